//! What every adapter binary does before and after its own work: logs to stderr filtered by
//! `RUST_LOG`, its options parsed from the command line, a multi-threaded runtime, and an
//! error printed as one line of causes with a failing exit status.

use std::future::Future;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// Runs `run` as the program `name`: an adapter's `main` is this one call.
pub fn main<O, F, Fut>(name: &str, run: F) -> ExitCode
where
    O: clap::Parser,
    F: FnOnce(O) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let options = O::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{name}: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error:#}");
            ExitCode::FAILURE
        }
    }
}
