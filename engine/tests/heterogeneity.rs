//! Heterogeneous GPUs through the engine's public API: memory per model and the guard, speeds
//! and run-time-aware placement, and user priorities.

use tandem_api::{
    Gpu, GpuSpec, Job, MemorySource, ModelCap, ModelSummary, Objective, Policy, Priority, Profile,
};
use tandem_engine::Recommender;

/// VGG-19 at batch 64, as SchedTune's table describes it (its measured peak is 10-11 GiB on
/// every GPU it ran on).
fn vgg19_b64() -> ModelSummary {
    ModelSummary {
        params_mib: 527.79,
        activations_mib: 7636.48,
        input_mib: 36.75,
        batch_size: 64,
        ..ModelSummary::default()
    }
}

/// ResNet-18 at batch 32, as SchedTune's table describes it: small, and within the data the
/// memory model was trained on.
fn resnet18_b32() -> ModelSummary {
    ModelSummary {
        params_mib: 44.59,
        activations_mib: 909.25,
        input_mib: 18.38,
        batch_size: 32,
        ..ModelSummary::default()
    }
}

fn gpu(id: &str, spec: GpuSpec, residents: Vec<Job>) -> Gpu {
    Gpu {
        id: id.into(),
        node: id.split('/').next().unwrap_or(id).into(),
        spec,
        residents,
    }
}

fn engine() -> Recommender {
    Recommender::bootstrap(Policy::default(), 1).unwrap()
}

#[test]
fn a_declared_job_is_kept_off_a_gpu_its_predicted_memory_overflows() {
    let engine = engine();
    // The small GPU comes first: a memory-blind first fit would take it.
    let gpus = [
        gpu("small/0", GpuSpec::new("RTX 2070 Super", 8192), vec![]),
        gpu("big/0", GpuSpec::new("V100", 16384), vec![]),
    ];
    let declared = Job {
        declared: Some(vgg19_b64()),
        ..Job::new("vgg")
    };
    let answer = engine
        .recommend(std::slice::from_ref(&declared), &gpus)
        .unwrap();
    assert_eq!(answer.placements[0].gpu, "big/0", "{answer:?}");
    let fits = engine.filter(&declared, &gpus).unwrap();
    assert!(!fits[0].fits && fits[0].reason.contains("MiB"), "{fits:?}");
    assert!(fits[1].fits, "{fits:?}");

    // The estimate says why: over 8 GiB predicted, more reserved, on both models.
    let specs = [gpus[0].spec.clone(), gpus[1].spec.clone()];
    let estimates = engine.estimate(&declared, &specs).unwrap();
    for e in &estimates {
        assert_eq!(e.memory_source, MemorySource::Declared);
        let (peak, reserved) = (e.peak_mem_mib.unwrap(), e.reserved_mib.unwrap());
        assert!(peak > 8192 && reserved > peak, "{e:?}");
    }
    assert!(!estimates[0].fits_empty && estimates[1].fits_empty);

    // Withheld, the model is unknown memory: alone on the first idle GPU, which is what a
    // guard without a declaration cannot prevent.
    let blind = engine.recommend(&[Job::new("vgg")], &gpus).unwrap();
    assert_eq!(blind.placements[0].gpu, "small/0");
}

