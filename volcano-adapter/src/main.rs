//! `tandem-volcano-adapter`: Tandem as vc-scheduler's extender. See the library documentation.

fn main() -> std::process::ExitCode {
    tandem_adapter_core::program::main("tandem-volcano-adapter", tandem_volcano_adapter::run)
}
