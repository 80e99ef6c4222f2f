//! `forget_stalest`: the jobs observed least recently go first, with their profiles, speeds
//! and the measurements of each pair they were in; a state saved before jobs were numbered
//! loads, its jobs the stalest.

use serde_json::Value;
use tandem_api::{Outcome, Policy, Profile};
use tandem_engine::Recommender;

fn profile(mem_used_mib: u32) -> Profile {
    Profile {
        gpu_util_pct: 40.0,
        mem_access_pct: 20.0,
        mem_used_mib,
        gpu_model: "V100".into(),
    }
}

fn outcome(a: &str, b: &str) -> Outcome {
    Outcome {
        gpu_model: "V100".into(),
        jobs: vec![a.into(), b.into()],
        solo_s: vec![100.0, 100.0],
        colocated_s: vec![130.0, 120.0],
    }
}

/// The saved knowledge base, as JSON.
fn knowledge(engine: &Recommender) -> Value {
    let state: Value = serde_json::from_slice(&engine.save()).unwrap();
    state["knowledge"].clone()
}

#[test]
fn a_forgotten_job_takes_its_profile_speeds_and_pairs_with_it() {
    let mut engine = Recommender::bootstrap(Policy::default(), 1).unwrap();
    engine.observe_profile("a", profile(4_000)).unwrap();
    engine.observe_speed("a", "V100", 3.0).unwrap();
    engine.observe_outcome(&outcome("a", "b")).unwrap();
    engine.observe_outcome(&outcome("b", "c")).unwrap();
    engine.observe_outcome(&outcome("c", "d")).unwrap();
    // Observations 1 to 5: a was last named by the third, b by the fourth, c and d by the last.
    assert_eq!(engine.forget_stalest(1), ["a"]);
    let kb = knowledge(&engine);
    assert_eq!(engine.describe().profiles, 0);
    assert_eq!(engine.describe().speed_workloads, 0);
    assert_eq!(engine.describe().outcomes, 3, "counts across jobs stay");
    assert_eq!(kb["workloads"]["ids"], serde_json::json!(["b", "c", "d"]));
    // b-c and c-d, both orders; a-b is gone with a.
    assert_eq!(kb["workloads"]["cells"].as_array().unwrap().len(), 4);
    assert_eq!(kb["last_observed"], serde_json::json!([4, 5, 5]));
    // What is left still saves and loads to the same bytes.
    let saved = engine.save();
    assert_eq!(Recommender::load(&saved).unwrap().save(), saved);
    assert_eq!(engine.forget_stalest(0), Vec::<String>::new());
    assert_eq!(engine.forget_stalest(9), ["b", "c", "d"]);
    assert_eq!(
        knowledge(&engine)["workloads"]["ids"],
        serde_json::json!([])
    );
}

#[test]
fn jobs_of_a_state_saved_before_they_were_numbered_are_the_stalest() {
    let mut engine = Recommender::bootstrap(Policy::default(), 1).unwrap();
    for job in ["c", "a", "b"] {
        engine.observe_profile(job, profile(1_000)).unwrap();
    }
    // The same state as an engine that did not number its observations saved it.
    let mut state: Value = serde_json::from_slice(&engine.save()).unwrap();
    let kb = state["knowledge"].as_object_mut().unwrap();
    kb.remove("observations");
    kb.remove("last_observed");
    let mut older = Recommender::load(&serde_json::to_vec(&state).unwrap()).unwrap();
    older.observe_profile("a", profile(2_000)).unwrap();
    older.observe_profile("z", profile(2_000)).unwrap();
    // b and c were never observed since: id order; then a, then z.
    assert_eq!(older.forget_stalest(3), ["b", "c", "a"]);
    assert_eq!(older.describe().profiles, 1);
}
