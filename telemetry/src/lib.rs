//! How Tandem's programs log, so that every binary (the adapters, the framework plugin inside
//! kube-scheduler, the node agents, the CLI) logs the same way: `tracing` events on standard
//! error — standard output is the CLI's answers, and inside kube-scheduler it is klog's — in
//! colour only on a terminal, filtered by `RUST_LOG` (`tandem_kube_common=debug,info`, say).

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

/// Installs the process's subscriber: `RUST_LOG` filters, and `default` (a filter such as
/// `info`) applies when it is unset or invalid. A second call (a library started twice in one
/// process, tests) keeps the first subscriber and changes nothing.
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
