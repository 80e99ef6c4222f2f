//! The per-workload model's tests: fits, transfer across GPU models, saving and loading.

use super::*;

fn outcome(a: &str, b: &str, slow_a: f64, slow_b: f64) -> Outcome {
    Outcome {
        gpu_model: "V100".into(),
        jobs: vec![a.into(), b.into()],
        solo_s: vec![100.0, 100.0],
        colocated_s: vec![100.0 * (1.0 + slow_a), 100.0 * (1.0 + slow_b)],
    }
}

/// Ground truth with a sensitivity and an aggressiveness per workload.
fn truth(i: usize, j: usize) -> f64 {
    let sensitivity: [f64; 6] = [0.1, 0.5, 0.2, 0.9, 0.3, 0.6];
    let aggressiveness = [0.4, 0.1, 0.8, 0.2, 0.5, 0.3];
    (sensitivity[i] + aggressiveness[j]).exp_m1()
}

#[test]
fn pairs_never_seen_together_are_predicted_from_each_side() {
    let mut w = Workloads::default();
    let ids: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    // Everything but the pair (0, 5).
    for i in 0..6 {
        for j in i + 1..6 {
            if (i, j) != (0, 5) {
                w.learn(&outcome(&ids[i], &ids[j], truth(i, j), truth(j, i)));
            }
        }
    }
    let initial = Workloads::no_evidence().predictive_var();
    let belief = w.refine(
        w.index("w0"),
        w.index("w5"),
        OnModel::Any,
        Workloads::no_evidence(),
    );
    let (predicted, var) = (belief.slowdown(), belief.predictive_var());
    // Closer than the average of everything measured, the best guess without a model.
    let measured: Vec<f64> = (0..6)
        .flat_map(|i| (0..6).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && (i.min(j), i.max(j)) != (0, 5))
        .map(|(i, j)| truth(i, j))
        .collect();
    let average = measured.iter().sum::<f64>() / measured.len() as f64;
    let error = (predicted - truth(0, 5)).abs();
    assert!(
        error < (average - truth(0, 5)).abs() / 2.0,
        "{predicted} vs {average}"
    );
    assert!(var < initial / 2.0);
    assert!(!w.shared(w.index("w0"), w.index("w5"), "V100"));
    assert!(w.shared(w.index("w0"), w.index("w4"), "V100"));
    assert!(!w.shared(w.index("w0"), w.index("w4"), "K80"));
}

#[test]
fn evidence_shrinks_uncertainty_and_pulls_towards_the_measurement() {
    let mut w = Workloads::default();
    let prior = Workloads::no_evidence();
    assert_eq!(w.refine(None, None, OnModel::Any, prior), prior);
    let var0 = prior.estimate_var;
    w.learn(&outcome("a", "b", 0.3, 0.6));
    let var1 = w
        .refine(w.index("a"), w.index("b"), OnModel::Any, prior)
        .estimate_var;
    for _ in 0..9 {
        w.learn(&outcome("a", "b", 0.3, 0.6));
    }
    let belief = w.refine(w.index("a"), w.index("b"), OnModel::Any, prior);
    let (mean, var10) = (belief.slowdown(), belief.estimate_var);
    assert!(var10 < var1 && var1 < var0);
    assert!((mean - 0.3).abs() < 0.02, "{mean}");
    assert!(w.uncertainty(w.index("a")) < w.uncertainty(None));
}

fn on(gpu_model: &str, mut outcome: Outcome) -> Outcome {
    outcome.gpu_model = gpu_model.into();
    outcome
}

/// Six workloads measured with each other on a V100 (at [`truth`]) and on a K80 (at
/// `k80(i, j, log slowdown on the V100)`, in log slowdown), except the pair (0, 5), measured
/// on the V100 alone.
fn two_models(k80: impl Fn(usize, usize, f64) -> f64) -> (Workloads, Vec<String>) {
    let mut w = Workloads::default();
    let ids: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    for i in 0..6 {
        for j in i + 1..6 {
            let (a, b) = (truth(i, j), truth(j, i));
            w.learn(&outcome(&ids[i], &ids[j], a, b));
            if (i, j) != (0, 5) {
                let (ka, kb) = (k80(i, j, a.ln_1p()), k80(j, i, b.ln_1p()));
                w.learn(&on(
                    "K80",
                    outcome(&ids[i], &ids[j], ka.exp_m1(), kb.exp_m1()),
                ));
            }
        }
    }
    (w, ids)
}

