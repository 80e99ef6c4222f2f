//! The `tandem` command line: the operator's and script's way into the engine.
//!
//! Every engine call goes through `tandem-host`, into the engine component embedded in this
//! binary at build time (or another one given with `--engine`). The CLI reads and checks input
//! files, names the file and field of any problem, and renders answers as a table or JSON.
//!
//! Exit codes: `0` success, `1` the engine or the host failed, `2` bad input (arguments, files,
//! or input the engine rejected).

mod atomic;
mod eval;
mod kb;
mod keys;
mod observations;
mod queue;
mod render;
mod simulate;
mod synthesize;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tandem_api::{EngineError, Objective};
use tandem_host::{HostConfig, Runtime};

pub use queue::{InputError, QueueFile};

/// The engine component this binary was built with.
static EMBEDDED_ENGINE: &[u8] = include_bytes!(env!("TANDEM_ENGINE_COMPONENT"));

/// Decide which GPU jobs should share a GPU, and where.
///
/// Tandem reads black-box telemetry of queued jobs (GPU utilization, memory-access time,
/// memory used) and the GPUs of a cluster, and recommends which jobs to co-locate on which GPU
/// so that sharing saves time without jobs slowing each other down or running out of memory.
/// The decisions come from the Tandem engine, a sandboxed WebAssembly component.
#[derive(Debug, Parser)]
#[command(
    name = "tandem",
    disable_version_flag = true,
    arg_required_else_help = true
)]
pub struct Cli {
    /// Print the versions of the CLI, the engine component and its WIT contract.
    #[arg(short = 'V', long)]
    version: bool,

    #[command(flatten)]
    engine: EngineArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Where the engine comes from and the limits it runs under.
#[derive(Debug, Args)]
struct EngineArgs {
    /// Engine component to use instead of the one built into this binary.
    #[arg(long, global = true, env = "TANDEM_ENGINE", value_name = "FILE")]
    engine: Option<PathBuf>,

    /// Wall-clock time one engine call may take before it is interrupted.
    #[arg(long, global = true, value_name = "MS", default_value_t = HostConfig::DEFAULT_CALL_DEADLINE.as_millis() as u64)]
    engine_deadline_ms: u64,

