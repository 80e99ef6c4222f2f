//! The baselines Tandem is compared with, and the oracle. Each groups one queue into pairs
//! (positions in the queue); every job of no pair runs alone.

use rand::seq::SliceRandom as _;
use rand_xoshiro::Xoshiro256PlusPlus;
use tandem_engine::grouping::{Edge, best_pairs};
use tandem_sim::policy::JrsScore;

use super::bench::Bench;

/// Pairs of positions in a queue.
pub(crate) type Pairs = Vec<(usize, usize)>;

/// First come, first paired: (0, 1), (2, 3), … in queue order.
pub(crate) fn first_come(len: usize) -> Pairs {
    (0..len / 2).map(|i| (2 * i, 2 * i + 1)).collect()
}

/// A uniformly random perfect matching (one job alone when the queue is odd).
pub(crate) fn random(len: usize, rng: &mut Xoshiro256PlusPlus) -> Pairs {
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(rng);
    order.chunks_exact(2).map(|c| (c[0], c[1])).collect()
}

/// JRS / PriRecT cluster ranking. Without profiles every job type is its own cluster, so the
/// ranking is over the observed (training) pairs themselves, in the simulator's JRS order
/// ([`JrsScore`]): best measured packing saving first, ties broken by the lower worst slowdown.
#[derive(Debug, Clone)]
pub(crate) struct JrsRanking {
    /// Type pairs, best first; only those whose measured saving is positive (a pair the
    /// method's own table says loses time is never worth forming).
    ranked: Vec<(usize, usize)>,
}

impl JrsRanking {
    /// Ranks the observed pairs (indices into `bench.pairs`).
    pub(crate) fn new(bench: &Bench, observed: &[usize]) -> Self {
        let mut scored: Vec<(JrsScore, usize)> = observed
            .iter()
            .map(|&p| (bench.jrs_score(&bench.pairs[p]), p))
            .filter(|(score, _)| score.saves_time())
            .collect();
        // Catalog order settles exact ties, so the ranking is reproducible.
        scored.sort_by(|x, y| x.0.rank(&y.0).then(x.1.cmp(&y.1)));
        Self {
            ranked: scored
                .into_iter()
                .map(|(_, p)| (bench.pairs[p].a, bench.pairs[p].b))
                .collect(),
        }
    }

    /// Greedy: the best-ranked pair whose two jobs are both in the queue and still free.
    pub(crate) fn pairs(&self, queue: &[usize]) -> Pairs {
        let position = |t: usize| queue.iter().position(|&q| q == t);
        let mut free = vec![true; queue.len()];
        let mut pairs = Vec::new();
        for &(a, b) in &self.ranked {
            if let (Some(i), Some(j)) = (position(a), position(b))
                && free[i]
                && free[j]
            {
                free[i] = false;
                free[j] = false;
                pairs.push((i.min(j), i.max(j)));
            }
        }
        pairs
    }
}

/// Why the Lucid-style rule cannot run on this bench, if it cannot: it needs every job type's
/// GPU utilization.
pub(crate) fn lucid_not_applicable(bench: &Bench) -> Option<String> {
    let missing: Vec<&str> = bench
        .types
        .iter()
        .filter(|t| t.gpu_util_pct.is_none())
        .map(|t| t.name.as_str())
        .collect();
    let first = missing.first()?;
    Some(format!(
        "needs each job type's GPU utilization (profile.gpu_util_pct or gpu_util_pct_approx); \
         {} of {} job types have none (first: {first})",
        missing.len(),
        bench.types.len()
    ))
}

/// Lucid's packing rule (ASPLOS '23), reduced to what a catalog offers: the job of highest GPU
/// utilization is paired with the free job of lowest utilization whose summed utilization stays
/// within 100% and, when both memories are known, whose summed memory fits the GPU; a job with
/// no such partner runs alone. Highest utilization first. Requires every utilization (see
/// [`lucid_not_applicable`]).
pub(crate) fn lucid(bench: &Bench, queue: &[usize]) -> Pairs {
    let util = |i: usize| bench.types[queue[i]].gpu_util_pct.unwrap_or(100.0);
    let memory = |i: usize| bench.types[queue[i]].mem_used_mib;
    // Highest utilization first; queue order settles ties.
    let mut order: Vec<usize> = (0..queue.len()).collect();
    order.sort_by(|&x, &y| util(y).total_cmp(&util(x)).then(x.cmp(&y)));
    let mut free = vec![true; queue.len()];
    let mut pairs = Vec::new();
    for (rank, &high) in order.iter().enumerate() {
        if !free[high] {
            continue;
        }
        free[high] = false;
        // Candidates from the lowest utilization up; once the sum passes 100% every later
        // candidate's does too.
        let partner = order[rank + 1..]
            .iter()
            .rev()
            .copied()
            .filter(|&low| free[low])
            .take_while(|&low| util(high) + util(low) <= 100.0)
            .find(|&low| match (memory(high), memory(low)) {
                (Some(x), Some(y)) => u64::from(x) + u64::from(y) <= u64::from(bench.memory_mib),
                _ => true,
            });
        if let Some(low) = partner {
            free[low] = false;
            pairs.push((high.min(low), high.max(low)));
        }
    }
    pairs
}

