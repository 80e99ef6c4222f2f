//! A guest that loops, hoards memory or panics never takes the host down, and loses nothing
//! that was acknowledged.

use std::time::Instant;

use tandem_api::{Gpu, GpuSpec, Job, Policy, Profile};
use tandem_host::{Error, HostConfig, Runtime};
use tandem_tests::components;

fn profile(mem: u32) -> Profile {
    Profile {
        gpu_util_pct: 40.0,
        mem_access_pct: 20.0,
        mem_used_mib: mem,
        gpu_model: "V100".into(),
    }
}

/// The ids the misbehaving guest reports as known (its whole state).
fn known_ids(recommender: &mut tandem_host::Recommender) -> Vec<String> {
    recommender
        .recommend(&[Job::new("ordinary")], &[])
        .expect("an ordinary call is served")
        .unplaced
        .into_iter()
        .map(|u| u.job)
        .collect()
}

#[test]
fn an_endless_loop_is_interrupted_at_the_deadline_and_the_next_call_is_served() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    let started = Instant::now();
    let err = recommender.recommend(&[Job::new("loop")], &[]).unwrap_err();
    let elapsed = started.elapsed();
    println!(
        "loop interrupted after {elapsed:?} (deadline {:?})",
        runtime.config().call_deadline
    );
    assert!(
        matches!(
            err,
            Error::DeadlineExceeded {
                call: "recommend",
                ..
            }
        ),
        "{err}"
    );
    // It cannot have been interrupted before its deadline passed.
    assert!(elapsed >= runtime.config().call_deadline, "{elapsed:?}");
    assert!(known_ids(&mut recommender).is_empty());
    assert_eq!(recommender.rebuilds(), 1);
}

#[test]
fn the_cluster_view_survives_a_rebuild() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    let (_, changes) = tandem_tests::busy_cluster(40, 4, 1);
    recommender.update_cluster(&changes).unwrap();
    let err = recommender.score_all(&Job::new("loop")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DeadlineExceeded {
                call: "score-all",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(recommender.rebuilds(), 1);
    // The rebuilt instance was told the view again: it scores all 40 GPUs.
    assert_eq!(
        recommender.score_all(&Job::new("ordinary")).unwrap().len(),
        40
    );
    assert_eq!(recommender.cluster().len(), 40);
}

#[test]
fn unbounded_allocation_stops_at_the_memory_cap() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    let err = recommender
        .recommend(&[Job::new("alloc")], &[])
        .unwrap_err();
    assert!(
        matches!(err, Error::MemoryLimit { call: "recommend", cap_bytes } if cap_bytes == 64 << 20),
        "{err}"
    );
    assert!(known_ids(&mut recommender).is_empty());
}

#[test]
fn a_panic_becomes_a_typed_error_with_its_message() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    let err = recommender
        .recommend(&[Job::new("panic")], &[])
        .unwrap_err();
    match &err {
        Error::Panicked { call, message } => {
            assert_eq!(*call, "recommend");
            assert!(message.contains("deliberate panic"), "{message}");
        }
        other => panic!("expected a panic error, got {other}"),
    }
    assert!(err.is_guest_fault());
    assert!(known_ids(&mut recommender).is_empty());
}

#[test]
fn state_saved_instance_trapped_state_restored() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    recommender.observe_profile("a", &profile(100)).unwrap();
    recommender.observe_profile("b", &profile(100)).unwrap();
    let saved = recommender.snapshot().unwrap().to_vec();

    for trigger in ["panic", "loop", "alloc"] {
        assert!(
            recommender
                .recommend(&[Job::new(trigger)], &[])
                .unwrap_err()
                .is_guest_fault()
        );
        assert_eq!(known_ids(&mut recommender), ["a", "b"], "after {trigger}");
        assert_eq!(recommender.snapshot().unwrap(), saved);
    }
    assert_eq!(recommender.rebuilds(), 3);
}