#[test]
fn memory_sources_go_from_the_best_evidence_down() {
    let mut engine = engine();
    let v100 = GpuSpec::new("V100", 16384);
    let k80 = GpuSpec::new("K80", 11441);
    engine
        .observe_profile(
            "seen",
            Profile {
                gpu_util_pct: 60.0,
                mem_access_pct: 30.0,
                mem_used_mib: 9000,
                gpu_model: "V100".into(),
            },
        )
        .unwrap();
    let specs = [v100.clone(), k80.clone()];
    let seen = engine.estimate(&Job::new("seen"), &specs).unwrap();
    assert_eq!(seen[0].memory_source, MemorySource::Observed);
    assert_eq!(seen[0].reserved_mib, Some(9000));
    // Not declared: the V100 figure is taken as is on the K80.
    assert_eq!(seen[1].memory_source, MemorySource::Transferred);
    assert_eq!(seen[1].reserved_mib, Some(9000));
    // Declared: scaled by the memory model's K80/V100 ratio, plus the margin.
    let scaled = Job {
        declared: Some(vgg19_b64()),
        ..Job::new("seen")
    };
    let scaled = engine.estimate(&scaled, &specs).unwrap();
    assert_eq!(scaled[1].memory_source, MemorySource::Transferred);
    assert!(scaled[1].reserved_mib.unwrap() > scaled[1].peak_mem_mib.unwrap());
    let nothing = engine.estimate(&Job::new("new"), &specs).unwrap();
    assert_eq!(nothing[0].memory_source, MemorySource::Unknown);
    assert_eq!(nothing[0].reserved_mib, None);
    assert!(!nothing[0].fits_empty);
}

#[test]
fn reported_peaks_retrain_the_memory_model_and_survive_a_snapshot() {
    let mut engine = engine();
    let before = engine.describe();
    assert_eq!(before.memory_rows, 240);
    assert!(before.memory_margin_pct > 0.0);
    let v100 = GpuSpec::new("V100", 16384);
    engine
        .observe_memory("vgg", &vgg19_b64(), &v100, 12_000)
        .unwrap();
    let after = engine.describe();
    assert_eq!(after.memory_rows, 241);
    // The same model on the same GPU again (a recurring job's next run) is no new row, and a
    // lower peak changes nothing: the row keeps the worst run seen.
    let job = Job {
        declared: Some(vgg19_b64()),
        ..Job::new("next-vgg")
    };
    let estimate = engine.estimate(&job, std::slice::from_ref(&v100)).unwrap();
    engine
        .observe_memory("vgg", &vgg19_b64(), &v100, 11_000)
        .unwrap();
    assert_eq!(engine.describe().memory_rows, 241);
    assert_eq!(
        engine.estimate(&job, std::slice::from_ref(&v100)).unwrap(),
        estimate
    );
    let restored = Recommender::load(&engine.save()).unwrap();
    assert_eq!(restored.describe().memory_rows, 241);
    assert_eq!(
        restored.describe().memory_margin_pct,
        after.memory_margin_pct
    );

    // Bad reports are refused, naming the field, and nothing is learned.
    let mut zero = vgg19_b64();
    zero.batch_size = 0;
    let err = engine.observe_memory("vgg", &zero, &v100, 1).unwrap_err();
    assert!(err.to_string().contains("declared.batch-size"), "{err}");
    let mystery = GpuSpec::new("Mystery 9000", 16384);
    let err = engine
        .observe_memory("vgg", &vgg19_b64(), &mystery, 1)
        .unwrap_err();
    assert!(err.to_string().contains("Mystery 9000"), "{err}");
    let err = engine
        .observe_memory("vgg", &vgg19_b64(), &v100, 0)
        .unwrap_err();
    assert!(err.to_string().contains("peak-mem-mib"), "{err}");
    assert_eq!(engine.describe().memory_rows, 241);
}

/// K80, V100 and T4 with prices and powers chosen so that each priority has another best GPU.
fn priced_gpus() -> Vec<Gpu> {
    let spec = |model: &str, memory, price, watts| GpuSpec {
        price_per_hour: Some(price),
        power_watts: Some(watts),
        ..GpuSpec::new(model, memory)
    };
    vec![
        gpu("k80/0", spec("K80", 11441, 0.2, 300.0), vec![]),
        gpu("v100/0", spec("V100", 16384, 3.0, 300.0), vec![]),
        gpu("t4/0", spec("T4", 15360, 0.5, 70.0), vec![]),
    ]
}

