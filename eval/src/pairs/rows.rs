//! What one method achieved over every queue of the main table: its row, and how a grouping
//! of each queue is scored under the measured table.

use serde::Serialize;

use super::bench::Bench;
use super::engine::Training;
use super::methods::Pairs;
use super::metrics::{HIGH_SLOWDOWN, QueueOutcome, mean, percentile, queue_outcome};
use crate::error::Result;

/// What one method achieved over every queue.
#[derive(Debug, Serialize)]
pub struct MethodRow {
    /// Method name (`random`, `first-come`, `jrs-ranking`, `lucid-style`, `tandem-balanced`,
    /// `tandem-min-slowdown`, `tandem-max-packing`, `oracle`).
    pub method: &'static str,
    /// Whether the method could run on this catalog; every figure is `null` when it could not.
    pub applicable: bool,
    /// Why it could not.
    pub reason: Option<String>,
    /// Mean number of pairs formed per queue (OOMs included).
    pub pairs_per_queue: Option<f64>,
    /// Mean over queues of the queue's packing saving, in %.
    pub packing_saving_pct: Option<f64>,
    /// Mean IndSD of the jobs that shared a GPU (measured pairs), in %.
    pub slowdown_mean_pct: Option<f64>,
    /// 95th percentile (nearest rank) of the same, in %.
    pub slowdown_p95_pct: Option<f64>,
    /// Share of the measured pairs formed in which a job slowed down by more than 50%, in %.
    pub high_slowdown_pairs_pct: Option<f64>,
    /// Pairs formed that were never measured (counted as out of memory), over all queues.
    pub ooms: Option<usize>,
    /// `packing_saving_pct` relative to the oracle's, in %.
    pub of_oracle_pct: Option<f64>,
    /// For Tandem: how its training outcomes were taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<Training>,
}

/// Runs one method over every queue and sums up what it achieved.
pub(crate) fn score(
    method: &'static str,
    bench: &Bench,
    queues: &[Vec<usize>],
    mut group: impl FnMut(&[usize]) -> Result<Pairs>,
) -> Result<MethodRow> {
    let mut outcomes = Vec::with_capacity(queues.len());
    for queue in queues {
        let pairs = group(queue)?;
        outcomes.push(outcome_of(bench, queue, &pairs));
    }
    let summary = Summary::of(&outcomes);
    Ok(MethodRow {
        method,
        applicable: true,
        reason: None,
        pairs_per_queue: Some(summary.pairs as f64 / queues.len() as f64),
        packing_saving_pct: summary.packing_saving_pct,
        slowdown_mean_pct: mean(&summary.slowdowns).map(|s| 100.0 * s),
        slowdown_p95_pct: summary.slowdown_p95_pct,
        high_slowdown_pairs_pct: summary.high_slowdown_pairs_pct,
        ooms: Some(summary.ooms),
        of_oracle_pct: None,
        engine: None,
    })
}

pub(crate) fn not_applicable(method: &'static str, reason: String) -> MethodRow {
    MethodRow {
        method,
        applicable: false,
        reason: Some(reason),
        pairs_per_queue: None,
        packing_saving_pct: None,
        slowdown_mean_pct: None,
        slowdown_p95_pct: None,
        high_slowdown_pairs_pct: None,
        ooms: None,
        of_oracle_pct: None,
        engine: None,
    }
}

/// Scores one queue's grouping under the measured table.
pub(crate) fn outcome_of(bench: &Bench, queue: &[usize], pairs: &[(usize, usize)]) -> QueueOutcome {
    let solo: Vec<f64> = queue.iter().map(|&t| bench.types[t].solo_s).collect();
    queue_outcome(&solo, pairs, |i, j| bench.colocated(queue[i], queue[j]))
}

/// The figures of a method over all its queues.
pub(crate) struct Summary {
    pub(crate) pairs: usize,
    pub(crate) ooms: usize,
    pub(crate) slowdowns: Vec<f64>,
    pub(crate) packing_saving_pct: Option<f64>,
    pub(crate) slowdown_p95_pct: Option<f64>,
    pub(crate) high_slowdown_pairs_pct: Option<f64>,
}

impl Summary {
    pub(crate) fn of(outcomes: &[QueueOutcome]) -> Self {
        let savings: Vec<f64> = outcomes.iter().map(QueueOutcome::packing_saving).collect();
        let slowdowns: Vec<f64> = outcomes.iter().flat_map(|o| o.slowdowns.clone()).collect();
        let worst: Vec<f64> = outcomes
            .iter()
            .flat_map(|o| o.worst_slowdowns.clone())
            .collect();
        let high = worst.iter().filter(|&&s| s > HIGH_SLOWDOWN).count();
        Self {
            pairs: outcomes.iter().map(|o| o.pairs).sum(),
            ooms: outcomes.iter().map(|o| o.ooms).sum(),
            packing_saving_pct: mean(&savings).map(|s| 100.0 * s),
            slowdown_p95_pct: percentile(&slowdowns, 0.95).map(|s| 100.0 * s),
            high_slowdown_pairs_pct: (!worst.is_empty())
                .then(|| 100.0 * high as f64 / worst.len() as f64),
            slowdowns,
        }
    }
}