/// Every pair 0.4 slower in log slowdown on the K80: a shift that transfers.
fn shifted(_: usize, _: usize, log_slowdown: f64) -> f64 {
    log_slowdown + 0.4
}

#[test]
fn a_pair_measured_on_one_model_is_predicted_on_another_as_far_as_models_agree() {
    let (w, ids) = two_models(shifted);
    let (a, b) = (w.index(&ids[0]), w.index(&ids[5]));
    let prior = Workloads::no_evidence();
    let v100 = w.refine(a, b, w.on_model("V100"), prior);
    let k80 = w.refine(a, b, w.on_model("K80"), prior);
    // Measured on the V100: predicted there at its measurement.
    assert!((v100.slowdown() - truth(0, 5)).abs() < 0.02, "{v100:?}");
    // On the K80 it is not the V100's figure: every other pair says the K80 is slower.
    let k80_truth = shifted(0, 5, truth(0, 5).ln_1p()).exp_m1();
    assert!(
        (k80.slowdown() - k80_truth).abs() < (truth(0, 5) - k80_truth).abs() / 4.0,
        "{} vs {k80_truth}",
        k80.slowdown()
    );
    // A model no outcome named takes everything known, less surely.
    assert_eq!(w.on_model("A100"), OnModel::Unseen);
    let unseen = w.refine(a, b, OnModel::Unseen, prior);
    assert!(unseen.predictive_var() > v100.predictive_var());
}

#[test]
fn where_models_disagree_pair_by_pair_a_measurement_transfers_with_a_wide_spread() {
    // The K80 moves each pair its own way (±0.5 in log slowdown).
    let scattered = |i: usize, j: usize, log_slowdown: f64| {
        let sign = if (i * 7 + j * 3).is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        (log_slowdown + sign * 0.5).max(0.0)
    };
    let (consistent, _) = two_models(shifted);
    let (w, ids) = two_models(scattered);
    let (a, b) = (w.index(&ids[0]), w.index(&ids[5]));
    let prior = Workloads::no_evidence();
    let v100 = w.refine(a, b, w.on_model("V100"), prior);
    let k80 = w.refine(a, b, w.on_model("K80"), prior);
    let k80_consistent = consistent.refine(a, b, consistent.on_model("K80"), prior);
    assert!(
        k80.predictive_var() > 2.0 * v100.predictive_var(),
        "{k80:?} vs {v100:?}"
    );
    assert!(k80.predictive_var() > 2.0 * k80_consistent.predictive_var());
}

#[test]
fn each_model_converges_to_its_own_measurement() {
    let (mut w, ids) = two_models(shifted);
    for _ in 0..6 {
        w.learn(&on("K80", outcome(&ids[0], &ids[5], 0.9, 0.9)));
    }
    let (a, b) = (w.index(&ids[0]), w.index(&ids[5]));
    let prior = Workloads::no_evidence();
    let k80 = w.refine(a, b, w.on_model("K80"), prior);
    let v100 = w.refine(a, b, w.on_model("V100"), prior);
    // Six K80 runs: at their measurement. One V100 run: within two of its noise's
    // standard deviations (in log slowdown) of it, where the fit pulls it a little.
    assert!((k80.slowdown() - 0.9).abs() < 0.02, "{k80:?}");
    let within_noise = 2.0 * v100.noise_var.sqrt();
    assert!(
        (v100.log_mean - truth(0, 5).ln_1p()).abs() < within_noise,
        "{v100:?}"
    );
    // Pooled over models, the pair is somewhere between.
    let any = w.refine(a, b, OnModel::Any, prior).slowdown();
    assert!(any > v100.slowdown() && any < k80.slowdown());
}

/// `w` saved as JSON, and what loading that JSON gives.
fn saved_and_loaded(w: &Workloads) -> (String, Workloads) {
    let json = serde_json::to_string(w).unwrap();
    let back = serde_json::from_str(&json).unwrap();
    (json, back)
}

#[test]
fn the_saved_form_round_trips_and_refits() {
    let mut w = Workloads::default();
    w.learn(&outcome("a", "b", 0.3, 0.6));
    w.learn(&outcome("b", "c", 0.2, 0.1));
    let (json, back) = saved_and_loaded(&w);
    assert_eq!(back, w);
    assert!(
        !json.contains("sensitivity"),
        "the fit is derived, not saved"
    );
}

