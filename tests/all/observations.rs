//! What the engine accepts, through the real component: an observation no real job can
//! produce is refused, naming its field, and whatever was accepted, the knowledge base saves
//! and loads back.

use tandem_api::{EngineError, GpuSpec, ModelSummary, Outcome, Policy, Profile};
use tandem_host::{Error, Recommender};

fn profile(util: f32, mem_used_mib: u32) -> Profile {
    Profile {
        gpu_util_pct: util,
        mem_access_pct: 20.0,
        mem_used_mib,
        gpu_model: "V100".into(),
    }
}

/// A bootstrapped engine that knows the profiles of `a` and `b`.
fn engine_with_two_jobs() -> (tandem_host::Runtime, Recommender) {
    let runtime = super::engine_runtime();
    let mut engine = runtime.bootstrap(&Policy::default(), 5).unwrap();
    engine.observe_profile("a", &profile(60.0, 4_000)).unwrap();
    engine.observe_profile("b", &profile(40.0, 6_000)).unwrap();
    (runtime, engine)
}

/// The message of an `invalid-input` refusal, or a panic saying what came back instead.
fn refusal<T: std::fmt::Debug>(answer: Result<T, Error>, what: &str) -> String {
    match answer {
        Err(Error::Engine(EngineError::InvalidInput(message))) => message,
        other => panic!("{what} was not refused as invalid input: {other:?}"),
    }
}

#[test]
fn an_outcome_no_real_job_can_show_is_refused_and_the_knowledge_base_still_loads() {
    let (runtime, mut engine) = engine_with_two_jobs();
    // 1e-300 s alone, 1e300 s beside a partner: the slowdown overflows to infinity.
    let poison = Outcome {
        gpu_model: "V100".into(),
        jobs: vec!["a".into(), "b".into()],
        solo_s: vec![1e-300, 1e-300],
        colocated_s: vec![1e300, 1e300],
    };
    let observed = engine.observe_outcome(&poison);
    let state = engine.snapshot().unwrap().to_vec();
    let reloaded = runtime.load(&state);
    assert!(
        matches!(&observed, Err(Error::Engine(EngineError::InvalidInput(m))) if m.contains("outcome.solo-s[0]")),
        "the poison outcome was acknowledged ({observed:?}); loading the knowledge base saved \
         after it: {:?}",
        reloaded.as_ref().err().map(ToString::to_string)
    );
    let message = refusal(observed, "the poison outcome");
    println!("the engine answered: invalid input: {message}");
    let mut reloaded = reloaded.expect("the knowledge base saved after the refusal loads");
    assert_eq!(reloaded.describe().unwrap().outcomes, 0);
    // A real outcome is still learned, and the knowledge base still loads after it.
    let real = Outcome {
        solo_s: vec![100.0, 80.0],
        colocated_s: vec![140.0, 95.0],
        ..poison
    };
    reloaded.observe_outcome(&real).unwrap();
    let state = reloaded.snapshot().unwrap().to_vec();
    let mut again = runtime.load(&state).unwrap();
    assert_eq!(again.describe().unwrap().outcomes, 1);
}

#[test]
fn each_time_and_ratio_out_of_bounds_is_refused_naming_its_item() {
    let (_, mut engine) = engine_with_two_jobs();
    let outcome = |solo_s: [f64; 2], colocated_s: [f64; 2]| Outcome {
        gpu_model: "V100".into(),
        jobs: vec!["a".into(), "b".into()],
        solo_s: solo_s.to_vec(),
        colocated_s: colocated_s.to_vec(),
    };
    for (bad, field) in [
        // A run shorter than a millisecond.
        (outcome([100.0, 1e-6], [120.0, 1e-6]), "outcome.solo-s[1]"),
        // A run longer than a year.
        (
            outcome([100.0, 80.0], [120.0, 1e12]),
            "outcome.colocated-s[1]",
        ),
        // Beside a partner 100 times faster than alone.
        (
            outcome([100.0, 80.0], [1.0, 95.0]),
            "outcome.colocated-s[0]",
        ),
        // Beside a partner a million times slower than alone.
        (
            outcome([100.0, 1.0], [120.0, 1e6]),
            "outcome.colocated-s[1]",
        ),
    ] {
        let message = refusal(engine.observe_outcome(&bad), field);
        assert!(message.contains(field), "{field}: {message}");
        println!("the engine answered: invalid input: {message}");
    }
    assert_eq!(engine.describe().unwrap().outcomes, 0);
}

#[test]
fn a_profile_using_more_memory_than_its_gpu_has_is_refused() {
    let (_, mut engine) = engine_with_two_jobs();
    // A V100 has 16 GiB; 64 GiB is no measurement of a job on one.
    let answer = engine.observe_profile("c", &profile(50.0, 65_536));
    let message = refusal(answer, "a 64 GiB profile on a V100");
    assert!(message.contains("profile.mem-used-mib"), "{message}");
    println!("the engine answered: invalid input: {message}");
    assert_eq!(engine.describe().unwrap().profiles, 2);
}

#[test]
fn a_memory_peak_above_the_gpu_and_a_speed_out_of_bounds_are_refused() {
    let (runtime, mut engine) = engine_with_two_jobs();
    let declared = ModelSummary {
        params_mib: 100.0,
        activations_mib: 900.0,
        input_mib: 10.0,
        batch_size: 32,
        ..ModelSummary::default()
    };
    let v100 = GpuSpec::new("V100", 16_384);
    let answer = engine.observe_memory("c", &declared, &v100, 4_000_000_000);
    let message = refusal(answer, "a 4 PB peak on a 16 GiB GPU");
    assert!(message.contains("peak-mem-mib"), "{message}");
    println!("the engine answered: invalid input: {message}");
    let answer = engine.observe_speed("c", "V100", 1e300);
    let message = refusal(answer, "a speed of 1e300 work per second");
    assert!(message.contains("work-per-s"), "{message}");
    println!("the engine answered: invalid input: {message}");
    // Nothing was learned, and what was still loads.
    assert_eq!(engine.describe().unwrap().speed_workloads, 0);
    let state = engine.snapshot().unwrap().to_vec();
    runtime.load(&state).unwrap();
}