#[test]
fn the_same_job_goes_where_its_priority_is_best_served() {
    let mut engine = engine();
    for (model, speed) in [("K80", 1.0), ("V100", 4.0), ("T4", 2.0)] {
        engine.observe_speed("train", model, speed).unwrap();
    }
    let gpus = priced_gpus();
    let specs: Vec<GpuSpec> = gpus.iter().map(|g| g.spec.clone()).collect();
    let job = |priority| Job {
        priority: Some(priority),
        work: Some(3600.0),
        ..Job::new("train~1")
    };
    // The predicted figures behind each choice: 3600, 900 and 1800 s; 0.20, 0.75 and 0.25 in
    // price; 1080, 270 and 126 kJ.
    let estimates = engine.estimate(&job(Priority::Latency), &specs).unwrap();
    let solo: Vec<f64> = estimates.iter().map(|e| e.solo_s.unwrap()).collect();
    let cost: Vec<f64> = estimates.iter().map(|e| e.cost.unwrap()).collect();
    let energy: Vec<f64> = estimates.iter().map(|e| e.energy_kj.unwrap()).collect();
    assert_eq!(solo, vec![3600.0, 900.0, 1800.0]);
    assert!((cost[0] - 0.2).abs() < 1e-6 && (cost[1] - 0.75).abs() < 1e-6);
    assert!((energy[2] - 126.0).abs() < 1e-6 && (energy[1] - 270.0).abs() < 1e-6);
    for (priority, expected) in [
        (Priority::Latency, "v100/0"),
        (Priority::Cost, "k80/0"),
        (Priority::Energy, "t4/0"),
    ] {
        let answer = engine.recommend(&[job(priority)], &gpus).unwrap();
        assert_eq!(
            answer.placements[0].gpu, expected,
            "{priority:?}: {answer:?}"
        );
    }
}

#[test]
fn speeds_learned_on_other_workloads_place_a_job_seen_on_one_model() {
    let mut engine = engine();
    for (workload, k80, v100) in [("a", 1.0, 3.0), ("b", 2.0, 6.0)] {
        engine.observe_speed(workload, "K80", k80).unwrap();
        engine.observe_speed(workload, "V100", v100).unwrap();
    }
    engine.observe_speed("c", "K80", 5.0).unwrap();
    let specs = [GpuSpec::new("K80", 11441), GpuSpec::new("V100", 16384)];
    let c = engine.estimate(&Job::new("c"), &specs).unwrap();
    assert!((c[1].speed.unwrap() - 15.0).abs() < 1e-9, "{c:?}");
    // The V100 is listed last and still chosen.
    let gpus = [
        gpu("k80/0", specs[0].clone(), vec![]),
        gpu("v100/0", specs[1].clone(), vec![]),
    ];
    let answer = engine.recommend(&[Job::new("c")], &gpus).unwrap();
    assert_eq!(answer.placements[0].gpu, "v100/0");
    // Bad speeds are refused.
    assert!(engine.observe_speed("c", "K80", f64::NAN).is_err());
    assert!(engine.observe_speed("c", "K80", 0.0).is_err());
    assert!(engine.observe_speed("c", "", 1.0).is_err());
}

#[test]
fn a_job_waits_for_a_busy_fast_gpu_only_when_that_clearly_pays() {
    let mut engine = engine();
    engine.observe_speed("resident", "V100", 1.0).unwrap();
    engine.observe_speed("fast", "K80", 1.0).unwrap();
    engine.observe_speed("fast", "V100", 10.0).unwrap();
    engine.observe_speed("meh", "K80", 1.0).unwrap();
    engine.observe_speed("meh", "V100", 1.2).unwrap();
    let resident = Job {
        work: Some(100.0),
        ..Job::new("resident")
    };
    let gpus = [
        gpu("k80/0", GpuSpec::new("K80", 11441), vec![]),
        gpu("v100/0", GpuSpec::new("V100", 16384), vec![resident]),
    ];
    let queued = |id: &str| Job {
        work: Some(1000.0),
        ..Job::new(id)
    };
    // 100 s for the resident, then 100 s: far sooner than 1000 s on the K80 now.
    let answer = engine.recommend(&[queued("fast")], &gpus).unwrap();
    assert!(answer.placements.is_empty(), "{answer:?}");
    assert!(
        answer.unplaced[0].reason.contains("waits for v100/0"),
        "{answer:?}"
    );
    // 100 s + 833 s is not clearly sooner than 1000 s: it starts on the K80.
    let answer = engine.recommend(&[queued("meh")], &gpus).unwrap();
    assert_eq!(answer.placements[0].gpu, "k80/0", "{answer:?}");
    // Without its work, the engine cannot weigh the wait and starts it.
    let answer = engine.recommend(&[Job::new("fast")], &gpus).unwrap();
    assert_eq!(answer.placements[0].gpu, "k80/0", "{answer:?}");
}

