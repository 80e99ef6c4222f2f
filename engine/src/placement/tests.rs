//! Tests of the planner through the engine's public API: the memory guard and job cap hold for any
//! queue, and each objective chooses as it says.

use proptest::prelude::*;
use tandem_api::{Gpu, GpuSpec, Job, ModelCap, ModelSummary, Objective, Policy, Profile};

use crate::Recommender;

fn profile(util: f32, mem: u32) -> Profile {
    Profile {
        gpu_util_pct: util,
        mem_access_pct: util / 2.0,
        mem_used_mib: mem,
        gpu_model: "V100".into(),
    }
}

fn gpu(id: &str, memory: u32, residents: Vec<Job>) -> Gpu {
    Gpu {
        id: id.into(),
        node: "n".into(),
        spec: GpuSpec::new("V100", memory),
        residents,
    }
}

prop_compose! {
    fn arb_job(i: usize)(util in 0.0f32..=100.0, mem in 0u32..20_000) -> Job {
        Job::profiled(format!("j{i}"), profile(util, mem))
    }
}

fn arb_queue(max: usize) -> impl Strategy<Value = Vec<Job>> {
    (0..=max).prop_flat_map(|n| (0..n).map(arb_job).collect::<Vec<_>>())
}

fn arb_gpus(max: usize) -> impl Strategy<Value = Vec<Gpu>> {
    prop::collection::vec((1u32..40_000, 0u32..12_000, any::<bool>()), 0..=max).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(g, (memory, resident_mem, has_resident))| {
                let residents = if has_resident {
                    vec![Job::profiled(format!("r{g}"), profile(30.0, resident_mem))]
                } else {
                    Vec::new()
                };
                gpu(&format!("g{g}"), memory, residents)
            })
            .collect()
    })
}

/// A job of one of four profiles: the jobs of a recurring workload, seen alike.
fn recurring(id: String, kind: u32) -> Job {
    Job::profiled(id, profile(15.0 + 25.0 * kind as f32, 2_000 + 3_500 * kind))
}

fn arb_recurring_queue(max: usize) -> impl Strategy<Value = Vec<Job>> {
    prop::collection::vec(0u32..4, 0..=max).prop_map(|kinds| {
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| recurring(format!("j{i}"), kind))
            .collect()
    })
}

/// GPUs holding up to two residents of those profiles.
fn arb_busy_gpus(max: usize) -> impl Strategy<Value = Vec<Gpu>> {
    prop::collection::vec(
        (16_000u32..40_000, prop::collection::vec(0u32..4, 0..=2)),
        0..=max,
    )
    .prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(g, (memory, kinds))| {
                let residents = kinds
                    .into_iter()
                    .enumerate()
                    .map(|(r, kind)| recurring(format!("r{g}.{r}"), kind))
                    .collect();
                gpu(&format!("g{g}"), memory, residents)
            })
            .collect()
    })
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (
        0usize..3,
        1u32..5,
        0.0f32..=1.0,
        proptest::option::of(1u32..4),
    )
        .prop_map(|(o, cap, exploration, test_cap)| Policy {
            objective: Objective::ALL[o],
            max_jobs_per_gpu: cap,
            exploration,
            // The test GPUs are all V100s: a cap of their own overrides `cap`.
            model_caps: test_cap
                .map(|max_jobs| ModelCap {
                    gpu_model: "V100".into(),
                    max_jobs,
                })
                .into_iter()
                .collect(),
        })
}

