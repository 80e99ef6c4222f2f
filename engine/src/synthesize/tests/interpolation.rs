//! The interpolants: values worked by hand, no extrapolation, rejected input, and properties.

use proptest::prelude::*;

use super::{assert_close, at, fit, increasing_sizes};
use crate::synthesize::interpolate::pchip_slopes;
use crate::synthesize::{Interpolant, Interpolation, InterpolationError};

#[test]
fn methods_have_stable_names_in_serde_and_display() {
    let names: Vec<&str> = Interpolation::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(names, ["linear", "pchip", "cubic-spline", "barycentric"]);
    for method in Interpolation::ALL {
        let json = serde_json::to_string(&method).unwrap_or_default();
        assert_eq!(json, format!("\"{}\"", method.name()));
        assert_eq!(method.to_string(), method.name());
        assert_eq!(
            serde_json::from_str::<Interpolation>(&json).ok(),
            Some(method)
        );
    }
}

/// SciPy's `PchipInterpolator([1, 2, 4, 8], [0, 1, 1.5, 4])`, worked by hand.
///
/// Widths h = [1, 2, 4], secants δ = [1, 0.25, 0.625].
///
/// Interior slopes, the weighted harmonic mean (w1 + w2) / (w1/δ_{k-1} + w2/δ_k) with
/// w1 = 2h_k + h_{k-1}, w2 = h_k + 2h_{k-1}:
/// - x = 2: w1 = 5, w2 = 4; d = 9 / (5/1 + 4/0.25) = 9/21 = 3/7.
/// - x = 4: w1 = 10, w2 = 8; d = 18 / (10/0.25 + 8/0.625) = 18/52.8 = 15/44.
///
/// End slopes, ((2h0 + h1) m0 - h0 m1) / (h0 + h1), kept as they are (same sign as m0, and
/// the secants do not change sign):
/// - x = 1: h0 = 1, h1 = 2, m0 = 1, m1 = 0.25: (4 - 0.25) / 3 = 1.25.
/// - x = 8: h0 = 4, h1 = 2, m0 = 0.625, m1 = 0.25: (6.25 - 1) / 6 = 0.875.
///
/// Hermite basis at t = 1/2: h00 = h01 = 1/2, h10 = 1/8, h11 = -1/8, so on a segment of
/// width h, p = (y0 + y1)/2 + h (d0 - d1) / 8:
/// - p(3) on [2, 4]: 1.25 + 2 (3/7 - 15/44) / 8 = 1.25 + 27/1232 ≈ 1.2719155844.
/// - p(6) on [4, 8]: 2.75 + 4 (15/44 - 7/8) / 8 = 2.75 - 47/176 ≈ 2.4829545455.
#[test]
fn pchip_matches_fritsch_carlson_worked_by_hand() {
    let (xs, ys) = ([1.0, 2.0, 4.0, 8.0], [0.0, 1.0, 1.5, 4.0]);
    let slopes = pchip_slopes(&xs, &ys);
    for (slope, expected) in slopes.iter().zip([1.25, 3.0 / 7.0, 15.0 / 44.0, 0.875]) {
        assert_close(*slope, expected);
    }
    let pchip = fit(Interpolation::Pchip, &xs, &ys);
    assert_close(at(&pchip, 3.0), 1.25 + 27.0 / 1232.0);
    assert_close(at(&pchip, 6.0), 2.75 - 47.0 / 176.0);
}

#[test]
fn pchip_is_flat_at_extrema_and_never_overshoots() {
    // A peak at x = 1: the slope there is zero, so the curve stays below the peak.
    let pchip = fit(
        Interpolation::Pchip,
        &[0.0, 1.0, 2.0, 3.0],
        &[0.0, 1.0, 0.0, 0.0],
    );
    for i in 0..=300 {
        let value = at(&pchip, f64::from(i) / 100.0);
        assert!((0.0..=1.0).contains(&value), "{value} at {i}");
    }
    // Equal neighbours make a plateau, not a bump.
    assert_eq!(at(&pchip, 2.5), 0.0);
    // The end-slope adjustment: where the data turns, the end slope is capped at 3·δ0
    // (here the raw estimate ((2+1)·1 - 1·(-10))/2 = 6.5 exceeds 3).
    let turning = pchip_slopes(&[0.0, 1.0, 2.0], &[0.0, 1.0, -9.0]);
    assert_close(turning[0], 3.0);
    // And zeroed where it would point against the end secant.
    let against = pchip_slopes(&[0.0, 1.0, 2.0], &[0.0, 1.0, 5.0]);
    assert_close(against[0], 0.0);
}