    /// Most memory the engine instance may use.
    #[arg(long, global = true, value_name = "MIB", default_value_t = (HostConfig::DEFAULT_MEMORY_CAP_BYTES >> 20) as u64)]
    engine_memory_mib: u64,
}

impl EngineArgs {
    fn runtime(&self) -> anyhow::Result<Runtime> {
        let config = HostConfig {
            call_deadline: Duration::from_millis(self.engine_deadline_ms),
            memory_cap_bytes: usize::try_from(self.engine_memory_mib.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
        };
        match &self.engine {
            Some(path) => Runtime::from_file(path, config)
                .with_context(|| format!("cannot load the engine component {}", path.display())),
            None => Runtime::from_bytes(EMBEDDED_ENGINE, config)
                .context("cannot load the engine component built into tandem"),
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Recommend which queued jobs share which GPU.
    ///
    /// Reads a queue file (GPUs with their residents, a policy, and jobs with their profiles)
    /// and prints one placement per GPU that receives jobs, with the predicted slowdown of each
    /// job, the packing saving of the group and the uncertainty of the prediction, followed by
    /// the jobs left unplaced and why. No GPU is ever filled past its memory or past
    /// `max_jobs_per_gpu`.
    Recommend(RecommendArgs),

    /// What the engine expects of each queued job on each GPU model of a queue file.
    ///
    /// `memory`: the peak memory and what the guard reserves, and where the figure comes from
    /// (the job's profile on that model, its profile from another model, its declared model, or
    /// nothing). `runtime`: speed (work per second alone; measured, or scaled across models by
    /// the ratios the engine learned), run time of the job's `work`, and its cost and energy
    /// where the GPUs give a price and a power. `utilization`: the peak GPU utilization of each
    /// job, profiled or predicted from its declared model. Jobs' `speeds` in the file are
    /// reported to the engine first; a --kb is read, never changed.
    #[command(subcommand)]
    Predict(PredictCommand),

    /// What Tandem sees of a model: the summary an ONNX file declares.
    ///
    /// Reads the ONNX graph (shapes only; weights are never read, and may be absent) and
    /// prints the model summary a job declaring this file hands the engine: parameters,
    /// activations and input of one batch in MiB, forward GFLOPs of one batch, and the
    /// convolution, linear, activation and other layers. `--format json` prints it as a queue
    /// file's `declared` object, for writing a summary by hand. Nothing else about the model
    /// (names, weights, data) leaves this command.
    Declare(DeclareArgs),

    /// Create, feed and inspect a knowledge base file.
    ///
    /// A knowledge base holds the clusters of observed profiles and the interference learned
    /// from finished co-locations. Job ids are keyed (HMAC-SHA256 with the secret stored next
    /// to the file, `<kb>.secret`) before they reach the engine, so the file names no job.
    #[command(subcommand)]
    Kb(KbCommand),

    /// Measure Tandem's decisions against measured outcomes and baselines.
    ///
    /// Quality is judged on numbers someone measured (a catalog in data/catalogs/), never on
    /// numbers the engine produced. See docs/EVALUATION.md for the protocol.
    #[command(subcommand)]
    Eval(EvalCommand),

    /// Replay a job trace on a simulated GPU cluster under Tandem and every baseline.
    ///
    /// Jobs arrive from the trace; each policy decides which queued jobs start on which GPUs;
    /// jobs run at the speeds measured in the catalogs (alone, and in pairs sharing a GPU of
    /// that model). A pair nobody measured fails with an OOM and its job is resubmitted to run
    /// alone; a job type's first run is profiled alone before its jobs may share. Tandem runs
    /// through the engine component and learns from every co-location that ends. Prints one
    /// row per policy: average, median and p95 job completion time, makespan, queueing delay,
    /// GPU utilization, individual slowdown of the jobs that shared, packing saving, OOMs and
    /// decisions per second; `--report` also writes an HTML page with plots.
    ///
    /// With no inputs it replays the built-in demo: a Philly-derived Gavel trace (986 jobs) on
    /// 48 GPUs (16 K80, 16 P100, 16 V100), with Gavel's measurements as ground truth. The same
    /// inputs, settings and seed give the same figures (except wall times).
    Simulate(SimulateArgs),

    /// Build simulator inputs from public traces, or generate a synthetic one.
    #[command(subcommand)]
    Trace(TraceCommand),
}

#[derive(Debug, Args)]
struct SimulateArgs {
    /// Trace CSV (`arrival_s,job_type,gpus,steps`; see `tandem trace`) [default: the built-in
    /// demo trace, sim/data/demo-trace.csv].
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Cluster CSV (`nodes,gpus_per_node,gpu_model`) [default: the demo's 16 K80, 16 P100 and
    /// 16 V100].
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,

    /// Catalog of measured co-locations, repeatable; they are merged [default: the three
    /// Gavel catalogs, K80, P100 and V100, built in].
    #[arg(long = "catalog", value_name = "FILE")]
    catalogs: Vec<PathBuf>,

    /// Policies to compare, comma-separated, or `all`: exclusive-fifo, random, ffd-util,
    /// schedtune-min-jct, jrs-ranking, lucid-style, tandem-balanced, tandem-min-slowdown,
    /// tandem-max-packing, tandem-balanced-blind (balanced, told no GPU speeds),
    /// tandem-balanced-undeclared (balanced, declared models withheld).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "all"
    )]
    policies: Vec<String>,

    /// Solo profiling window of a job type's first run, in seconds (0: no profiling).
    #[arg(long, value_name = "S", default_value_t = Settings::default().profile_window_s)]
    profile_window_s: f64,

    /// Seconds from the start of a group that cannot run to the OOM of the job that joined.
    #[arg(long, value_name = "S", default_value_t = Settings::default().oom_after_s)]
    oom_after_s: f64,

    /// Queued jobs, from the head, that a policy considers at each decision.
    #[arg(long, value_name = "N", default_value_t = Settings::default().window)]
    window: usize,

    /// Share (0..=1) of the catalogs' measured pairs told to every policy before the run, as
    /// the history a cluster would have.
    #[arg(long, value_name = "F", default_value_t = Settings::default().history_share)]
    history_share: f64,

    /// Shortest sharing, in seconds, reported to the policies as an outcome.
    #[arg(long, value_name = "S", default_value_t = Settings::default().min_outcome_s)]
    min_outcome_s: f64,

    /// Seed of the history split, the random policy, the id keys and the engine.
    #[arg(long, default_value_t = Settings::default().seed)]
    seed: u64,

    /// Write an HTML report with plots (JCT CDF, utilization over time, slowdowns) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

use tandem_sim::Settings;

#[derive(Debug, Subcommand)]
pub(crate) enum TraceCommand {
    /// Convert Gavel's Philly-derived traces (tab-separated, seven columns) to a trace CSV.
    ///
    /// Several files are merged by arrival time (the 15 files of data/gavel/traces/
    /// philly_vc_seed0 make 15,264 jobs).
    Gavel {
        /// Gavel trace files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Multiply every arrival time by this factor (compress or stretch the trace).
        #[arg(long, value_name = "F", default_value_t = 1.0)]
        time_scale: f64,
        /// Keep only the first N jobs.
        #[arg(long, value_name = "N")]
        first: Option<usize>,
        /// The trace CSV to write (atomically).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Convert the Alibaba GPU-sharing trace (cluster-trace-gpu-v2023) to a trace and a
    /// cluster.
    ///
    /// Pods carry no job type, so each gets one drawn (seeded) from the catalogs' types, with
    /// its observed run time as its solo time on the reference GPU model. Only nodes of GPU
    /// models the catalogs measured are kept.
    Alibaba {
        /// The pod list (for example data/alibaba/openb_pod_list_default.csv).
        #[arg(long, value_name = "FILE")]
        pods: PathBuf,
        /// The node list (data/alibaba/openb_node_list_gpu_node.csv).
        #[arg(long, value_name = "FILE")]
        nodes: PathBuf,
        /// Catalogs whose job types and GPU models to use, repeatable [default: the built-in
        /// Gavel catalogs].
        #[arg(long = "catalog", value_name = "FILE")]
        catalogs: Vec<PathBuf>,
        /// GPU model whose solo throughput turns a pod's run time into work.
        #[arg(long, value_name = "MODEL", default_value = "V100")]
        reference_model: String,
        /// Seed of the job-type draw.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The trace CSV to write.
        #[arg(long, value_name = "FILE")]
        out_trace: PathBuf,
        /// The cluster CSV to write.
        #[arg(long, value_name = "FILE")]
        out_cluster: PathBuf,
    },
    /// Generate a synthetic trace: Poisson arrivals and a uniform mix of the catalogs' job
    /// types, solo durations log-uniform on the reference GPU model.
    Synthetic {
        /// Jobs to generate.
        #[arg(long, value_name = "N", default_value_t = 1000)]
        jobs: usize,
        /// Mean time between arrivals, s.
        #[arg(long, value_name = "S", default_value_t = 300.0)]
        mean_interarrival_s: f64,
        /// Share of jobs needing 2, 4 or 8 GPUs.
        #[arg(long, value_name = "F", default_value_t = 0.1)]
        multi_gpu_share: f64,
        /// Shortest solo duration on the reference model, s.
        #[arg(long, value_name = "S", default_value_t = 600.0)]
        min_duration_s: f64,
        /// Longest solo duration on the reference model, s.
        #[arg(long, value_name = "S", default_value_t = 36_000.0)]
        max_duration_s: f64,
        /// Catalogs whose job types to draw from, repeatable [default: the built-in Gavel
        /// catalogs].
        #[arg(long = "catalog", value_name = "FILE")]
        catalogs: Vec<PathBuf>,
        /// GPU model whose solo throughput turns a duration into work.
        #[arg(long, value_name = "MODEL", default_value = "V100")]
        reference_model: String,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The trace CSV to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// Pairing quality: Tandem against baselines and the oracle on a measured catalog.
    ///
    /// Draws queues of distinct job types (each with solo data on the GPU model) from the
    /// catalog. Tandem observes the measured outcomes of a share of the catalog's pairs (the
    /// rest are held out), then every method groups each queue into pairs and singletons:
    /// random, first-come, the JRS cluster ranking, a Lucid-style utilization rule, Tandem
    /// under each objective (through the engine component, with job types known only by keyed
    /// ids), and the oracle (maximum-weight matching on the measured table). Every pair's
    /// outcome is looked up in the catalog; a pair the catalog never measured counts as an OOM.
    ///
    /// Prints, per method: pairs per queue, packing saving (time saved against running the
    /// queue one job after another), mean and p95 individual slowdown of the jobs that shared
    /// a GPU, the share of pairs with a slowdown above 50%, OOMs, and the share of the oracle's
    /// saving. Then a learning curve: Tandem trained on 0..90% of the pairs, its queue results
    /// and its prediction error on the held-out pairs, next to a naive predictor. The same seed
    /// gives the same report.
    Pairs(PairsArgs),

    /// Memory prediction: the engine's forest against simpler estimates, and the OOM guard.
    ///
    /// On SchedTune's 240 measured peaks (12 CNNs × batch sizes 8-64 × 5 GPUs, bundled with the
    /// engine), each row is predicted from models trained without it, under three splits:
    /// random (5 seeded folds), leave-one-GPU-out and leave-one-model-out. Prints RMSE, average
    /// and maximum error % for the engine's random forest, a Torchinfo-like sum (parameters +
    /// activations + input) and a Horus-like linear model; then the guard: how many would-be
    /// OOMs (true peak above the prediction) the reservation (prediction × (1 + margin), the
    /// margin measured on the training folds only) catches, and how much memory it
    /// over-reserves. Needs no engine component: it runs the engine's own prediction code
    /// natively.
    Memory(EvalSeedArgs),

    /// Utilization prediction: the engine's forest against simpler estimates (Yeung et al.).
    ///
    /// On the 49 Futurewei training runs bundled with the engine (15 networks at batch sizes
    /// 2-7000, maximum GPU utilization measured on a Tesla P100), each described only by the
    /// summary `tandem declare` computes from the network's ONNX graph, every run is predicted
    /// from models trained without it: leave-one-model-out (each network in turn),
    /// leave-one-family-out (the seven small BERTs out together) and random (5 seeded folds).
    /// Prints RMSLE (utilization in percent and as a fraction) and the mean absolute error for
    /// the engine's random forest, the training mean and a FLOPs-only log-log line, then the
    /// forest's error per held-out network. Needs no engine component: it runs the engine's own
    /// prediction code natively.
    Utilization(EvalSeedArgs),
}

#[derive(Debug, Args)]
struct DeclareArgs {
    /// ONNX file of the model.
    #[arg(value_name = "FILE")]
    onnx: PathBuf,

    /// Training batch size: required when the graph's batch dimension is symbolic; with a
    /// fixed batch, input, activations and FLOPs are scaled from it to this one.
    #[arg(long, value_name = "N")]
    batch_size: Option<u32>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Options of the evaluations on a bundled table: the random split's seed and the output format.
#[derive(Debug, Args)]
struct EvalSeedArgs {
    /// Seed of the random split.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, Args)]
struct PairsArgs {
    /// Catalog of measured co-locations (for example data/catalogs/gavel-v100.json).
    #[arg(long, value_name = "FILE")]
    catalog: PathBuf,

    /// GPU model to evaluate on; required when the catalog measured several.
    #[arg(long, value_name = "MODEL")]
    gpu_model: Option<String>,

    /// Number of queues to draw.
    #[arg(long, value_name = "N", default_value_t = 200)]
    queues: u32,

    /// Jobs per queue, each of a different job type: at least 2, at most the number of job
    /// types with solo data on the GPU model [default: two thirds of that number, so that
    /// queues differ, at most 16, rounded down to even].
    #[arg(long, value_name = "K")]
    queue_size: Option<usize>,

    /// Share (0..=1) of the measured pairs whose outcomes Tandem and the JRS ranking observe
    /// before they are evaluated; the rest are held out.
    #[arg(long, value_name = "F", default_value_t = 0.5)]
    train_share: f64,

    /// Seed of the queues, the training split, random pairing, the id keys and the engine.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, Subcommand)]
enum KbCommand {
    /// Create a knowledge base, seeded with the bundled Futurewei profiles unless --empty.
    Init {
        /// The knowledge-base file to create.
        #[arg(long, value_name = "FILE")]
        kb: PathBuf,
        /// Start with no seed profiles at all.
        #[arg(long)]
        empty: bool,
        /// Replace an existing file (what it learned is lost).
        #[arg(long)]
        force: bool,
        /// Objective stored with the knowledge base (a queue file's policy overrides it).
        #[arg(long, value_enum, default_value_t = ObjectiveArg::Balanced)]
        objective: ObjectiveArg,
        /// Seed for clustering and exploration.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        secret: SecretArgs,
    },
    /// Feed profiles and/or outcomes; the file is written only if every one is accepted.
    Observe {
        /// The knowledge-base file.
        #[arg(long, value_name = "FILE")]
        kb: PathBuf,
        /// Profiles: a JSON list of jobs shaped as in a queue file.
        #[arg(long, value_name = "FILE")]
        profiles: Option<PathBuf>,
        /// Outcomes: a JSON list of `{"gpu_model", "jobs", "solo_s", "colocated_s"}` or
        /// `{"gpu_model", "jobs", "speeds"}` (co-located throughput / solo throughput).
        #[arg(long, value_name = "FILE")]
        outcomes: Option<PathBuf>,
        /// Accept outcomes naming jobs that were never profiled: the engine learns them as
        /// workloads known by their outcomes alone (a recurring job keyed to the same id each
        /// time). Without it such an outcome is refused, as it is usually a typo.
        #[arg(long)]
        workloads: bool,
        #[command(flatten)]
        secret: SecretArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Show the clusters and the interference learned between them.
    Show {
        /// The knowledge-base file.
        #[arg(long, value_name = "FILE")]
        kb: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Enlarge measured workload profiles by interpolation across batch sizes.
    ///
    /// Reads a measured-workload CSV (the Futurewei set: columns Model, Dataset, BS, MGUP,
    /// MGMAP, MaGTSAMP; others are ignored), groups runs by workload (model and dataset, a
    /// dataset's `/version` suffix ignored) and averages runs at the same batch size. The
    /// engine judges four interpolation methods per workload by leaving out each interior
    /// batch size in turn, picks the lowest RMSE, and generates profiles between the measured
    /// batch sizes. Workloads reach the engine as opaque labels (w1, w2, ...), never by name.
    Synthesize {
        /// The measured-workload CSV (for example data/alnair/futurewei_mini_ml_workload.csv).
        #[arg(long, value_name = "FILE")]
        data: PathBuf,
        /// Synthetic batch sizes to generate between each pair of consecutive measured ones
        /// (fewer where the gap holds fewer whole batch sizes).
        #[arg(long, value_name = "N", default_value_t = 3)]
        points_per_gap: u32,
        /// Write the augmented set, measured and synthetic rows, as CSV
        /// (`workload,batch_size,MGUP,MGMAP,MGTSAMP,synthetic`); written atomically.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

/// Where the id secret comes from.
#[derive(Debug, Args)]
struct SecretArgs {
    /// Id secret (hex) to use instead of the one next to the knowledge base.
    #[arg(long, value_name = "FILE", env = "TANDEM_SECRET_FILE")]
    secret_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum PredictCommand {
    /// Peak memory of each queued job on each GPU model, and what the guard reserves.
    Memory(PredictArgs),
    /// Speed, run time, cost and energy of each queued job on each GPU model.
    Runtime(PredictArgs),
    /// Peak GPU utilization of each queued job alone.
    ///
    /// Its profile's (from the queue file or the knowledge base) when it has one, else
    /// predicted from its declared model by the engine's forest (trained on runs measured on a
    /// Tesla P100; see `tandem eval utilization`). The same on every GPU model.
    Utilization(PredictArgs),
}

#[derive(Debug, Args)]
struct PredictArgs {
    /// Queue file (JSON), as for `tandem recommend`.
    #[arg(long, value_name = "FILE")]
    queue: PathBuf,

    /// Knowledge base to predict from (see `tandem kb`); it is read, never changed (speeds
    /// in the queue file count for this prediction only).
    #[arg(long, value_name = "FILE")]
    kb: Option<PathBuf>,

    #[command(flatten)]
    secret: SecretArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, Args)]
struct RecommendArgs {
    /// Queue file (JSON): `{"gpus": [...], "policy": {...}, "jobs": [...]}`; see examples/.
    #[arg(long, value_name = "FILE")]
    queue: PathBuf,

    /// Knowledge base to recommend from (see `tandem kb`); without one, the engine starts
    /// from the bundled seed profiles and has learned nothing.
    #[arg(long, value_name = "FILE")]
    kb: Option<PathBuf>,

    #[command(flatten)]
    secret: SecretArgs,

    /// What to optimize; overrides the queue file's `policy.objective`.
    #[arg(long, value_enum)]
    objective: Option<ObjectiveArg>,

    /// Seed for the engine's exploration; the same seed and queue give the same answer.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// The objectives, as command-line values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ObjectiveArg {
    /// Maximize packing saving while keeping individual slowdown low.
    Balanced,
    /// Smallest individual slowdown (the user's view).
    MinSlowdown,
    /// Fill GPUs as tightly as memory allows (the provider's view).
    MaxPacking,
}

impl From<ObjectiveArg> for Objective {
    fn from(value: ObjectiveArg) -> Self {
        match value {
            ObjectiveArg::Balanced => Objective::Balanced,
            ObjectiveArg::MinSlowdown => Objective::MinSlowdown,
            ObjectiveArg::MaxPacking => Objective::MaxPacking,
        }
    }
}

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned columns for a person.
    Table,
    /// JSON for scripts (field names are a stable contract).
    Json,
}

/// Runs the command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    init_tracing();
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit_code(&error))
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    if cli.version {
        return print_version(&cli.engine);
    }
    match cli.command {
        Some(Command::Recommend(args)) => recommend(&cli.engine, &args),
        Some(Command::Predict(PredictCommand::Memory(args))) => predict(
            &cli.engine,
            &args,
            render::Estimates::PerModel(render::PerModel::Memory),
        ),
        Some(Command::Predict(PredictCommand::Runtime(args))) => predict(
            &cli.engine,
            &args,
            render::Estimates::PerModel(render::PerModel::Runtime),
        ),
        Some(Command::Predict(PredictCommand::Utilization(args))) => {
            predict(&cli.engine, &args, render::Estimates::Utilization)
        }
        Some(Command::Declare(args)) => declare(&args),
        Some(Command::Kb(command)) => knowledge_base(&cli.engine, command),
        Some(Command::Eval(EvalCommand::Pairs(args))) => evaluate_pairs(&cli.engine, args),
        Some(Command::Eval(EvalCommand::Memory(args))) => evaluate_memory(&args),
        Some(Command::Eval(EvalCommand::Utilization(args))) => evaluate_utilization(&args),
        Some(Command::Simulate(args)) => run_simulation(&cli.engine, args),
        Some(Command::Trace(command)) => simulate::trace(command),
        // `arg_required_else_help` prints the help when nothing is given at all; this covers
        // options without a command.
        None => Err(InputError::usage("no command given; see `tandem --help`").into()),
    }
}

fn print_version(engine: &EngineArgs) -> anyhow::Result<()> {
    let runtime = engine.runtime()?;
    let engine_version = runtime.engine_version()?;
    println!("tandem {}", env!("CARGO_PKG_VERSION"));
    println!(
        "engine {engine_version}, WIT {}@{}",
        tandem_api::WIT_PACKAGE,
        runtime.wit_version()
    );
    Ok(())
}

/// A queue file loaded into an engine: the request, and the same with keyed ids.
struct Loaded {
    request: queue::Request,
    recommender: tandem_host::Recommender,
    keys: keys::IdKeys,
    /// The queue, keyed.
    queued: Vec<tandem_api::Job>,
    /// The GPUs, residents keyed.
    gpus: Vec<tandem_api::Gpu>,
}

/// Reads `path`, opens the engine (from `kb` if given) and reports the file's speeds to it.
fn load_queue(
    engine: &EngineArgs,
    path: &std::path::Path,
    kb: Option<&std::path::Path>,
    secret: &SecretArgs,
    seed: u64,
    objective: Option<ObjectiveArg>,
) -> anyhow::Result<Loaded> {
    let mut queue = QueueFile::read(path)?;
    if let Some(objective) = objective {
        queue.policy.objective = objective.into();
    }
    let speeds = queue.speeds();
    let request = queue.into_request();
    let runtime = engine.runtime()?;
    let (mut recommender, mut keys) = match kb {
        Some(kb) => {
            let opened = kb::open(&runtime, kb, secret.secret_file.as_deref())?;
            (opened.recommender, opened.keys)
        }
        None => (
            runtime.bootstrap(&request.policy, seed)?,
            keys::IdKeys::ephemeral()?,
        ),
    };
    recommender.set_policy(&request.policy)?;
    for (job, model, speed) in speeds {
        recommender
            .observe_speed(&keys.key(&job), &model, speed)
            .with_context(|| {
                format!(
                    "{}: the engine rejected the speeds of `{job}`",
                    path.display()
                )
            })?;
    }
    // The engine sees keyed ids only; answers are mapped back by the callers.
    let key_job = |keys: &mut keys::IdKeys, job: &tandem_api::Job| tandem_api::Job {
        id: keys.key(&job.id),
        ..job.clone()
    };
    let queued: Vec<_> = request
        .queue
        .iter()
        .map(|j| key_job(&mut keys, j))
        .collect();
    let gpus: Vec<_> = request
        .gpus
        .iter()
        .map(|gpu| tandem_api::Gpu {
            residents: gpu
                .residents
                .iter()
                .map(|j| key_job(&mut keys, j))
                .collect(),
            ..gpu.clone()
        })
        .collect();
    Ok(Loaded {
        request,
        recommender,
        keys,
        queued,
        gpus,
    })
}

fn predict(engine: &EngineArgs, args: &PredictArgs, what: render::Estimates) -> anyhow::Result<()> {
    let Loaded {
        mut recommender,
        keys,
        queued,
        gpus,
        ..
    } = load_queue(
        engine,
        &args.queue,
        args.kb.as_deref(),
        &args.secret,
        0,
        None,
    )?;
    let mut specs: Vec<tandem_api::GpuSpec> = Vec::new();
    for gpu in &gpus {
        if !specs.iter().any(|s| s.model == gpu.spec.model) {
            specs.push(gpu.spec.clone());
        }
    }
    let mut rows = Vec::new();
    for job in &queued {
        let estimates = recommender.estimate(job, &specs).with_context(|| {
            format!(
                "{}: the engine rejected job `{}`",
                args.queue.display(),
                keys.original(&job.id)
            )
        })?;
        rows.push(render::JobEstimates {
            job: keys.original(&job.id).to_owned(),
            estimates,
        });
    }
    print_as(args.format, &rows, || {
        render::estimates(&rows, &specs, what)
    })?;
    Ok(())
}

fn recommend(engine: &EngineArgs, args: &RecommendArgs) -> anyhow::Result<()> {
    let Loaded {
        request,
        mut recommender,
        keys,
        queued,
        gpus,
    } = load_queue(
        engine,
        &args.queue,
        args.kb.as_deref(),
        &args.secret,
        args.seed,
        args.objective,
    )?;
    let mut answer = recommender
        .recommend(&queued, &gpus)
        .with_context(|| format!("{}: the engine rejected the queue", args.queue.display()))?;
    for placement in &mut answer.placements {
        for id in placement
            .jobs
            .iter_mut()
            .chain(placement.residents.iter_mut())
        {
            *id = keys.original(id).to_owned();
        }
    }
    for unplaced in &mut answer.unplaced {
        unplaced.job = keys.original(&unplaced.job).to_owned();
    }
    print_as(args.format, &answer, || {
        render::recommendation(&answer, &request)
    })?;
    Ok(())
}

fn knowledge_base(engine: &EngineArgs, command: KbCommand) -> anyhow::Result<()> {
    let runtime = engine.runtime()?;
    match command {
        KbCommand::Init {
            kb,
            empty,
            force,
            objective,
            seed,
            secret,
        } => {
            let policy = tandem_api::Policy {
                objective: objective.into(),
                ..tandem_api::Policy::default()
            };
            let summary = kb::init(
                &runtime,
                &kb,
                secret.secret_file.as_deref(),
                &policy,
                seed,
                empty,
                force,
            )?;
            println!(
                "created {} with {} seed profile(s) in {} cluster(s)",
                kb.display(),
                summary.seed_points,
                summary.clusters.len()
            );
        }
        KbCommand::Observe {
            kb,
            profiles,
            outcomes,
            workloads,
            secret,
            format,
        } => {
            if profiles.is_none() && outcomes.is_none() {
                return Err(InputError::usage("give --profiles, --outcomes or both").into());
            }
            let mut opened = kb::open(&runtime, &kb, secret.secret_file.as_deref())?;
            let observed = kb::observe(
                &mut opened,
                profiles.as_deref(),
                outcomes.as_deref(),
                workloads,
            )?;
            print_as(format, &observed, || render::observed(&observed))?;
        }
        KbCommand::Show { kb, format } => {
            // Showing needs no secret: nothing is keyed.
            let mut recommender = kb::open_unkeyed(&runtime, &kb)?;
            let summary = recommender.describe()?;
            print_as(format, &summary, || render::knowledge(&summary))?;
        }
        KbCommand::Synthesize {
            data,
            points_per_gap,
            out,
            format,
        } => {
            let (report, written) =
                synthesize::run(&runtime, &data, points_per_gap, out.as_deref())?;
            print_as(format, &report, || {
                render::synthesis(&report, written.as_ref())
            })?;
        }
    }
    Ok(())
}

fn evaluate_pairs(engine: &EngineArgs, args: PairsArgs) -> anyhow::Result<()> {
    let settings = eval::Settings {
        catalog: args.catalog,
        gpu_model: args.gpu_model,
        queues: args.queues,
        queue_size: args.queue_size,
        train_share: args.train_share,
        seed: args.seed,
    };
    // Bad settings are reported before the engine is loaded.
    let plan = eval::plan(settings)?;
    let runtime = engine.runtime()?;
    let report = eval::run(&runtime, &plan)?;
    print_as(args.format, &report, || render::evaluation(&report))?;
    Ok(())
}

/// Prints `value` as JSON for scripts, or as the table `table` makes for a person.
fn print_as<T: serde::Serialize>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Table => print!("{}", table()),
    }
    Ok(())
}

fn declare(args: &DeclareArgs) -> anyhow::Result<()> {
    let file = &args.onnx;
    let bytes = std::fs::read(file)
        .map_err(|e| InputError::usage(format!("cannot read {}: {e}", file.display())))?;
    let summary = tandem_declare::summarize(&bytes, args.batch_size)
        .map_err(|e| InputError::usage(format!("{}: {e}", file.display())))?;
    print_as(args.format, &summary, || render::summary(&summary))?;
    Ok(())
}

fn evaluate_memory(args: &EvalSeedArgs) -> anyhow::Result<()> {
    let report = eval::memory::run(args.seed)?;
    print_as(args.format, &report, || render::memory_evaluation(&report))?;
    Ok(())
}

fn evaluate_utilization(args: &EvalSeedArgs) -> anyhow::Result<()> {
    let report = eval::utilization::run(args.seed)?;
    print_as(args.format, &report, || {
        render::utilization_evaluation(&report)
    })?;
    Ok(())
}

fn run_simulation(engine: &EngineArgs, args: SimulateArgs) -> anyhow::Result<()> {
    let request = simulate::Request {
        catalogs: args.catalogs,
        trace: args.trace,
        cluster: args.cluster,
        policies: if args.policies.iter().any(|p| p == "all") {
            tandem_sim::policy::PolicyName::ALL
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect()
        } else {
            args.policies
        },
        settings: Settings {
            profile_window_s: args.profile_window_s,
            oom_after_s: args.oom_after_s,
            window: args.window,
            history_share: args.history_share,
            min_outcome_s: args.min_outcome_s,
            seed: args.seed,
        },
        command: std::iter::once("tandem".to_owned())
            .chain(std::env::args().skip(1).map(|arg| shell_quoted(&arg)))
            .collect::<Vec<_>>()
            .join(" "),
    };
    // Bad settings are reported before the engine is loaded.
    request
        .settings
        .check()
        .map_err(|e| InputError::usage(e.to_string()))?;
    let runtime = engine.runtime()?;
    let report = simulate::run(&runtime, &request)?;
    if let Some(path) = &args.report {
        simulate::write(path, &tandem_sim::report::html(&report))?;
    }
    print_as(args.format, &report, || tandem_sim::report::table(&report))?;
    if let Some(path) = &args.report {
        eprintln!("report written to {}", path.display());
    }
    Ok(())
}

/// `arg` as a POSIX shell reads it back: unchanged when it holds only safe characters, else in
/// single quotes (a quote inside becomes `'\''`), so a printed command can be pasted.
fn shell_quoted(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// 2 for anything the user can fix in their input, 1 for everything else.
fn exit_code(error: &anyhow::Error) -> u8 {
    let bad_input = error.chain().any(|cause| {
        cause.downcast_ref::<InputError>().is_some()
            || matches!(
                cause.downcast_ref::<tandem_host::Error>(),
                Some(tandem_host::Error::Engine(
                    EngineError::InvalidInput(_) | EngineError::UnknownJob(_)
                ))
            )
    });
    if bad_input { 2 } else { 1 }
}

/// Logs to stderr, filtered by `RUST_LOG` (warnings and errors by default).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second initialisation (tests calling `run` twice) is harmless; ignore it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::shell_quoted;

    #[test]
    fn printed_commands_paste_back_into_a_shell() {
        assert_eq!(shell_quoted("--report"), "--report");
        assert_eq!(shell_quoted("a/b-c_d.csv"), "a/b-c_d.csv");
        assert_eq!(shell_quoted("my trace.csv"), "'my trace.csv'");
        assert_eq!(shell_quoted("it's"), "'it'\\''s'");
        assert_eq!(shell_quoted(""), "''");
    }
}
