//! The simulator's demo inputs (`sim/data/demo-trace.csv` and `sim/data/demo-cluster.csv`): the
//! recipe that converts them, and the test that the committed files equal a fresh conversion.

use super::edit::{keep_shorter_than, rescale};
use super::gavel::gavel_trace;
use crate::cluster::{Cluster, NodeGroup};
use crate::error::Result;
use crate::trace::Trace;

/// The Gavel trace the demo trace is converted from, relative to the repository root.
///
/// `ed69ec.trace` because every one of its 951 jobs needs a single GPU, so every job is one
/// that may share: the demo is about which jobs share a GPU. (Multi-GPU jobs are exercised by
/// the 15,264-job benchmark, which merges all fifteen traces.)
pub const DEMO_SOURCE: &str = "data/gavel/traces/philly_vc_seed0/ed69ec.trace";

/// The longest job the demo keeps: 48 hours alone on a V100 ([`keep_shorter_than`]).
///
/// The source's durations are heavy-tailed (median 3.7 h, 99th percentile 893 h, longest
/// 1,301 h on a V100). Each of the 57 jobs above 48 h would alone decide the makespan of every
/// policy, hiding everything else; the other 894 are kept.
pub const DEMO_MAX_SOLO_S: f64 = 48.0 * 3600.0;

/// The factor the demo trace's arrivals are multiplied by ([`rescale`]).
///
/// The source was cut for Gavel's clusters, not the demo's 48 GPUs: at its own pace the kept
/// jobs hardly ever queue, and sharing a GPU could only slow them down. Compressed to 0.3 of
/// its length (arrivals over 489 h instead of 1,629 h), jobs queue at times, which is when
/// sharing pays: the situation the demo compares policies in.
pub const DEMO_TIME_SCALE: f64 = 0.3;

/// The demo trace (`sim/data/demo-trace.csv`): the Gavel trace [`DEMO_SOURCE`], whose text is
/// `gavel_text`, converted by [`gavel_trace`], without the jobs longer than
/// [`DEMO_MAX_SOLO_S`] on a V100 (`v100_throughput_of` gives a job type's steps/s there), its
/// arrivals shifted so the first kept job arrives at 0, then rescaled by [`DEMO_TIME_SCALE`].
pub fn demo_trace(
    gavel_text: &str,
    origin: &str,
    v100_throughput_of: impl Fn(&str) -> Option<f64>,
) -> Result<Trace> {
    let mut trace = gavel_trace(gavel_text, origin)?;
    keep_shorter_than(&mut trace, DEMO_MAX_SOLO_S, v100_throughput_of);
    // The source's first job is among those dropped: start the clock at the first one kept.
    let first = trace.jobs.first().map_or(0.0, |j| j.arrival_s);
    for job in &mut trace.jobs {
        job.arrival_s -= first;
    }
    rescale(&mut trace, DEMO_TIME_SCALE)?;
    Ok(trace)
}

/// The demo cluster (`sim/data/demo-cluster.csv`): 48 GPUs of the three models the Gavel
/// catalogs measured, four nodes of four GPUs each per model, fastest first (V100, P100, K80),
/// as an operator lists them so that placements which take the first free GPU take the best.
pub fn demo_cluster() -> Cluster {
    let groups: Vec<NodeGroup> = ["V100", "P100", "K80"]
        .into_iter()
        .map(|model| NodeGroup {
            nodes: 4,
            gpus_per_node: 4,
            gpu_model: model.to_owned(),
        })
        .collect();
    Cluster {
        origin: "demo cluster".into(),
        lines: (2..).take(groups.len()).collect(),
        groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::PathBuf;

    use crate::catalog::Catalog;

    /// A path relative to the repository root.
    fn repo(path: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path)
    }

    /// Compares a committed demo file with a fresh conversion; with `TANDEM_UPDATE_DEMO=1`,
    /// writes the conversion instead.
    fn check_committed(path: &str, fresh: &str) {
        let path = repo(path);
        if std::env::var_os("TANDEM_UPDATE_DEMO").is_some_and(|v| v == "1") {
            std::fs::write(&path, fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == fresh,
            "{} differs from a fresh conversion; rerun with TANDEM_UPDATE_DEMO=1 to rewrite it",
            path.display()
        );
    }

    #[test]
    fn committed_demo_trace_is_a_fresh_conversion() {
        let source = std::fs::read_to_string(repo(DEMO_SOURCE)).unwrap();
        // Each type's V100 solo throughput, as the simulator's ground truth takes it.
        let v100 = Catalog::read(repo("data/catalogs/gavel-v100.json")).unwrap();
        let tput = |name: &str| {
            v100.job_type(name)
                .and_then(|t| t.solo_throughput.get("V100").copied())
        };
        let trace = demo_trace(&source, DEMO_SOURCE, tput).unwrap();
        assert_eq!(trace.jobs.len(), 894);
        assert!(trace.jobs.iter().all(|j| j.gpus == 1));
        check_committed("sim/data/demo-trace.csv", &trace.to_csv());
        let committed = Trace::read(repo("sim/data/demo-trace.csv")).unwrap();
        assert_eq!(committed.jobs, trace.jobs);
    }

    #[test]
    fn committed_demo_cluster_is_fresh() {
        let cluster = demo_cluster();
        check_committed("sim/data/demo-cluster.csv", &cluster.to_csv());
        let committed = Cluster::read(repo("sim/data/demo-cluster.csv")).unwrap();
        assert_eq!(committed.groups, cluster.groups);
        assert_eq!(committed.gpus().len(), 48);
    }
}
