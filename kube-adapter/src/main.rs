//! `tandem-kube-adapter`: Tandem's kube-scheduler extender. See the library documentation.

fn main() -> std::process::ExitCode {
    tandem_adapter_core::program::main("tandem-kube-adapter", tandem_kube_adapter::run)
}
