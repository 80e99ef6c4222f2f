//! Whatever sequence of accepted observations arrives — figures at the bounds' edges, the same
//! pair again and again, tiny and huge times alternating — every statistic the engine keeps
//! stays finite, its state saves and loads back to the same bytes, and its predictions are
//! finite.

use proptest::prelude::*;
use tandem_api::bounds::{
    LARGEST_GPU_MEMORY_MIB, MAX_BATCH_SIZE, MAX_COLOCATED_RATIO, MAX_GFLOPS, MAX_LAYERS,
    MAX_MODEL_MIB, MAX_RUN_S, MAX_WORK, MAX_WORK_PER_S, MIN_COLOCATED_RATIO, MIN_RUN_S,
    MIN_WORK_PER_S, largest_memory_of,
};
use tandem_api::{Gpu, GpuSpec, Job, ModelSummary, Outcome, Policy, Profile};

use crate::Recommender;
use crate::finite::is_finite;

/// GPU models the observations name: two the engine knows, one it does not.
const MODELS: [&str; 3] = ["V100", "K80", "mystery"];

/// One observation, in terms the strategies draw.
#[derive(Debug, Clone)]
enum Observation {
    Profile {
        job: String,
        util: f32,
        access: f32,
        /// Share of the most memory the model allows, 0..=1.
        memory: f64,
        model: usize,
    },
    Outcome {
        jobs: Vec<String>,
        solo_s: Vec<f64>,
        ratios: Vec<f64>,
        model: usize,
    },
    Speed {
        job: String,
        model: usize,
        work_per_s: f64,
    },
    Memory {
        summary: ModelSummary,
        model: usize,
        /// Share of the GPU's memory, 0..=1.
        peak: f64,
    },
    Forget(u32),
}

/// A figure between `low` and `high`: often one of the edges, else spread evenly in log space.
fn edgy(low: f64, high: f64) -> impl Strategy<Value = f64> {
    prop_oneof![
        2 => Just(low),
        2 => Just(high),
        1 => Just((low * high).sqrt()),
        3 => (0.0..=1.0_f64).prop_map(move |t| (low.ln() + t * (high.ln() - low.ln())).exp().clamp(low, high)),
    ]
}

fn percentage() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0_f32), Just(100.0_f32), 0.0..=100.0_f32]
}

/// Few jobs, so pairs repeat: four workloads, some as instances.
fn job() -> impl Strategy<Value = String> {
    (0..4_u8, prop::option::of(0..3_u8)).prop_map(|(w, instance)| match instance {
        Some(i) => format!("w{w}~{i}"),
        None => format!("w{w}"),
    })
}

fn summary() -> impl Strategy<Value = ModelSummary> {
    (
        edgy(1e-3, f64::from(MAX_MODEL_MIB)),
        prop_oneof![Just(0.0), edgy(1e-3, f64::from(MAX_MODEL_MIB))],
        prop_oneof![Just(0.0), edgy(1e-3, f64::from(MAX_MODEL_MIB))],
        prop_oneof![Just(1_u32), Just(MAX_BATCH_SIZE), 1..=4096_u32],
        prop_oneof![Just(0.0), edgy(1e-3, f64::from(MAX_GFLOPS))],
        prop_oneof![Just(0_u32), Just(MAX_LAYERS), 0..=400_u32],
    )
        .prop_map(
            |(params, activations, input, batch_size, gflops, layers)| ModelSummary {
                params_mib: params as f32,
                activations_mib: activations as f32,
                input_mib: input as f32,
                batch_size,
                gflops: gflops as f32,
                conv_layers: layers,
                linear_layers: layers / 2,
                activation_layers: layers,
                other_layers: 1,
            },
        )
}