proptest! {
    #[test]
    fn no_placement_exceeds_gpu_memory_or_the_job_cap(
        queue in arb_queue(30), gpus in arb_gpus(12), policy in arb_policy(), seed in any::<u64>()
    ) {
        let cap = policy.max_jobs_on("V100") as usize;
        let answer = Recommender::new(policy, seed).unwrap().recommend(&queue, &gpus).unwrap();
        let mem_of = |id: &str| queue.iter().find(|j| j.id == id).and_then(|j| j.profile.as_ref()).map_or(0, |p| u64::from(p.mem_used_mib));
        for placement in &answer.placements {
            let gpu = gpus.iter().find(|g| g.id == placement.gpu).unwrap();
            let resident_mem: u64 = gpu.residents.iter().map(|r| u64::from(r.profile.as_ref().unwrap().mem_used_mib)).sum();
            let placed_mem: u64 = placement.jobs.iter().map(|id| mem_of(id)).sum();
            prop_assert!(resident_mem + placed_mem <= u64::from(gpu.spec.memory_mib));
            prop_assert!(gpu.residents.len() + placement.jobs.len() <= cap);
        }
        let placed: usize = answer.placements.iter().map(|p| p.jobs.len()).sum();
        prop_assert_eq!(placed + answer.unplaced.len(), queue.len());
    }

    #[test]
    fn the_same_seed_gives_the_same_answer(
        queue in arb_queue(20), gpus in arb_gpus(8), policy in arb_policy(), seed in any::<u64>()
    ) {
        let engine = Recommender::new(policy, seed).unwrap();
        prop_assert_eq!(engine.recommend(&queue, &gpus).unwrap(), engine.recommend(&queue, &gpus).unwrap());
    }

    /// Many queued jobs and residents of a few workloads: refusing a job seen alike without
    /// judging it again, and predicting a newcomer beside each kind of resident once, give
    /// the answers judging every job beside every resident gives.
    #[test]
    fn the_planner_s_shortcuts_change_no_answer(
        queue in arb_recurring_queue(40), gpus in arb_busy_gpus(12), policy in arb_policy(),
        seed in any::<u64>()
    ) {
        let engine = Recommender::new(policy, seed).unwrap();
        let answers = || {
            let scores: Vec<_> = queue.iter().map(|job| engine.score(job, &gpus).unwrap()).collect();
            (engine.recommend(&queue, &gpus).unwrap(), scores)
        };
        let with = answers();
        super::SHORTCUTS.with(|on| on.set(false));
        let without = answers();
        super::SHORTCUTS.with(|on| on.set(true));
        prop_assert_eq!(with, without);
    }
}

#[test]
fn zero_one_and_ten_thousand_jobs_are_grouped_without_panic() {
    let engine = Recommender::bootstrap(Policy::default(), 3).unwrap();
    let gpus: Vec<Gpu> = (0..100)
        .map(|g| gpu(&format!("g{g}"), 16_384, vec![]))
        .collect();
    assert!(engine.recommend(&[], &gpus).unwrap().placements.is_empty());
    let one = [Job::profiled("only", profile(50.0, 1_000))];
    assert_eq!(engine.recommend(&one, &gpus).unwrap().placements.len(), 1);
    let many: Vec<Job> = (0..10_000)
        .map(|i| {
            Job::profiled(
                format!("j{i}"),
                profile((i % 97) as f32, 500 + (i % 13) as u32 * 700),
            )
        })
        .collect();
    let answer = engine.recommend(&many, &gpus).unwrap();
    let placed: usize = answer.placements.iter().map(|p| p.jobs.len()).sum();
    assert_eq!(placed + answer.unplaced.len(), many.len());
    assert!(placed <= 200);
}

/// Two compute-heavy and two light jobs, and two idle GPUs: pairing heavy with light saves
/// the most time and keeps slowdowns low; heavy with heavy would time-slice.
fn heavy_and_light() -> ([Job; 4], [Gpu; 2]) {
    let queue = [
        Job::profiled("heavy-1", profile(95.0, 2_000)),
        Job::profiled("heavy-2", profile(90.0, 2_000)),
        Job::profiled("light-1", profile(10.0, 2_000)),
        Job::profiled("light-2", profile(8.0, 2_000)),
    ];
    (
        queue,
        [gpu("g0", 16_384, vec![]), gpu("g1", 16_384, vec![])],
    )
}

/// Every GPU of `answer` holds one job of `heavy_and_light`'s heavy ones (and so one light).
fn assert_each_heavy_beside_a_light(answer: &tandem_api::Recommendation) {
    for placement in &answer.placements {
        let heavy = placement
            .jobs
            .iter()
            .filter(|j| j.starts_with("heavy"))
            .count();
        assert_eq!(heavy, 1, "{answer:?}");
    }
}

