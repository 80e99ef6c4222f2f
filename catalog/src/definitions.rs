//! The project's definitions of slowdown and packing saving, and the model that turns measured
//! speeds into completion times (shared DESIGN, "Definitions").

/// Completion times of two jobs started together on one GPU.
///
/// `solo` are the jobs' completion times alone, `speeds` their normalized speeds when sharing
/// (co-located throughput / solo throughput, as in [`Pair`](crate::Pair)). Both progress at
/// their speed until the first finishes; the other then runs alone at full speed. Times are in
/// the unit of `solo`.
///
/// Speeds must be finite and positive (a valid catalog's are); otherwise the result is
/// meaningless (infinite or NaN), though never a panic.
///
/// ```
/// // 100 s and 50 s alone, at half and 0.8 speed together: the second finishes at 62.5 s,
/// // when the first has done 31.25 s of its work; its other 68.75 s run alone.
/// assert_eq!(tandem_catalog::colocated_times([100.0, 50.0], [0.5, 0.8]), [131.25, 62.5]);
/// ```
pub fn colocated_times(solo: [f64; 2], speeds: [f64; 2]) -> [f64; 2] {
    let shared = [solo[0] / speeds[0], solo[1] / speeds[1]];
    let (first, second) = if shared[0] <= shared[1] {
        (0, 1)
    } else {
        (1, 0)
    };
    let together = shared[first];
    // Work (in solo seconds) the second job still has when the first one leaves.
    let left = solo[second] - speeds[second] * together;
    let mut times = [0.0; 2];
    times[first] = together;
    times[second] = together + left;
    times
}

/// Individual slowdown, `IndSD = (J_c - J_a) / J_a`: how much longer a job takes co-located
/// (`colocated`) than alone on the same GPU (`solo`), as a fraction (0.25 = 25% longer).
///
/// ```
/// assert_eq!(tandem_catalog::individual_slowdown(100.0, 131.25), 0.3125);
/// ```
pub fn individual_slowdown(solo: f64, colocated: f64) -> f64 {
    (colocated - solo) / solo
}

/// Packing saving, `PacSav = (Σ J_a - max J_c) / Σ J_a`: the share of time saved by running
/// jobs together rather than one after another, as a fraction. `solo` and `colocated` list the
/// same jobs in the same order. With no jobs the result is NaN.
///
/// ```
/// let saving = tandem_catalog::packing_saving([100.0, 50.0], [131.25, 62.5]);
/// assert_eq!(saving, 0.125);
/// ```
pub fn packing_saving<const N: usize>(solo: [f64; N], colocated: [f64; N]) -> f64 {
    let total: f64 = solo.iter().sum();
    // `f64::max` ignores NaN: the start value only survives when there are no jobs.
    let makespan = colocated.iter().copied().fold(f64::NAN, f64::max);
    (total - makespan) / total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_faster_finisher_leaves_the_other_to_run_alone() {
        // Job 0: 100 s at 0.5 would need 200 s shared; job 1: 50 s at 0.8 needs 62.5 s.
        // Job 1 leaves at 62.5 s; job 0 has 100 - 31.25 = 68.75 s of work left, alone.
        assert_eq!(colocated_times([100.0, 50.0], [0.5, 0.8]), [131.25, 62.5]);
        // Same pair in the other orientation.
        assert_eq!(colocated_times([50.0, 100.0], [0.8, 0.5]), [62.5, 131.25]);
    }

    #[test]
    fn full_speed_changes_nothing_and_equal_finishes_tie() {
        assert_eq!(colocated_times([30.0, 70.0], [1.0, 1.0]), [30.0, 70.0]);
        // Both need 120 s shared: they finish together.
        assert_eq!(colocated_times([60.0, 90.0], [0.5, 0.75]), [120.0, 120.0]);
    }

    #[test]
    fn time_slicing_halves_both_until_the_first_leaves() {
        // 40 s and 100 s at half speed: the first ends at 80 s, the second has done 40 s and
        // runs its last 60 s alone: 140 s, exactly the serial time (no saving).
        let times = colocated_times([40.0, 100.0], [0.5, 0.5]);
        assert_eq!(times, [80.0, 140.0]);
        assert!(close(individual_slowdown(40.0, times[0]), 1.0));
        assert!(close(individual_slowdown(100.0, times[1]), 0.4));
        assert!(close(packing_saving([40.0, 100.0], times), 0.0));
    }

    #[test]
    fn slowdown_and_saving_on_hand_computed_numbers() {
        assert!(close(individual_slowdown(100.0, 131.25), 0.3125));
        assert!(close(individual_slowdown(50.0, 62.5), 0.25));
        assert!(close(individual_slowdown(80.0, 80.0), 0.0));
        // (100 + 50 - 131.25) / 150
        assert!(close(packing_saving([100.0, 50.0], [131.25, 62.5]), 0.125));
        // A row of the Futurewei tables: Inceptionv3 (BS=20) 316.2 s and Small BERT L2 253.9 s
        // alone, 338.8 s and 294.5 s together: the papers report a saving of 40.5%.
        let saving = packing_saving([316.2, 253.9], [338.8, 294.5]);
        assert!((saving - 0.405).abs() < 0.001, "{saving}");
        // Three jobs.
        assert!(close(
            packing_saving([10.0, 20.0, 30.0], [15.0, 25.0, 45.0]),
            0.25
        ));
    }

    #[test]
    fn bad_speeds_give_non_finite_times_without_panicking() {
        let times = colocated_times([10.0, 10.0], [f64::NAN, 1.0]);
        assert!(times.iter().any(|t| !t.is_finite()));
        assert!(packing_saving::<0>([], []).is_nan());
    }
}
