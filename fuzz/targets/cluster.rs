//! Cluster-shape CSV (`tandem_catalog::Cluster::parse`): any text is a cluster or an error, and
//! a cluster it accepts is small enough to list GPU by GPU.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| {
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
});