#[test]
fn observations_not_yet_saved_survive_a_trap_and_reach_the_next_snapshot() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    // More than one journal's worth, so one fold happened and a partial journal remains.
    let ids: Vec<String> = (0..tandem_host::JOURNAL_LIMIT + 3)
        .map(|i| format!("job-{i:03}"))
        .collect();
    for id in &ids {
        recommender.observe_profile(id, &profile(100)).unwrap();
    }
    assert!(
        recommender
            .recommend(&[Job::new("panic")], &[])
            .unwrap_err()
            .is_guest_fault()
    );
    assert_eq!(recommender.rebuilds(), 1);
    assert_eq!(known_ids(&mut recommender), ids, "after the rebuild");

    let saved = recommender.snapshot().unwrap().to_vec();
    let mut resumed = runtime.load(&saved).unwrap();
    assert_eq!(known_ids(&mut resumed), ids, "loaded from the snapshot");
}

#[test]
fn the_real_engine_resumes_from_its_snapshot_after_a_deadline() {
    // A deadline of 50 ms: far more than a small call needs, far less than 3,000 jobs over
    // 3,000 GPUs take.
    let engine = Runtime::from_file(
        components::ENGINE.as_ref(),
        HostConfig {
            call_deadline: std::time::Duration::from_millis(50),
            ..HostConfig::default()
        },
    )
    .unwrap();
    let mut recommender = engine.create(&Policy::default(), 7).unwrap();
    // The resident's profile is known only through this observation.
    recommender
        .observe_profile("resident", &profile(15_000))
        .unwrap();
    let gpus = [Gpu {
        id: "node-a/0".into(),
        node: "node-a".into(),
        spec: GpuSpec::new("V100", 16_384),
        residents: vec![Job::new("resident")],
    }];
    let queue = [Job::profiled("newcomer", profile(2_000))];
    let before = recommender.recommend(&queue, &gpus).unwrap();
    assert_eq!(before.unplaced.len(), 1, "{before:?}");
    assert!(
        before.unplaced[0].reason.contains("needs 2000 MiB"),
        "{before:?}"
    );

    let huge = recommender.recommend(
        &tandem_tests::queue(3_000, 1),
        &tandem_tests::cluster(3_000),
    );
    assert!(
        matches!(huge, Err(Error::DeadlineExceeded { .. })),
        "{huge:?}"
    );

    let after = recommender.recommend(&queue, &gpus).unwrap();
    assert_eq!(after, before, "the observed profile survived the rebuild");
    assert_eq!(recommender.rebuilds(), 1);
}

#[test]
fn a_free_function_runs_under_the_deadline_and_the_next_call_is_served() {
    let engine = Runtime::from_file(
        components::ENGINE.as_ref(),
        HostConfig {
            call_deadline: std::time::Duration::from_millis(50),
            ..HostConfig::default()
        },
    )
    .unwrap();
    let series = |samples: Vec<tandem_api::Sample>| tandem_api::Series {
        workload: "w1".into(),
        samples,
    };
    let sample = |batch_size, value| tandem_api::Sample {
        batch_size,
        values: vec![value],
    };
    let truth = [series(vec![sample(2.0, 10.0), sample(1024.0, 90.0)])];
    // Four billion candidate points in one gap: far past 50 ms.
    let err = engine.synthesize(&truth, u32::MAX, &[None]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DeadlineExceeded {
                call: "synthesize",
                ..
            }
        ),
        "{err}"
    );
    // Each call has its own instance: nothing to rebuild, the next one is served.
    let answer = engine.synthesize(&truth, 1, &[None]).unwrap();
    assert_eq!(answer.generated[0].samples.len(), 1);
}

#[test]
fn the_test_guest_refuses_to_synthesize_with_an_engine_error() {
    let runtime = super::misbehaving_runtime();
    let err = runtime.synthesize(&[], 3, &[]).unwrap_err();
    assert!(!err.is_guest_fault());
    assert!(
        matches!(
            &err,
            Error::Engine(tandem_api::EngineError::InvalidInput(m)) if m.contains("synthesizes nothing")
        ),
        "{err}"
    );
}

