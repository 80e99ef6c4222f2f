//! Blinded evaluation, the choice of method, generation, and the errors that name their input.

use proptest::prelude::*;

use super::{PERCENT, assert_close, batch_sizes, best, increasing_sizes, run, series};
use crate::synthesize::{Interpolation, Sample, Series, Synthesis, SynthesisError, synthesize};

#[test]
fn blinded_evaluation_leaves_out_interior_points_only() {
    // One interior point (2, 1): every method predicts it from (1, 0) and (3, 0), a line
    // at 0, so the error is 1 for all four and the tie goes to linear.
    let truth = [series(
        "peak",
        &[(1.0, &[0.0]), (2.0, &[1.0]), (3.0, &[0.0])],
    )];
    let synthesis = run(&truth, 0, &[None]);
    assert_eq!(synthesis.scores.len(), 4);
    for (score, method) in synthesis.scores.iter().zip(Interpolation::ALL) {
        assert_eq!(score.method, method);
        assert_eq!(score.workload, "peak");
        assert_eq!(
            (score.rmse, score.mae, score.predictions),
            (Some(1.0), Some(1.0), 1)
        );
    }
    assert_eq!(synthesis.best, [best("peak", Interpolation::Linear)]);
    assert!(synthesis.generated[0].samples.is_empty());
}

#[test]
fn rmse_and_mae_pool_every_feature_and_left_out_point() {
    // Interior points 2 and 3; two features. Linear predictions:
    // leave 2 out: from (1,0),(3,2) -> 1, truth 0: error -1 (feature 0); feature 1 is
    // constant 5, error 0. Leave 3 out: from (2,0),(4,0) -> 0, truth 2: error -2; 0.
    // RMSE = sqrt((1 + 4) / 4), MAE = 3 / 4, 4 predictions.
    let truth = [series(
        "w",
        &[
            (1.0, &[0.0, 5.0]),
            (2.0, &[0.0, 5.0]),
            (3.0, &[2.0, 5.0]),
            (4.0, &[0.0, 5.0]),
        ],
    )];
    let synthesis = run(&truth, 0, &[None, None]);
    let linear = &synthesis.scores[0];
    assert_eq!(linear.predictions, 4);
    assert_close(linear.rmse.unwrap_or(f64::NAN), (5.0_f64 / 4.0).sqrt());
    assert_close(linear.mae.unwrap_or(f64::NAN), 0.75);
}

#[test]
fn best_method_has_the_lowest_rmse_and_ties_go_to_the_simplest() {
    let cubic = |x: f64| 0.001 * x * x * x - 0.05 * x * x + x;
    let sizes = [2.0, 8.0, 16.0, 32.0, 64.0];
    let polynomial: Vec<(f64, Vec<f64>)> = sizes.iter().map(|&x| (x, vec![cubic(x)])).collect();
    let straight: Vec<(f64, Vec<f64>)> = sizes.iter().map(|&x| (x, vec![3.0 + 0.5 * x])).collect();
    let as_series = |name: &str, points: &[(f64, Vec<f64>)]| Series {
        workload: name.into(),
        samples: points
            .iter()
            .map(|(x, v)| Sample {
                batch_size: *x,
                values: v.clone(),
            })
            .collect(),
    };
    let truth = [
        as_series("cubic", &polynomial),
        as_series("straight", &straight),
    ];
    let synthesis = run(&truth, 1, &[None]);
    // Four points of a cubic determine it: the polynomial predicts each left-out point.
    assert_eq!(synthesis.best[0], best("cubic", Interpolation::Barycentric));
    // Every method reproduces a line (up to rounding): linear wins the tie.
    assert_eq!(synthesis.best[1], best("straight", Interpolation::Linear));
}

#[test]
fn generates_rounded_geometric_midpoints_between_measured_sizes() {
    let two_sizes = |low: f64, high: f64| series("w", &[(low, &[0.0]), (high, &[1.0])]);
    let generated = |low, high, per_gap| {
        batch_sizes(&run(&[two_sizes(low, high)], per_gap, &[None]).generated[0])
    };
    // 2·16^(k/4) = 4, 8, 16.
    assert_eq!(generated(2.0, 32.0, 3), [4.0, 8.0, 16.0]);
    // 4·2^(k/4) = 4.76, 5.66, 6.73.
    assert_eq!(generated(4.0, 8.0, 3), [5.0, 6.0, 7.0]);
    // √6 = 2.45 rounds to the measured 2: skipped.
    assert!(generated(2.0, 3.0, 1).is_empty());
    // 2.38, 2.83, 3.36 round to 2 (measured), 3, 3 (repeat): one sample.
    assert_eq!(generated(2.0, 4.0, 3), [3.0]);
    assert!(generated(2.0, 32.0, 0).is_empty());
    // Values come from the interpolant: linear between (2, 0) and (32, 1) at 8.
    let synthesis = run(&[two_sizes(2.0, 32.0)], 1, &[None]);
    assert_eq!(synthesis.generated[0].samples[0].values, [0.2]);
}

