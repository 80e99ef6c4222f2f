//! The four interpolants: piecewise linear, PCHIP (monotone piecewise cubic), natural cubic
//! spline, and the barycentric form of the polynomial through every point.
//!
//! No method ever extrapolates: outside the fitted range an interpolant returns the value at
//! the nearest end.

use tandem_api::Interpolation;

use super::error::InterpolationError;

/// A fitted interpolant: a function of `x` defined on the range of the points it was fitted to,
/// and constant (the end value) outside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Interpolant {
    method: Interpolation,
    /// Strictly increasing, finite, at least two.
    xs: Vec<f64>,
    ys: Vec<f64>,
    shape: Shape,
}

/// How the value between two points is computed.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// Straight segments; also what every method degrades to with two points.
    Linear,
    /// Cubic Hermite segments with these slopes at the points (PCHIP and the natural spline
    /// differ only in how they choose the slopes).
    Hermite { slopes: Vec<f64> },
    /// `p(u) = Σ w_j y_j / (u - u_j) / Σ w_j / (u - u_j)` in rescaled coordinates
    /// `u = (x - origin) * inverse_capacity`.
    Barycentric {
        nodes: Vec<f64>,
        weights: Vec<f64>,
        origin: f64,
        inverse_capacity: f64,
    },
}

impl Interpolant {
    /// Fits `method` to the points `(xs[i], ys[i])`, given in any order. Equal `x` with equal
    /// `y` count once; at least two distinct `x` are needed. With exactly two, every method is
    /// the straight line through them.
    pub fn fit(method: Interpolation, xs: &[f64], ys: &[f64]) -> Result<Self, InterpolationError> {
        if xs.len() != ys.len() {
            return Err(InterpolationError::LengthMismatch {
                xs: xs.len(),
                ys: ys.len(),
            });
        }
        for (index, (&x, &y)) in xs.iter().zip(ys).enumerate() {
            if !x.is_finite() {
                return Err(InterpolationError::NonFiniteX { index, value: x });
            }
            if !y.is_finite() {
                return Err(InterpolationError::NonFiniteY { index, value: y });
            }
        }
        let mut order: Vec<usize> = (0..xs.len()).collect();
        order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]).then(a.cmp(&b)));
        // Indices of the points kept: the first of each run of equal x.
        let mut kept: Vec<usize> = Vec::with_capacity(xs.len());
        for index in order {
            if let Some(&previous) = kept.last()
                && xs[index] == xs[previous]
            {
                if ys[index] != ys[previous] {
                    return Err(InterpolationError::ConflictingDuplicate {
                        x: xs[previous],
                        first: previous,
                        second: index,
                    });
                }
                continue;
            }
            kept.push(index);
        }
        let sorted_xs: Vec<f64> = kept.iter().map(|&i| xs[i]).collect();
        let sorted_ys: Vec<f64> = kept.iter().map(|&i| ys[i]).collect();
        if sorted_xs.len() < 2 {
            return Err(InterpolationError::TooFewPoints {
                distinct: sorted_xs.len(),
            });
        }
        Ok(Self::build(method, sorted_xs, sorted_ys))
    }

    /// Builds the interpolant. `xs` must be finite and strictly increasing, `ys` finite and as
    /// long, with at least two points: [`Interpolant::fit`] and [`synthesize`] check that first.
    pub(super) fn build(method: Interpolation, xs: Vec<f64>, ys: Vec<f64>) -> Self {
        let shape = if xs.len() < 3 {
            // The cubic through two points with secant slopes, and the degree-one polynomial,
            // are the line; using the line's own arithmetic makes them tie with `Linear`
            // exactly in the blinded evaluation instead of differing by rounding.
            Shape::Linear
        } else {
            match method {
                Interpolation::Linear => Shape::Linear,
                Interpolation::Pchip => Shape::Hermite {
                    slopes: pchip_slopes(&xs, &ys),
                },
                Interpolation::CubicSpline => Shape::Hermite {
                    slopes: natural_spline_slopes(&xs, &ys),
                },
                Interpolation::Barycentric => barycentric_shape(&xs),
            }
        };
        Self {
            method,
            xs,
            ys,
            shape,
        }
    }

    /// The method this interpolant was fitted with.
    pub fn method(&self) -> Interpolation {
        self.method
    }

    /// The smallest and largest `x` fitted: outside this range the value is the end value.
    pub fn domain(&self) -> (f64, f64) {
        (
            self.xs.first().copied().unwrap_or(f64::NAN),
            self.xs.last().copied().unwrap_or(f64::NAN),
        )
    }

    /// The interpolated value at `x`; the end value outside the fitted range (no
    /// extrapolation). At a fitted point it is that point's `y`, exactly.
    pub fn evaluate(&self, x: f64) -> Result<f64, InterpolationError> {
        if !x.is_finite() {
            return Err(InterpolationError::NonFiniteQuery { x });
        }
        let value = self.value_at(x);
        if value.is_finite() {
            Ok(value)
        } else {
            Err(InterpolationError::NonFiniteResult { x })
        }
    }

    /// The value at a finite `x`; may be non-finite if intermediate results overflow.
    pub(super) fn value_at(&self, x: f64) -> f64 {
        let (xs, ys) = (&self.xs, &self.ys);
        let last = xs.len() - 1;
        if x <= xs[0] {
            return ys[0];
        }
        if x >= xs[last] {
            return ys[last];
        }
        // Fitted points are measurements: returning them verbatim, rather than through the
        // segment formula's rounding, lets callers rely on exact reproduction.
        let segment = match xs.binary_search_by(|probe| probe.total_cmp(&x)) {
            Ok(index) => return ys[index],
            // x is strictly inside the range, so 1 <= index <= last.
            Err(index) => index - 1,
        };
        let (x0, x1, y0, y1) = (xs[segment], xs[segment + 1], ys[segment], ys[segment + 1]);
        let width = x1 - x0;
        let t = (x - x0) / width;
        match &self.shape {
            Shape::Linear => y0 + (y1 - y0) * t,
            Shape::Hermite { slopes } => {
                let s = 1.0 - t;
                let (d0, d1) = (slopes[segment], slopes[segment + 1]);
                y0 * (1.0 + 2.0 * t) * s * s + width * d0 * t * s * s + y1 * t * t * (3.0 - 2.0 * t)
                    - width * d1 * t * t * s
            }
            Shape::Barycentric {
                nodes,
                weights,
                origin,
                inverse_capacity,
            } => {
                let u = (x - origin) * inverse_capacity;
                let (mut numerator, mut denominator) = (0.0, 0.0);
                for ((&node, &weight), &y) in nodes.iter().zip(weights).zip(ys) {
                    // Rescaling can map an x just beside a point onto the point's node.
                    if u == node {
                        return y;
                    }
                    let term = weight / (u - node);
                    numerator += term * y;
                    denominator += term;
                }
                numerator / denominator
            }
        }
    }
}

