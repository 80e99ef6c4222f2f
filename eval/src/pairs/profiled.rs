//! The profile path: jobs given to the engine with their profiles, so that it places each in a
//! cluster of its knowledge base and predicts a pair from what its clusters taught (the
//! analytic prior, the cluster-pair matrix, the residual model) rather than from keyed ids.
//!
//! Runs only on a catalog whose every job type has a profile. Three phases per objective, on
//! the same queues as the per-id methods:
//! - **cold**: a freshly bootstrapped recommender (its clusters seeded with the bundled
//!   Futurewei profiles), no outcome observed; every job is seen for the first time;
//! - **warm**: the recommender first observes each type's profile and the training pairs'
//!   outcomes under one set of ids; the queues then carry *new* ids, so nothing learned per id
//!   applies and only what the clusters learned carries over;
//! - **recurring**: the same warm recommender, the queues carrying the ids it observed, so the
//!   per-id layers add to the clusters' (a profiled workload that runs again).
//!
//! Beside them, the JRS ranking as its papers describe it: cluster pairs (the engine's
//! clusters) ranked by the mean packing saving of their observed pairs. And the measured pairs
//! grouped by the clusters of their two jobs, to check which cluster pairs interfere least.

use std::collections::BTreeMap;

use serde::Serialize;
use tandem_api::{GpuSpec, Job, Objective, Policy, Profile};
use tandem_host::{Recommender, Runtime};
use tandem_wire::identity::keyed_id;

use super::bench::Bench;
use super::draws::training_count;
use super::engine::{self, Training, observe_outcomes};
use super::methods::Pairs;
use super::metrics::{HIGH_SLOWDOWN, mean, spearman};
use super::rows::{MethodRow, score};
use crate::error::{Error, Result};

/// What the profile path measured (`profile_path` in the JSON output).
#[derive(Debug, Serialize)]
pub struct ProfilePath {
    /// Each job type's cluster in the bootstrapped knowledge base, as `observe-profile`
    /// assigns it, in catalog order.
    pub clusters: Vec<TypeCluster>,
    /// Measured pairs whose profiles' memory sums to more than the GPU: the memory guard
    /// refuses them although they were measured sharing one.
    pub pairs_over_memory: usize,
    /// One row per method and phase; `method` names the phase (`tandem-balanced cold`).
    pub methods: Vec<MethodRow>,
    /// `tandem-balanced` warm (the queued jobs new) after observing growing shares of the
    /// measured pairs: the learning curve of the profile path.
    pub curve: Vec<ProfileCurveRow>,
    /// The engine's predictions for measured pairs of new jobs, cold (every measured pair) and
    /// warm (the held-out pairs), against the measurements: free of the queues' unmeasured
    /// pairs.
    pub predictions: Vec<PredictionRow>,
    /// Every measured pair grouped by the clusters of its two jobs (lower cluster first).
    pub cluster_pairs: Vec<ClusterPairRow>,
    /// The same pairs in two groups: both jobs in one cluster (`within`), or in two (`across`).
    pub within_across: Vec<ClusterPairRow>,
}

/// A job type and the engine's cluster for it.
#[derive(Debug, Serialize)]
pub struct TypeCluster {
    /// The catalog's name of the type (never sent to the engine).
    pub job_type: String,
    /// Its cluster.
    pub cluster: u32,
    /// The assignment's uncertainty, 0 (at the centre) ..= 1.
    pub uncertainty: f32,
}

/// One point of the profile path's learning curve.
#[derive(Debug, Serialize)]
pub struct ProfileCurveRow {
    /// Share of the measured pairs observed.
    pub train_share: f64,
    /// Measured pairs observed.
    pub training_pairs: usize,
    /// How the engine took them.
    pub engine: Training,
    /// Mean queue packing saving, in %.
    pub packing_saving_pct: Option<f64>,
    /// `packing_saving_pct` relative to the oracle's on the same queues, in %.
    pub of_oracle_pct: Option<f64>,
    /// p95 IndSD of the jobs that shared a GPU, in %.
    pub slowdown_p95_pct: Option<f64>,
    /// Unmeasured pairs formed over all queues.
    pub ooms: usize,
    /// The engine's predictions for the pairs held out, both jobs new.
    pub held_out: PredictionRow,
}

