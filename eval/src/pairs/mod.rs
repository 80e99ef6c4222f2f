//! Pairing quality (`tandem eval pairs`): how well does Tandem pair jobs, measured against a
//! catalog?
//!
//! Queues of distinct job types are drawn from a catalog's GPU model; every method groups each
//! queue into pairs and singletons; each pair's outcome is looked up in the catalog's measured
//! table, never taken from the engine. The methods: random and first-come pairing, the JRS
//! cluster ranking, a Lucid-style utilization rule, Tandem under its three objectives (through
//! the real component, trained on a share of the measured pairs), and the oracle (maximum-weight
//! matching on the measured table). A learning curve then shows what Tandem gains from more
//! observed outcomes, on the queues and on held-out pairs. On a catalog whose every job type
//! has a profile, the profile path ([`ProfilePath`]) adds the engine given those profiles, cold
//! and warm. `docs/EVALUATION.md` is the protocol.
//!
//! Everything random is drawn from generators seeded by `--seed`, each purpose from its own
//! stream (queues, training split, random pairing, id keys), so one seed gives one report.

mod bench;
mod durations;
mod engine;
mod methods;
mod metrics;
mod profiled;

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use tandem_api::Objective;
use tandem_catalog::Catalog;
use tandem_engine::learning::interval;
use tandem_host::Runtime;

use crate::error::{Error, Result};
use bench::Bench;
use engine::Trained;
use methods::Pairs;
use metrics::{HIGH_SLOWDOWN, QueueOutcome, mean, percentile, queue_outcome, spearman};

pub use bench::ASSUMED_SOLO_S;
pub use durations::{DurationRow, LENGTH_SPREAD, MixedDurations};
pub use engine::Training;
pub use profiled::{ClusterPairRow, PredictionRow, ProfileCurveRow, ProfilePath, TypeCluster};

/// Largest default queue: enough for a scheduling cycle's worth of pairing decisions.
const DEFAULT_QUEUE_LIMIT: usize = 16;

/// Default queue size for a catalog of `types` job types: two thirds of them, at most
/// [`DEFAULT_QUEUE_LIMIT`], rounded down to even. Never all of them: a queue of every type is
/// the same queue each time, and the queues would sample nothing (on the 12-type Futurewei
/// catalog the first version of this default made 200 identical queues).
fn default_queue_size(types: usize) -> usize {
    (types * 2 / 3).clamp(2, DEFAULT_QUEUE_LIMIT) / 2 * 2
}

/// Training shares of the learning curve.
pub const CURVE_SHARES: [f64; 6] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9];

/// What to evaluate, as given on the command line (checked by [`run`]).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The catalog file.
    pub catalog: PathBuf,
    /// GPU model to evaluate on (the catalog's only one when `None`).
    pub gpu_model: Option<String>,
    /// Number of queues.
    pub queues: u32,
    /// Jobs per queue (default: up to 16, even).
    pub queue_size: Option<usize>,
    /// Share of the measured pairs Tandem observes before it is evaluated.
    pub train_share: f64,
    /// Seed of every random draw.
    pub seed: u64,
}

/// The whole evaluation (the `--format json` output).
#[derive(Debug, Serialize)]
pub struct Report {
    /// Which catalog.
    pub catalog: CatalogInfo,
    /// The settings in force, defaults resolved, and the sizes they led to.
    pub settings: Resolved,
    /// One row per method, in a fixed order, the oracle last.
    pub methods: Vec<MethodRow>,
    /// Tandem (`balanced`) trained on growing shares of the measured pairs.
    pub learning_curve: Vec<CurveRow>,
    /// The same queues with jobs of unequal lengths, hidden from Tandem and declared to it.
    pub mixed_durations: MixedDurations,
    /// The jobs given with their profiles, cold and warm, when every job type has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_path: Option<ProfilePath>,
}

/// The catalog evaluated.
#[derive(Debug, Serialize)]
pub struct CatalogInfo {
    /// Its name (`gavel-v100`).
    pub name: String,
    /// The file it was read from.
    pub file: PathBuf,
}

