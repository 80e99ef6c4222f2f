//! How much co-located jobs slow each other down, and what sharing saves.
//!
//! Definitions (DESIGN.md §1), used everywhere in Tandem:
//! - individual slowdown `IndSD(j) = (J_c(j) - J_a(j)) / J_a(j)`, co-located vs alone;
//! - packing saving `PacSav = (Σ J_a - max J_c) / Σ J_a`, time saved by running together
//!   instead of one after another.
//!
//! The skeleton predicts slowdowns with an analytic prior from the profiles alone: when the
//! summed SM utilization exceeds 100% the GPU time-slices, so every job runs at `1/U` of its
//! solo speed; on top of that, each co-runner's memory traffic costs a quarter of its
//! memory-access share. It is the first layer of the predictor ([`crate::learning`]), which
//! outcomes refine. Slowdowns here are fractions (0.25 = 25%).

use tandem_api::Profile;

/// Extra slowdown per unit of a co-runner's memory-access share (0..=1). A quarter matches
/// the order of magnitude the JRS/PriRecT pair tables show for memory-bound partners.
const MEMORY_CONTENTION_WEIGHT: f64 = 0.25;

/// Predicted individual slowdowns (fractions) of each member of a group sharing one GPU,
/// from their profiles alone.
pub fn prior_slowdowns(group: &[&Profile]) -> Vec<f64> {
    let total_util: f64 = group
        .iter()
        .map(|p| f64::from(p.gpu_util_pct) / 100.0)
        .sum();
    let total_access: f64 = group
        .iter()
        .map(|p| f64::from(p.mem_access_pct) / 100.0)
        .sum();
    let time_slicing = (total_util - 1.0).max(0.0);
    group
        .iter()
        .map(|p| {
            let others_access = total_access - f64::from(p.mem_access_pct) / 100.0;
            time_slicing + MEMORY_CONTENTION_WEIGHT * others_access
        })
        .collect()
}

/// The prior slowdown of a job with features `a` next to one with features `b` (both as
/// [`crate::features`] describes them), the two-job case of [`prior_slowdowns`].
pub fn prior_slowdowns_of(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    let time_slicing = (a[0] + b[0] - 1.0).max(0.0);
    time_slicing + MEMORY_CONTENTION_WEIGHT * b[1]
}

/// Variance the analytic prior ([`prior_slowdowns_of`]) inherits from one job's features
/// when they are predicted with variances `util_var` and `access_var` (fractions²), whichever
/// side of the pair the job is: the time-slicing term moves one for one with its
/// utilization, the memory-contention term with its access share.
pub fn prior_variance_of_features(util_var: f64, access_var: f64) -> f64 {
    util_var + MEMORY_CONTENTION_WEIGHT * MEMORY_CONTENTION_WEIGHT * access_var
}

/// Standard-normal quadrature: the nodes and weights (summing to 1) of five-point
/// Gauss–Hermite, exact for polynomials up to degree nine.
const NORMAL_QUADRATURE: [(f64, f64); 5] = [
    (-2.856_970_013_872_806, 0.011_257_411_327_720_69),
    (-1.355_626_179_974_266, 0.222_075_922_005_612_6),
    (0.0, 0.533_333_333_333_333_3),
    (1.355_626_179_974_266, 0.222_075_922_005_612_6),
    (2.856_970_013_872_806, 0.011_257_411_327_720_69),
];

/// What `saved` is expected to come to for a pair whose slowdowns are predicted as
/// `slowdowns` (fractions) with predictive variances `log_vars` of log slowdown
/// `ln(1 + s)`, each member's error normal and independent of the other's.
///
/// What sharing saves hangs on the pair's *worst* slowdown, and the maximum of two uncertain
/// slowdowns is larger, on average, than the larger of their predictions: a pair predicted
/// from little evidence saves less than its predictions say, and the less is known the more
/// it falls short. Valuing a pair by its expectation rather than by its predictions prices
/// that in, so a matching over many uncertain pairs does not pick the ones predicted too
/// well. A well-measured pair's expectation is its prediction.
pub fn expected_saving(
    slowdowns: [f64; 2],
    log_vars: [f64; 2],
    saved: impl Fn(&[f64; 2]) -> f64,
) -> f64 {
    let spreads = log_vars.map(|v| v.max(0.0).sqrt());
    if spreads == [0.0; 2] {
        return saved(&slowdowns.map(|s| s.max(0.0)));
    }
    // Each member's slowdown at each node, computed once (a matching values many pairs).
    let [a, b] = [0, 1].map(|m| {
        let centre = slowdowns[m].max(0.0).ln_1p();
        NORMAL_QUADRATURE.map(|(z, _)| (centre + spreads[m] * z).exp_m1().max(0.0))
    });
    let mut expected = 0.0;
    for (&sa, &(_, wa)) in a.iter().zip(&NORMAL_QUADRATURE) {
        for (&sb, &(_, wb)) in b.iter().zip(&NORMAL_QUADRATURE) {
            expected += wa * wb * saved(&[sa, sb]);
        }
    }
    expected
}