/// The best grouping under the measured table: a maximum-weight matching where a measured pair
/// weighs the time it saves (only positive savings are edges), solved exactly by the engine's
/// own matching code.
pub(crate) fn oracle(bench: &Bench, queue: &[usize]) -> Pairs {
    // The matching scales weights to integers with a fixed factor meant for values of a few
    // units; seconds saved can reach thousands, so weigh in units of the queue's mean solo
    // time. A common factor changes no optimum.
    let unit = queue.iter().map(|&t| bench.types[t].solo_s).sum::<f64>() / queue.len() as f64;
    let mut edges = Vec::new();
    for i in 0..queue.len() {
        for j in i + 1..queue.len() {
            let Some(times) = bench.colocated(queue[i], queue[j]) else {
                continue;
            };
            let solo = bench.types[queue[i]].solo_s + bench.types[queue[j]].solo_s;
            let saved = solo - times[0].max(times[1]);
            if saved > 0.0 {
                edges.push(Edge {
                    a: i,
                    b: j,
                    value: saved / unit,
                });
            }
        }
    }
    best_pairs(queue.len(), &edges)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rand::SeedableRng as _;
    use tandem_catalog::Catalog;

    use super::*;

    /// Four types of 100 s each; speeds chosen so the savings are known.
    fn bench() -> Bench {
        let catalog = Catalog::parse(
            r#"{"name": "four", "source": "tests",
              "gpu_models": [{"model": "T4", "memory_mib": 16000}],
              "job_types": [
                {"name": "w", "profile": null, "declared": null, "solo_time_s": {"T4": 100.0}, "gpu_util_pct_approx": 90},
                {"name": "x", "profile": null, "declared": null, "solo_time_s": {"T4": 100.0}, "gpu_util_pct_approx": 60},
                {"name": "y", "profile": null, "declared": null, "solo_time_s": {"T4": 100.0}, "gpu_util_pct_approx": 30},
                {"name": "z", "profile": null, "declared": null, "solo_time_s": {"T4": 100.0}, "gpu_util_pct_approx": 5}
              ],
              "pairs": [
                {"gpu_model": "T4", "a": "w", "b": "x", "speed_a": 0.9, "speed_b": 0.9},
                {"gpu_model": "T4", "a": "y", "b": "z", "speed_a": 0.9, "speed_b": 0.9},
                {"gpu_model": "T4", "a": "w", "b": "z", "speed_a": 0.6, "speed_b": 0.6},
                {"gpu_model": "T4", "a": "x", "b": "y", "speed_a": 0.6, "speed_b": 0.6},
                {"gpu_model": "T4", "a": "w", "b": "y", "speed_a": 0.4, "speed_b": 0.4}
              ]}"#,
            "four.json",
        )
        .unwrap();
        Bench::load(&catalog, Path::new("four.json"), None).unwrap()
    }

    #[test]
    fn first_come_and_random_pair_everyone() {
        assert_eq!(first_come(5), vec![(0, 1), (2, 3)]);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let pairs = random(6, &mut rng);
        let mut seen: Vec<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn the_oracle_maximizes_measured_saving() {
        let bench = bench();
        // (w, x) + (y, z) save 2 × 88.9 s; (w, z) + (x, y) save 2 × 33.3 s; (w, y) saves less
        // than nothing (speeds 0.4).
        let pairs = oracle(&bench, &[0, 1, 2, 3]);
        assert_eq!(pairs, vec![(0, 1), (2, 3)]);
        // Queue order is positions, not types.
        assert_eq!(oracle(&bench, &[3, 0, 2]), vec![(0, 2)]);
        // (w, y) loses time: left alone.
        assert!(oracle(&bench, &[0, 2]).is_empty());
    }

    #[test]
    fn jrs_takes_the_best_observed_pairs_that_are_free() {
        let bench = bench();
        // Only (w, z) and (x, y) observed (pairs 2 and 3), and the losing (w, y) (pair 4).
        let ranking = JrsRanking::new(&bench, &[2, 3, 4]);
        assert_eq!(ranking.ranked.len(), 2, "the losing pair is not ranked");
        assert_eq!(ranking.pairs(&[0, 1, 2, 3]), vec![(0, 3), (1, 2)]);
        // y is missing: only (w, z) can form.
        assert_eq!(ranking.pairs(&[3, 1, 0]), vec![(0, 2)]);
    }

    #[test]
    fn lucid_pairs_high_with_low_utilization_within_100_percent() {
        let bench = bench();
        assert_eq!(lucid_not_applicable(&bench), None);
        // 90 + 5 ≤ 100: (w, z); 60 + 30 ≤ 100: (x, y).
        assert_eq!(lucid(&bench, &[0, 1, 2, 3]), vec![(0, 3), (1, 2)]);
        // 90 + 30 > 100: w alone; x alone too (nobody left).
        assert!(lucid(&bench, &[0, 2]).is_empty());
        assert_eq!(lucid(&bench, &[1, 0, 2]), vec![(0, 2)]);
    }
}
