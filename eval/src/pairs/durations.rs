//! The mixed-duration protocol: the main table's queues again, each job now of a length of its
//! own, so that what sharing saves depends on how long the partners run together.
//!
//! Each job runs its type's solo time times a factor drawn log-uniformly within
//! `1/LENGTH_SPREAD..=LENGTH_SPREAD`. A measured pair's slowdowns are taken as how much slower
//! each job progresses while both run: the two share the GPU until the first finishes, then
//! the other runs alone ([`corun_saved_s`]). A pair of a short and a long job saves at most the
//! short one's time; the oracle pairs jobs that finish together.
//!
//! Tandem runs twice per objective: with the lengths **hidden** (the engine knows each job by
//! its id alone, as in the main table) and **declared** (each job's work and each type's speed
//! told, `job.work` and `observe-speed`, so the engine knows every run time).
//!
//! A second oracle matches over the **observed** pairs only. Jobs known by their ids alone carry
//! no memory figure, so the engine's guard lets two of them share only once they were seen
//! sharing: this oracle is the most any method bound by that promise can save, and the gap
//! between the two oracles is what the pairs never observed hold, not what the matching misses.

use std::collections::BTreeSet;

use rand::Rng as _;
use serde::Serialize;
use tandem_api::Objective;
use tandem_engine::grouping::{Edge, best_pairs};
use tandem_host::Runtime;

use super::bench::Bench;
use super::draws::{Stream, rng};
use super::engine::Trained;
use super::methods::{self, JrsRanking, Pairs};
use super::metrics::{mean, of_oracle};
use crate::error::Result;

/// How far apart job lengths are: each job runs its type's solo time times a factor within
/// `1/LENGTH_SPREAD..=LENGTH_SPREAD` (a hundredfold range, as between a fine-tuning run and a
/// training run from scratch).
pub const LENGTH_SPREAD: f64 = 10.0;

/// The mixed-duration table (the `mixed_durations` field of `--format json`).
#[derive(Debug, Serialize)]
pub struct MixedDurations {
    /// [`LENGTH_SPREAD`].
    pub length_spread: f64,
    /// One row per method, then the oracle and the oracle over the observed pairs.
    pub methods: Vec<DurationRow>,
}

/// What one method achieved on the queues with mixed lengths.
#[derive(Debug, Serialize)]
pub struct DurationRow {
    /// Method name, as in the main table.
    pub method: &'static str,
    /// For Tandem, whether the engine was told each job's work and each type's speed
    /// (`declared`) or not (`hidden`); `None` for the others, which never look at lengths.
    pub lengths: Option<&'static str>,
    /// Mean number of pairs formed per queue (OOMs included).
    pub pairs_per_queue: f64,
    /// Mean over queues of the queue's packing saving, in %.
    pub packing_saving_pct: Option<f64>,
    /// Pairs formed that were never measured (they save nothing), over all queues.
    pub ooms: usize,
    /// `packing_saving_pct` relative to the oracle's, in %.
    pub of_oracle_pct: Option<f64>,
}

/// Each queue's job lengths (s), drawn from their own stream, so the main table's draws are
/// the same with or without this protocol.
fn draw_lengths(bench: &Bench, queues: &[Vec<usize>], seed: u64) -> Vec<Vec<f64>> {
    let mut rng = rng(seed, Stream::Lengths);
    let spread = LENGTH_SPREAD.ln();
    queues
        .iter()
        .map(|queue| {
            queue
                .iter()
                .map(|&t| bench.types[t].solo_s * rng.gen_range(-spread..=spread).exp())
                .collect()
        })
        .collect()
}

/// Runs the protocol on `queues` with Tandem trained on the `observed` pairs.
pub(crate) fn run(
    runtime: &Runtime,
    bench: &Bench,
    secret: &[u8],
    queues: &[Vec<usize>],
    observed: &[usize],
    seed: u64,
) -> Result<MixedDurations> {
    let lengths = draw_lengths(bench, queues, seed);
    let mut rows = Vec::new();
    let mut pairing_rng = rng(seed, Stream::RandomPairing);
    rows.push(score(
        "random",
        None,
        bench,
        queues,
        &lengths,
        |queue, _| Ok(methods::random(queue.len(), &mut pairing_rng)),
    )?);
    rows.push(score(
        "first-come",
        None,
        bench,
        queues,
        &lengths,
        |queue, _| Ok(methods::first_come(queue.len())),
    )?);
    let ranking = JrsRanking::new(bench, observed);
    rows.push(score(
        "jrs-ranking",
        None,
        bench,
        queues,
        &lengths,
        |queue, _| Ok(ranking.pairs(queue)),
    )?);
    for (method, objective) in [
        ("tandem-balanced", Objective::Balanced),
        ("tandem-min-slowdown", Objective::MinSlowdown),
        ("tandem-max-packing", Objective::MaxPacking),
    ] {
        for declared in [false, true] {
            let mut trained = Trained::new(runtime, bench, secret, objective, seed, observed)?;
            if declared {
                trained.tell_speeds(bench)?;
            }
            let label = if declared { "declared" } else { "hidden" };
            rows.push(score(
                method,
                Some(label),
                bench,
                queues,
                &lengths,
                |queue, lengths| {
                    let work = declared.then(|| work_of(bench, queue, lengths));
                    trained.pairs(bench, queue, work.as_deref())
                },
            )?);
        }
    }
    let oracle_row = score("oracle", None, bench, queues, &lengths, |queue, lengths| {
        Ok(oracle(bench, queue, lengths, |_, _| true))
    })?;
    let best = oracle_row.packing_saving_pct;
    rows.push(oracle_row);
    let seen: BTreeSet<(usize, usize)> = observed
        .iter()
        .map(|&p| {
            let pair = &bench.pairs[p];
            (pair.a.min(pair.b), pair.a.max(pair.b))
        })
        .collect();
    rows.push(score(
        "oracle-observed",
        None,
        bench,
        queues,
        &lengths,
        |queue, lengths| {
            Ok(oracle(bench, queue, lengths, |a, b| {
                seen.contains(&(a.min(b), a.max(b)))
            }))
        },
    )?);
    for row in &mut rows {
        row.of_oracle_pct = of_oracle(row.packing_saving_pct, best);
    }
    Ok(MixedDurations {
        length_spread: LENGTH_SPREAD,
        methods: rows,
    })
}

