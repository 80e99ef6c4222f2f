//! `tandem-profiler`: Tandem's node profiler. See the library documentation.
//!
//! Parses the options, starts logging and runs the library; prints the error chain and exits
//! with the error's code.

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main]
async fn main() -> ExitCode {
    tandem_telemetry::init("info");
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
