//! `tandem-profiler`: Tandem's node profiler. See the library documentation.
//!
//! Parses the options, starts logging and runs the library; prints the error chain and exits
//! with the error's code.

use std::process::ExitCode;

use clap::Parser as _;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let options = tandem_profiler::Options::parse();
    match tandem_profiler::run(options).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            let code = error.exit_code();
            eprintln!("tandem-profiler: {}", tandem_profiler::report(&error));
            ExitCode::from(code)
        }
    }
}
