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
//! and warm. Job types may declare their models (the catalog's, or [`Settings::models`]'):
//! Tandem's jobs then declare them. `docs/EVALUATION.md` is the protocol.
//!
//! Everything random is drawn from generators seeded by `--seed`, each purpose from its own
//! stream (queues, training split, random pairing, id keys), so one seed gives one report.

mod bench;
mod draws;
mod durations;
mod engine;
mod methods;
mod metrics;
mod profiled;
mod rows;

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom as _;
use serde::Serialize;
use tandem_api::Objective;
use tandem_catalog::{Catalog, DeclaredModels};
use tandem_engine::learning::interval;
use tandem_host::Runtime;

use crate::error::{Error, Result};
use bench::Bench;
use draws::{Stream, draw_queues, key_secret, rng, training_count};
use engine::Trained;
use metrics::{mean, of_oracle, spearman};
use rows::{Summary, not_applicable, outcome_of, score};

pub use bench::ASSUMED_SOLO_S;
pub use durations::{DurationRow, LENGTH_SPREAD, MixedDurations};
pub use engine::Training;
pub use profiled::{ClusterPairRow, PredictionRow, ProfileCurveRow, ProfilePath, TypeCluster};
pub use rows::MethodRow;

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
    /// Declared models of the catalog's job types (the `tandem simulate --models` CSV), over
    /// those the catalog carries: Tandem's jobs declare them.
    pub models: Option<PathBuf>,
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
    /// Job types whose jobs declare their models to Tandem (the catalog's or `--models`').
    pub declared_models: usize,
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
    let mut bench = Bench::load(&catalog, &settings.catalog, settings.gpu_model.as_deref())?;
    if let Some(path) = &settings.models {
        let models = DeclaredModels::read(path)?;
        if bench.declare(&models) == 0 {
            return Err(Error::Setting(format!(
                "--models {}: names none of the {} job types of {} on {} (the first is `{}`)",
                path.display(),
                bench.types.len(),
                settings.catalog.display(),
                bench.gpu_model,
                bench.types[0].name
            )));
        }
    }
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
            declared_models: bench.declared_models(),
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

/// Reads the catalog; any problem with it is bad input ([`Error::is_bad_input`]).
fn read_catalog(path: &Path) -> Result<Catalog> {
    // The catalog's errors start with the file and keep their cause as their source.
    Ok(Catalog::read(path)?)
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