fn observation() -> impl Strategy<Value = Observation> {
    let profile = (
        job(),
        percentage(),
        percentage(),
        prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0_f64],
        0..MODELS.len(),
    )
        .prop_map(|(job, util, access, memory, model)| Observation::Profile {
            job,
            util,
            access,
            memory,
            model,
        });
    let outcome = (
        prop::collection::btree_set(job(), 2..=3),
        prop::collection::vec(edgy(MIN_RUN_S, MAX_RUN_S), 3),
        prop::collection::vec(edgy(MIN_COLOCATED_RATIO, MAX_COLOCATED_RATIO), 3),
        0..MODELS.len(),
    )
        .prop_map(|(jobs, solo_s, ratios, model)| Observation::Outcome {
            jobs: jobs.into_iter().collect(),
            solo_s,
            ratios,
            model,
        });
    let speed = (job(), 0..MODELS.len(), edgy(MIN_WORK_PER_S, MAX_WORK_PER_S)).prop_map(
        |(job, model, work_per_s)| Observation::Speed {
            job,
            model,
            work_per_s,
        },
    );
    // Two known GPU models only: observe-memory needs a GPU's characteristics.
    let memory = (
        summary(),
        0..2_usize,
        prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0_f64],
    )
        .prop_map(|(summary, model, peak)| Observation::Memory {
            summary,
            model,
            peak,
        });
    prop_oneof![
        4 => profile,
        8 => outcome,
        3 => speed,
        1 => memory,
        1 => (0..3_u32).prop_map(Observation::Forget),
    ]
}

/// Applies `observation`; an outcome whose jobs an instance collision made one is skipped.
fn apply(engine: &mut Recommender, observation: &Observation) {
    match observation {
        Observation::Profile {
            job,
            util,
            access,
            memory,
            model,
        } => {
            let most = f64::from(largest_memory_of(MODELS[*model]));
            let profile = Profile {
                gpu_util_pct: *util,
                mem_access_pct: *access,
                mem_used_mib: (memory * most).round() as u32,
                gpu_model: MODELS[*model].into(),
            };
            engine.observe_profile(job, profile).unwrap();
        }
        Observation::Outcome {
            jobs,
            solo_s,
            ratios,
            model,
        } => {
            let n = jobs.len();
            // Clamping to the run bounds moves a ratio towards 1, so it stays within its
            // bounds but for rounding, which the last steps undo.
            let colocated_s = solo_s[..n]
                .iter()
                .zip(ratios)
                .map(|(&solo, ratio)| {
                    let mut colocated = (solo * ratio).clamp(MIN_RUN_S, MAX_RUN_S);
                    while colocated / solo < MIN_COLOCATED_RATIO {
                        colocated = colocated.next_up();
                    }
                    while colocated / solo > MAX_COLOCATED_RATIO {
                        colocated = colocated.next_down();
                    }
                    colocated
                })
                .collect();
            let outcome = Outcome {
                gpu_model: MODELS[*model].into(),
                jobs: jobs.clone(),
                solo_s: solo_s[..n].to_vec(),
                colocated_s,
            };
            engine.observe_outcome(&outcome).unwrap();
        }
        Observation::Speed {
            job,
            model,
            work_per_s,
        } => engine
            .observe_speed(job, MODELS[*model], *work_per_s)
            .unwrap(),
        Observation::Memory {
            summary,
            model,
            peak,
        } => {
            let gpu = GpuSpec::new(MODELS[*model], largest_memory_of(MODELS[*model]));
            let peak_mib = ((peak * f64::from(gpu.memory_mib)).round() as u32).max(1);
            engine.observe_memory("m", summary, &gpu, peak_mib).unwrap();
        }
        Observation::Forget(count) => {
            engine.forget_stalest(*count);
        }
    }
}

/// A queue of every workload, profiled or not, with extreme work left, and GPUs of every
/// model, the largest among them.
fn request() -> (Vec<Job>, Vec<Gpu>) {
    let queue = (0..4)
        .map(|w| Job {
            work: Some([0.0, 1.0, MAX_WORK, 1e6][w]),
            submitted_at_s: [0.0, -1e12, 1e12, 5.0][w],
            ..Job::new(format!("w{w}~q"))
        })
        .collect();
    let gpus = MODELS
        .iter()
        .enumerate()
        .map(|(g, model)| Gpu {
            id: format!("g{g}"),
            node: "n".into(),
            spec: GpuSpec::new(*model, [32_768, 12_288, LARGEST_GPU_MEMORY_MIB][g]),
            residents: vec![Job::new(format!("w{g}~r"))],
        })
        .collect();
    (queue, gpus)
}

