//! How Tandem's programs log, so that every binary (the adapters, the framework plugin inside
//! kube-scheduler, the node agents, the CLI) logs the same way: `tracing` events on standard
//! error — standard output is the CLI's answers, and inside kube-scheduler it is klog's — in
//! colour only on a terminal, filtered by `RUST_LOG` (`tandem_kube_common=debug,info`, say);
//! and how they say what failed: an error with its causes on one line ([`report`]).

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

/// `error` and its causes, `: `-separated, for people: a log line, an HTTP answer's `error`, an
/// exit message. Tandem's errors keep their cause as a `source`, out of their own message; a
/// cause whose text the message before it already ends with is not repeated, as some
/// libraries' errors quote their source (NVML's loader error does).
pub fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::report;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(text: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn a_report_names_each_cause_once_in_order() {
        let quoting = layer(
            "cannot load NVML: libnvidia-ml.so.1 not found",
            Some(layer("libnvidia-ml.so.1 not found", None)),
        );
        let chained = layer("engine sync failed", Some(layer("trap", Some(quoting))));
        assert_eq!(
            report(&chained),
            "engine sync failed: trap: cannot load NVML: libnvidia-ml.so.1 not found"
        );
        assert_eq!(report(&layer("alone", None)), "alone");
    }
}