/// Time saved by running a group together instead of one after another, in units of one
/// job's solo time, assuming equal solo times: `n - max(1 + s)`. Zero for a job alone.
pub fn time_saved(slowdowns: &[f64]) -> f64 {
    if slowdowns.len() < 2 {
        return 0.0;
    }
    let longest = slowdowns.iter().fold(0.0_f64, |m, s| m.max(1.0 + s));
    slowdowns.len() as f64 - longest
}

/// Seconds a group saves by sharing one GPU instead of running one after another, when each
/// member's run time left alone, `solo_s` (s, in the order of `slowdowns`), is known. Members
/// progress at `1 / (1 + slowdown)` of their solo speed while they share, until the first
/// finishes; the last one left runs alone. Between (groups of three or more) the others keep
/// the whole group's slowdowns, which understates what a smaller group saves rather than
/// guessing it. With equal run times this is at least `time_saved` × the run time: the jobs
/// slowed less finish first, and the rest run alone after them.
///
/// This is why durations matter: a partner that finishes early saves at most its own run
/// time, and the other then runs alone; partners that finish together save the most.
pub fn time_saved_s(slowdowns: &[f64], solo_s: &[f64]) -> f64 {
    debug_assert_eq!(slowdowns.len(), solo_s.len());
    if slowdowns.len() < 2 {
        return 0.0;
    }
    // Work left of each running member, in solo seconds, and the wall time passed (on the
    // stack: a GPU holds a few jobs, and a matching values many pairs).
    let mut left: smallvec::SmallVec<[(f64, f64); 4]> = solo_s
        .iter()
        .zip(slowdowns)
        .map(|(&t, &s)| (t.max(0.0), 1.0 / (1.0 + s.max(0.0))))
        .collect();
    let mut wall = 0.0;
    while left.len() > 1 {
        // Wall time until the next member finishes at its shared speed.
        let dt = left
            .iter()
            .map(|&(work, speed)| work / speed)
            .fold(f64::INFINITY, f64::min);
        wall += dt;
        for (work, speed) in &mut left {
            *work -= dt * *speed;
        }
        // The one that finished (and any that finished with it) leaves; keep at least one.
        let before = left.len();
        left.retain(|(work, _)| *work > 1e-9 * (1.0 + dt));
        if left.len() == before {
            // Rounding kept the finisher: drop the member with the least work left.
            let least = (0..left.len())
                .min_by(|&a, &b| left[a].0.total_cmp(&left[b].0))
                .unwrap_or(0);
            left.swap_remove(least);
        }
    }
    let alone: f64 = left.iter().map(|&(work, _)| work.max(0.0)).sum();
    solo_s.iter().map(|t| t.max(0.0)).sum::<f64>() - (wall + alone)
}