/// How well the engine predicts measured pairs of jobs it sees for the first time.
#[derive(Debug, Serialize)]
pub struct PredictionRow {
    /// `cold` (nothing observed; every measured pair) or `warm` (the training pairs observed;
    /// the held-out pairs).
    pub phase: &'static str,
    /// Pairs predicted.
    pub pairs: usize,
    /// Mean absolute error of the predicted IndSD of both jobs, in percentage points.
    pub slowdown_mae_pp: Option<f64>,
    /// Spearman's rank correlation of predicted vs measured packing saving. The engine knows
    /// no solo time of a new job, so its saving assumes equal ones; the measured saving also
    /// reflects how different the two jobs' lengths are.
    pub packing_saving_spearman: Option<f64>,
    /// Spearman's rank correlation of the predicted vs measured larger IndSD of the two jobs:
    /// the interference ranking alone.
    pub worst_slowdown_spearman: Option<f64>,
    /// Pairs the engine could not predict (left out of both figures).
    pub predict_errors: usize,
    /// The first such error, for the reader.
    pub first_predict_error: Option<String>,
}

/// What the measured pairs of one group of cluster pairs did.
#[derive(Debug, Serialize)]
pub struct ClusterPairRow {
    /// `a-b` for the clusters of the two jobs (lower first), or `within` / `across`.
    pub clusters: String,
    /// Measured pairs in the group.
    pub pairs: usize,
    /// Mean packing saving of those pairs, in %.
    pub packing_saving_pct: Option<f64>,
    /// Mean IndSD of their jobs, in %.
    pub slowdown_mean_pct: Option<f64>,
    /// Largest IndSD of their jobs, in %.
    pub slowdown_max_pct: Option<f64>,
    /// Pairs in which a job slowed down by more than 50%.
    pub high_slowdown_pairs: usize,
}

/// The objectives evaluated, with the names of their rows.
const OBJECTIVES: [(Objective, [&str; 3]); 3] = [
    (
        Objective::Balanced,
        [
            "tandem-balanced cold",
            "tandem-balanced warm",
            "tandem-balanced recurring",
        ],
    ),
    (
        Objective::MinSlowdown,
        [
            "tandem-min-slowdown cold",
            "tandem-min-slowdown warm",
            "tandem-min-slowdown recurring",
        ],
    ),
    (
        Objective::MaxPacking,
        [
            "tandem-max-packing cold",
            "tandem-max-packing warm",
            "tandem-max-packing recurring",
        ],
    ),
];

/// What every phase of the profile path shares: the ground truth, every type's profile, the
/// queues and the ids their jobs carry.
pub(crate) struct Setup<'a> {
    runtime: &'a Runtime,
    bench: &'a Bench,
    profiles: Vec<Profile>,
    secret: &'a [u8],
    queues: &'a [Vec<usize>],
    seed: u64,
    /// Each type's id in the warm phases' training (and the recurring queues).
    seen_ids: Vec<String>,
    /// Per queue, in queue order, ids never seen: a job of a new queue is a new job.
    fresh_ids: Vec<Vec<String>>,
}

impl<'a> Setup<'a> {
    /// The profile path over `queues`, or `None` when a job type of `bench` has no profile (a
    /// pair of one profiled and one unprofiled job is the per-id path's).
    pub(crate) fn new(
        runtime: &'a Runtime,
        bench: &'a Bench,
        secret: &'a [u8],
        queues: &'a [Vec<usize>],
        seed: u64,
    ) -> Option<Self> {
        let profiles = bench
            .types
            .iter()
            .map(|t| t.profile.clone())
            .collect::<Option<Vec<Profile>>>()?;
        let seen_ids = bench
            .types
            .iter()
            .map(|t| keyed_id(secret, &format!("seen/{}", t.name)))
            .collect();
        let fresh_ids = queues
            .iter()
            .enumerate()
            .map(|(q, queue)| {
                queue
                    .iter()
                    .map(|&t| keyed_id(secret, &format!("queue {q}/{}", bench.types[t].name)))
                    .collect()
            })
            .collect();
        Some(Self {
            runtime,
            bench,
            profiles,
            secret,
            queues,
            seed,
            seen_ids,
            fresh_ids,
        })
    }

