//! Command-line options of `tandem-volcano-adapter`.

use clap::Parser;

/// Tandem as Volcano's extender: decides which GPU tasks share a GPU, and where.
///
/// vc-scheduler's `extender` plugin calls it (see deploy/helm/tandem/files/volcano-scheduler.conf) for
/// tasks that request the managed GPU resource: `predicate` (the engine's OOM guard and
/// sharing cap, once per task and node), `prioritize` (the engine's interference-aware score),
/// `allocate`/`deallocate` (the chosen GPU recorded at once and written on the pod as
/// tandem.dev/gpu), and `onSessionOpen`/`onSessionClose`. Gang members (PodGroup minMember > 1)
/// and multi-GPU tasks only take idle GPUs. It watches nodes and pods like tandem-kube-adapter
/// and keeps the same knowledge base (the same ConfigMap, written by the holder of the same
/// Lease), so a cluster running both schedulers keeps one. The options below the first are
/// tandem-kube-adapter's; where they mention kube-scheduler's bind, read vc-scheduler's
/// allocate. Set RUST_LOG (for example `RUST_LOG=tandem_volcano_adapter=debug`) for more
/// detail.
#[derive(Debug, Clone, Parser)]
#[command(name = "tandem-volcano-adapter", version)]
// Clap names each struct's argument group after the struct, and the flattened options are an
// `Options` too: without its own id the two groups collide (a panic at start in debug builds).
#[group(id = "volcano-options")]
pub struct Options {
    /// What `prioritize` multiplies the engine's 0..100 score by. vc-scheduler adds the
    /// extender's scores raw to its node-order plugins' (each 0..100 times its weight), so
    /// this is the extender's weight among them.
    #[arg(long, default_value_t = 10.0, value_parser = parse_weight)]
    pub score_weight: f64,

    /// Options shared with tandem-kube-adapter.
    #[command(flatten)]
    pub kube: tandem_kube_common::Options,
}

fn parse_weight(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(weight) if weight.is_finite() && weight >= 0.0 => Ok(weight),
        _ => Err(format!("`{text}` is not a weight (a number, 0 or more)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent_and_names_itself() {
        use clap::CommandFactory as _;
        let command = Options::command();
        command.clone().debug_assert();
        assert_eq!(command.get_name(), "tandem-volcano-adapter");
        let options = Options::try_parse_from([
            "tandem-volcano-adapter",
            "--id-secret-file",
            "/s",
            "--score-weight",
            "2.5",
        ])
        .unwrap();
        assert_eq!(options.score_weight, 2.5);
        assert_eq!(options.kube.knowledge_configmap, "tandem-knowledge");
        assert!(parse_weight("-1").unwrap_err().contains("`-1`"));
    }
}