/// Packing saving (fraction) of a group, assuming equal solo times.
pub fn packing_saving(slowdowns: &[f64]) -> f64 {
    if slowdowns.is_empty() {
        return 0.0;
    }
    time_saved(slowdowns) / slowdowns.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(util: f32, access: f32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: access,
            mem_used_mib: 1000,
            gpu_model: "V100".into(),
        }
    }

    #[test]
    fn a_job_alone_is_not_slowed_down() {
        assert_eq!(prior_slowdowns(&[&profile(90.0, 0.0)]), vec![0.0]);
        assert_eq!(packing_saving(&[0.0]), 0.0);
    }

    #[test]
    fn oversubscribed_gpus_time_slice() {
        let (a, b) = (profile(80.0, 0.0), profile(70.0, 0.0));
        let s = prior_slowdowns(&[&a, &b]);
        assert!(
            (s[0] - 0.5).abs() < 1e-9 && (s[1] - 0.5).abs() < 1e-9,
            "{s:?}"
        );
    }

    #[test]
    fn a_partner_that_finishes_early_saves_at_most_its_run_time() {
        // Equal run times, equal slowdowns: both finish together, as `time_saved` says.
        let equal = time_saved_s(&[0.25, 0.25], &[100.0, 100.0]);
        assert!((equal - 100.0 * time_saved(&[0.25, 0.25])).abs() < 1e-9);
        // A 10 s job beside a 100 s one: they share for 12.5 s, then the long one has
        // 90 s of its work left alone: 110 s of work in 102.5 s saves 7.5 s.
        let short = time_saved_s(&[0.25, 0.25], &[10.0, 100.0]);
        assert!((short - 7.5).abs() < 1e-9, "{short}");
        // Unequal slowdowns: the job slowed less finishes first and the other runs alone
        // after it, which saves more than `max(1 + s)` supposes.
        let apart = time_saved_s(&[0.1, 0.5], &[100.0, 100.0]);
        assert!(apart > 100.0 * time_saved(&[0.1, 0.5]));
        // 110 s together; the other has 100 - 110 / 1.5 s left alone.
        let expected = 200.0 - (110.0 + 100.0 - 110.0 / 1.5);
        assert!((apart - expected).abs() < 1e-9, "{apart} vs {expected}");
        // Alone, nothing is saved.
        assert_eq!(time_saved_s(&[0.0], &[100.0]), 0.0);
    }

    #[test]
    fn three_members_save_no_more_than_their_runs() {
        let saved = time_saved_s(&[0.5, 0.5, 0.5], &[30.0, 60.0, 90.0]);
        assert!(saved > 0.0 && saved < 180.0, "{saved}");
        // Sharing that doubles run times saves nothing however the runs end.
        let none = time_saved_s(&[1.0, 1.0], &[50.0, 50.0]);
        assert!(none.abs() < 1e-9, "{none}");
    }

    #[test]
    fn a_pair_known_for_sure_is_expected_to_save_what_its_predictions_say() {
        let sure = expected_saving([0.2, 0.4], [0.0, 0.0], |s| time_saved(s));
        assert!((sure - time_saved(&[0.2, 0.4])).abs() < 1e-12, "{sure}");
    }

    #[test]
    fn an_uncertain_pair_is_expected_to_save_less_the_less_is_known() {
        // Two jobs predicted 30% slower each: their worst slowdown is more than 30% on
        // average once either may land either side of it.
        let plain = time_saved(&[0.3, 0.3]);
        let mut last = plain;
        for var in [0.01, 0.05, 0.2] {
            let expected = expected_saving([0.3, 0.3], [var, var], |s| time_saved(s));
            assert!(expected < last, "{var}: {expected} after {last}");
            last = expected;
        }
        // Lengths known: the same holds for the seconds saved.
        let plain_s = time_saved_s(&[0.3, 0.3], &[100.0, 300.0]);
        let expected_s = expected_saving([0.3, 0.3], [0.05, 0.05], |s| {
            time_saved_s(s, &[100.0, 300.0])
        });
        assert!(expected_s < plain_s, "{expected_s} vs {plain_s}");
    }

    #[test]
    fn the_quadrature_integrates_a_normal() {
        let weights: f64 = NORMAL_QUADRATURE.iter().map(|(_, w)| w).sum();
        assert!((weights - 1.0).abs() < 1e-12);
        // E[exp(σZ)] = exp(σ²/2): a log-normal's mean, which a prediction's mean slowdown is.
        let var: f64 = 0.09;
        // (Far enough from 0 that no node's slowdown is cut off at "no slowdown".)
        let mean = expected_saving([3.0, 0.0], [var, 0.0], |s| 1.0 + s[0]);
        assert!((mean - 4.0 * (var / 2.0).exp()).abs() < 1e-6, "{mean}");
    }

    #[test]
    fn packing_saving_follows_the_definition() {
        // Two jobs of 100 s each, co-located they take 120 s and 110 s:
        // (200 - 120) / 200 = 0.4.
        assert!((packing_saving(&[0.2, 0.1]) - 0.4).abs() < 1e-12);
        // Sharing that doubles both run times saves nothing.
        assert!(packing_saving(&[1.0, 1.0]).abs() < 1e-12);
    }
}
