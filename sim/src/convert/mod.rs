//! Converters from public traces (and a generator) to the simulator's input formats.
//!
//! - [`gavel`]: Gavel's Philly-derived job traces, whose job types and step counts are those of
//!   the Gavel catalogs, so they convert one to one ([`gavel_trace`]; several merged into one
//!   by [`gavel_traces`], the 15,264-job benchmark).
//! - [`alibaba`]: Alibaba's cluster-trace-gpu-v2023: its node list becomes a [`Cluster`] of the
//!   GPU models the catalogs measured ([`alibaba_cluster`]); its pod list a [`Trace`] whose
//!   pods get a job type drawn from the catalogs and their observed run time as work
//!   ([`alibaba_trace`], then [`scale_to_steps`]).
//! - [`synthetic`]: Poisson arrivals of a weighted job mix ([`synthetic_trace`]), for loads and
//!   mixes no recorded trace has.
//!
//! Conventions shared by all three: converted traces satisfy every rule of the trace format
//! (sorted arrivals, positive work, at least one GPU), so [`Trace::to_csv`] writes a file that
//! [`Trace::parse`] reads back unchanged. A job's `lines` entry is its line in the source file
//! when it has one (a Gavel line, an Alibaba pod), so errors about it point there; otherwise
//! (merged or generated traces, clusters built from groups of nodes) it is the job's row in
//! the result's own CSV form. Every random draw is seeded, so a seed names one result.
//!
//! The demo inputs in `sim/data/` are made here too ([`demo_trace`], [`demo_cluster`]); a test
//! fails if the committed files differ from a fresh conversion.

pub mod alibaba;
pub mod gavel;
pub mod synthetic;

pub use alibaba::{
    AlibabaClusterSummary, AlibabaTraceSummary, ModelTally, alibaba_cluster, alibaba_trace,
    catalog_model, scale_to_steps,
};
pub use gavel::{gavel_trace, gavel_traces};
pub use synthetic::{SyntheticSpec, synthetic_trace};

use rand::RngCore;

use crate::cluster::{Cluster, NodeGroup};
use crate::error::{Error, Result};
use crate::trace::Trace;

/// Multiplies every arrival time of `trace` by `factor`, rounded to the millisecond.
///
/// Compresses (`factor` < 1) or stretches (> 1) a trace's clock without touching its jobs'
/// work, which raises or lowers the load it puts on a cluster: recorded traces were made for
/// clusters of another size. Rounding keeps written files short and readable; a millisecond
/// is far below any scheduling granularity, and rounding never reorders arrivals. Errors if
/// `factor` is not a positive finite number.
pub fn rescale(trace: &mut Trace, factor: f64) -> Result<()> {
    if !(factor.is_finite() && factor > 0.0) {
        return Err(Error::Input {
            origin: trace.origin.clone(),
            problem: format!("the time scale must be a positive number, got {factor}"),
        });
    }
    for job in &mut trace.jobs {
        job.arrival_s = round_ms(job.arrival_s * factor);
    }
    Ok(())
}

/// Keeps the first `n` jobs of `trace` (all of them if it has fewer): a shorter trace with the
/// same mix and arrival pattern, for quick runs.
pub fn take_first(trace: &mut Trace, n: usize) {
    trace.jobs.truncate(n);
    trace.lines.truncate(n);
}

/// Keeps the jobs of `trace` whose work takes at most `max_solo_s` alone on one GPU at
/// `throughput_of(job type)` (steps/s on a reference model); jobs of unknown throughput are
/// dropped too. Returns how many were dropped.
pub fn keep_shorter_than(
    trace: &mut Trace,
    max_solo_s: f64,
    throughput_of: impl Fn(&str) -> Option<f64>,
) -> usize {
    let before = trace.jobs.len();
    let (jobs, lines): (Vec<_>, Vec<_>) = std::mem::take(&mut trace.jobs)
        .into_iter()
        .zip(std::mem::take(&mut trace.lines))
        .filter(|(job, _)| {
            throughput_of(&job.job_type)
                .is_some_and(|tput| job.steps / (tput * f64::from(job.gpus)) <= max_solo_s)
        })
        .unzip();
    trace.jobs = jobs;
    trace.lines = lines;
    before - trace.jobs.len()
}

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