/// Sign as -1, 0 or 1 (zero for 0.0, unlike `f64::signum`), as NumPy's `sign`.
fn sign(value: f64) -> i8 {
    if value > 0.0 {
        1
    } else if value < 0.0 {
        -1
    } else {
        0
    }
}

/// PCHIP slopes at each point (Fritsch–Carlson, as SciPy's `PchipInterpolator`), `xs.len() >= 3`.
///
/// Interior: zero where the neighbouring secants differ in sign or either is flat (a local
/// extremum or plateau must stay flat, or the curve would overshoot); otherwise the weighted
/// harmonic mean of the secants, which keeps every slope within three times both secants,
/// the Fritsch–Carlson condition for a monotone segment. Ends: the one-sided three-point
/// estimate, adjusted as SciPy does so it cannot create an overshoot.
pub(super) fn pchip_slopes(xs: &[f64], ys: &[f64]) -> Vec<f64> {
    let n = xs.len();
    let widths: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    let secants: Vec<f64> = ys
        .windows(2)
        .zip(&widths)
        .map(|(w, width)| (w[1] - w[0]) / width)
        .collect();
    let mut slopes = vec![0.0; n];
    for k in 1..n - 1 {
        let (before, after) = (secants[k - 1], secants[k]);
        if sign(before) == 0 || sign(after) == 0 || sign(before) != sign(after) {
            continue;
        }
        let w1 = 2.0 * widths[k] + widths[k - 1];
        let w2 = widths[k] + 2.0 * widths[k - 1];
        slopes[k] = (w1 + w2) / (w1 / before + w2 / after);
    }
    slopes[0] = pchip_end_slope(widths[0], widths[1], secants[0], secants[1]);
    slopes[n - 1] = pchip_end_slope(widths[n - 2], widths[n - 3], secants[n - 2], secants[n - 3]);
    slopes
}

