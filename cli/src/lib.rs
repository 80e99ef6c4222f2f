//! The `tandem` command line: the operator's and script's way into the engine.
//!
//! Every engine call goes through `tandem-host`, into the engine component embedded in this
//! binary at build time (or another one given with `--engine`). The CLI reads and checks input
//! files, names the file and field of any problem, and renders answers as a table or JSON.
//!
//! Exit codes: `0` success, `1` the engine or the host failed, `2` bad input (arguments, files,
//! or input the engine rejected).

mod args;
mod atomic;
mod commands;
mod error;
mod kb;
mod keys;
mod loaded;
mod observations;
mod output;
mod queue;
mod synthesize;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tandem_api::EngineError;

use crate::args::EngineArgs;

pub use kb::KbContents;
pub use queue::{InputError, QueueFile};

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

/// The commands, each in its own module of [`commands`].
#[derive(Debug, Subcommand)]
enum Command {
    /// Recommend which queued jobs share which GPU.
    ///
    /// Reads a queue file (GPUs with their residents, a policy, and jobs with their profiles)
    /// and prints one placement per GPU that receives jobs, with the predicted slowdown of each
    /// job, the packing saving of the group and the uncertainty of the prediction, followed by
    /// the jobs left unplaced and why. No GPU is ever filled past its memory or past
    /// `max_jobs_per_gpu`.
    Recommend(commands::recommend::Args),

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
    Predict(commands::predict::Command),

    /// What Tandem sees of a model: the summary an ONNX file declares.
    ///
    /// Reads the ONNX graph (shapes only; weights are never read, and may be absent) and
    /// prints the model summary a job declaring this file hands the engine: parameters,
    /// activations and input of one batch in MiB, forward GFLOPs of one batch, and the
    /// convolution, linear, activation and other layers. `--format json` prints it as a queue
    /// file's `declared` object, for writing a summary by hand. Nothing else about the model
    /// (names, weights, data) leaves this command.
    Declare(commands::declare::Args),

    /// Create, feed and inspect a knowledge base file.
    ///
    /// A knowledge base holds the clusters of observed profiles and the interference learned
    /// from finished co-locations. Job ids are keyed (HMAC-SHA256 with the secret stored next
    /// to the file, `<kb>.secret`) before they reach the engine, so the file names no job.
    #[command(subcommand)]
    Kb(commands::kb::Command),

    /// Measure Tandem's decisions against measured outcomes and baselines.
    ///
    /// Quality is judged on numbers someone measured (a catalog in data/catalogs/), never on
    /// numbers the engine produced. See docs/EVALUATION.md for the protocol.
    #[command(subcommand)]
    Eval(commands::eval::Command),

    /// Replay a job trace on a simulated GPU cluster under Tandem and every baseline.
    ///
    /// Jobs arrive from the trace; each policy decides which queued jobs start on which GPUs;
    /// jobs run at the speeds measured in the catalogs (alone, and in pairs sharing a GPU of
    /// that model). A pair nobody measured fails with an OOM and its job is resubmitted to run
    /// alone; a job type's first run is profiled alone before its jobs may share. Tandem runs
    /// through the engine component and learns from every co-location that ends. Prints one
    /// row per policy: average, median and p95 job completion time, makespan, queueing delay,
    /// GPU utilization, individual slowdown of the jobs that shared, packing saving, OOMs and
    /// decisions per second; `--report` also writes an HTML page with plots. The policies
    /// replay side by side, one per CPU core.
    ///
    /// With no inputs it replays the built-in demo: a Philly-derived Gavel trace (986 jobs) on
    /// 48 GPUs (16 K80, 16 P100, 16 V100), with Gavel's measurements as ground truth. The same
    /// inputs, settings and seed give the same figures (except wall times).
    Simulate(commands::simulate::Args),

    /// Build simulator inputs from public traces, or generate a synthetic one.
    #[command(subcommand)]
    Trace(commands::trace::Command),
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
    let engine = &cli.engine;
    match cli.command {
        Some(Command::Recommend(args)) => args.execute(engine),
        Some(Command::Predict(command)) => command.execute(engine),
        Some(Command::Declare(args)) => args.execute(),
        Some(Command::Kb(command)) => command.execute(engine),
        Some(Command::Eval(command)) => command.execute(engine),
        Some(Command::Simulate(args)) => args.execute(engine),
        Some(Command::Trace(command)) => command.execute(),
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

/// 2 for anything the user can fix in their input, 1 for everything else.
fn exit_code(error: &anyhow::Error) -> u8 {
    let bad_input = error.chain().any(|cause| {
        cause.downcast_ref::<InputError>().is_some()
            || cause.is::<error::BadInput>()
            || cause
                .downcast_ref::<tandem_eval::Error>()
                .is_some_and(tandem_eval::Error::is_bad_input)
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
    // A second initialisation (tests calling `run` twice) keeps the first.
    tandem_telemetry::init("warn");
}
