//! The evidence layers, for profiled jobs as for jobs without telemetry: a pair
//! observed several times converges to its measured slowdown with shrinking uncertainty, and a
//! pair never observed keeps a wide one.

use proptest::prelude::*;
use tandem_api::{Job, Outcome, Profile};

use super::{GroupPrediction, Knowledge};

fn profile(util: f32, access: f32, mem: u32) -> Profile {
    Profile {
        gpu_util_pct: util,
        mem_access_pct: access,
        mem_used_mib: mem,
        gpu_model: "V100".into(),
    }
}

fn outcome(a: &str, b: &str, slowdown_a: f64, slowdown_b: f64) -> Outcome {
    Outcome {
        gpu_model: "V100".into(),
        jobs: vec![a.into(), b.into()],
        solo_s: vec![100.0, 100.0],
        colocated_s: vec![100.0 * (1.0 + slowdown_a), 100.0 * (1.0 + slowdown_b)],
    }
}

/// A knowledge base that has seen the profiles of four recurring workloads: `a` and `b`, which
/// will share, `c` and `d`, which never do, but look like them.
fn profiled() -> Knowledge {
    let mut kb = Knowledge::bootstrapped(1);
    kb.observe_profile("a", profile(60.0, 30.0, 4000), 1);
    kb.observe_profile("b", profile(55.0, 25.0, 5000), 1);
    kb.observe_profile("c", profile(62.0, 31.0, 4200), 1);
    kb.observe_profile("d", profile(53.0, 24.0, 4800), 1);
    kb
}

fn predict(kb: &Knowledge, a: &str, b: &str) -> GroupPrediction {
    let (a, b) = (kb.view_of(&Job::new(a)), kb.view_of(&Job::new(b)));
    kb.predict(&[&a, &b])
}

/// Deterministic scatter in -1..=1 for the `i`th measurement.
fn jitter(i: usize) -> f64 {
    [0.9, -0.7, 0.3, -0.1, 0.6, -0.9, 0.2, -0.4, 0.8, -0.5][i % 10]
}

#[test]
fn a_measured_profiled_pair_is_predicted_at_its_measurement_not_its_clusters() {
    // The spot check: the profiles predict a few percent; the pair was measured at
    // 16% and 22%.
    let mut kb = profiled();
    let cold = predict(&kb, "a", "b");
    let mut last = cold.uncertainty;
    for i in 0..8 {
        kb.observe_outcome(&outcome("a", "b", 0.16 + 0.01 * jitter(i), 0.22))
            .unwrap();
        let now = predict(&kb, "a", "b");
        assert!(
            now.uncertainty <= last + 1e-9,
            "{} > {last}",
            now.uncertainty
        );
        last = now.uncertainty;
    }
    let learned = predict(&kb, "a", "b");
    assert!(learned.learned);
    assert!((learned.slowdowns[0] - 0.16).abs() < 0.01, "{learned:?}");
    assert!((learned.slowdowns[1] - 0.22).abs() < 0.01, "{learned:?}");
    assert!(
        learned.uncertainty < cold.uncertainty / 3.0,
        "{learned:?} vs {cold:?}"
    );
}

#[test]
fn an_unseen_pair_stays_wide_beside_a_well_measured_one() {
    let mut kb = profiled();
    for i in 0..10 {
        kb.observe_outcome(&outcome("a", "b", 0.3 + 0.02 * jitter(i), 0.3))
            .unwrap();
    }
    let seen = predict(&kb, "a", "b");
    // c and d look like a and b, but were never measured: the cluster cell moved their mean,
    // not the spread a different pair may have around it.
    let unseen = predict(&kb, "c", "d");
    assert!(
        unseen.uncertainty > 2.0 * seen.uncertainty,
        "{unseen:?} vs {seen:?}"
    );
    assert!(unseen.uncertainty > 0.1, "{unseen:?}");
}

