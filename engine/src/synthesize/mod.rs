//! Synthetic workloads by interpolation across batch sizes (PriRecT's augmentation).
//!
//! The knowledge base is bootstrapped from measured profiles of a few training runs per
//! workload (one model on one dataset; here only an opaque label). PriRecT enlarged that set by
//! treating each telemetry feature as a function of the batch size and interpolating between
//! the measured batch sizes. This module does the same, in three steps:
//!
//! 1. **Interpolation** ([`Interpolation`], [`Interpolant`], in `interpolate`): piecewise linear, PCHIP (monotone
//!    piecewise cubic), natural cubic spline, and the barycentric form of the polynomial through
//!    every point. The last one can oscillate between points; it is here so the blinded
//!    evaluation can show when it does.
//! 2. **Blinded evaluation** ([`MethodScore`]), the way PriRecT judged methods: every interior
//!    measured point is left out in turn, predicted from the others, and the errors are pooled
//!    into an RMSE and an MAE per workload and method. The lowest RMSE picks the workload's
//!    method.
//! 3. **Generation** ([`synthesize`]): new samples at geometric midpoints between consecutive
//!    measured batch sizes, each feature from the workload's chosen method, clamped to the
//!    feature's bounds (0..100 for percentages).
//!
//! No method ever extrapolates: outside the measured range an interpolant returns the value at
//! the nearest end. Telemetry beyond the largest measured batch size would be invented rather
//! than interpolated (a larger batch may not even fit in memory), and a synthetic profile that
//! looks measured but is not would mislead the knowledge base it is meant to enlarge.
//!
//! The answer is the contract's own types ([`Synthesis`], [`MethodScore`], [`BestMethod`],
//! [`Interpolation`], from [`tandem_api`], the mirror of the WIT), so what this module returns
//! is what the component hands its host, with no conversion on the way.
//!
//! ```
//! use tandem_engine::synthesize::{synthesize, Interpolation, Sample, Series};
//!
//! let run = |batch_size, util| Sample { batch_size, values: vec![util] };
//! let measured = [Series {
//!     workload: "w1".into(),
//!     samples: vec![run(32.0, 40.0), run(128.0, 60.0), run(512.0, 70.0)],
//! }];
//! let synthesis = synthesize(&measured, 1, &[Some((0.0, 100.0))])?;
//! assert_eq!(synthesis.best[0].method, Interpolation::Linear);
//! let generated: Vec<f64> = synthesis.generated[0].samples.iter().map(|s| s.batch_size).collect();
//! assert_eq!(generated, [64.0, 256.0]); // geometric midpoints of 32..128 and 128..512
//! # Ok::<(), tandem_engine::synthesize::SynthesisError>(())
//! ```

mod error;
mod interpolate;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub use self::error::{InterpolationError, SynthesisError};
pub use self::interpolate::Interpolant;
// The contract's types: one definition, no conversions on the way in or out.
pub use tandem_api::{BestMethod, Interpolation, MethodScore, Sample, Series, Synthesis};

/// Two RMSEs closer than this fraction of the data's magnitude are a tie: such a difference is
/// floating-point rounding, not evidence that the more complex method predicts better.
const TIE_TOLERANCE: f64 = 1e-9;

/// A workload's validated points: distinct batch sizes, increasing, with one column per feature.
struct Measured<'a> {
    workload: &'a str,
    batch_sizes: Vec<f64>,
    /// `columns[feature][point]`.
    columns: Vec<Vec<f64>>,
}