#[test]
fn bad_declarations_and_work_are_refused_naming_the_field() {
    let engine = engine();
    let gpus = [gpu("g/0", GpuSpec::new("V100", 16384), vec![])];
    let mut nan = vgg19_b64();
    nan.params_mib = f32::NAN;
    let job = Job {
        declared: Some(nan),
        ..Job::new("x")
    };
    let err = engine.recommend(&[job], &gpus).unwrap_err();
    assert!(
        err.to_string().contains("queue[0].declared.params-mib"),
        "{err}"
    );
    let empty = Job {
        declared: Some(ModelSummary {
            batch_size: 1,
            ..ModelSummary::default()
        }),
        ..Job::new("x")
    };
    let err = engine.recommend(&[empty], &gpus).unwrap_err();
    assert!(err.to_string().contains("a model has a size"), "{err}");
    let negative = Job {
        work: Some(-1.0),
        ..Job::new("x")
    };
    let err = engine.recommend(&[negative], &gpus).unwrap_err();
    assert!(err.to_string().contains("queue[0].work"), "{err}");
}

#[test]
fn a_declared_model_vouches_for_memory_and_predicts_interference_a_bare_id_does_neither() {
    let engine = engine();
    let gpus = [gpu("g/0", GpuSpec::new("V100", 16384), vec![])];
    let small = resnet18_b32();
    let job = |id: &str| Job {
        declared: Some(small.clone()),
        ..Job::new(id)
    };
    // Both fit the GPU's memory many times over, and their declared models predict how they
    // interfere (proactive sharing before they are profiled).
    let answer = engine.recommend(&[job("a"), job("b")], &gpus).unwrap();
    assert_eq!(answer.placements.len(), 1);
    assert_eq!(answer.placements[0].jobs.len(), 2, "{answer:?}");
    // A job that declares nothing says neither: it shares with nothing it was not seen with.
    let answer = engine
        .recommend(&[job("a"), Job::new("bare")], &gpus)
        .unwrap();
    assert_eq!(answer.placements[0].jobs.len(), 1, "{answer:?}");
    assert!(
        answer.unplaced[0].reason.contains("never observed sharing")
            || answer.unplaced[0].reason.contains("no known profile"),
        "{answer:?}"
    );
}