#[test]
fn matching_pairs_complementary_jobs() {
    let (queue, gpus) = heavy_and_light();
    let answer = Recommender::new(Policy::default(), 0)
        .unwrap()
        .recommend(&queue, &gpus)
        .unwrap();
    assert_eq!(answer.placements.len(), 2, "{answer:?}");
    assert_each_heavy_beside_a_light(&answer);
}

#[test]
fn an_unknown_resident_closes_its_gpu() {
    let engine = Recommender::new(Policy::default(), 0).unwrap();
    let gpus = [gpu("g0", 16_384, vec![Job::new("mystery")])];
    let answer = engine
        .recommend(&[Job::profiled("a", profile(10.0, 10))], &gpus)
        .unwrap();
    assert!(answer.placements.is_empty());
    assert!(
        answer.unplaced[0].reason.contains("unknown memory"),
        "{answer:?}"
    );
    let fits = engine
        .filter(&Job::profiled("a", profile(10.0, 10)), &gpus)
        .unwrap();
    assert!(
        !fits[0].fits && fits[0].reason.contains("mystery"),
        "{fits:?}"
    );
}

fn outcome(a: &str, b: &str, model: &str) -> tandem_api::Outcome {
    tandem_api::Outcome {
        gpu_model: model.into(),
        jobs: vec![a.into(), b.into()],
        solo_s: vec![100.0, 100.0],
        colocated_s: vec![120.0, 130.0],
    }
}

#[test]
fn jobs_of_unknown_memory_share_only_with_an_observed_co_runner_on_that_model() {
    let mut engine = Recommender::bootstrap(Policy::default(), 0).unwrap();
    let queue = [Job::new("a"), Job::new("b")];
    let one_gpu = [gpu("g0", 16_384, vec![])];
    // Never seen together: one runs alone, the other waits.
    let answer = engine.recommend(&queue, &one_gpu).unwrap();
    assert_eq!(answer.placements.len(), 1);
    assert_eq!(answer.placements[0].jobs.len(), 1);
    assert_eq!(answer.placements[0].predicted.peak_mem_mib, 16_384);
    assert!(
        answer.unplaced[0].reason.contains("unknown memory"),
        "{answer:?}"
    );
    // Seen sharing a K80 says nothing about a V100.
    engine.observe_outcome(&outcome("a", "b", "K80")).unwrap();
    let answer = engine.recommend(&queue, &one_gpu).unwrap();
    assert_eq!(answer.unplaced.len(), 1, "{answer:?}");
    // Seen sharing a V100: they may share one again, with the learned prediction.
    engine.observe_outcome(&outcome("a", "b", "V100")).unwrap();
    let answer = engine.recommend(&queue, &one_gpu).unwrap();
    assert!(answer.unplaced.is_empty(), "{answer:?}");
    assert_eq!(answer.placements[0].jobs.len(), 2);
    let slowdowns = &answer.placements[0].predicted.slowdown_pct;
    assert!(
        slowdowns.iter().all(|s| (15.0..35.0).contains(s)),
        "{slowdowns:?}"
    );
    // A third job of unknown memory never joins them, whatever the cap.
    engine
        .set_policy(Policy {
            max_jobs_per_gpu: 4,
            ..Policy::default()
        })
        .unwrap();
    let busy = [gpu("g0", 16_384, vec![Job::new("a")])];
    let fits = engine.filter(&Job::new("b"), &busy).unwrap();
    assert!(fits[0].fits, "{fits:?}");
    let fits = engine.filter(&Job::new("c"), &busy).unwrap();
    assert!(!fits[0].fits && fits[0].reason.contains("`a`"), "{fits:?}");
    let profiled = engine
        .filter(&Job::profiled("d", profile(10.0, 10)), &busy)
        .unwrap();
    assert!(!profiled[0].fits, "{profiled:?}");
}