/// Natural splines worked by hand from `h M[i-1] + 4h M[i] + h M[i+1] = 6 (δ_i - δ_{i-1})`
/// with unit widths h and M = 0 at the ends:
/// - (0,0), (1,1), (2,0): 4 M1 = -12, so M1 = -3, and on [0, 1]
///   S(x) = M1 x³/6 + (1 - M1/6) x, so S(0.5) = -1/16 + 3/4 = 0.6875 (and S(1.5) by symmetry).
/// - (0,0), (1,1), (2,0), (3,1): 4 M1 + M2 = -12, M1 + 4 M2 = 12, so M1 = -4, M2 = 4;
///   S(0.5) = -4/48 + (1 + 4/6)/2 = 0.75, S(1.5) = 0.5 and, by the point symmetry
///   (x, y) -> (3 - x, 1 - y), S(2.5) = 0.25.
#[test]
fn natural_spline_matches_values_worked_by_hand() {
    let three = fit(
        Interpolation::CubicSpline,
        &[0.0, 1.0, 2.0],
        &[0.0, 1.0, 0.0],
    );
    assert_close(at(&three, 0.5), 0.6875);
    assert_close(at(&three, 1.5), 0.6875);
    let four = fit(
        Interpolation::CubicSpline,
        &[0.0, 1.0, 2.0, 3.0],
        &[0.0, 1.0, 0.0, 1.0],
    );
    assert_close(at(&four, 0.5), 0.75);
    assert_close(at(&four, 1.5), 0.5);
    assert_close(at(&four, 2.5), 0.25);
}

#[test]
fn barycentric_is_the_polynomial_through_every_point() {
    // Four points of x³ - 2x, spread like batch sizes: the cubic is recovered everywhere.
    let cubic = |x: f64| x * x * x - 2.0 * x;
    let xs = [1.0, 2.0, 4.0, 8.0];
    let ys = xs.map(cubic);
    let polynomial = fit(Interpolation::Barycentric, &xs, &ys);
    for x in [1.5, 3.0, 5.0, 7.9] {
        assert!((at(&polynomial, x) - cubic(x)).abs() < 1e-9);
    }
    // The parabola through (0,0), (1,1), (2,0) is 2x - x².
    let parabola = fit(
        Interpolation::Barycentric,
        &[0.0, 1.0, 2.0],
        &[0.0, 1.0, 0.0],
    );
    assert_close(at(&parabola, 0.5), 0.75);
    assert_close(at(&parabola, 1.5), 0.75);
}

#[test]
fn linear_interpolates_between_neighbours_only() {
    let line = fit(Interpolation::Linear, &[1.0, 2.0, 4.0], &[10.0, 20.0, 0.0]);
    assert_close(at(&line, 1.5), 15.0);
    assert_close(at(&line, 3.0), 10.0);
}

#[test]
fn no_method_extrapolates() {
    let (xs, ys) = ([32.0, 64.0, 128.0, 256.0], [10.0, 30.0, 35.0, 80.0]);
    for method in Interpolation::ALL {
        let interpolant = fit(method, &xs, &ys);
        assert_eq!(interpolant.domain(), (32.0, 256.0));
        assert_eq!(at(&interpolant, 1.0), 10.0, "{method}");
        assert_eq!(at(&interpolant, 1e6), 80.0, "{method}");
    }
}

#[test]
fn with_two_points_every_method_is_the_line() {
    for method in Interpolation::ALL {
        let interpolant = fit(method, &[8.0, 2.0], &[40.0, 10.0]);
        assert_eq!(interpolant.method(), method);
        assert_eq!(at(&interpolant, 5.0), 25.0, "{method}");
    }
}

#[test]
fn fit_sorts_and_merges_equal_duplicates() {
    let interpolant = fit(
        Interpolation::Pchip,
        &[4.0, 1.0, 2.0, 1.0],
        &[3.0, 0.0, 1.0, 0.0],
    );
    assert_eq!(interpolant.domain(), (1.0, 4.0));
    assert_eq!(at(&interpolant, 2.0), 1.0);
}