/// Every figure a recommendation, a prediction and an estimate carry is finite.
fn predictions_are_finite(engine: &Recommender) -> Result<(), TestCaseError> {
    let (queue, gpus) = request();
    let answer = engine.recommend(&queue, &gpus).unwrap();
    for placement in &answer.placements {
        let p = &placement.predicted;
        prop_assert!(
            p.slowdown_pct.iter().all(|s| s.is_finite()),
            "{placement:?}"
        );
        prop_assert!(p.packing_saving_pct.is_finite() && p.uncertainty.is_finite());
    }
    let specs: Vec<GpuSpec> = gpus.iter().map(|g| g.spec.clone()).collect();
    for job in &queue {
        for estimate in engine.estimate(job, &specs).unwrap() {
            for figure in [
                estimate.speed,
                estimate.solo_s,
                estimate.cost,
                estimate.energy_kj,
            ]
            .into_iter()
            .flatten()
            {
                prop_assert!(figure.is_finite(), "{estimate:?}");
            }
            prop_assert!(estimate.utilization_pct.is_none_or(f32::is_finite));
        }
    }
    if let Ok(prediction) = engine.predict(&queue[..2], &specs[0]) {
        prop_assert!(prediction.slowdown_pct.iter().all(|s| s.is_finite()));
        prop_assert!(
            prediction.packing_saving_pct.is_finite() && prediction.uncertainty.is_finite()
        );
    }
    let summary = engine.describe();
    prop_assert!(summary.memory_margin_pct.is_finite());
    for pair in &summary.pairs {
        prop_assert!(
            pair.slowdown_pct.is_finite() && pair.slowdown_std_pct.is_finite(),
            "{pair:?}"
        );
        prop_assert!(pair.packing_saving_pct.is_none_or(f32::is_finite));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn accepted_observations_keep_every_statistic_finite_and_the_state_loadable(
        observations in prop::collection::vec(observation(), 1..40),
        repeats in 1..6_usize,
    ) {
        let mut engine = Recommender::bootstrap(Policy::default(), 3).unwrap();
        // The sequence again and again: many repeats of the same extreme pairs. A peak retrains
        // the memory forest (most of a case's time) and a repeated one changes no row, so the
        // first three are reported once.
        let mut peaks = 0;
        for pass in 0..repeats {
            for observation in &observations {
                if let Observation::Memory { .. } = observation {
                    peaks += 1;
                    if pass > 0 || peaks > 3 {
                        continue;
                    }
                }
                apply(&mut engine, observation);
            }
        }
        prop_assert!(is_finite(&engine.knowledge), "a statistic is not finite");
        prop_assert!(engine.knowledge.numbers_every_job());
        let saved = engine.save();
        let loaded = Recommender::load(&saved).unwrap();
        prop_assert_eq!(&loaded.save(), &saved, "the reloaded engine saves other bytes");
        predictions_are_finite(&engine)?;
        let (queue, gpus) = request();
        prop_assert_eq!(loaded.recommend(&queue, &gpus).unwrap(), engine.recommend(&queue, &gpus).unwrap());
    }
}

#[test]
fn a_non_finite_statistic_is_saved_finite_and_the_state_still_loads() {
    let mut engine = Recommender::bootstrap(Policy::default(), 3).unwrap();
    engine.observe_speed("w", "V100", 2.0).unwrap();
    engine.observe_speed("w", "K80", 1.0).unwrap();
    // What no accepted observation produces: planted to check the defence behind the bounds.
    engine.knowledge.plant_non_finite_speed("w", "K80");
    assert!(!is_finite(&engine.knowledge));
    let saved = engine.save();
    let loaded = Recommender::load(&saved).expect("a state holding a non-finite number loads");
    assert!(is_finite(&loaded.knowledge));
    assert_eq!(loaded.save(), saved);
}
