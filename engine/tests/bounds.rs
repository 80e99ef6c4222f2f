//! Each bound where an observation enters the engine: a figure just inside it is learned, one
//! just outside is refused as `invalid-input` naming the field, and nothing is learned from
//! the refused one.

use tandem_api::bounds::{
    LARGEST_GPU_MEMORY_MIB, MAX_BATCH_SIZE, MAX_COLOCATED_RATIO, MAX_GFLOPS, MAX_LAYERS,
    MAX_MODEL_MIB, MAX_RUN_S, MAX_SUBMITTED_AT_S, MAX_WORK, MAX_WORK_PER_S, MIN_COLOCATED_RATIO,
    MIN_RUN_S, MIN_WORK_PER_S,
};
use tandem_api::{
    Binding, ClusterChange, EngineError, Gpu, GpuSpec, Job, ModelSummary, Outcome, Policy, Profile,
    ViewGpu,
};
use tandem_engine::Recommender;

fn engine() -> Recommender {
    Recommender::bootstrap(Policy::default(), 1).unwrap()
}

/// The message of an `invalid-input` refusal naming `field`.
fn refused<T: std::fmt::Debug>(answer: Result<T, EngineError>, field: &str) -> String {
    match answer {
        Err(EngineError::InvalidInput(message)) => {
            assert!(message.contains(field), "`{field}` is not named: {message}");
            message
        }
        other => panic!("a value out of `{field}`'s bounds was accepted: {other:?}"),
    }
}

fn outcome(solo_s: [f64; 2], colocated_s: [f64; 2]) -> Outcome {
    Outcome {
        gpu_model: "V100".into(),
        jobs: vec!["a".into(), "b".into()],
        solo_s: solo_s.to_vec(),
        colocated_s: colocated_s.to_vec(),
    }
}

/// Just past `bound`, away from the accepted side.
fn past(bound: f64, up: bool) -> f64 {
    if up {
        bound * (1.0 + 1e-9)
    } else {
        bound * (1.0 - 1e-9)
    }
}

#[test]
fn outcome_times_are_learned_from_a_millisecond_to_a_year_and_refused_past_them() {
    let mut engine = engine();
    for times in [
        outcome([MIN_RUN_S, 100.0], [MIN_RUN_S, 120.0]),
        outcome([MAX_RUN_S, 100.0], [MAX_RUN_S, 120.0]),
    ] {
        engine.observe_outcome(&times).unwrap();
    }
    for (bad, field) in [
        (
            outcome([past(MIN_RUN_S, false), 100.0], [0.01, 120.0]),
            "outcome.solo-s[0]",
        ),
        (
            outcome([100.0, past(MAX_RUN_S, true)], [120.0, MAX_RUN_S]),
            "outcome.solo-s[1]",
        ),
        (
            outcome([100.0, 100.0], [120.0, past(MIN_RUN_S, false)]),
            "outcome.colocated-s[1]",
        ),
        (
            outcome([100.0, 1e7], [120.0, past(MAX_RUN_S, true)]),
            "outcome.colocated-s[1]",
        ),
        (
            outcome([f64::NAN, 100.0], [120.0, 120.0]),
            "outcome.solo-s[0]",
        ),
        (
            outcome([100.0, 100.0], [f64::INFINITY, 120.0]),
            "outcome.colocated-s[0]",
        ),
    ] {
        refused(engine.observe_outcome(&bad), field);
    }
    assert_eq!(engine.describe().outcomes, 2);
}

#[test]
fn co_located_times_are_learned_from_a_tenth_to_ten_thousand_times_the_solo_time() {
    let mut engine = engine();
    let (low, high) = (100.0 * MIN_COLOCATED_RATIO, 100.0 * MAX_COLOCATED_RATIO);
    engine
        .observe_outcome(&outcome([100.0, 100.0], [low, high]))
        .unwrap();
    let message = refused(
        engine.observe_outcome(&outcome([100.0, 100.0], [past(low, false), 120.0])),
        "outcome.colocated-s[0]",
    );
    assert!(message.contains("times the job's solo time"), "{message}");
    refused(
        engine.observe_outcome(&outcome([100.0, 100.0], [120.0, past(high, true)])),
        "outcome.colocated-s[1]",
    );
    assert_eq!(engine.describe().outcomes, 1);
}

fn profile(mem_used_mib: u32, gpu_model: &str) -> Profile {
    Profile {
        gpu_util_pct: 50.0,
        mem_access_pct: 20.0,
        mem_used_mib,
        gpu_model: gpu_model.into(),
    }
}

#[test]
fn a_profile_uses_at_most_the_memory_of_its_gpu_model() {
    let mut engine = engine();
    // A V100 is a 16 or a 32 GiB board.
    engine
        .observe_profile("a", profile(32_768, "V100"))
        .unwrap();
    refused(
        engine.observe_profile("b", profile(32_769, "V100")),
        "profile.mem-used-mib",
    );
    // A model the engine does not know: at most the largest GPU's memory.
    engine
        .observe_profile("c", profile(LARGEST_GPU_MEMORY_MIB, "B200"))
        .unwrap();
    refused(
        engine.observe_profile("d", profile(LARGEST_GPU_MEMORY_MIB + 1, "B200")),
        "profile.mem-used-mib",
    );
    // ... unless the cluster view holds GPUs of that model: at most theirs.
    let gpu = Gpu {
        id: "n/0".into(),
        node: "n".into(),
        spec: GpuSpec::new("B200", 184_320),
        residents: vec![],
    };
    engine
        .update_cluster(&[ClusterChange::SetGpu(ViewGpu { handle: 0, gpu })])
        .unwrap();
    engine
        .observe_profile("e", profile(184_320, "B200"))
        .unwrap();
    refused(
        engine.observe_profile("f", profile(184_321, "B200")),
        "profile.mem-used-mib",
    );
    assert_eq!(engine.describe().profiles, 3);
}

