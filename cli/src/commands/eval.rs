//! `tandem eval`: Tandem's decisions measured against measured outcomes and baselines; a thin
//! front-end over `tandem-eval`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tandem_eval as eval;

use crate::args::{EngineArgs, Format};
use crate::output::print_as;

/// The subcommands of `tandem eval`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// and its prediction error on the held-out pairs, next to a naive predictor. When every
    /// job type of the catalog has a profile (data/catalogs/futurewei-p100-profiled.json), also
    /// the profile path: Tandem given the jobs with their profiles, cold (nothing observed),
    /// warm (the training pairs observed, the queued jobs new) and recurring (the observed
    /// jobs again), the JRS ranking over the engine's clusters, the engine's predictions for
    /// measured pairs of new jobs, and the measured pairs grouped by the engine's clusters.
    /// Last, mixed durations: the same queues with each job running its type's solo time times
    /// a factor within 1/10..10, Tandem told the lengths (work and speeds) and not, against the
    /// oracle on seconds saved and the oracle over the observed pairs only (the most a method
    /// can save that lets jobs of unknown memory share only once seen sharing). The same seed
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

/// Options of the evaluations on a bundled table: the random split's seed and the output format.
#[derive(Debug, Args)]
pub(crate) struct EvalSeedArgs {
    /// Seed of the random split.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// The options of `tandem eval pairs`.
#[derive(Debug, Args)]
pub(crate) struct PairsArgs {
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

    /// Declared models of the catalog's job types, a CSV as for `tandem simulate --models`
    /// (for Gavel's: data/utilization/gavel_models.csv). Tandem's jobs then declare them: the
    /// engine predicts their memory and interference from the models, and its guard may pair
    /// jobs never seen sharing where their predicted memory fits (for models within the memory
    /// model's training data). The pairs it forms are still scored on the catalog (a pair the
    /// catalog never measured counts as an OOM).
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl Command {
    /// Runs the evaluation and prints its report.
    pub(crate) fn execute(self, engine: &EngineArgs) -> anyhow::Result<()> {
        match self {
            Command::Pairs(args) => pairs(engine, args),
            Command::Memory(args) => {
                let report = eval::memory::run(args.seed)?;
                print_as(args.format, &report, || eval::render::memory(&report))
            }
            Command::Utilization(args) => {
                let report = eval::utilization::run(args.seed)?;
                print_as(args.format, &report, || eval::render::utilization(&report))
            }
        }
    }
}

fn pairs(engine: &EngineArgs, args: PairsArgs) -> anyhow::Result<()> {
    let settings = eval::pairs::Settings {
        catalog: args.catalog,
        gpu_model: args.gpu_model,
        queues: args.queues,
        queue_size: args.queue_size,
        train_share: args.train_share,
        seed: args.seed,
        models: args.models,
    };
    // Bad settings are reported before the engine is loaded.
    let plan = eval::pairs::plan(settings)?;
    let runtime = engine.runtime()?;
    let report = eval::pairs::run(&runtime, &plan)?;
    print_as(args.format, &report, || eval::render::pairs(&report))
}
