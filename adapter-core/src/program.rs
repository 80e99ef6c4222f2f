//! What every adapter binary does before and after its own work: logs to stderr filtered by
//! `RUST_LOG`, its options parsed from the command line, a multi-threaded runtime, and an
//! error printed as one line of causes with a failing exit status.

use std::future::Future;
use std::process::ExitCode;

/// Runs `run` as the program `name`: an adapter's `main` is this one call.
pub fn main<O, F, Fut>(name: &str, run: F) -> ExitCode
where
    O: clap::Parser,
    F: FnOnce(O) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    tandem_telemetry::init("info");
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
