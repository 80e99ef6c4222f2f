//! Tests of interpolation and synthesis, by topic; the helpers they share are here.

mod futurewei;
mod interpolation;
mod synthesis;

use proptest::prelude::*;

use super::{BestMethod, Interpolant, Interpolation, Sample, Series, Synthesis, synthesize};

pub(super) const PERCENT: Option<(f64, f64)> = Some((0.0, 100.0));

fn fit(method: Interpolation, xs: &[f64], ys: &[f64]) -> Interpolant {
    match Interpolant::fit(method, xs, ys) {
        Ok(interpolant) => interpolant,
        Err(error) => panic!("{method} fit of {xs:?} -> {ys:?}: {error}"),
    }
}

fn at(interpolant: &Interpolant, x: f64) -> f64 {
    match interpolant.evaluate(x) {
        Ok(value) => value,
        Err(error) => panic!("evaluate at {x}: {error}"),
    }
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-12 * (1.0 + expected.abs()),
        "{actual} != {expected}"
    );
}

fn series(workload: &str, points: &[(f64, &[f64])]) -> Series {
    Series {
        workload: workload.into(),
        samples: points
            .iter()
            .map(|&(batch_size, values)| Sample {
                batch_size,
                values: values.to_vec(),
            })
            .collect(),
    }
}

fn run(ground_truth: &[Series], points_per_gap: u32, bounds: &[Option<(f64, f64)>]) -> Synthesis {
    match synthesize(ground_truth, points_per_gap, bounds) {
        Ok(synthesis) => synthesis,
        Err(error) => panic!("synthesize: {error}"),
    }
}

fn batch_sizes(series: &Series) -> Vec<f64> {
    series.samples.iter().map(|s| s.batch_size).collect()
}

/// Strictly increasing batch sizes: a start and positive gaps.
fn increasing_sizes(max_points: usize) -> impl Strategy<Value = Vec<f64>> {
    (
        1.0..64.0_f64,
        prop::collection::vec(0.5..256.0_f64, 1..max_points),
    )
        .prop_map(|(start, gaps)| {
            let mut sizes = vec![start];
            for gap in gaps {
                let next = sizes[sizes.len() - 1] + gap;
                sizes.push(next);
            }
            sizes
        })
}

/// What `synthesis.best` holds for one workload.
fn best(workload: &str, method: Interpolation) -> BestMethod {
    BestMethod {
        workload: workload.into(),
        method,
    }
}