/// Settings with defaults resolved, and what they select from the catalog.
#[derive(Debug, Serialize)]
pub struct Resolved {
    /// GPU model evaluated.
    pub gpu_model: String,
    /// Its memory, in MiB (the GPUs the engine is offered).
    pub memory_mib: u32,
    /// Job types with solo data on the model.
    pub job_types: usize,
    /// Whether every solo time was measured; otherwise each job is assumed to take
    /// [`ASSUMED_SOLO_S`] alone.
    pub solo_times_measured: bool,
    /// Measured pairs of two different job types.
    pub measured_pairs: usize,
    /// Measured self-pairs left out (a queue holds each job type once).
    pub self_pairs_skipped: usize,
    /// Measured pairs Tandem and the JRS ranking observe.
    pub training_pairs: usize,
    /// Measured pairs held out.
    pub held_out_pairs: usize,
    /// Number of queues.
    pub queues: u32,
    /// Jobs per queue.
    pub queue_size: usize,
    /// Share of the measured pairs observed.
    pub train_share: f64,
    /// Seed.
    pub seed: u64,
}

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

/// One point of the learning curve.
#[derive(Debug, Serialize)]
pub struct CurveRow {
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
    /// Measured pairs held out (not observed), each predicted.
    pub held_out_pairs: usize,
    /// Mean absolute error of the predicted IndSD (both jobs of each held-out pair), in
    /// percentage points.
    pub slowdown_mae_pp: Option<f64>,
    /// The same error on the pairs observed (predicted after training on them): how close
    /// the engine comes to what it measured.
    pub seen_slowdown_mae_pp: Option<f64>,
    /// Share of the held-out jobs whose measured IndSD falls inside the predicted 90%
    /// interval (`tandem_engine::learning::interval` at z = 1.645), in %.
    pub interval_coverage_pct: Option<f64>,
    /// Mean width of those intervals, in percentage points of IndSD.
    pub interval_width_pp: Option<f64>,
    /// The same error for the naive predictor "mean IndSD of the training pairs", on every
    /// held-out pair.
    pub naive_slowdown_mae_pp: Option<f64>,
    /// Spearman's rank correlation of predicted vs measured packing saving of held-out pairs.
    pub packing_saving_spearman: Option<f64>,
    /// Held-out pairs the engine could not predict (left out of `slowdown_mae_pp` and
    /// `packing_saving_spearman`).
    pub predict_errors: usize,
    /// The first such error, for the reader.
    pub first_predict_error: Option<String>,
}

/// The independent random streams of one evaluation.
#[derive(Debug, Clone, Copy)]
enum Stream {
    /// Which job types each queue holds, and their order.
    Queues = 1,
    /// Which measured pairs are observed.
    Split = 2,
    /// The `random` method's matchings.
    RandomPairing = 3,
    /// The id-keying secret.
    Keys = 4,
    /// Each job's length in the mixed-duration protocol.
    Lengths = 5,
}

