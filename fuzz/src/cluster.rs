//! Cluster-shape CSV (`tandem_catalog::Cluster::parse`): any text is a cluster or an error, and
//! a cluster it accepts is small enough to list GPU by GPU.

/// Feeds one input to the target (inputs that are not UTF-8 are skipped, as libFuzzer's
/// `&str` targets skip them).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cluster) = tandem_catalog::Cluster::parse(text, "fuzz") {
        let gpus: u64 = cluster
            .groups
            .iter()
            .map(|g| u64::from(g.nodes) * u64::from(g.gpus_per_node))
            .sum();
        assert!(
            gpus <= tandem_catalog::cluster::MAX_GPUS,
            "{gpus} GPUs accepted"
        );
    }
}