    /// Runs every phase, the warm engines observing the pairs `observed` (indices into
    /// `bench.pairs`). The curve and each row's share of the oracle are left for the caller.
    pub(crate) fn run(&self, observed: &[usize]) -> Result<ProfilePath> {
        let (bench, profiles) = (self.bench, self.profiles.as_slice());
        let held_out: Vec<usize> = (0..bench.pairs.len())
            .filter(|p| !observed.contains(p))
            .collect();
        let all: Vec<usize> = (0..bench.pairs.len()).collect();
        let mut predictions = Vec::new();
        let mut rows = Vec::new();
        let mut clusters = Vec::new();
        for (objective, [cold_name, warm_name, recurring_name]) in OBJECTIVES {
            let mut cold = self.bootstrap(objective)?;
            if predictions.is_empty() {
                predictions.push(self.predict("cold", &mut cold, &all));
            }
            rows.push(self.score_new_jobs(cold_name, &mut cold)?);

            let mut warm = self.bootstrap(objective)?;
            // Every recommender is bootstrapped with the same seed, so each assigns the same.
            clusters = observe_profiles(&mut warm, profiles, &self.seen_ids)?;
            let training = observe_outcomes(&mut warm, bench, observed, &self.seen_ids);
            if predictions.len() == 1 {
                predictions.push(self.predict("warm", &mut warm, &held_out));
            }
            let mut row = self.score_new_jobs(warm_name, &mut warm)?;
            row.engine = Some(training.clone());
            rows.push(row);
            let mut row = score(recurring_name, bench, self.queues, |queue| {
                let ids: Vec<String> = queue.iter().map(|&t| self.seen_ids[t].clone()).collect();
                group(&mut warm, bench, profiles, queue, &ids)
            })?;
            row.engine = Some(training);
            rows.push(row);
        }
        let of_type: Vec<u32> = clusters.iter().map(|&(cluster, _)| cluster).collect();
        let ranking = ClusterRanking::new(bench, &of_type, observed);
        rows.insert(
            0,
            score("jrs-clusters warm", bench, self.queues, |queue| {
                Ok(ranking.pairs(queue))
            })?,
        );

        let (cluster_pairs, within_across) = cluster_pair_rows(bench, &of_type);
        Ok(ProfilePath {
            clusters: bench
                .types
                .iter()
                .zip(clusters)
                .map(|(t, (cluster, uncertainty))| TypeCluster {
                    job_type: t.name.clone(),
                    cluster,
                    uncertainty,
                })
                .collect(),
            pairs_over_memory: bench
                .pairs
                .iter()
                .filter(|p| {
                    u64::from(profiles[p.a].mem_used_mib) + u64::from(profiles[p.b].mem_used_mib)
                        > u64::from(bench.memory_mib)
                })
                .count(),
            methods: rows,
            curve: Vec::new(),
            predictions,
            cluster_pairs,
            within_across,
        })
    }

    /// `tandem-balanced` trained on the first `share` of the shuffled pairs `split`, for each
    /// of `shares`: each type's profile and the observed outcomes under the seen ids, then the
    /// queues with new jobs, and predictions for the rest. The training sets are nested, as in
    /// the per-id curve; each row's share of the oracle is left for the caller.
    pub(crate) fn curve(&self, split: &[usize], shares: &[f64]) -> Result<Vec<ProfileCurveRow>> {
        shares
            .iter()
            .map(|&share| {
                let (observed, held_out) = split.split_at(training_count(share, split.len()));
                let mut warm = self.bootstrap(Objective::Balanced)?;
                observe_profiles(&mut warm, &self.profiles, &self.seen_ids)?;
                let training = observe_outcomes(&mut warm, self.bench, observed, &self.seen_ids);
                let row = self.score_new_jobs("tandem-balanced warm", &mut warm)?;
                Ok(ProfileCurveRow {
                    train_share: share,
                    training_pairs: observed.len(),
                    engine: training,
                    packing_saving_pct: row.packing_saving_pct,
                    of_oracle_pct: None,
                    slowdown_p95_pct: row.slowdown_p95_pct,
                    ooms: row.ooms.unwrap_or(0),
                    held_out: self.predict("warm", &mut warm, held_out),
                })
            })
            .collect()
    }

    /// A recommender as the per-id path bootstraps its own: two jobs per GPU, no exploration.
    fn bootstrap(&self, objective: Objective) -> Result<Recommender> {
        let policy = Policy {
            objective,
            max_jobs_per_gpu: 2,
            exploration: 0.0,
            model_caps: Vec::new(),
        };
        self.runtime
            .bootstrap(&policy, self.seed)
            .map_err(|source| Error::Engine {
                doing: "cannot create the recommender to evaluate",
                source,
            })
    }