#[test]
fn percentages_of_a_profile_are_zero_to_a_hundred() {
    let mut engine = engine();
    let mut p = profile(1_000, "V100");
    p.gpu_util_pct = 100.0;
    p.mem_access_pct = 0.0;
    engine.observe_profile("a", p.clone()).unwrap();
    p.mem_access_pct = -0.5;
    refused(engine.observe_profile("b", p), "profile.mem-access-pct");
}

#[test]
fn speeds_are_learned_between_their_bounds() {
    let mut engine = engine();
    engine.observe_speed("a", "V100", MIN_WORK_PER_S).unwrap();
    engine.observe_speed("b", "V100", MAX_WORK_PER_S).unwrap();
    for bad in [
        past(MIN_WORK_PER_S, false),
        past(MAX_WORK_PER_S, true),
        1e300,
        -1.0,
    ] {
        refused(engine.observe_speed("c", "V100", bad), "work-per-s");
    }
    assert_eq!(engine.describe().speed_workloads, 2);
}

fn declared() -> ModelSummary {
    ModelSummary {
        params_mib: 100.0,
        activations_mib: 900.0,
        input_mib: 10.0,
        batch_size: 32,
        gflops: 5.0,
        conv_layers: 20,
        linear_layers: 1,
        activation_layers: 20,
        other_layers: 3,
    }
}

#[test]
fn a_memory_peak_is_at_most_its_gpus_memory() {
    let mut engine = engine();
    let v100 = GpuSpec::new("V100", 16_384);
    engine
        .observe_memory("a", &declared(), &v100, 16_384)
        .unwrap();
    let rows = engine.describe().memory_rows;
    refused(
        engine.observe_memory("a", &declared(), &v100, 16_385),
        "peak-mem-mib",
    );
    refused(
        engine.observe_memory("a", &declared(), &v100, 0),
        "peak-mem-mib",
    );
    assert_eq!(engine.describe().memory_rows, rows);
}

#[test]
fn a_declared_model_is_bounded_field_by_field() {
    let mut engine = engine();
    let v100 = GpuSpec::new("V100", 16_384);
    let edges = ModelSummary {
        params_mib: MAX_MODEL_MIB,
        batch_size: MAX_BATCH_SIZE,
        gflops: MAX_GFLOPS,
        other_layers: MAX_LAYERS,
        ..declared()
    };
    engine.observe_memory("a", &edges, &v100, 1_000).unwrap();
    let cases = [
        (
            ModelSummary {
                params_mib: MAX_MODEL_MIB * 1.01,
                ..declared()
            },
            "declared.params-mib",
        ),
        (
            ModelSummary {
                input_mib: f32::INFINITY,
                ..declared()
            },
            "declared.input-mib",
        ),
        (
            ModelSummary {
                gflops: MAX_GFLOPS * 1.01,
                ..declared()
            },
            "declared.gflops",
        ),
        (
            ModelSummary {
                batch_size: MAX_BATCH_SIZE + 1,
                ..declared()
            },
            "declared.batch-size",
        ),
        (
            ModelSummary {
                linear_layers: MAX_LAYERS + 1,
                ..declared()
            },
            "declared.linear-layers",
        ),
    ];
    for (bad, field) in cases {
        refused(engine.observe_memory("a", &bad, &v100, 1_000), field);
        // A queued job's declared model is held to the same bounds.
        let job = Job {
            declared: Some(bad),
            ..Job::new("q")
        };
        refused(engine.recommend(&[job], &[]), &format!("queue[0].{field}"));
    }
}

#[test]
fn requests_bound_gpu_memory_work_and_submission_times() {
    let engine = engine();
    let gpu = |memory_mib| Gpu {
        id: "n/0".into(),
        node: "n".into(),
        spec: GpuSpec::new("B200", memory_mib),
        residents: vec![],
    };
    engine
        .recommend(&[Job::new("a")], &[gpu(LARGEST_GPU_MEMORY_MIB)])
        .unwrap();
    refused(
        engine.recommend(&[Job::new("a")], &[gpu(LARGEST_GPU_MEMORY_MIB + 1)]),
        "gpus[0].spec.memory-mib",
    );
    let with = |work, submitted_at_s| Job {
        work: Some(work),
        submitted_at_s,
        ..Job::new("a")
    };
    engine
        .recommend(&[with(MAX_WORK, MAX_SUBMITTED_AT_S)], &[gpu(16_384)])
        .unwrap();
    refused(
        engine.recommend(&[with(MAX_WORK * 1.01, 0.0)], &[gpu(16_384)]),
        "queue[0].work",
    );
    refused(
        engine.recommend(&[with(1.0, -MAX_SUBMITTED_AT_S * 1.01)], &[gpu(16_384)]),
        "queue[0].submitted-at-s",
    );
    // A profile in a request may use at most the largest GPU's memory (its own GPU's is
    // checked where it is observed).
    let mut resident = Job::profiled("r", profile(LARGEST_GPU_MEMORY_MIB + 1, "B200"));
    resident.id = "r".into();
    let mut busy = gpu(16_384);
    busy.residents.push(resident.clone());
    refused(
        engine.recommend(&[], &[busy]),
        "gpus[0].residents[0].profile.mem-used-mib",
    );
    let mut view = engine.clone();
    refused(
        view.update_cluster(&[
            ClusterChange::SetGpu(ViewGpu {
                handle: 0,
                gpu: gpu(16_384),
            }),
            ClusterChange::Bind(Binding {
                gpu: 0,
                job: resident,
            }),
        ]),
        "changes[1].bind.job.profile.mem-used-mib",
    );
}