#[test]
fn two_instances_of_one_workload_keep_what_they_showed_through_a_save() {
    let mut w = Workloads::default();
    w.learn(&outcome("w~1", "w~2", 0.4, 0.4));
    w.learn(&outcome("w~3", "v", 0.1, 0.2));
    let (_, back) = saved_and_loaded(&w);
    let (i, v) = (back.index("w"), back.index("v"));
    assert!(
        back.shared(i, i, "V100"),
        "the pair was seen sharing a V100"
    );
    let measured = |w: &Workloads| w.refine(i, i, OnModel::Any, Workloads::no_evidence());
    assert_eq!(measured(&back), measured(&w));
    assert!(back.shared(i, v, "V100") && !back.shared(v, v, "V100"));
    assert_eq!(back, w);
}

/// Mild interference, as on the K80 and P100 catalogs, where part of it is an interaction:
/// log slowdown `0.6 + s_i + a_j + 0.3 x_i z_j`, with every term a few tenths at most.
fn mild(i: usize, j: usize) -> f64 {
    let wave = |k: usize, f: f64| (k as f64 * f).sin();
    0.6 + 0.1 * wave(i, 1.3) + 0.1 * wave(j, 0.7) + 0.3 * wave(i, 2.1) * wave(j, 1.7)
}

#[test]
fn an_interaction_as_mild_as_the_slowdowns_is_learned() {
    let mut w = Workloads::default();
    let ids: Vec<String> = (0..16).map(|i| format!("w{i}")).collect();
    let observed = |i: usize, j: usize| !(i * 7 + j * 3).is_multiple_of(5);
    for i in 0..16 {
        for j in i + 1..16 {
            if observed(i, j) {
                let slowdown = |a, b| mild(a, b).exp_m1();
                w.learn(&outcome(&ids[i], &ids[j], slowdown(i, j), slowdown(j, i)));
            }
        }
    }
    // Over the pairs never observed: the error of the prediction, and what the interaction
    // alone moves them (the error of a model without it, at best).
    let (mut error, mut interaction, mut n) = (0.0, 0.0, 0);
    for i in 0..16 {
        for j in (0..16).filter(|&j| j != i && !observed(i.min(j), i.max(j))) {
            let belief = w.refine(
                w.index(&ids[i]),
                w.index(&ids[j]),
                OnModel::Any,
                Workloads::no_evidence(),
            );
            error += (belief.log_mean - mild(i, j)).abs();
            interaction += (0.3 * (i as f64 * 2.1).sin() * (j as f64 * 1.7).sin()).abs();
            n += 1;
        }
    }
    let (error, interaction) = (error / n as f64, interaction / n as f64);
    assert!(
        error < interaction / 2.0,
        "mean error {error:.3} against the interaction's {interaction:.3}"
    );
}

/// Whether every factor of the interaction is zero: the additive part alone was fit.
fn has_no_interaction(factors: &Factors) -> bool {
    factors
        .u
        .iter()
        .chain(&factors.v)
        .all(|f| *f == [0.0; factors::RANK])
}

#[test]
fn fewer_pairs_than_an_interaction_has_parameters_fit_the_additive_part_alone() {
    let mut w = Workloads::default();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("a", "e")] {
        w.learn(&outcome(a, b, 0.4, 0.9));
    }
    let factors = &w.fit().factors;
    assert!(has_no_interaction(factors));
    // The additive part still tells the workloads apart.
    assert!(factors.sensitivity.iter().any(|s| s.abs() > 0.01));
}

#[test]
fn an_interaction_the_pairs_do_not_show_is_not_fit() {
    // Sensitivity and aggressiveness only, with run-to-run scatter: whatever an interaction
    // fit to these pairs would learn is scatter, and cross-validation tells.
    let mut w = Workloads::default();
    let ids: Vec<String> = (0..16).map(|i| format!("w{i}")).collect();
    // Pseudo-random, of no structure in `i` and `j` (a sine of `13i + 7j` would be a rank-2
    // interaction itself).
    let scatter = |i: usize, j: usize| {
        let h = ((i * 73_856_093) ^ (j * 19_349_663)) % 1_000;
        0.1 * (h as f64 / 1_000.0 - 0.5)
    };
    let additive = |i: usize, j: usize| {
        0.6 + 0.1 * (i as f64 * 1.3).sin() + 0.1 * (j as f64 * 0.7).sin() + scatter(i, j)
    };
    for i in 0..16_usize {
        for j in i + 1..16 {
            if !(i * 7 + j * 3).is_multiple_of(5) {
                let slowdown = |a, b| additive(a, b).exp_m1();
                w.learn(&outcome(&ids[i], &ids[j], slowdown(i, j), slowdown(j, i)));
            }
        }
    }
    let factors = &w.fit().factors;
    assert!(has_no_interaction(factors));
}