    /// The queues grouped by `recommender`, every job new and profiled.
    fn score_new_jobs(
        &self,
        method: &'static str,
        recommender: &mut Recommender,
    ) -> Result<MethodRow> {
        let mut next = 0;
        score(method, self.bench, self.queues, |queue| {
            let ids = &self.fresh_ids[next];
            next += 1;
            group(recommender, self.bench, &self.profiles, queue, ids)
        })
    }

    /// The engine's predictions for the measured pairs `pairs` (indices into `bench.pairs`),
    /// each job new (an id never observed) and profiled, against what was measured.
    fn predict(
        &self,
        phase: &'static str,
        recommender: &mut Recommender,
        pairs: &[usize],
    ) -> PredictionRow {
        predict(
            phase,
            recommender,
            self.bench,
            &self.profiles,
            self.secret,
            pairs,
        )
    }
}

/// Files every type's profile under its id; returns each type's (cluster, uncertainty).
fn observe_profiles(
    recommender: &mut Recommender,
    profiles: &[Profile],
    ids: &[String],
) -> Result<Vec<(u32, f32)>> {
    profiles
        .iter()
        .zip(ids)
        .map(|(profile, id)| {
            recommender
                .observe_profile(id, profile)
                .map(|a| (a.cluster, a.uncertainty))
                .map_err(|source| Error::Engine {
                    doing: "the engine refused a catalog profile",
                    source,
                })
        })
        .collect()
}

/// The engine's grouping of a queue whose jobs carry `ids` (in queue order) and their types'
/// profiles, on ⌈K/2⌉ idle GPUs as in the per-id path.
fn group(
    recommender: &mut Recommender,
    bench: &Bench,
    profiles: &[Profile],
    queue: &[usize],
    ids: &[String],
) -> Result<Pairs> {
    let jobs: Vec<Job> = queue
        .iter()
        .zip(ids)
        .enumerate()
        .map(|(position, (&t, id))| Job {
            submitted_at_s: position as f64,
            ..Job::profiled(id.clone(), profiles[t].clone())
        })
        .collect();
    engine::group(recommender, bench, &jobs)
}

