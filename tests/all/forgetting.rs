//! A host forgets the jobs its engine observed least recently, through the real component:
//! what it forgets is the state's to decide, the same after a save and a load, and replayed
//! after a rebuild.

use tandem_api::{Job, Outcome, Policy, Profile};
use tandem_host::Recommender;

fn profile(mem_used_mib: u32) -> Profile {
    Profile {
        gpu_util_pct: 40.0,
        mem_access_pct: 20.0,
        mem_used_mib,
        gpu_model: "V100".into(),
    }
}

/// The ids the misbehaving guest remembers (it answers them as unplaced jobs).
fn known_ids(recommender: &mut Recommender) -> Vec<String> {
    recommender
        .recommend(&[Job::new("ordinary")], &[])
        .expect("an ordinary call is served")
        .unplaced
        .into_iter()
        .map(|u| u.job)
        .collect()
}

#[test]
fn the_engine_forgets_the_jobs_observed_least_recently_with_what_is_only_about_them() {
    let runtime = super::engine_runtime();
    let mut engine = runtime.bootstrap(&Policy::default(), 3).unwrap();
    for (job, mem) in [("a", 4_000), ("b", 5_000), ("c", 6_000), ("d", 3_000)] {
        engine.observe_profile(job, &profile(mem)).unwrap();
    }
    // `a` and `b` (instances of their workloads) are observed again, `c` once more by a speed:
    // `d` is now the stalest, then `a` and `b` (ties to the smaller id), then `c`.
    engine
        .observe_outcome(&Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["a~1".into(), "b~7".into()],
            solo_s: vec![100.0, 80.0],
            colocated_s: vec![130.0, 100.0],
        })
        .unwrap();
    engine.observe_speed("c", "V100", 2.5).unwrap();
    let before = engine.snapshot().unwrap().len();
    assert_eq!(engine.forget_stalest(2).unwrap(), ["d", "a"]);
    let summary = engine.describe().unwrap();
    assert_eq!((summary.profiles, summary.outcomes), (2, 1));
    let state = engine.snapshot().unwrap().to_vec();
    assert!(
        state.len() < before,
        "{} bytes, {before} before",
        state.len()
    );
    // The same answer from the loaded state: the order is the state's, not the instance's.
    let mut loaded = runtime.load(&state).unwrap();
    assert_eq!(loaded.forget_stalest(5).unwrap(), ["b", "c"]);
    assert_eq!(engine.forget_stalest(5).unwrap(), ["b", "c"]);
    assert_eq!(loaded.describe().unwrap().profiles, 0);
    assert_eq!(loaded.forget_stalest(1).unwrap(), Vec::<String>::new());
}

#[test]
fn a_rebuilt_instance_replays_what_was_forgotten() {
    let runtime = super::misbehaving_runtime();
    let mut recommender = runtime.create(&Policy::default(), 1).unwrap();
    for id in ["x", "y", "z"] {
        recommender.observe_profile(id, &profile(100)).unwrap();
    }
    assert_eq!(recommender.forget_stalest(1).unwrap(), ["x"]);
    assert!(
        recommender
            .recommend(&[Job::new("panic")], &[])
            .unwrap_err()
            .is_guest_fault()
    );
    assert_eq!(recommender.rebuilds(), 1);
    assert_eq!(known_ids(&mut recommender), ["y", "z"], "after the rebuild");
}
