//! Which plots the report shows and what each says: the JCT distribution, utilization and
//! queue over time, the slowdown distribution, each with its caption and a note on the
//! policies it leaves out. The page lays them out; [`draw`](super::draw) draws them.

use super::draw::{short, svg};
use super::look::Look;
use super::series::{
    PLOT_SIZE, Plot, SMALL_PLOT_SIZE, clip_x, collect, sample_cdf, step_cdf, timeline_points,
    x_range,
};
use crate::metrics::{PolicyReport, percentile};

/// One section of the plots: a heading and what goes under it.
pub(crate) struct Section<'a> {
    /// The heading.
    pub(crate) title: &'static str,
    /// Figures and notes, in order.
    pub(crate) parts: Vec<Part<'a>>,
}

/// One thing under a plot heading.
pub(crate) enum Part<'a> {
    /// A drawn plot (an SVG document, plotters having escaped its text) and its caption.
    Figure {
        /// The SVG.
        svg: String,
        /// The caption, plain text.
        caption: String,
    },
    /// No policy had data for the plot.
    NoData,
    /// The plot could not be drawn, and why.
    Unavailable(String),
    /// Policies left out of the plot above, and why.
    Omitted {
        /// Their names.
        policies: Vec<&'a str>,
        /// Why they are left out.
        why: &'static str,
    },
}

/// The plots of the applicable policies (`looks`), by section, each with a caption, and notes
/// on policies left out of them.
pub(crate) fn sections<'a>(looks: &[(&'a PolicyReport, Look)]) -> Vec<Section<'a>> {
    let mut sections = Vec::new();

    // JCT CDF.
    let mut parts = Vec::new();
    let (series, omitted) = collect(looks, |p| {
        step_cdf(
            p.jct_cdf
                .iter()
                .map(|&(jct_s, share)| (jct_s / 3600.0, share)),
        )
    });
    let (x, log_x) = x_range(&series, true);
    let caption = format!(
        "Share of jobs (y) that finished within a given time of their arrival (x){}. \
         Further up and to the left is better.",
        if log_x {
            "; the x axis is logarithmic"
        } else {
            ""
        }
    );
    parts.push(figure(
        Plot {
            x_desc: "job completion time (h)",
            y_desc: "share of jobs with JCT ≤ x",
            x,
            log_x,
            y: (0.0, 1.0),
            series,
            size: PLOT_SIZE,
        },
        caption,
    ));
    parts.extend(omitted_note(omitted, "no job finished"));

    sections.push(Section {
        title: "Job completion time",
        parts,
    });

    // Utilization and queue over time.
    let mut parts = Vec::new();
    let (series, omitted) = collect(looks, |p| {
        timeline_points(&p.timeline, |point| point.busy_gpus_pct)
    });
    let (x, _) = x_range(&series, false);
    // 0–100 %, unless rounding put a bin a hair above it.
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(100.0_f64, f64::max);
    parts.push(figure(
        Plot {
            x_desc: "time since the start of the trace (h)",
            y_desc: "busy GPUs (% of cluster)",
            x,
            log_x: false,
            y: (0.0, top),
            series,
            size: PLOT_SIZE,
        },
        "GPUs running at least one job, as a share of the cluster, averaged over 200 equal \
         intervals up to each policy's makespan (where its line ends). Finishing the same \
         work sooner ends the line earlier."
            .to_owned(),
    ));
    let (series, _) = collect(looks, |p| {
        timeline_points(&p.timeline, |point| point.queued)
    });
    let peak = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max);
    parts.push(figure(
        Plot {
            x_desc: "time since the start of the trace (h)",
            y_desc: "jobs queued",
            x,
            log_x: false,
            y: (0.0, (peak * 1.05).max(1.0)),
            series,
            size: SMALL_PLOT_SIZE,
        },
        "Jobs waiting in the queue, averaged over the same intervals.".to_owned(),
    ));
    parts.extend(omitted_note(omitted, "no timeline recorded"));

    sections.push(Section {
        title: "Cluster utilization and queue over time",
        parts,
    });

    // Slowdown distribution.
    let mut parts = Vec::new();
    let (mut series, omitted) = collect(looks, |p| step_cdf(sample_cdf(&p.slowdowns_pct)));
    let mut caption = String::from(
        "For the jobs that shared a GPU during their final run: the share (y) slowed by at most \
         a given percentage (x) against running alone. Further left is better; 0% means no \
         slowdown.",
    );
    // A few extreme slowdowns would squeeze every line against the y axis: past three times
    // the 95th percentile of all shared jobs, the axis ends at their 99th percentile, and the
    // caption says where the largest lies.
    let mut all: Vec<f64> = looks
        .iter()
        .flat_map(|(p, _)| p.slowdowns_pct.iter().copied())
        .filter(|s| s.is_finite())
        .collect();
    all.sort_by(f64::total_cmp);
    if let Some(&largest) = all.last() {
        let (p95, p99) = (percentile(&all, 0.95), percentile(&all, 0.99));
        let cut = p99 * 1.05;
        if p95 > 0.0 && largest > 3.0 * p95 && cut < largest {
            for s in &mut series {
                s.points = clip_x(&s.points, cut);
            }
            caption.push_str(&format!(
                " The x axis ends at {}% (past the 99th percentile of all shared jobs); the \
                 largest slowdown is {}%.",
                short(cut),
                short(largest)
            ));
        }
    }
    let (x, _) = x_range(&series, false);
    parts.push(figure(
        Plot {
            x_desc: "individual slowdown (%)",
            y_desc: "share of shared jobs ≤ x",
            x,
            log_x: false,
            y: (0.0, 1.0),
            series,
            size: PLOT_SIZE,
        },
        caption,
    ));
    parts.extend(omitted_note(omitted, "no job shared a GPU"));
    sections.push(Section {
        title: "Individual slowdown of jobs that shared a GPU",
        parts,
    });
    sections
}

/// The plot as a figure with its caption, or a note when it has nothing to show or could not
/// be drawn.
fn figure<'a>(plot: Plot<'_>, caption: String) -> Part<'a> {
    if plot.series.is_empty() {
        return Part::NoData;
    }
    match svg(&plot) {
        Ok(svg) => Part::Figure { svg, caption },
        Err(e) => Part::Unavailable(e.to_string()),
    }
}

/// The note naming the policies left out of the plot above it, if any.
fn omitted_note<'a>(omitted: Vec<&'a str>, why: &'static str) -> Option<Part<'a>> {
    (!omitted.is_empty()).then_some(Part::Omitted {
        policies: omitted,
        why,
    })
}
