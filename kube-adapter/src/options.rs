//! Command-line options of `tandem-kube-adapter`.

use clap::Parser;
use tandem_kube_common::decide::FilterPasses;

/// Tandem's kube-scheduler extender: decides which GPU pods share a GPU, and where.
///
/// kube-scheduler calls it for pods that request the managed GPU resource (the Helm chart's
/// mode `extender` installs both; see deploy/helm/tandem/templates/extender-scheduler.yaml). It watches nodes and pods, keeps the knowledge base in a ConfigMap
/// and, when several replicas run, elects one writer with a Lease. Set RUST_LOG (for example
/// `RUST_LOG=tandem_kube_adapter=debug,tandem_kube_common=debug`) for more detail.
#[derive(Debug, Clone, Parser)]
#[command(name = "tandem-kube-adapter", version)]
pub struct Options {
    /// What every Kubernetes front-end takes.
    #[command(flatten)]
    pub kube: tandem_kube_common::Options,

    /// Which nodes `filter` passes: `best`, only the node Tandem ranks first (kube-scheduler
    /// then binds the pod there without calling `prioritize` or running its own scoring
    /// plugins, one round trip per pod fewer), or `fitting`, every node where the pod fits
    /// (ranked by `prioritize` together with the scheduler's own plugins, whose soft
    /// preferences then count too).
    #[arg(long, value_enum, default_value = "best")]
    pub filter_passes: FilterPasses,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory as _;
        Options::command().debug_assert();
    }
}
