//! Why points could not be interpolated, and why `synthesize` rejected its input. Every cause
//! is the caller's input, so the variants carry what names it and no error wraps another.

use tandem_api::{EngineError, Interpolation};

/// Why points could not be fitted or an interpolant evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InterpolationError {
    /// `xs` and `ys` have different lengths.
    #[error("{xs} x values but {ys} y values: one y per x is needed")]
    LengthMismatch {
        /// Number of `x` values.
        xs: usize,
        /// Number of `y` values.
        ys: usize,
    },
    /// An `x` is NaN or infinite.
    #[error("point {index}: x is {value}, not a finite number")]
    NonFiniteX {
        /// Index of the point.
        index: usize,
        /// The value.
        value: f64,
    },
    /// A `y` is NaN or infinite.
    #[error("point {index}: y is {value}, not a finite number")]
    NonFiniteY {
        /// Index of the point.
        index: usize,
        /// The value.
        value: f64,
    },
    /// Two points share an `x` but not a `y`: the data is not a function of `x`.
    #[error("points {first} and {second} share x = {x} with different y values")]
    ConflictingDuplicate {
        /// The shared `x`.
        x: f64,
        /// Index of the first point at `x`.
        first: usize,
        /// Index of the point that disagrees with it.
        second: usize,
    },
    /// Fewer than two distinct `x`: nothing to interpolate between.
    #[error("{distinct} distinct x value(s): interpolation needs at least 2")]
    TooFewPoints {
        /// Number of distinct `x` given.
        distinct: usize,
    },
    /// The point to evaluate at is NaN or infinite.
    #[error("cannot evaluate at x = {x}: not a finite number")]
    NonFiniteQuery {
        /// The point.
        x: f64,
    },
    /// The value at `x` overflowed (only with magnitudes near `f64::MAX`, or a polynomial
    /// through so many points that its weights overflow).
    #[error("the interpolated value at x = {x} overflowed: the data's magnitudes are too large")]
    NonFiniteResult {
        /// The point.
        x: f64,
    },
}

/// Why [`synthesize`](super::synthesize) rejected its input. Sample indices are positions in the input series.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SynthesisError {
    /// A feature's bounds are not finite or are reversed.
    #[error("bounds of feature {feature} are ({low}, {high}): both must be finite, low <= high")]
    InvalidBounds {
        /// Index of the feature.
        feature: usize,
        /// Lower bound given.
        low: f64,
        /// Upper bound given.
        high: f64,
    },
    /// Two series carry the same workload label, so their results could not be told apart.
    #[error(
        "series {second} repeats workload {workload:?} of series {first}: labels must be unique"
    )]
    DuplicateWorkload {
        /// The label.
        workload: String,
        /// Index of the first series with it.
        first: usize,
        /// Index of the repeat.
        second: usize,
    },
    /// A sample has a different number of values than there are features (bounds).
    #[error(
        "workload {workload:?}, sample {sample}: {found} value(s), expected {expected} (one per feature bound)"
    )]
    ValueCount {
        /// The workload's label.
        workload: String,
        /// Index of the sample in its series.
        sample: usize,
        /// Number of values it has.
        found: usize,
        /// Number of features (the length of `bounds`).
        expected: usize,
    },
    /// A batch size is NaN or infinite.
    #[error(
        "workload {workload:?}, sample {sample}: batch size {batch_size} is not a finite number"
    )]
    NonFiniteBatchSize {
        /// The workload's label.
        workload: String,
        /// Index of the sample in its series.
        sample: usize,
        /// The value.
        batch_size: f64,
    },
    /// A batch size is zero or negative.
    #[error("workload {workload:?}, sample {sample}: batch size {batch_size} is not positive")]
    NonPositiveBatchSize {
        /// The workload's label.
        workload: String,
        /// Index of the sample in its series.
        sample: usize,
        /// The value.
        batch_size: f64,
    },
    /// A feature value is NaN or infinite.
    #[error(
        "workload {workload:?}, sample {sample}: feature {feature} is {value}, not a finite number"
    )]
    NonFiniteValue {
        /// The workload's label.
        workload: String,
        /// Index of the sample in its series.
        sample: usize,
        /// Index of the feature.
        feature: usize,
        /// The value.
        value: f64,
    },
    /// Two samples of a workload share a batch size but not their values. Repeated runs (other
    /// epochs, say) should be averaged by the caller, who knows whether that is meaningful.
    #[error(
        "workload {workload:?}, samples {first} and {second}: batch size {batch_size} has different values (average repeated runs first)"
    )]
    ConflictingDuplicate {
        /// The workload's label.
        workload: String,
        /// Index of the first sample at that batch size.
        first: usize,
        /// Index of the sample that disagrees with it.
        second: usize,
        /// The shared batch size.
        batch_size: f64,
    },
    /// Interpolating a feature overflowed (only with magnitudes near `f64::MAX`).
    #[error(
        "workload {workload:?}: {method} interpolation of feature {feature} at batch size {batch_size} overflowed"
    )]
    NonFiniteResult {
        /// The workload's label.
        workload: String,
        /// The method used.
        method: Interpolation,
        /// Index of the feature.
        feature: usize,
        /// Where it was evaluated.
        batch_size: f64,
    },
}

/// Every rejection is the caller's input: `invalid-input`, with the message naming the
/// workload and the sample.
impl From<SynthesisError> for EngineError {
    fn from(value: SynthesisError) -> Self {
        Self::InvalidInput(value.to_string())
    }
}