#[test]
fn instances_of_one_workload_share_what_it_learned() {
    let mut engine = Recommender::bootstrap(Policy::default(), 0).unwrap();
    let one_gpu = [gpu("g0", 16_384, vec![])];
    let queue = [Job::new("w~1"), Job::new("w~2"), Job::new("v~1")];
    // Nothing learned yet: two instances are strangers of unknown memory.
    let answer = engine.recommend(&queue[..2], &one_gpu).unwrap();
    assert_eq!(answer.unplaced.len(), 1, "{answer:?}");
    // Two instances of `w` were seen sharing a V100 (outcomes name any instances).
    engine
        .observe_outcome(&outcome("w~7", "w~8", "V100"))
        .unwrap();
    let answer = engine.recommend(&queue[..2], &one_gpu).unwrap();
    assert!(answer.unplaced.is_empty(), "{answer:?}");
    // But not beside `v`, which no outcome named.
    let busy = [gpu("g0", 16_384, vec![Job::new("w~1")])];
    assert!(engine.filter(&Job::new("w~3"), &busy).unwrap()[0].fits);
    assert!(!engine.filter(&queue[2], &busy).unwrap()[0].fits);
    // A profile observed for one instance serves every instance.
    engine.observe_profile("v~1", profile(10.0, 1_000)).unwrap();
    assert_eq!(
        engine
            .predict(&[Job::new("v~9")], &one_gpu[0].spec)
            .unwrap()
            .peak_mem_mib,
        1_000
    );
}

#[test]
fn objectives_choose_differently() {
    // g0 already runs a light job; g1 is idle and larger.
    let resident = Job::profiled("r", profile(20.0, 2_000));
    let gpus = [gpu("g0", 16_384, vec![resident]), gpu("g1", 32_768, vec![])];
    let newcomer = [Job::profiled("a", profile(30.0, 4_000))];
    let choice = |objective| {
        let policy = Policy {
            objective,
            ..Policy::default()
        };
        Recommender::new(policy, 0)
            .unwrap()
            .recommend(&newcomer, &gpus)
            .unwrap()
            .placements[0]
            .gpu
            .clone()
    };
    // Packing fills g0 beside the light job.
    assert_eq!(choice(Objective::MaxPacking), "g0");
    // Only an idle GPU means no slowdown at all.
    assert_eq!(choice(Objective::MinSlowdown), "g1");
    // With an idle GPU for every queued job, sharing would only slow someone down.
    assert_eq!(choice(Objective::Balanced), "g1");
    // Under contention (two jobs, one idle GPU) balanced shares, since sharing light
    // jobs saves time: both start now, on a shared GPU.
    let two = [
        Job::profiled("a", profile(30.0, 4_000)),
        Job::profiled("b", profile(25.0, 3_000)),
    ];
    let answer = Recommender::new(Policy::default(), 0)
        .unwrap()
        .recommend(&two, &gpus)
        .unwrap();
    assert!(answer.unplaced.is_empty(), "{answer:?}");
    assert!(
        answer
            .placements
            .iter()
            .any(|p| p.jobs.len() + p.residents.len() == 2),
        "{answer:?}"
    );
}

/// What a fresh recommender under `max-packing` answers for `queue` on `gpus`.
fn under_max_packing(queue: &[Job], gpus: &[Gpu]) -> tandem_api::Recommendation {
    let packing = Policy {
        objective: Objective::MaxPacking,
        ..Policy::default()
    };
    Recommender::new(packing, 0)
        .unwrap()
        .recommend(queue, gpus)
        .unwrap()
}

#[test]
fn max_packing_joins_the_partner_that_saves_the_most_time_not_the_tightest_fit() {
    // Both GPUs are busy. g0 runs a job that saturates it, and the newcomer would fill its
    // memory the most tightly; g1 runs a light job and would keep memory to spare.
    let hog = Job::profiled("hog", profile(100.0, 8_000));
    let light = Job::profiled("light", profile(15.0, 2_000));
    let gpus = [gpu("g0", 16_384, vec![hog]), gpu("g1", 32_768, vec![light])];
    let newcomer = [Job::profiled("a", profile(20.0, 4_000))];
    let answer = under_max_packing(&newcomer, &gpus);
    assert_eq!(answer.placements[0].gpu, "g1", "{answer:?}");
}

#[test]
fn max_packing_matches_the_queue_into_the_pairs_that_save_the_most() {
    let (queue, gpus) = heavy_and_light();
    let answer = under_max_packing(&queue, &gpus);
    assert!(answer.unplaced.is_empty(), "{answer:?}");
    assert_each_heavy_beside_a_light(&answer);
}