#[test]
fn a_declared_model_beyond_the_memory_models_reach_fits_alone_and_shares_once_measured() {
    let mut engine = engine();
    let v100 = GpuSpec::new("V100", 16384);
    let gpus = [gpu("g/0", v100.clone(), vec![])];
    // ResNet-18 at batch 128: twice SchedTune's largest batch. Predicted small, as a
    // forest predicts past its data: the largest peaks it saw, not what the batch needs.
    let big_batch = ModelSummary {
        activations_mib: 3637.0,
        batch_size: 128,
        ..resnet18_b32()
    };
    let small = resnet18_b32();
    let declaring = |id: &str, model: &ModelSummary| Job {
        declared: Some(model.clone()),
        ..Job::new(id)
    };
    let (a, b) = (declaring("a", &big_batch), declaring("b", &small));
    let estimate = engine.estimate(&a, std::slice::from_ref(&v100)).unwrap();
    let reserved = estimate[0].reserved_mib.unwrap();
    assert!(reserved < 8192, "{estimate:?}");
    // The prediction leaves room for both, yet they do not share: it may be short by more
    // than the margin. The job still runs, alone.
    let answer = engine.recommend(&[a.clone(), b.clone()], &gpus).unwrap();
    assert_eq!(answer.placements.len(), 1, "{answer:?}");
    assert_eq!(answer.placements[0].jobs.len(), 1, "{answer:?}");
    assert!(
        answer.unplaced[0]
            .reason
            .contains("larger than any the memory model"),
        "{answer:?}"
    );
    let alone = engine.recommend(std::slice::from_ref(&a), &gpus).unwrap();
    assert_eq!(alone.placements[0].jobs, ["a"], "{alone:?}");
    // Within the model's reach, two such jobs share.
    let two_small = [declaring("b", &small), declaring("c", &small)];
    let answer = engine.recommend(&two_small, &gpus).unwrap();
    assert_eq!(answer.placements[0].jobs.len(), 2, "{answer:?}");
    // A measured peak at that batch size widens the model's reach: the next job declaring
    // it shares where its (retrained) prediction fits.
    engine
        .observe_memory("a", &big_batch, &v100, 5_000)
        .unwrap();
    let answer = engine.recommend(&[a, b], &gpus).unwrap();
    assert_eq!(answer.placements[0].jobs.len(), 2, "{answer:?}");
}

#[test]
fn two_declared_jobs_seen_sharing_share_again_whatever_their_predicted_memory() {
    let mut engine = engine();
    let spec = GpuSpec::new("RTX 3090", 24576);
    let gpus = [gpu("g/0", spec.clone(), vec![])];
    let vgg = |id: &str| Job {
        declared: Some(vgg19_b64()),
        ..Job::new(id)
    };
    let (a, b) = (vgg("a"), vgg("b"));
    // Each fits alone; the two predicted reservations (peak plus the guard's margin) do not
    // fit together, though the peaks measured for VGG-19 at this batch (10-11 GiB) do.
    let reserved = engine.estimate(&a, std::slice::from_ref(&spec)).unwrap()[0]
        .reserved_mib
        .unwrap();
    assert!(reserved <= 24576 && 2 * reserved > 24576, "{reserved} MiB");
    let answer = engine.recommend(&[a.clone(), b.clone()], &gpus).unwrap();
    assert_eq!(answer.placements.len(), 1, "{answer:?}");
    assert_eq!(answer.placements[0].jobs.len(), 1, "{answer:?}");
    assert!(answer.unplaced[0].reason.contains("MiB"), "{answer:?}");
    assert!(engine.predict(&[a.clone(), b.clone()], &spec).is_err());
    // An outcome proves the two fit on one: it outweighs the prediction.
    engine
        .observe_outcome(&tandem_api::Outcome {
            gpu_model: "RTX 3090".into(),
            jobs: vec!["a".into(), "b".into()],
            solo_s: vec![100.0, 100.0],
            colocated_s: vec![125.0, 125.0],
        })
        .unwrap();
    let answer = engine.recommend(&[a.clone(), b], &gpus).unwrap();
    assert_eq!(answer.placements.len(), 1, "{answer:?}");
    assert_eq!(answer.placements[0].jobs.len(), 2, "{answer:?}");
    assert!(engine.predict(&[a.clone(), vgg("b")], &spec).is_ok());
    // Seen with `b` only: a third job declaring the same model still does not fit beside `a`.
    let answer = engine.recommend(&[a, vgg("c")], &gpus).unwrap();
    assert_eq!(answer.placements[0].jobs.len(), 1, "{answer:?}");
}

