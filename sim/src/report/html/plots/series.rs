//! What a plot shows, before it is drawn: each policy's points ([`Series`]), the axes
//! ([`Plot`]), and the shaping of the report's samples into lines (CDF staircases, thinned
//! samples, timelines, cut tails, axis ranges).

use super::look::Look;
use crate::metrics::{PolicyReport, TimePoint, cdf};

/// Width and height of the main plots, px.
pub(crate) const PLOT_SIZE: (u32, u32) = (900, 450);
/// Size of the queue plot, a smaller companion of the utilization plot.
pub(crate) const SMALL_PLOT_SIZE: (u32, u32) = (900, 300);

/// One policy's line in a plot.
pub(crate) struct Series<'a> {
    pub(crate) name: &'a str,
    pub(crate) look: Look,
    pub(crate) points: Vec<(f64, f64)>,
}

/// A line plot, ready to draw.
pub(crate) struct Plot<'a> {
    pub(crate) x_desc: &'static str,
    pub(crate) y_desc: &'static str,
    pub(crate) x: (f64, f64),
    pub(crate) log_x: bool,
    pub(crate) y: (f64, f64),
    pub(crate) series: Vec<Series<'a>>,
    pub(crate) size: (u32, u32),
}

/// At most about 200 points of the CDF of `values` (non-finite ones dropped), as
/// `(value, share of values ≤ it)`: enough for a smooth line, and the page stays small for
/// traces of any length.
pub(crate) fn sample_cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    cdf(&sorted)
}

/// A staircase CDF cut at `x = hi`: its line goes on flat to `hi` at the share reached there.
pub(crate) fn clip_x(steps: &[(f64, f64)], hi: f64) -> Vec<(f64, f64)> {
    let mut clipped: Vec<(f64, f64)> = steps.iter().copied().take_while(|p| p.0 <= hi).collect();
    if clipped.len() < steps.len() {
        let reached = clipped.last().map_or(0.0, |p| p.1);
        clipped.push((hi, reached));
    }
    clipped
}

/// The series `points_of` makes for each policy, and the names of the policies it made none
/// for (they are left out of the plot).
pub(crate) fn collect<'a>(
    looks: &[(&'a PolicyReport, Look)],
    points_of: impl Fn(&PolicyReport) -> Vec<(f64, f64)>,
) -> (Vec<Series<'a>>, Vec<&'a str>) {
    let mut series = Vec::new();
    let mut omitted = Vec::new();
    for &(p, look) in looks {
        let points = points_of(p);
        if points.is_empty() {
            omitted.push(p.policy.as_str());
        } else {
            series.push(Series {
                name: &p.policy,
                look,
                points,
            });
        }
    }
    (series, omitted)
}

/// A CDF given as `(value, share ≤ value)` points, as the staircase it is (drawn straight, a
/// sparse CDF would suggest values between its points). Non-finite points are dropped.
pub(crate) fn step_cdf(points: impl IntoIterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut steps = Vec::new();
    let mut below = 0.0;
    for (x, share) in points
        .into_iter()
        .filter(|(x, s)| x.is_finite() && s.is_finite())
    {
        steps.push((x, below));
        steps.push((x, share));
        below = share;
    }
    steps
}

/// A timeline as points at the middle of its bins (time in hours), of the value `y_of` picks.
pub(crate) fn timeline_points(
    timeline: &[TimePoint],
    y_of: impl Fn(&TimePoint) -> f64,
) -> Vec<(f64, f64)> {
    // The bins are equal; their width is the distance between two starts.
    let width = match timeline {
        [first, second, ..] => second.t_s - first.t_s,
        _ => 0.0,
    };
    timeline
        .iter()
        .map(|point| ((point.t_s + width / 2.0) / 3600.0, y_of(point)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// The x range covering every point, and whether it should be logarithmic: only when
/// `may_log`, every x is positive and they span more than two decades.
pub(crate) fn x_range(series: &[Series<'_>], may_log: bool) -> ((f64, f64), bool) {
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let lo = xs().fold(f64::INFINITY, f64::min);
    let hi = xs().fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return ((0.0, 1.0), false);
    }
    if may_log && lo > 0.0 && hi / lo > 100.0 {
        // A little room on both sides, in log space.
        return ((lo / 1.15, hi * 1.15), true);
    }
    // Linear axes start at 0 unless values go below it (a job may run faster shared).
    let lo = lo.min(0.0);
    let span = hi - lo;
    if span <= 0.0 {
        return ((lo, lo + 1.0), false);
    }
    ((lo, hi + 0.03 * span), false)
}