#[test]
fn a_workload_measured_beside_others_teaches_its_unseen_pairs() {
    // c is aggressive next to everyone it met; its pair with d was never measured.
    let mut kb = profiled();
    for partner in ["a", "b"] {
        for _ in 0..3 {
            kb.observe_outcome(&outcome(partner, "c", 0.9, 0.1))
                .unwrap();
        }
    }
    kb.observe_outcome(&outcome("a", "b", 0.1, 0.1)).unwrap();
    kb.observe_outcome(&outcome("b", "d", 0.1, 0.1)).unwrap();
    // Neither of d's pairs below was measured; the profiles alone cannot tell c from a (they
    // look alike and share a cluster), the workloads can.
    let with_c = predict(&kb, "d", "c");
    let with_a = predict(&kb, "d", "a");
    assert!(
        with_c.slowdowns[0] > with_a.slowdowns[0] + 0.1,
        "{with_c:?} vs {with_a:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever the profiles say, a pair measured `n` times at slowdowns scattered by `noise`
    /// around `truth` is predicted within the noise of its measured mean, with an uncertainty
    /// below the cold one, and the same pair of workloads never measured stays where it was.
    #[test]
    fn observed_pairs_converge_to_their_measurement(
        truth in 0.0f64..1.5,
        noise in 0.0f64..0.05,
        n in 4usize..16,
        util in 20.0f32..95.0,
        access in 5.0f32..60.0,
        unprofiled in any::<bool>(),
    ) {
        let mut kb = Knowledge::bootstrapped(1);
        if !unprofiled {
            kb.observe_profile("x", profile(util, access, 3000), 1);
            kb.observe_profile("y", profile(100.0 - util / 2.0, access / 2.0, 3000), 1);
        }
        let cold = predict(&kb, "x", "y");
        let mut measured = 0.0;
        for i in 0..n {
            let s = (1.0 + truth) * (1.0 + noise * jitter(i)) - 1.0;
            measured += s / n as f64;
            kb.observe_outcome(&outcome("x", "y", s, truth)).unwrap();
        }
        let learned = predict(&kb, "x", "y");
        // Within the measurement noise of the mean, plus the shrinkage of a handful of runs
        // towards the layers below; both are proportional to the slowdown factor `1 + truth`
        // (the layers combine in log slowdown), so the allowance is relative.
        let tolerance = (0.02 + 2.0 * noise) * (1.0 + truth);
        prop_assert!((learned.slowdowns[0] - measured).abs() < tolerance, "{learned:?} vs {measured}");
        prop_assert!((learned.slowdowns[1] - truth).abs() < tolerance, "{learned:?} vs {truth}");
        prop_assert!(learned.uncertainty < cold.uncertainty, "{learned:?} vs {cold:?}");
        prop_assert!(learned.learned && !cold.learned);
    }
}

#[test]
fn a_declared_job_is_predicted_from_its_predicted_profile_with_that_prediction_s_error() {
    let kb = Knowledge::bootstrapped(1);
    let summary = tandem_api::ModelSummary {
        params_mib: 45.0,
        activations_mib: 900.0,
        input_mib: 20.0,
        batch_size: 64,
        gflops: 300.0,
        conv_layers: 20,
        linear_layers: 1,
        activation_layers: 19,
        other_layers: 6,
    };
    let declared = kb.view_of(&Job {
        declared: Some(summary),
        ..Job::new("declared")
    });
    let features = declared
        .features
        .expect("the declaration predicts a profile");
    // The same job, had it been profiled at exactly those figures.
    let measured = kb.view(&profile(
        (features[0] * 100.0) as f32,
        (features[1] * 100.0) as f32,
        4000,
    ));
    let partner = kb.view(&profile(50.0, 20.0, 3000));
    let (guessed, known) = (
        kb.predict_pair(&declared, &partner),
        kb.predict_pair(&measured, &partner),
    );
    assert!((guessed.log_mean - known.log_mean).abs() < 0.05);
    assert!(
        guessed.estimate_var > known.estimate_var,
        "{guessed:?} vs {known:?}"
    );
}