#[test]
fn each_gpu_model_holds_at_most_its_own_cap() {
    let gpus = [
        gpu("k80/0", GpuSpec::new("K80", 11441), vec![]),
        gpu("v100/0", GpuSpec::new("V100", 16384), vec![]),
    ];
    let queue: Vec<Job> = (0..6)
        .map(|i| {
            Job::profiled(
                format!("j{i}"),
                Profile {
                    gpu_util_pct: 15.0,
                    mem_access_pct: 5.0,
                    mem_used_mib: 1000,
                    gpu_model: "V100".into(),
                },
            )
        })
        .collect();
    let per_gpu = |policy: Policy| {
        let answer = Recommender::bootstrap(policy, 1)
            .unwrap()
            .recommend(&queue, &gpus)
            .unwrap();
        let on = |id: &str| {
            answer
                .placements
                .iter()
                .find(|p| p.gpu == id)
                .map_or(0, |p| p.jobs.len())
        };
        (on("k80/0"), on("v100/0"), answer)
    };
    let packing = Policy {
        objective: Objective::MaxPacking,
        max_jobs_per_gpu: 3,
        ..Policy::default()
    };
    let (k80, v100, _) = per_gpu(packing.clone());
    assert_eq!((k80, v100), (3, 3), "without a model cap both GPUs take 3");
    let capped = Policy {
        model_caps: vec![ModelCap {
            gpu_model: "K80".into(),
            max_jobs: 1,
        }],
        ..packing
    };
    let (k80, v100, answer) = per_gpu(capped);
    assert_eq!((k80, v100), (1, 3), "{answer:?}");
    assert_eq!(answer.unplaced.len(), 2);
    assert!(answer.unplaced[0].reason.contains("cap"), "{answer:?}");
}

#[test]
fn bad_model_caps_are_refused_naming_the_entry() {
    let cap = |model: &str, max_jobs| ModelCap {
        gpu_model: model.into(),
        max_jobs,
    };
    for (caps, expected) in [
        (vec![cap("K80", 0)], "policy.model-caps[0].max-jobs"),
        (vec![cap("", 2)], "policy.model-caps[0].gpu-model"),
        (
            vec![cap("K80", 1), cap("K80", 2)],
            "policy.model-caps[1]: a second cap for GPU model K80",
        ),
    ] {
        let policy = Policy {
            model_caps: caps,
            ..Policy::default()
        };
        let err = Recommender::new(policy, 0).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn utilization_is_measured_when_profiled_else_predicted_from_the_declared_model() {
    let engine = engine();
    let specs = [GpuSpec::new("V100", 16384), GpuSpec::new("K80", 11441)];
    // ResNet-50 at batch 256 as `tandem declare` summarizes it (measured at 91.6% on a P100),
    // and the DQN of TF-Agents' CartPole tutorial at batch 1024 (measured at 1.8%).
    let resnet = ModelSummary {
        params_mib: 89.81,
        activations_mib: 25757.3,
        input_mib: 147.0,
        batch_size: 256,
        gflops: 1978.5,
        conv_layers: 53,
        linear_layers: 1,
        activation_layers: 49,
        other_layers: 21,
    };
    let dqn = ModelSummary {
        params_mib: 0.021,
        activations_mib: 1.18,
        input_mib: 0.016,
        batch_size: 1024,
        gflops: 0.0114,
        conv_layers: 0,
        linear_layers: 3,
        activation_layers: 2,
        other_layers: 0,
    };
    let utilization = |job: Job| {
        let estimates = engine.estimate(&job, &specs).unwrap();
        assert_eq!(estimates[0].utilization_pct, estimates[1].utilization_pct);
        estimates[0].utilization_pct
    };
    let declared = |id: &str, summary: &ModelSummary| Job {
        declared: Some(summary.clone()),
        ..Job::new(id)
    };
    let big = utilization(declared("big", &resnet)).unwrap();
    let tiny = utilization(declared("tiny", &dqn)).unwrap();
    assert!((0.0..=100.0).contains(&big) && (0.0..=100.0).contains(&tiny));
    assert!(big > 60.0 && tiny < 20.0, "ResNet-50 {big}%, DQN {tiny}%");
    let profiled = Job {
        declared: Some(dqn),
        ..Job::profiled(
            "p",
            Profile {
                gpu_util_pct: 42.0,
                mem_access_pct: 10.0,
                mem_used_mib: 900,
                gpu_model: "V100".into(),
            },
        )
    };
    assert_eq!(utilization(profiled), Some(42.0));
    assert_eq!(utilization(Job::new("nothing")), None);
}