#[test]
fn generated_values_are_clamped_to_their_bounds() {
    // 100 - (x - 5)² through 5 points: the polynomial wins the blinded evaluation (it is
    // exact) and peaks at 100 at batch size 5, above the bound of 97.
    let parabola = |x: f64| 100.0 - (x - 5.0) * (x - 5.0);
    let sizes = [1.0, 2.0, 3.0, 7.0, 9.0];
    let samples: Vec<Sample> = sizes
        .iter()
        .map(|&x| Sample {
            batch_size: x,
            values: vec![parabola(x), parabola(x)],
        })
        .collect();
    let truth = [Series {
        workload: "peaked".into(),
        samples,
    }];
    let synthesis = run(&truth, 1, &[Some((0.0, 97.0)), None]);
    assert_eq!(synthesis.best[0].method, Interpolation::Barycentric);
    let at_five = synthesis.generated[0]
        .samples
        .iter()
        .find(|s| s.batch_size == 5.0)
        .map(|s| s.values.clone());
    let Some(values) = at_five else {
        panic!("no sample at 5 in {:?}", synthesis.generated[0]);
    };
    assert_eq!(values[0], 97.0);
    assert!((values[1] - 100.0).abs() < 1e-9);
}

#[test]
fn workloads_with_fewer_than_three_sizes_default_to_linear() {
    let truth = [
        series("none", &[]),
        series("one", &[(32.0, &[10.0])]),
        series("two", &[(32.0, &[10.0]), (32.0, &[10.0]), (128.0, &[20.0])]),
    ];
    let synthesis = run(&truth, 1, &[PERCENT]);
    assert_eq!(synthesis.scores.len(), 12);
    assert!(
        synthesis
            .scores
            .iter()
            .all(|s| s.predictions == 0 && s.rmse.is_none() && s.mae.is_none())
    );
    assert!(
        synthesis
            .best
            .iter()
            .all(|b| b.method == Interpolation::Linear)
    );
    let workloads: Vec<&str> = synthesis.best.iter().map(|b| b.workload.as_str()).collect();
    assert_eq!(workloads, ["none", "one", "two"]);
    assert!(synthesis.generated[0].samples.is_empty());
    assert!(synthesis.generated[1].samples.is_empty());
    assert_eq!(batch_sizes(&synthesis.generated[2]), [64.0]);
    assert_close(
        synthesis.generated[2].samples[0].values[0],
        10.0 + 10.0 * 32.0 / 96.0,
    );
}

#[test]
fn errors_name_the_workload_and_the_sample_at_fault() {
    let fail = |truth: &[Series], bounds: &[Option<(f64, f64)>]| match synthesize(truth, 1, bounds)
    {
        Ok(_) => panic!("accepted {truth:?}"),
        Err(error) => (error.clone(), error.to_string()),
    };
    let good = series("ok", &[(1.0, &[1.0])]);
    let cases: Vec<(Vec<Series>, &str)> = vec![
        (
            vec![
                good.clone(),
                series("bad", &[(1.0, &[1.0]), (2.0, &[1.0, 2.0])]),
            ],
            "sample 1",
        ),
        (vec![series("bad", &[(f64::NAN, &[1.0])])], "sample 0"),
        (
            vec![series("bad", &[(1.0, &[1.0]), (-2.0, &[1.0])])],
            "sample 1",
        ),
        (vec![series("bad", &[(0.0, &[1.0])])], "sample 0"),
        (
            vec![series("bad", &[(1.0, &[1.0]), (2.0, &[f64::INFINITY])])],
            "sample 1",
        ),
        (
            vec![series(
                "bad",
                &[(4.0, &[1.0]), (1.0, &[1.0]), (4.0, &[2.0])],
            )],
            "samples 0 and 2",
        ),
    ];
    for (truth, index) in cases {
        let (_, message) = fail(&truth, &[PERCENT]);
        assert!(
            message.contains("\"bad\"") && message.contains(index),
            "{message}"
        );
    }
    let (error, message) = fail(&[good.clone(), good.clone()], &[PERCENT]);
    assert!(matches!(
        error,
        SynthesisError::DuplicateWorkload {
            first: 0,
            second: 1,
            ..
        }
    ));
    assert!(message.contains("\"ok\""), "{message}");
    let (error, _) = fail(std::slice::from_ref(&good), &[Some((10.0, 0.0))]);
    assert!(matches!(
        error,
        SynthesisError::InvalidBounds { feature: 0, .. }
    ));
    let (error, _) = fail(&[good], &[Some((f64::NAN, 1.0))]);
    assert!(matches!(error, SynthesisError::InvalidBounds { .. }));
    let (error, message) = fail(
        &[series("huge", &[(1.0, &[-f64::MAX]), (4.0, &[f64::MAX])])],
        &[None],
    );
    assert!(
        matches!(error, SynthesisError::NonFiniteResult { .. }),
        "{message}"
    );
}