#[test]
fn balanced_leaves_a_job_queued_rather_than_wreck_its_co_runner() {
    // The only GPU with room runs a job that saturates it; sharing would slow both by
    // far more than it saves.
    let hog = Job::profiled("hog", profile(100.0, 2_000));
    let gpus = [gpu("g0", 16_384, vec![hog])];
    let newcomer = [Job::profiled("a", profile(95.0, 2_000))];
    let answer = Recommender::new(Policy::default(), 0)
        .unwrap()
        .recommend(&newcomer, &gpus)
        .unwrap();
    assert!(answer.placements.is_empty(), "{answer:?}");
    assert!(
        answer.unplaced[0].reason.contains("better slot"),
        "{answer:?}"
    );
    // max-packing, the provider's view, shares anyway.
    let answer = under_max_packing(&newcomer, &gpus);
    assert_eq!(answer.placements.len(), 1);
}

#[test]
fn scores_are_zero_exactly_where_the_job_does_not_fit() {
    let engine = Recommender::new(Policy::default(), 0).unwrap();
    let gpus = [gpu("small", 1_000, vec![]), gpu("big", 16_384, vec![])];
    let job = Job::profiled("a", profile(50.0, 4_000));
    let scores = engine.score(&job, &gpus).unwrap();
    assert_eq!(scores[0].score, 0);
    assert!(scores[1].score > 0);
}

/// A small declared model: a few linear layers, little work per batch.
fn light_model() -> ModelSummary {
    ModelSummary {
        params_mib: 0.02,
        activations_mib: 0.04,
        input_mib: 0.001,
        batch_size: 32,
        gflops: 0.0004,
        linear_layers: 3,
        activation_layers: 2,
        ..ModelSummary::default()
    }
}

/// A ResNet-sized declared model at a large batch: it keeps a GPU busy alone.
fn heavy_model() -> ModelSummary {
    ModelSummary {
        params_mib: 90.0,
        activations_mib: 6_000.0,
        input_mib: 600.0,
        batch_size: 1024,
        gflops: 7900.0,
        conv_layers: 53,
        linear_layers: 1,
        activation_layers: 49,
        other_layers: 21,
    }
}

fn declared(id: &str, summary: ModelSummary) -> Job {
    Job {
        declared: Some(summary),
        ..Job::new(id)
    }
}

#[test]
fn declared_jobs_share_before_they_are_profiled_where_their_prediction_allows() {
    // One idle GPU, two declared jobs never profiled nor seen together. Their declared models
    // predict light utilization and little memory: they share (Yeung et al.'s proactive
    // sharing), where a job known by its memory alone would have to wait.
    let gpus = [gpu("g0", 16_384, vec![])];
    let engine = Recommender::new(Policy::default(), 0).unwrap();
    let light = [declared("a", light_model()), declared("b", light_model())];
    let answer = engine.recommend(&light, &gpus).unwrap();
    assert_eq!(answer.placements.len(), 1, "{answer:?}");
    assert_eq!(answer.placements[0].jobs.len(), 2, "{answer:?}");
    // Two declared jobs predicted to saturate the GPU each are not put together.
    let heavy = [declared("c", heavy_model()), declared("d", heavy_model())];
    let answer = engine.recommend(&heavy, &gpus).unwrap();
    assert!(
        answer.placements.iter().all(|p| p.jobs.len() == 1),
        "{answer:?}"
    );
}

/// Two long and two short jobs alike in every other way, in an order that pairs long with
/// short if taken as it comes, with their work declared and speeds known.
fn long_and_short(objective: Objective) -> tandem_api::Recommendation {
    let mut engine = Recommender::new(
        Policy {
            objective,
            ..Policy::default()
        },
        0,
    )
    .unwrap();
    let queue: Vec<Job> = [
        ("long-1", 100.0),
        ("short-1", 1.0),
        ("long-2", 90.0),
        ("short-2", 1.5),
    ]
    .into_iter()
    .map(|(id, work)| {
        engine.observe_speed(id, "V100", 1.0).unwrap();
        Job {
            work: Some(work),
            ..Job::profiled(id, profile(40.0, 2_000))
        }
    })
    .collect();
    let gpus = [gpu("g0", 16_384, vec![]), gpu("g1", 16_384, vec![])];
    engine.recommend(&queue, &gpus).unwrap()
}

