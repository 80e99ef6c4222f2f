//! `tandem-node`: Tandem's node component. See the library documentation.
//!
//! Parses the options, starts logging and runs the library; prints the error chain and exits
//! with the error's code.

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main]
async fn main() -> ExitCode {
    tandem_telemetry::init("info");
    match tandem_node::run(tandem_node::Options::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tandem-node: {}", tandem_node::report(&error));
            ExitCode::from(error.exit_code())
        }
    }
}