/// Judges the interpolation methods on each workload, picks the best per workload, and
/// generates `points_per_gap` synthetic samples between each pair of consecutive measured batch
/// sizes.
///
/// `bounds` has one entry per feature (every sample has that many values): `Some((low, high))`
/// clamps generated values of the feature into that range (`(0.0, 100.0)` for percentages),
/// `None` leaves them unclamped. Measured values are taken as given, even outside their bounds.
///
/// Synthetic batch sizes are the geometric points `a·(b/a)^(k/(n+1))`, `k = 1..=n`, between
/// consecutive measured `a < b` (batch sizes are usually powers of two, so geometric spacing
/// spreads the points evenly across the range that matters), rounded to whole batch sizes;
/// a rounded size that is measured, outside `(a, b)` or already generated is skipped, so a
/// gap may receive fewer than `points_per_gap` samples. The work is proportional to
/// `points_per_gap` times the number of gaps.
pub fn synthesize(
    ground_truth: &[Series],
    points_per_gap: u32,
    bounds: &[Option<(f64, f64)>],
) -> Result<Synthesis, SynthesisError> {
    for (feature, bound) in bounds.iter().enumerate() {
        if let Some((low, high)) = *bound {
            // `f64::clamp` panics on NaN or reversed bounds; reject them here, by feature.
            if !low.is_finite() || !high.is_finite() || low > high {
                return Err(SynthesisError::InvalidBounds { feature, low, high });
            }
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, series) in ground_truth.iter().enumerate() {
        if let Some(&first) = seen.get(series.workload.as_str()) {
            return Err(SynthesisError::DuplicateWorkload {
                workload: series.workload.clone(),
                first,
                second: index,
            });
        }
        seen.insert(&series.workload, index);
    }
    let measured = ground_truth
        .iter()
        .map(|series| measure(series, bounds.len()))
        .collect::<Result<Vec<_>, _>>()?;

    let mut synthesis = Synthesis {
        scores: Vec::with_capacity(measured.len() * Interpolation::ALL.len()),
        best: Vec::with_capacity(measured.len()),
        generated: Vec::with_capacity(measured.len()),
    };
    for workload in &measured {
        let scores: Vec<MethodScore> = Interpolation::ALL
            .iter()
            .map(|&method| blinded_score(workload, method))
            .collect();
        let best = best_method(workload, &scores);
        synthesis.scores.extend(scores);
        synthesis.best.push(BestMethod {
            workload: workload.workload.to_owned(),
            method: best,
        });
        synthesis
            .generated
            .push(generate(workload, best, points_per_gap, bounds)?);
    }
    Ok(synthesis)
}

/// Validates a series and reduces it to distinct, increasing batch sizes.
fn measure(series: &Series, features: usize) -> Result<Measured<'_>, SynthesisError> {
    let workload = series.workload.as_str();
    for (sample, entry) in series.samples.iter().enumerate() {
        let batch_size = entry.batch_size;
        if !batch_size.is_finite() {
            return Err(SynthesisError::NonFiniteBatchSize {
                workload: workload.to_owned(),
                sample,
                batch_size,
            });
        }
        if batch_size <= 0.0 {
            return Err(SynthesisError::NonPositiveBatchSize {
                workload: workload.to_owned(),
                sample,
                batch_size,
            });
        }
        if entry.values.len() != features {
            return Err(SynthesisError::ValueCount {
                workload: workload.to_owned(),
                sample,
                found: entry.values.len(),
                expected: features,
            });
        }
        if let Some((feature, &value)) = entry
            .values
            .iter()
            .enumerate()
            .find(|(_, value)| !value.is_finite())
        {
            return Err(SynthesisError::NonFiniteValue {
                workload: workload.to_owned(),
                sample,
                feature,
                value,
            });
        }
    }
    let samples = &series.samples;
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by(|&a, &b| {
        samples[a]
            .batch_size
            .total_cmp(&samples[b].batch_size)
            .then(a.cmp(&b))
    });
    let mut kept: Vec<usize> = Vec::with_capacity(order.len());
    for index in order {
        if let Some(&previous) = kept.last()
            && samples[index].batch_size == samples[previous].batch_size
        {
            if samples[index].values != samples[previous].values {
                return Err(SynthesisError::ConflictingDuplicate {
                    workload: workload.to_owned(),
                    first: previous,
                    second: index,
                    batch_size: samples[index].batch_size,
                });
            }
            continue;
        }
        kept.push(index);
    }
    Ok(Measured {
        workload,
        batch_sizes: kept.iter().map(|&i| samples[i].batch_size).collect(),
        columns: (0..features)
            .map(|feature| kept.iter().map(|&i| samples[i].values[feature]).collect())
            .collect(),
    })
}