/// The engine answers in the contract's types: the crate-level `synthesize` (what the
/// component calls) gives the same answer, and turns a rejection into `invalid-input`.
#[test]
fn the_contract_types_carry_the_same_answer() {
    let truth = [series(
        "w1",
        &[(2.0, &[1.0]), (32.0, &[50.0]), (256.0, &[70.0])],
    )];
    let synthesis = run(&truth, 1, &[PERCENT]);
    let through_api = crate::synthesize(&truth, 1, &[PERCENT]);
    assert_eq!(through_api, Ok(synthesis.clone()));
    let Ok(through_api) = through_api else {
        unreachable!()
    };
    assert_eq!(
        through_api.best,
        [tandem_api::BestMethod {
            workload: "w1".into(),
            method: synthesis.best[0].method,
        }]
    );
    assert_eq!(through_api.scores[0].predictions, 1);
    let bad = [Series {
        workload: "w7".into(),
        samples: vec![Sample {
            batch_size: -1.0,
            values: vec![1.0],
        }],
    }];
    match crate::synthesize(&bad, 1, &[PERCENT]) {
        Err(tandem_api::EngineError::InvalidInput(message)) => {
            assert!(message.contains("\"w7\", sample 0"), "{message}");
        }
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn synthesis_round_trips_through_json() {
    let truth = [
        series("a", &[(2.0, &[1.0]), (32.0, &[50.0]), (256.0, &[70.0])]),
        series("b", &[(64.0, &[3.0])]),
    ];
    let synthesis = run(&truth, 2, &[PERCENT]);
    let json = serde_json::to_string(&synthesis).unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Synthesis>(&json).ok(),
        Some(synthesis)
    );
}

fn any_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -10.0..200.0_f64,
        1 => prop::num::f64::ANY,
        1 => Just(0.0),
        1 => Just(f64::MAX),
    ]
}

fn any_series() -> impl Strategy<Value = Vec<Series>> {
    let sample = (any_number(), prop::collection::vec(any_number(), 0..4))
        .prop_map(|(batch_size, values)| Sample { batch_size, values });
    let one = (0_u8..4, prop::collection::vec(sample, 0..7)).prop_map(|(label, samples)| Series {
        workload: format!("w{label}"),
        samples,
    });
    prop::collection::vec(one, 0..4)
}

fn any_bounds() -> impl Strategy<Value = Vec<Option<(f64, f64)>>> {
    prop::collection::vec(prop::option::of((any_number(), any_number())), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_input_never_panics(truth in any_series(), per_gap in 0_u32..5, bounds in any_bounds()) {
        let _ = synthesize(&truth, per_gap, &bounds);
    }

    #[test]
    fn valid_input_yields_bounded_samples_strictly_inside_gaps(
        workloads in prop::collection::vec(
            (increasing_sizes(7), prop::collection::vec(prop::collection::vec(0.0..100.0_f64, 2), 8)),
            1..4,
        ),
        per_gap in 0_u32..6,
    ) {
        let truth: Vec<Series> = workloads
            .iter()
            .enumerate()
            .map(|(i, (sizes, values))| Series {
                workload: format!("w{i}"),
                samples: sizes
                    .iter()
                    .zip(values)
                    .map(|(&batch_size, v)| Sample { batch_size, values: v.clone() })
                    .collect(),
            })
            .collect();
        let synthesis = synthesize(&truth, per_gap, &[PERCENT, None]);
        prop_assert!(synthesis.is_ok(), "{:?}", synthesis.err());
        let synthesis = synthesis.unwrap_or_else(|_| unreachable!());
        prop_assert_eq!(synthesis.scores.len(), truth.len() * Interpolation::ALL.len());
        prop_assert_eq!(synthesis.best.len(), truth.len());
        for (measured, generated) in truth.iter().zip(&synthesis.generated) {
            prop_assert_eq!(&measured.workload, &generated.workload);
            let sizes: Vec<f64> = measured.samples.iter().map(|s| s.batch_size).collect();
            let (low, high) = (sizes[0], sizes[sizes.len() - 1]);
            let mut previous = 0.0;
            for sample in &generated.samples {
                prop_assert!(sample.batch_size > previous);
                prop_assert!(sample.batch_size > low && sample.batch_size < high);
                prop_assert!(!sizes.contains(&sample.batch_size));
                prop_assert_eq!(sample.batch_size, sample.batch_size.round());
                prop_assert!((0.0..=100.0).contains(&sample.values[0]));
                previous = sample.batch_size;
            }
        }
    }
}
