//! `tandem-slurm-adapter`: Tandem's service for Slurm. See the library documentation.

use clap::Parser as _;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let options = tandem_slurm_adapter::Options::parse();
    match tandem_slurm_adapter::run(options).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tandem-slurm-adapter: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