/// Leave-one-out over the interior points: each is predicted from all the others. End points
/// are never left out, since predicting them would be extrapolation, which no method does.
fn blinded_score(workload: &Measured<'_>, method: Interpolation) -> MethodScore {
    let points = workload.batch_sizes.len();
    let (mut squared, mut absolute, mut predictions) = (0.0, 0.0, 0_usize);
    let mut overflowed = false;
    for left_out in 1..points.saturating_sub(1) {
        let xs = without(&workload.batch_sizes, left_out);
        for column in &workload.columns {
            let interpolant = Interpolant::build(method, xs.clone(), without(column, left_out));
            let predicted = interpolant.value_at(workload.batch_sizes[left_out]);
            let error = predicted - column[left_out];
            overflowed |= !error.is_finite();
            squared += error * error;
            absolute += error.abs();
            predictions += 1;
        }
    }
    let (rmse, mae) = if predictions == 0 {
        (None, None)
    } else if overflowed {
        (Some(f64::INFINITY), Some(f64::INFINITY))
    } else {
        let count = predictions as f64;
        (Some((squared / count).sqrt()), Some(absolute / count))
    };
    MethodScore {
        workload: workload.workload.to_owned(),
        method,
        rmse,
        mae,
        // Interior points times features: far below u32::MAX for any input that fits the
        // sandbox's memory; saturate rather than wrap all the same.
        predictions: u32::try_from(predictions).unwrap_or(u32::MAX),
    }
}

/// `values` without the element at `index`.
fn without(values: &[f64], index: usize) -> Vec<f64> {
    values
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != index)
        .map(|(_, &v)| v)
        .collect()
}

/// The lowest finite RMSE, ties (within [`TIE_TOLERANCE`] of the data's magnitude) to the
/// earlier method in [`Interpolation::ALL`]; `Linear` when no method could be judged.
fn best_method(workload: &Measured<'_>, scores: &[MethodScore]) -> Interpolation {
    let magnitude = workload
        .columns
        .iter()
        .flatten()
        .fold(1.0_f64, |largest, v| largest.max(v.abs()));
    let margin = TIE_TOLERANCE * magnitude;
    let mut best: Option<(Interpolation, f64)> = None;
    for score in scores {
        let Some(rmse) = score.rmse.filter(|r| r.is_finite()) else {
            continue;
        };
        match best {
            Some((_, best_rmse)) if rmse >= best_rmse - margin => {}
            _ => best = Some((score.method, rmse)),
        }
    }
    best.map_or(Interpolation::Linear, |(method, _)| method)
}

/// The synthetic samples of one workload.
fn generate(
    workload: &Measured<'_>,
    method: Interpolation,
    points_per_gap: u32,
    bounds: &[Option<(f64, f64)>],
) -> Result<Series, SynthesisError> {
    let mut series = Series {
        workload: workload.workload.to_owned(),
        samples: Vec::new(),
    };
    let batch_sizes = &workload.batch_sizes;
    if batch_sizes.len() < 2 {
        return Ok(series);
    }
    let interpolants: Vec<Interpolant> = workload
        .columns
        .iter()
        .map(|column| Interpolant::build(method, batch_sizes.clone(), column.clone()))
        .collect();
    let steps = f64::from(points_per_gap) + 1.0;
    for gap in batch_sizes.windows(2) {
        let (low, high) = (gap[0], gap[1]);
        let ratio = high / low;
        let mut previous = low;
        for k in 1..=points_per_gap {
            let batch_size = (low * ratio.powf(f64::from(k) / steps)).round();
            // Rounding can land on a measured size, outside the gap (for fractional measured
            // sizes) or on the size generated just before (narrow gaps); the points increase
            // with k, so comparing with the previous one removes every repeat.
            if batch_size <= previous || batch_size >= high {
                continue;
            }
            previous = batch_size;
            let mut values = Vec::with_capacity(interpolants.len());
            for (feature, interpolant) in interpolants.iter().enumerate() {
                let value = interpolant.value_at(batch_size);
                if !value.is_finite() {
                    return Err(SynthesisError::NonFiniteResult {
                        workload: workload.workload.to_owned(),
                        method,
                        feature,
                        batch_size,
                    });
                }
                values.push(match bounds[feature] {
                    Some((floor, ceiling)) => value.clamp(floor, ceiling),
                    None => value,
                });
            }
            series.samples.push(Sample { batch_size, values });
        }
    }
    Ok(series)
}