/// Each job's work in the unit the engine is told speeds in ([`Trained::tell_speeds`]): runs
/// of its type, so that work over speed is its length.
fn work_of(bench: &Bench, queue: &[usize], lengths: &[f64]) -> Vec<f64> {
    queue
        .iter()
        .zip(lengths)
        .map(|(&t, length)| length / bench.types[t].solo_s)
        .collect()
}

/// The oracle with lengths: maximum-weight matching on the seconds each measured pair of job
/// types `allowed` admits saves (as a share of the queue's total length, the scale the
/// matching's weights expect).
fn oracle(
    bench: &Bench,
    queue: &[usize],
    lengths: &[f64],
    allowed: impl Fn(usize, usize) -> bool,
) -> Pairs {
    let total: f64 = lengths.iter().sum();
    let mut edges = Vec::new();
    for a in 0..queue.len() {
        for b in a + 1..queue.len() {
            if allowed(queue[a], queue[b])
                && let Some(saved) = pair_saved_s(bench, queue, lengths, a, b)
                && saved > 0.0
            {
                edges.push(Edge {
                    a,
                    b,
                    value: saved / total,
                });
            }
        }
    }
    best_pairs(queue.len(), &edges)
}

/// Seconds the queue's jobs `a` and `b` save sharing, if their pair was measured.
fn pair_saved_s(
    bench: &Bench,
    queue: &[usize],
    lengths: &[f64],
    a: usize,
    b: usize,
) -> Option<f64> {
    let colocated = bench.colocated(queue[a], queue[b])?;
    let slowdown = |i: usize, at: usize| colocated[i] / bench.types[queue[at]].solo_s - 1.0;
    Some(corun_saved_s(
        [lengths[a], lengths[b]],
        [slowdown(0, a), slowdown(1, b)],
    ))
}

/// Seconds two jobs save sharing a GPU rather than running one after the other, when they run
/// `solo_s` alone and, while both run, progress at `1 / (1 + slowdown)` of their solo speed;
/// once the first finishes the other runs alone.
pub(crate) fn corun_saved_s(solo_s: [f64; 2], slowdowns: [f64; 2]) -> f64 {
    // A measured speed-up is kept; a slowdown of -100% or less would mean infinite speed.
    let factor = slowdowns.map(|s| 1.0 + s.max(-0.99));
    let wall = [solo_s[0] * factor[0], solo_s[1] * factor[1]];
    let (first, other) = if wall[0] <= wall[1] { (0, 1) } else { (1, 0) };
    let together = wall[first];
    let alone = solo_s[other] - together / factor[other];
    solo_s[0] + solo_s[1] - (together + alone)
}

/// Runs one method over every queue with its lengths.
fn score(
    method: &'static str,
    lengths_told: Option<&'static str>,
    bench: &Bench,
    queues: &[Vec<usize>],
    lengths: &[Vec<f64>],
    mut group: impl FnMut(&[usize], &[f64]) -> Result<Pairs>,
) -> Result<DurationRow> {
    let mut savings = Vec::with_capacity(queues.len());
    let (mut pairs_formed, mut ooms) = (0, 0);
    for (queue, lengths) in queues.iter().zip(lengths) {
        let pairs = group(queue, lengths)?;
        pairs_formed += pairs.len();
        let mut saved = 0.0;
        for &(a, b) in &pairs {
            match pair_saved_s(bench, queue, lengths, a, b) {
                Some(s) => saved += s,
                None => ooms += 1,
            }
        }
        let total: f64 = lengths.iter().sum();
        savings.push(if total > 0.0 { saved / total } else { 0.0 });
    }
    Ok(DurationRow {
        method,
        lengths: lengths_told,
        pairs_per_queue: pairs_formed as f64 / queues.len().max(1) as f64,
        packing_saving_pct: mean(&savings).map(|s| 100.0 * s),
        ooms,
        of_oracle_pct: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partners_that_finish_together_save_the_most() {
        // Equal lengths and slowdowns: both finish together, each 25% late.
        assert!((corun_saved_s([100.0, 100.0], [0.25, 0.25]) - 75.0).abs() < 1e-9);
        // A 10 s job beside a 100 s one: 12.5 s together, then 90 s alone; 7.5 s saved.
        assert!((corun_saved_s([10.0, 100.0], [0.25, 0.25]) - 7.5).abs() < 1e-9);
        // Order does not matter.
        assert!((corun_saved_s([100.0, 10.0], [0.25, 0.25]) - 7.5).abs() < 1e-9);
        // Doubling both run times saves nothing.
        assert!(corun_saved_s([50.0, 80.0], [1.0, 1.0]).abs() < 1e-9);
    }

    #[test]
    fn the_job_slowed_less_finishes_first_and_the_other_runs_alone() {
        // 110 s together; then 100 - 110 / 1.5 s of the other alone.
        let saved = corun_saved_s([100.0, 100.0], [0.1, 0.5]);
        let expected = 200.0 - (110.0 + 100.0 - 110.0 / 1.5);
        assert!((saved - expected).abs() < 1e-9, "{saved} vs {expected}");
    }
}