#[test]
fn endless_recursion_stops_at_the_stack_limit_and_the_next_call_is_served() {
    // A small limit, so the native stack runs out before the guest's own shadow stack in
    // linear memory (which would trap as an out-of-bounds access instead).
    let limit = 64 << 10;
    let runtime = Runtime::from_file(
        components::MISBEHAVING.as_ref(),
        HostConfig {
            max_wasm_stack_bytes: limit,
            ..HostConfig::default()
        },
    )
    .unwrap();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    recommender.observe_profile("a", &profile(100)).unwrap();
    let err = recommender
        .recommend(&[Job::new("recurse")], &[])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::StackOverflow {
                call: "recommend",
                limit_bytes,
            } if limit_bytes == limit
        ),
        "{err}"
    );
    assert!(err.is_guest_fault());
    assert_eq!(known_ids(&mut recommender), ["a"]);
    assert_eq!(recommender.rebuilds(), 1);
}

#[test]
fn a_save_that_traps_fails_alone_and_loses_nothing() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    recommender.observe_profile("a", &profile(100)).unwrap();
    let mut spoiler = profile(100);
    spoiler.gpu_model = "unsaveable".into();
    recommender.observe_profile("u", &spoiler).unwrap();
    let err = recommender.snapshot().unwrap_err();
    assert!(matches!(err, Error::Panicked { call: "save", .. }), "{err}");
    // Rebuilt from the last snapshot and the journal: everything acknowledged is there.
    assert_eq!(known_ids(&mut recommender), ["a", "unsaveable:u"]);
    // Changes go on being acknowledged while every fold fails (the journal keeps them).
    let more: Vec<String> = (0..tandem_host::JOURNAL_LIMIT + 3)
        .map(|i| format!("job-{i:03}"))
        .collect();
    for id in &more {
        recommender.observe_profile(id, &profile(100)).unwrap();
    }
    let mut expected = vec!["a".to_owned(), "unsaveable:u".to_owned()];
    expected.extend(more);
    assert_eq!(known_ids(&mut recommender), expected);
    assert!(
        recommender
            .recommend(&[Job::new("panic")], &[])
            .unwrap_err()
            .is_guest_fault()
    );
    assert_eq!(known_ids(&mut recommender), expected, "after a rebuild");
}

#[test]
fn a_snapshot_that_cannot_be_loaded_falls_back_to_the_one_before() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    recommender.observe_profile("a", &profile(100)).unwrap();
    let mut spoiler = profile(100);
    spoiler.gpu_model = "unloadable".into();
    recommender.observe_profile("x", &spoiler).unwrap();
    let unloadable = recommender.snapshot().unwrap().to_vec();
    assert!(matches!(
        runtime.load(&unloadable).unwrap_err(),
        Error::Engine(tandem_api::EngineError::InvalidInput(_))
    ));
    recommender.observe_profile("b", &profile(100)).unwrap();

    let err = recommender
        .recommend(&[Job::new("panic")], &[])
        .unwrap_err();
    assert!(matches!(err, Error::Panicked { .. }), "{err}");
    assert_eq!(recommender.rebuilds(), 1);
    assert_eq!(known_ids(&mut recommender), ["a", "unloadable:x", "b"]);
}

#[test]
fn with_no_snapshot_that_loads_every_call_fails_with_a_typed_error() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    let mut spoiler = profile(100);
    spoiler.gpu_model = "unloadable".into();
    recommender.observe_profile("x", &spoiler).unwrap();
    recommender.snapshot().unwrap();
    recommender.observe_profile("y", &profile(100)).unwrap();
    recommender.snapshot().unwrap();
    // Both the last snapshot and the one before hold `x`.
    for _ in 0..2 {
        let err = recommender
            .recommend(&[Job::new("panic")], &[])
            .unwrap_err();
        assert!(
            matches!(err, Error::Restore { .. }) && err.is_guest_fault(),
            "{err}"
        );
    }
    assert_eq!(recommender.rebuilds(), 0);
}