#[test]
fn fit_and_evaluate_reject_bad_input() {
    let err = |xs: &[f64], ys: &[f64]| Interpolant::fit(Interpolation::CubicSpline, xs, ys).err();
    assert_eq!(
        err(&[1.0, 2.0], &[1.0]),
        Some(InterpolationError::LengthMismatch { xs: 2, ys: 1 })
    );
    assert!(matches!(
        err(&[1.0, f64::NAN], &[1.0, 2.0]),
        Some(InterpolationError::NonFiniteX { index: 1, .. })
    ));
    assert!(matches!(
        err(&[1.0, 2.0], &[f64::INFINITY, 2.0]),
        Some(InterpolationError::NonFiniteY { index: 0, .. })
    ));
    assert_eq!(
        err(&[3.0, 1.0, 3.0], &[1.0, 0.0, 2.0]),
        Some(InterpolationError::ConflictingDuplicate {
            x: 3.0,
            first: 0,
            second: 2
        })
    );
    assert_eq!(
        err(&[5.0, 5.0], &[1.0, 1.0]),
        Some(InterpolationError::TooFewPoints { distinct: 1 })
    );
    assert_eq!(
        err(&[], &[]),
        Some(InterpolationError::TooFewPoints { distinct: 0 })
    );
    let line = fit(Interpolation::Linear, &[1.0, 2.0], &[1.0, 2.0]);
    assert!(matches!(
        line.evaluate(f64::NAN),
        Err(InterpolationError::NonFiniteQuery { .. })
    ));
    let huge = fit(Interpolation::Linear, &[0.0, 1.0], &[-f64::MAX, f64::MAX]);
    assert_eq!(
        huge.evaluate(0.5),
        Err(InterpolationError::NonFiniteResult { x: 0.5 })
    );
    let message = InterpolationError::ConflictingDuplicate {
        x: 3.0,
        first: 0,
        second: 2,
    }
    .to_string();
    assert!(message.contains("points 0 and 2"), "{message}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_interpolant_passes_through_its_points(
        xs in increasing_sizes(9),
        ys in prop::collection::vec(-1e3..1e3_f64, 10),
    ) {
        let ys = &ys[..xs.len()];
        // Reversed input: fitting sorts.
        let (reversed_xs, reversed_ys): (Vec<f64>, Vec<f64>) =
            xs.iter().rev().zip(ys.iter().rev()).map(|(x, y)| (*x, *y)).unzip();
        for method in Interpolation::ALL {
            let interpolant = fit(method, &reversed_xs, &reversed_ys);
            for (&x, &y) in xs.iter().zip(ys) {
                prop_assert_eq!(at(&interpolant, x), y, "{} at {}", method, x);
                // And the segment formulas agree with the points just beside them.
                let beside = at(&interpolant, x * (1.0 + 1e-12));
                if method != Interpolation::Barycentric {
                    prop_assert!((beside - y).abs() < 1e-4 * (1.0 + y.abs()), "{} near {}: {}", method, x, beside);
                }
            }
        }
    }

    #[test]
    fn pchip_preserves_monotonicity(
        xs in increasing_sizes(9),
        steps in prop::collection::vec(prop_oneof![1 => Just(0.0), 3 => 0.0..50.0_f64], 10),
        decreasing in any::<bool>(),
    ) {
        let sign = if decreasing { -1.0 } else { 1.0 };
        let mut ys = vec![0.0];
        for step in &steps[..xs.len() - 1] {
            let next = ys[ys.len() - 1] + sign * step;
            ys.push(next);
        }
        let pchip = fit(Interpolation::Pchip, &xs, &ys);
        let (low, high) = (xs[0], xs[xs.len() - 1]);
        let mut previous = ys[0];
        for i in 0..=400 {
            let value = at(&pchip, low + (high - low) * f64::from(i) / 400.0);
            let tolerance = 1e-9 * (1.0 + value.abs());
            prop_assert!(sign * (value - previous) >= -tolerance, "{} after {}", value, previous);
            previous = value;
        }
    }

    #[test]
    fn natural_spline_reproduces_a_straight_line(
        xs in increasing_sizes(9),
        intercept in -100.0..100.0_f64,
        slope in -10.0..10.0_f64,
        probes in prop::collection::vec(0.0..1.0_f64, 20),
    ) {
        let ys: Vec<f64> = xs.iter().map(|x| intercept + slope * x).collect();
        let spline = fit(Interpolation::CubicSpline, &xs, &ys);
        let (low, high) = (xs[0], xs[xs.len() - 1]);
        for probe in probes {
            let x = low + (high - low) * probe;
            let expected = intercept + slope * x;
            let scale = 1.0 + intercept.abs() + (slope * high).abs();
            prop_assert!((at(&spline, x) - expected).abs() <= 1e-9 * scale);
        }
    }
}