#[test]
fn partners_that_finish_together_are_paired_when_run_times_are_known() {
    // Beside a short job a long one shares for a moment and then runs alone: the time saved
    // is the short one's at most. Two long jobs together save a long run's worth.
    for objective in [Objective::Balanced, Objective::MaxPacking] {
        let answer = long_and_short(objective);
        assert_eq!(answer.placements.len(), 2, "{objective:?}: {answer:?}");
        for placement in &answer.placements {
            let long = placement
                .jobs
                .iter()
                .filter(|j| j.starts_with("long"))
                .count();
            assert!(long != 1, "{objective:?} mixed lengths: {answer:?}");
        }
    }
}

#[test]
fn max_packing_prefers_a_measured_pair_to_a_guess_predicted_a_little_better() {
    // `p` and `q` declare a light model and were measured together many times: each slows
    // down by a quarter. `x` declares the same model and was never seen beside anyone, so
    // its pair with `p` is a guess from predicted features, predicted to save a little more
    // than the measured pair and far less surely.
    let mut engine = Recommender::new(
        Policy {
            objective: Objective::MaxPacking,
            ..Policy::default()
        },
        0,
    )
    .unwrap();
    for _ in 0..8 {
        engine
            .observe_outcome(&tandem_api::Outcome {
                gpu_model: "V100".into(),
                jobs: vec!["p~1".into(), "q~1".into()],
                solo_s: vec![100.0, 100.0],
                colocated_s: vec![125.0, 125.0],
            })
            .unwrap();
    }
    let queue = [
        declared("p~2", light_model()),
        declared("q~2", light_model()),
        declared("x~1", light_model()),
    ];
    let spec = GpuSpec::new("V100", 16_384);
    let predict = |a: usize, b: usize| {
        engine
            .predict(&[queue[a].clone(), queue[b].clone()], &spec)
            .unwrap()
    };
    let (measured, guessed) = (predict(0, 1), predict(0, 2));
    assert!(
        guessed.packing_saving_pct > measured.packing_saving_pct
            && guessed.uncertainty > 1.5 * measured.uncertainty,
        "{guessed:?} vs {measured:?}"
    );
    // One idle GPU: the pair expected to save the most, its uncertainty counted, is the
    // measured one.
    let answer = engine
        .recommend(&queue, &[gpu("g0", 16_384, vec![])])
        .unwrap();
    let mut pair = answer.placements[0].jobs.clone();
    pair.sort();
    assert_eq!(pair, ["p~2", "q~2"], "{answer:?}");
}

#[test]
fn cold_max_packing_takes_the_pair_its_predictions_say_saves_most() {
    // No outcome observed yet: every pair's belief is the analytic prior, equally unsure, and
    // the pair predicted to save the most is the one formed.
    let job = |id: &str, util: f32, access: f32| {
        Job::profiled(
            id,
            Profile {
                gpu_util_pct: util,
                mem_access_pct: access,
                mem_used_mib: 2_000,
                gpu_model: "V100".into(),
            },
        )
    };
    let queue = [job("a", 3.0, 1.0), job("b", 3.0, 15.0), job("c", 80.0, 1.0)];
    let engine = Recommender::new(
        Policy {
            objective: Objective::MaxPacking,
            ..Policy::default()
        },
        0,
    )
    .unwrap();
    let spec = GpuSpec::new("V100", 16_384);
    let saving = |x: usize, y: usize| {
        engine
            .predict(&[queue[x].clone(), queue[y].clone()], &spec)
            .unwrap()
            .packing_saving_pct
    };
    assert!(
        saving(0, 2) > saving(0, 1) && saving(0, 2) > saving(1, 2),
        "{} {} {}",
        saving(0, 1),
        saving(0, 2),
        saving(1, 2)
    );
    let answer = under_max_packing(&queue, &[gpu("g0", 16_384, vec![])]);
    let mut pair = answer.placements[0].jobs.clone();
    pair.sort();
    assert_eq!(pair, ["a", "c"], "{answer:?}");
}