/// The engine's predictions for the measured pairs `pairs` (indices into `bench.pairs`), each
/// job new (an id never observed) and profiled, against what was measured.
fn predict(
    phase: &'static str,
    recommender: &mut Recommender,
    bench: &Bench,
    profiles: &[Profile],
    secret: &[u8],
    pairs: &[usize],
) -> PredictionRow {
    let gpu = GpuSpec::new(bench.gpu_model.clone(), bench.memory_mib);
    let mut errors = Vec::new();
    let (mut predicted, mut measured) = (Vec::new(), Vec::new());
    let (mut predicted_worst, mut measured_worst) = (Vec::new(), Vec::new());
    let mut failures = 0;
    let mut first_error = None;
    for &p in pairs {
        let pair = &bench.pairs[p];
        let job = |t: usize| {
            let id = keyed_id(secret, &format!("predicted/{}", bench.types[t].name));
            Job::profiled(id, profiles[t].clone())
        };
        match recommender.predict(&[job(pair.a), job(pair.b)], &gpu) {
            Ok(prediction) if prediction.slowdown_pct.len() == 2 => {
                let slowdowns = bench.slowdowns(pair);
                for (s, m) in prediction.slowdown_pct.iter().zip(slowdowns) {
                    errors.push((f64::from(*s) - 100.0 * m).abs());
                }
                let worst = prediction
                    .slowdown_pct
                    .iter()
                    .copied()
                    .fold(f32::MIN, f32::max);
                predicted_worst.push(f64::from(worst));
                measured_worst.push(slowdowns[0].max(slowdowns[1]));
                predicted.push(f64::from(prediction.packing_saving_pct));
                measured.push(bench.packing_saving(pair));
            }
            Ok(prediction) => {
                failures += 1;
                first_error.get_or_insert_with(|| {
                    format!(
                        "{} slowdown(s) predicted for a pair",
                        prediction.slowdown_pct.len()
                    )
                });
            }
            Err(error) => {
                failures += 1;
                first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    PredictionRow {
        phase,
        pairs: pairs.len(),
        slowdown_mae_pp: mean(&errors),
        packing_saving_spearman: spearman(&predicted, &measured),
        worst_slowdown_spearman: spearman(&predicted_worst, &measured_worst),
        predict_errors: failures,
        first_predict_error: first_error,
    }
}

/// JRS / PriRecT as their papers describe it: the knowledge is per cluster pair, the mean
/// packing saving (and worst slowdown) of the observed pairs between the two clusters.
struct ClusterRanking {
    /// Cluster of each job type.
    of_type: Vec<u32>,
    /// (lower cluster, higher cluster) -> rank, 0 best; only cluster pairs whose observed mean
    /// saving is positive.
    rank: BTreeMap<(u32, u32), usize>,
}

impl ClusterRanking {
    /// Ranks the cluster pairs of the observed pairs: best mean saving first, ties broken by
    /// the lower mean worst slowdown, then by the clusters.
    fn new(bench: &Bench, of_type: &[u32], observed: &[usize]) -> Self {
        let mut cells: BTreeMap<(u32, u32), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for &p in observed {
            let pair = &bench.pairs[p];
            let cell = cells
                .entry(cluster_key(of_type[pair.a], of_type[pair.b]))
                .or_default();
            cell.0.push(bench.packing_saving(pair));
            let [sa, sb] = bench.slowdowns(pair);
            cell.1.push(sa.max(sb));
        }
        let mut scored: Vec<((u32, u32), f64, f64)> = cells
            .into_iter()
            .filter_map(|(key, (savings, worst))| {
                let saving = mean(&savings)?;
                (saving > 0.0).then(|| (key, saving, mean(&worst).unwrap_or(0.0)))
            })
            .collect();
        scored.sort_by(|x, y| {
            y.1.total_cmp(&x.1)
                .then(x.2.total_cmp(&y.2))
                .then(x.0.cmp(&y.0))
        });
        Self {
            of_type: of_type.to_vec(),
            rank: scored
                .into_iter()
                .enumerate()
                .map(|(rank, (key, _, _))| (key, rank))
                .collect(),
        }
    }

    /// Greedy over the queue's job pairs by their cluster pair's rank (queue order among
    /// equals): each job joins at most one pair; a job whose every candidate is unranked runs
    /// alone.
    fn pairs(&self, queue: &[usize]) -> Pairs {
        let mut candidates: Vec<(usize, usize, usize)> = Vec::new();
        for i in 0..queue.len() {
            for j in i + 1..queue.len() {
                let key = cluster_key(self.of_type[queue[i]], self.of_type[queue[j]]);
                if let Some(&rank) = self.rank.get(&key) {
                    candidates.push((rank, i, j));
                }
            }
        }
        candidates.sort_unstable();
        let mut free = vec![true; queue.len()];
        let mut pairs = Vec::new();
        for (_, i, j) in candidates {
            if free[i] && free[j] {
                free[i] = false;
                free[j] = false;
                pairs.push((i, j));
            }
        }
        pairs
    }
}

/// A cluster pair with the lower cluster first.
fn cluster_key(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

/// Every measured pair grouped by its cluster pair, then within one cluster against across two.
fn cluster_pair_rows(bench: &Bench, of_type: &[u32]) -> (Vec<ClusterPairRow>, Vec<ClusterPairRow>) {
    let mut by_pair: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (p, pair) in bench.pairs.iter().enumerate() {
        by_pair
            .entry(cluster_key(of_type[pair.a], of_type[pair.b]))
            .or_default()
            .push(p);
    }
    let rows = by_pair
        .iter()
        .map(|(&(a, b), pairs)| summarize(bench, format!("{a}-{b}"), pairs))
        .collect();
    let (within, across): (Vec<usize>, Vec<usize>) = (0..bench.pairs.len())
        .partition(|&p| of_type[bench.pairs[p].a] == of_type[bench.pairs[p].b]);
    (
        rows,
        vec![
            summarize(bench, "within".into(), &within),
            summarize(bench, "across".into(), &across),
        ],
    )
}

/// The figures of the measured pairs `pairs` (indices into `bench.pairs`).
fn summarize(bench: &Bench, clusters: String, pairs: &[usize]) -> ClusterPairRow {
    let savings: Vec<f64> = pairs
        .iter()
        .map(|&p| bench.packing_saving(&bench.pairs[p]))
        .collect();
    let slowdowns: Vec<[f64; 2]> = pairs
        .iter()
        .map(|&p| bench.slowdowns(&bench.pairs[p]))
        .collect();
    let each: Vec<f64> = slowdowns.iter().flatten().copied().collect();
    ClusterPairRow {
        clusters,
        pairs: pairs.len(),
        packing_saving_pct: mean(&savings).map(|s| 100.0 * s),
        slowdown_mean_pct: mean(&each).map(|s| 100.0 * s),
        slowdown_max_pct: each.iter().copied().reduce(f64::max).map(|s| 100.0 * s),
        high_slowdown_pairs: slowdowns
            .iter()
            .filter(|[a, b]| a.max(*b) > HIGH_SLOWDOWN)
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tandem_catalog::Catalog;

    use super::*;

    /// Four profiled types on a T4: `heavy` and `busy` in one cluster, `light` and `idle` in
    /// another (as the test assigns them); the pairs across clusters save more.
    fn bench() -> Bench {
        let job = |name: &str| {
            format!(
                r#"{{"name": "{name}", "declared": null, "solo_time_s": {{"T4": 100.0}},
                   "profile": {{"gpu_util_pct": 50, "mem_access_pct": 10, "mem_used_mib": 9000,
                                "gpu_model": "T4"}}}}"#
            )
        };
        let pair = |a: &str, b: &str, ta: f64, tb: f64| {
            format!(
                r#"{{"gpu_model": "T4", "a": "{a}", "b": "{b}", "speed_a": {}, "speed_b": {},
                   "colocated_time_s": [{ta}, {tb}]}}"#,
                100.0 / ta,
                100.0 / tb
            )
        };
        let text = format!(
            r#"{{"name": "tiny", "source": "tests",
                "gpu_models": [{{"model": "T4", "memory_mib": 15360}}],
                "job_types": [{}, {}, {}, {}],
                "pairs": [{}, {}, {}, {}]}}"#,
            job("heavy"),
            job("busy"),
            job("light"),
            job("idle"),
            // within cluster 0: saves 20%, worst slowdown 60%
            pair("heavy", "busy", 160.0, 150.0),
            // across: save 40% and 30%
            pair("heavy", "light", 120.0, 110.0),
            pair("busy", "idle", 140.0, 105.0),
            // within cluster 1: saves 10%
            pair("light", "idle", 180.0, 170.0),
        );
        let catalog = Catalog::parse(&text, "tiny.json").unwrap();
        Bench::load(&catalog, Path::new("tiny.json"), None).unwrap()
    }

    const CLUSTER_OF: [u32; 4] = [0, 0, 1, 1];

    #[test]
    fn the_cluster_ranking_pairs_the_best_cluster_pair_first() {
        let bench = bench();
        // Observing only one pair of each cluster pair, the ranking still pairs the others.
        let ranking = ClusterRanking::new(&bench, &CLUSTER_OF, &[0, 1, 3]);
        assert_eq!(ranking.rank.get(&(0, 1)), Some(&0));
        assert_eq!(ranking.rank.get(&(0, 0)), Some(&1));
        // Queue busy, idle, heavy, light: across first, in queue order among equals.
        assert_eq!(ranking.pairs(&[1, 3, 0, 2]), vec![(0, 1), (2, 3)]);
        // Nothing observed: nothing ranked, everyone alone.
        let cold = ClusterRanking::new(&bench, &CLUSTER_OF, &[]);
        assert!(cold.pairs(&[0, 1, 2, 3]).is_empty());
    }

    #[test]
    fn measured_pairs_are_grouped_by_their_clusters() {
        let bench = bench();
        let (rows, within_across) = cluster_pair_rows(&bench, &CLUSTER_OF);
        let labels: Vec<&str> = rows.iter().map(|r| r.clusters.as_str()).collect();
        assert_eq!(labels, ["0-0", "0-1", "1-1"]);
        assert_eq!(rows[1].pairs, 2);
        // (200 - 120) / 200 and (200 - 140) / 200
        assert!((rows[1].packing_saving_pct.unwrap() - 35.0).abs() < 1e-9);
        assert_eq!(rows[2].high_slowdown_pairs, 1);
        let [within, across] = within_across.as_slice() else {
            panic!("two groups")
        };
        assert_eq!((within.pairs, across.pairs), (2, 2));
        assert!((within.slowdown_max_pct.unwrap() - 80.0).abs() < 1e-9);
        assert!(across.slowdown_mean_pct < within.slowdown_mean_pct);
    }
}
