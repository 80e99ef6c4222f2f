//! `tandem-node`: Tandem's node component. See the library documentation.
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
    match tandem_node::run(tandem_node::Options::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tandem-node: {}", tandem_node::report(&error));
            ExitCode::from(error.exit_code())
        }
    }
}