/// The generator of one stream for `seed`.
fn rng(seed: u64, stream: Stream) -> Xoshiro256PlusPlus {
    // `seed_from_u64` expands through SplitMix64, so nearby inputs give unrelated streams.
    Xoshiro256PlusPlus::seed_from_u64(seed ^ (stream as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Settings checked against their catalog: everything needed to run, nothing run yet.
#[derive(Debug)]
pub struct Plan {
    settings: Settings,
    bench: Bench,
    queue_size: usize,
}

/// Reads the catalog and checks every setting against it (bad input is exit code 2), before
/// any engine is loaded.
pub fn plan(settings: Settings) -> Result<Plan> {
    if settings.queues == 0 {
        return Err(Error::Setting("--queues 0: must be at least 1".into()));
    }
    if !(0.0..=1.0).contains(&settings.train_share) {
        return Err(Error::Setting(format!(
            "--train-share {}: must be within 0..=1",
            settings.train_share
        )));
    }
    let catalog = read_catalog(&settings.catalog)?;
    let bench = Bench::load(&catalog, &settings.catalog, settings.gpu_model.as_deref())?;
    let types = bench.types.len();
    let queue_size = match settings.queue_size {
        Some(size) if size < 2 => {
            return Err(Error::Setting(format!(
                "--queue-size {size}: must be at least 2 (a pair)"
            )));
        }
        Some(size) if size > types => {
            return Err(Error::Setting(format!(
                "--queue-size {size}: at most {types}, the job types with solo data on {} in {} \
                 (a queue holds each job type once)",
                bench.gpu_model,
                settings.catalog.display()
            )));
        }
        Some(size) => size,
        None => default_queue_size(types).min(types / 2 * 2),
    };
    Ok(Plan {
        settings,
        bench,
        queue_size,
    })
}

/// Runs every method and the learning curve.
pub fn run(runtime: &Runtime, plan: &Plan) -> Result<Report> {
    let (settings, bench, queue_size) = (&plan.settings, &plan.bench, plan.queue_size);
    let types = bench.types.len();
    let queues = draw_queues(bench, settings.queues, queue_size, settings.seed);
    let mut split: Vec<usize> = (0..bench.pairs.len()).collect();
    split.shuffle(&mut rng(settings.seed, Stream::Split));
    let observed = &split[..training_count(settings.train_share, split.len())];

    let secret = key_secret(settings.seed);
    let mut rows = Vec::new();
    let mut pairing_rng = rng(settings.seed, Stream::RandomPairing);
    rows.push(score("random", bench, &queues, |queue| {
        Ok(methods::random(queue.len(), &mut pairing_rng))
    })?);
    rows.push(score("first-come", bench, &queues, |queue| {
        Ok(methods::first_come(queue.len()))
    })?);
    let ranking = methods::JrsRanking::new(bench, observed);
    rows.push(score("jrs-ranking", bench, &queues, |queue| {
        Ok(ranking.pairs(queue))
    })?);
    rows.push(match methods::lucid_not_applicable(bench) {
        Some(reason) => not_applicable("lucid-style", reason),
        None => score("lucid-style", bench, &queues, |queue| {
            Ok(methods::lucid(bench, queue))
        })?,
    });
    for (method, objective) in [
        ("tandem-balanced", Objective::Balanced),
        ("tandem-min-slowdown", Objective::MinSlowdown),
        ("tandem-max-packing", Objective::MaxPacking),
    ] {
        let mut trained =
            Trained::new(runtime, bench, &secret, objective, settings.seed, observed)?;
        let mut row = score(method, bench, &queues, |queue| {
            trained.pairs(bench, queue, None)
        })?;
        row.engine = Some(trained.training.clone());
        rows.push(row);
    }
    let oracle = score("oracle", bench, &queues, |queue| {
        Ok(methods::oracle(bench, queue))
    })?;
    let oracle_saving = oracle.packing_saving_pct;
    rows.push(oracle);
    for row in &mut rows {
        row.of_oracle_pct = of_oracle(row.packing_saving_pct, oracle_saving);
    }

    let learning_curve = CURVE_SHARES
        .iter()
        .map(|&share| {
            curve_row(
                runtime,
                bench,
                &secret,
                &queues,
                &split,
                share,
                settings.seed,
            )
            .map(|row| CurveRow {
                of_oracle_pct: of_oracle(row.packing_saving_pct, oracle_saving),
                ..row
            })
        })
        .collect::<Result<_>>()?;

    let mixed_durations =
        durations::run(runtime, bench, &secret, &queues, observed, settings.seed)?;
    let profile_path = match profiled::Setup::new(runtime, bench, &secret, &queues, settings.seed) {
        Some(setup) => {
            let mut path = setup.run(observed)?;
            path.curve = setup.curve(&split, &CURVE_SHARES)?;
            for row in &mut path.methods {
                row.of_oracle_pct = of_oracle(row.packing_saving_pct, oracle_saving);
            }
            for row in &mut path.curve {
                row.of_oracle_pct = of_oracle(row.packing_saving_pct, oracle_saving);
            }
            Some(path)
        }
        None => None,
    };

    Ok(Report {
        catalog: CatalogInfo {
            name: bench.catalog.clone(),
            file: settings.catalog.clone(),
        },
        settings: Resolved {
            gpu_model: bench.gpu_model.clone(),
            memory_mib: bench.memory_mib,
            job_types: types,
            solo_times_measured: bench.solo_times_measured(),
            measured_pairs: bench.pairs.len(),
            self_pairs_skipped: bench.self_pairs_skipped,
            training_pairs: observed.len(),
            held_out_pairs: bench.pairs.len() - observed.len(),
            queues: settings.queues,
            queue_size,
            train_share: settings.train_share,
            seed: settings.seed,
        },
        methods: rows,
        learning_curve,
        mixed_durations,
        profile_path,
    })
}

/// A method's saving relative to the oracle's, in %, when both are known and the oracle saves.
fn of_oracle(saving: Option<f64>, oracle: Option<f64>) -> Option<f64> {
    match (saving, oracle) {
        (Some(method), Some(best)) if best > 0.0 => Some(100.0 * method / best),
        _ => None,
    }
}

/// Reads the catalog; any problem with it is bad input ([`Error::is_bad_input`]).
fn read_catalog(path: &Path) -> Result<Catalog> {
    // The catalog's errors start with the file and keep their cause as their source.
    Ok(Catalog::read(path)?)
}

/// Number of pairs observed for a training share: the share of all, rounded to the nearest.
fn training_count(share: f64, pairs: usize) -> usize {
    ((share * pairs as f64).round() as usize).min(pairs)
}

/// `count` queues of `size` distinct job types each, drawn without replacement, in a random
/// order (the order is the queue's submission order).
fn draw_queues(bench: &Bench, count: u32, size: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = rng(seed, Stream::Queues);
    (0..count)
        .map(|_| {
            let mut types: Vec<usize> = (0..bench.types.len()).collect();
            types.shuffle(&mut rng);
            types.truncate(size);
            types
        })
        .collect()
}

/// The id-keying secret, derived from the seed. Keyed ids still hide every name from the
/// engine; deriving the secret (rather than drawing it from the OS) keeps the engine's inputs,
/// and so any tie it breaks by id, the same from run to run.
fn key_secret(seed: u64) -> Vec<u8> {
    let mut secret = vec![0_u8; 32];
    rng(seed, Stream::Keys).fill(secret.as_mut_slice());
    secret
}

/// Runs one method over every queue and sums up what it achieved.
fn score(
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

fn not_applicable(method: &'static str, reason: String) -> MethodRow {
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
fn outcome_of(bench: &Bench, queue: &[usize], pairs: &[(usize, usize)]) -> QueueOutcome {
    let solo: Vec<f64> = queue.iter().map(|&t| bench.types[t].solo_s).collect();
    queue_outcome(&solo, pairs, |i, j| bench.colocated(queue[i], queue[j]))
}

/// The figures of a method over all its queues.
struct Summary {
    pairs: usize,
    ooms: usize,
    slowdowns: Vec<f64>,
    packing_saving_pct: Option<f64>,
    slowdown_p95_pct: Option<f64>,
    high_slowdown_pairs_pct: Option<f64>,
}

impl Summary {
    fn of(outcomes: &[QueueOutcome]) -> Self {
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

/// Tandem (`balanced`) trained on the first `share` of the shuffled pairs: its queues, and its
/// predictions for the rest.
fn curve_row(
    runtime: &Runtime,
    bench: &Bench,
    secret: &[u8],
    queues: &[Vec<usize>],
    split: &[usize],
    share: f64,
    seed: u64,
) -> Result<CurveRow> {
    let (observed, held_out) = split.split_at(training_count(share, split.len()));
    let mut trained = Trained::new(runtime, bench, secret, Objective::Balanced, seed, observed)?;
    let mut outcomes = Vec::with_capacity(queues.len());
    for queue in queues {
        let pairs = trained.pairs(bench, queue, None)?;
        outcomes.push(outcome_of(bench, queue, &pairs));
    }
    let summary = Summary::of(&outcomes);

    // The naive predictor: every job of every pair slows down by the training pairs' mean.
    let training_slowdowns: Vec<f64> = observed
        .iter()
        .flat_map(|&p| bench.slowdowns(&bench.pairs[p]))
        .collect();
    let naive = mean(&training_slowdowns);
    let naive_errors: Vec<f64> = match naive {
        Some(naive) => held_out
            .iter()
            .flat_map(|&p| bench.slowdowns(&bench.pairs[p]))
            .map(|m| 100.0 * (m - naive).abs())
            .collect(),
        None => Vec::new(),
    };
    let unseen = Scored::of(&mut trained, bench, held_out);
    let seen = Scored::of(&mut trained, bench, observed);
    let first_predict_error = unseen
        .first_error
        .clone()
        .or_else(|| seen.first_error.clone());
    Ok(CurveRow {
        train_share: share,
        training_pairs: observed.len(),
        engine: trained.training,
        packing_saving_pct: summary.packing_saving_pct,
        // Filled in by the caller, who knows the oracle's saving.
        of_oracle_pct: None,
        slowdown_p95_pct: summary.slowdown_p95_pct,
        ooms: summary.ooms,
        held_out_pairs: held_out.len(),
        slowdown_mae_pp: mean(&unseen.errors),
        seen_slowdown_mae_pp: mean(&seen.errors),
        interval_coverage_pct: (!unseen.covered.is_empty()).then(|| {
            100.0 * unseen.covered.iter().filter(|&&c| c).count() as f64
                / unseen.covered.len() as f64
        }),
        interval_width_pp: mean(&unseen.widths),
        naive_slowdown_mae_pp: mean(&naive_errors),
        packing_saving_spearman: spearman(&unseen.predicted_savings, &unseen.measured_savings),
        predict_errors: unseen.failures + seen.failures,
        first_predict_error,
    })
}

/// z of a two-sided 90% normal interval.
const Z_90: f64 = 1.644_853_626_951_472_2;

/// How the engine's predictions for a set of measured pairs compare with the measurements.
#[derive(Default)]
struct Scored {
    /// Absolute error of each predicted IndSD (both jobs of each pair), in percentage points.
    errors: Vec<f64>,
    /// Whether each measured IndSD fell inside its predicted 90% interval.
    covered: Vec<bool>,
    /// Width of each such interval, in percentage points.
    widths: Vec<f64>,
    predicted_savings: Vec<f64>,
    measured_savings: Vec<f64>,
    /// Pairs the engine could not predict.
    failures: usize,
    first_error: Option<String>,
}

impl Scored {
    /// Predicts each of `pairs` (indices into `bench.pairs`) and scores the predictions.
    fn of(trained: &mut Trained, bench: &Bench, pairs: &[usize]) -> Self {
        let mut scored = Self::default();
        for &p in pairs {
            let pair = &bench.pairs[p];
            let measured = bench.slowdowns(pair);
            match trained.predict(bench, pair.a, pair.b) {
                Ok(prediction) if prediction.slowdown_pct.len() == 2 => {
                    let uncertainty = f64::from(prediction.uncertainty);
                    for (predicted, measured) in prediction.slowdown_pct.iter().zip(measured) {
                        let predicted = f64::from(*predicted) / 100.0;
                        scored.errors.push(100.0 * (predicted - measured).abs());
                        let (low, high) = interval(predicted, uncertainty, Z_90);
                        scored.covered.push((low..=high).contains(&measured));
                        scored.widths.push(100.0 * (high - low));
                    }
                    scored
                        .predicted_savings
                        .push(f64::from(prediction.packing_saving_pct));
                    scored.measured_savings.push(bench.packing_saving(pair));
                }
                Ok(prediction) => {
                    scored.failures += 1;
                    scored.first_error.get_or_insert_with(|| {
                        format!(
                            "{} slowdown(s) predicted for a pair",
                            prediction.slowdown_pct.len()
                        )
                    });
                }
                Err(error) => {
                    scored.failures += 1;
                    scored.first_error.get_or_insert_with(|| error.to_string());
                }
            }
        }
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_counts_round_and_stay_within_the_pairs() {
        assert_eq!(training_count(0.5, 306), 153);
        assert_eq!(training_count(0.1, 306), 31);
        assert_eq!(training_count(0.0, 306), 0);
        assert_eq!(training_count(1.0, 306), 306);
        assert_eq!(training_count(0.9, 0), 0);
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        assert_eq!(key_secret(7), key_secret(7));
        assert_ne!(key_secret(7), key_secret(8));
        let mut a = rng(7, Stream::Queues);
        let mut b = rng(7, Stream::Split);
        let draws =
            |r: &mut Xoshiro256PlusPlus| (0..4).map(|_| r.r#gen::<u64>()).collect::<Vec<_>>();
        assert_ne!(draws(&mut a), draws(&mut b));
    }
}