/// SciPy's `_edge_case`: the three-point slope at an end from the nearest interval (`h0`,
/// secant `m0`) and the next (`h1`, `m1`); zero if it points against the data, and at most
/// three times the end secant where the data turns, so the end segment stays monotone.
fn pchip_end_slope(h0: f64, h1: f64, m0: f64, m1: f64) -> f64 {
    let slope = ((2.0 * h0 + h1) * m0 - h0 * m1) / (h0 + h1);
    if sign(slope) != sign(m0) {
        0.0
    } else if sign(m0) != sign(m1) && slope.abs() > 3.0 * m0.abs() {
        3.0 * m0
    } else {
        slope
    }
}

/// Slopes at each point of the natural cubic spline through the points, `xs.len() >= 3`.
///
/// Solves the tridiagonal system for the second derivatives `M` (Thomas algorithm; the matrix
/// is strictly diagonally dominant, so no pivoting is needed) with `M = 0` at both ends, then
/// turns them into end-of-segment slopes so the spline can be evaluated as Hermite segments.
fn natural_spline_slopes(xs: &[f64], ys: &[f64]) -> Vec<f64> {
    let n = xs.len();
    let widths: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    let secants: Vec<f64> = ys
        .windows(2)
        .zip(&widths)
        .map(|(w, width)| (w[1] - w[0]) / width)
        .collect();
    // Row i (1..n-1): h[i-1] M[i-1] + 2 (h[i-1] + h[i]) M[i] + h[i] M[i+1] = 6 (δ[i] - δ[i-1]).
    // Forward sweep: reduced super-diagonal and right-hand side, indexed by point.
    let mut upper = vec![0.0; n];
    let mut rhs = vec![0.0; n];
    for i in 1..n - 1 {
        let lower = if i > 1 { widths[i - 1] } else { 0.0 };
        let diagonal = 2.0 * (widths[i - 1] + widths[i]) - lower * upper[i - 1];
        upper[i] = if i < n - 2 { widths[i] / diagonal } else { 0.0 };
        rhs[i] = (6.0 * (secants[i] - secants[i - 1]) - lower * rhs[i - 1]) / diagonal;
    }
    let mut second = vec![0.0; n];
    for i in (1..n - 1).rev() {
        second[i] = rhs[i] - upper[i] * second[i + 1];
    }
    let mut slopes: Vec<f64> = (0..n - 1)
        .map(|i| secants[i] - widths[i] * (2.0 * second[i] + second[i + 1]) / 6.0)
        .collect();
    slopes.push(secants[n - 2] + widths[n - 2] * (second[n - 2] + 2.0 * second[n - 1]) / 6.0);
    slopes
}

/// Barycentric weights `w_j = 1 / Π_{k≠j} (u_j - u_k)`, `xs.len() >= 3`.
///
/// The points are first mapped onto an interval of length 4 (capacity 1), as SciPy's
/// `BarycentricInterpolator` does: the weights of spread-out batch sizes (2..1024) would
/// otherwise underflow or overflow after a few points. The interpolant does not change, since
/// the form is invariant under rescaling the weights.
fn barycentric_shape(xs: &[f64]) -> Shape {
    let origin = xs[0];
    let inverse_capacity = 4.0 / (xs[xs.len() - 1] - origin);
    let nodes: Vec<f64> = xs.iter().map(|x| (x - origin) * inverse_capacity).collect();
    let weights = nodes
        .iter()
        .enumerate()
        .map(|(j, &node)| {
            let product: f64 = nodes
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != j)
                .map(|(_, &other)| node - other)
                .product();
            1.0 / product
        })
        .collect();
    Shape::Barycentric {
        nodes,
        weights,
        origin,
        inverse_capacity,
    }
}