/// A uniform draw in [0, 1) from the generator's raw output: the top 53 bits of a `u64` as the
/// mantissa. Done by hand rather than through `rand`'s distributions, whose algorithms may
/// change between versions: a seed must keep naming the same trace.
fn unit(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
}

/// `seconds` rounded to the millisecond.
fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::PathBuf;

    use crate::trace::TraceJob;

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
        let v100 = crate::Truth::new(&crate::demo::catalogs().unwrap()).unwrap();
        let m = v100.model("V100").unwrap();
        let tput = |name: &str| v100.job_type(name).and_then(|t| v100.throughput(t, m));
        let trace = demo_trace(&source, DEMO_SOURCE, tput).unwrap();
        assert_eq!(trace.jobs.len(), 894);
        assert!(trace.jobs.iter().all(|j| j.gpus == 1));
        check_committed("sim/data/demo-trace.csv", &trace.to_csv());
        let committed = Trace::read(repo("sim/data/demo-trace.csv")).unwrap();
        assert_eq!(committed.jobs, trace.jobs);
    }

    #[test]
    fn keeps_the_jobs_short_enough() {
        let mut t = trace(&[0.0, 1.0, 2.0]);
        t.jobs[1].steps = 1_000.0;
        t.jobs[2].job_type = "B".into();
        let dropped = keep_shorter_than(&mut t, 100.0, |n| (n == "A").then_some(1.0));
        assert_eq!(
            (dropped, t.jobs.len(), t.lines.as_slice()),
            (2, 1, [2].as_slice())
        );
    }

    #[test]
    fn committed_demo_cluster_is_fresh() {
        let cluster = demo_cluster();
        check_committed("sim/data/demo-cluster.csv", &cluster.to_csv());
        let committed = Cluster::read(repo("sim/data/demo-cluster.csv")).unwrap();
        assert_eq!(committed.groups, cluster.groups);
        assert_eq!(committed.gpus().len(), 48);
    }

    fn trace(arrivals: &[f64]) -> Trace {
        Trace {
            origin: "t".into(),
            jobs: arrivals
                .iter()
                .map(|&arrival_s| TraceJob {
                    arrival_s,
                    job_type: "A".into(),
                    gpus: 1,
                    steps: 10.0,
                })
                .collect(),
            lines: (2..).take(arrivals.len()).collect(),
        }
    }

    #[test]
    fn rescales_arrivals_only() {
        let mut t = trace(&[0.0, 10.0, 33.0]);
        rescale(&mut t, 0.1).unwrap();
        let arrivals: Vec<f64> = t.jobs.iter().map(|j| j.arrival_s).collect();
        // Rounded to the millisecond: 3.3, not 3.3000000000000003.
        assert_eq!(arrivals, [0.0, 1.0, 3.3]);
        assert!(t.jobs.iter().all(|j| j.steps == 10.0));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = rescale(&mut t, bad).unwrap_err().to_string();
            assert!(e.starts_with("t: the time scale"), "{e}");
        }
    }

    #[test]
    fn takes_the_first_jobs() {
        let mut t = trace(&[0.0, 1.0, 2.0]);
        take_first(&mut t, 2);
        assert_eq!((t.jobs.len(), t.lines.as_slice()), (2, [2, 3].as_slice()));
        take_first(&mut t, 10);
        assert_eq!(t.jobs.len(), 2);
    }

    #[test]
    fn unit_draws_stay_in_range() {
        use rand::SeedableRng;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
        let draws: Vec<f64> = (0..10_000).map(|_| unit(&mut rng)).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
