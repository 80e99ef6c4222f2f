//! `tandem-slurm-adapter`: Tandem's service for Slurm. See the library documentation.

fn main() -> std::process::ExitCode {
    tandem_adapter_core::program::main("tandem-slurm-adapter", tandem_slurm_adapter::run)
}
