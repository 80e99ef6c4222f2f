//! The HTML report: one self-contained page (inline CSS, inline SVG plots, no scripts, fonts or
//! network) with the reproducing command, the inputs and settings, the results table, three
//! plots and how to read them.
//!
//! The plots are drawn by `plotters` into SVG strings. Its font support (`ttf`/`ab_glyph`) is
//! left off on purpose: the SVG backend then writes every label as an SVG `<text>` element that
//! the browser lays out with its own fonts, so rendering the report needs no font files, and
//! plotters only *estimates* text widths for its layout (hence the generous label areas).

use std::error::Error;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::metrics::{PolicyReport, Report, TimePoint, percentile};

/// Ten colours that stay apart on white (the "category10" palette); a policy keeps its colour
/// in the table and in every plot.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Dash patterns, `(dash, gap)` in pixels, for the second, third, … round of the palette, so
/// two policies never share both colour and line.
const DASHES: [Option<(u32, u32)>; 4] = [None, Some((10, 6)), Some((3, 4)), Some((18, 5))];

/// Font sizes as plotters takes them. Its SVG backend writes `font-size` as the size / 1.24,
/// so these come out at about 14.5, 16 and 14.5 px: readable, and no smaller than 14 px.
const TICK_FONT: f64 = 18.0;
const AXIS_FONT: f64 = 20.0;
const LEGEND_FONT: f64 = 18.0;
const FONT_FAMILY: &str = "sans-serif";

/// Legend layout, px: the line sample and gap before a name, and a generous estimate of the
/// width of one of its characters (the browser, not plotters, chooses the font).
const LEGEND_SAMPLE_PX: u32 = 56;
const LEGEND_CHAR_PX: u32 = 9;

/// Width and height of the main plots, px.
const PLOT_SIZE: (u32, u32) = (900, 450);
/// Size of the queue plot, a smaller companion of the utilization plot.
const SMALL_PLOT_SIZE: (u32, u32) = (900, 300);

/// How a policy is drawn: its colour and, once the palette repeats, a dash pattern.
#[derive(Debug, Clone, Copy)]
struct Look {
    color: RGBColor,
    dash: Option<(u32, u32)>,
}

impl Look {
    /// The look of the `index`-th applicable policy of the report.
    fn of(index: usize) -> Self {
        let (r, g, b) = PALETTE[index % PALETTE.len()];
        Self {
            color: RGBColor(r, g, b),
            dash: DASHES[(index / PALETTE.len()) % DASHES.len()],
        }
    }

    /// The colour as CSS.
    fn css_color(&self) -> String {
        let RGBColor(r, g, b) = self.color;
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// A short horizontal sample of the line, as a CSS background, for the table.
    fn css_swatch(&self) -> String {
        let color = self.css_color();
        match self.dash {
            None => format!("background:{color}"),
            Some((dash, gap)) => format!(
                "background:repeating-linear-gradient(to right,{color} 0 {dash}px,\
                 transparent {dash}px {}px)",
                dash + gap
            ),
        }
    }

    /// The plotters style of the line.
    fn shape(&self) -> ShapeStyle {
        ShapeStyle {
            color: self.color.to_rgba(),
            filled: false,
            stroke_width: 2,
        }
    }
}

/// The report as a self-contained HTML page: the reproducing command, inputs and settings, the
/// results table (the terminal table's columns), plots of the JCT distribution, utilization and
/// queue over time and the slowdown distribution, and a guide to reading them. Every text taken
/// from the report is HTML-escaped. A plot that cannot be drawn becomes a visible note.
pub fn html(report: &Report) -> String {
    // Colours go to applicable policies only, in report order, so none is spent on a policy
    // that has nothing to draw.
    let looks: Vec<(&PolicyReport, Look)> = report
        .policies
        .iter()
        .filter(|p| p.not_applicable.is_none())
        .enumerate()
        .map(|(i, p)| (p, Look::of(i)))
        .collect();
    let mut page = String::with_capacity(256 * 1024);
    page.push_str(HEAD);
    header(&mut page, report);
    results(&mut page, report, &looks);
    plots(&mut page, &looks);
    page.push_str(HOW_TO_READ);
    page.push_str("</body>\n</html>\n");
    page
}

/// The start of the page. The Content-Security-Policy makes the browser refuse anything but
/// the inline styles, so the page provably loads nothing from elsewhere.
const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tandem simulation report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       font-size: 16px; line-height: 1.45; color: #1a1a1a; background: #fff;
       max-width: 1240px; margin: 0 auto; padding: 1.5em 1.5em 3em; }
h1 { font-size: 1.8em; margin: 0 0 0.6em; }
h2 { font-size: 1.35em; margin: 1.8em 0 0.5em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
h3 { font-size: 1.1em; margin: 1.4em 0 0.3em; }
pre { background: #f4f4f4; border: 1px solid #ddd; padding: 0.7em 0.9em; overflow-x: auto;
      white-space: pre-wrap; overflow-wrap: anywhere; font-size: 14px; }
code { font-size: 14px; }
table { border-collapse: collapse; font-size: 14px; }
th, td { border: 1px solid #d0d0d0; padding: 0.3em 0.4em; }
thead th { background: #f0f0f0; vertical-align: bottom; }
td.name { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
table.kv th { text-align: left; font-weight: 600; background: #fafafa; }
.swatch { display: inline-block; width: 28px; height: 4px; vertical-align: middle; margin-right: 0.45em; }
.note { color: #555; font-size: 15px; }
.error { color: #a00000; font-weight: 600; }
figure { margin: 0.6em 0 1.2em; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 15px; color: #333; max-width: 900px; }
dt { font-weight: 600; margin-top: 0.4em; }
dd { margin-left: 1.5em; }
</style>
</head>
<body>
<h1>Tandem simulation report</h1>
"#;

/// The command, the inputs and the settings.
fn header(page: &mut String, report: &Report) {
    page.push_str(&format!(
        "<p>Running this command reproduces every number and plot on this page:</p>\n\
         <pre>{}</pre>\n",
        escape(&report.command)
    ));

    let inputs = &report.inputs;
    let total_gpus: usize = inputs.gpus.iter().map(|(_, n)| n).sum();
    let gpus: Vec<String> = inputs
        .gpus
        .iter()
        .map(|(model, n)| format!("{n} × {}", escape(model)))
        .collect();
    let catalogs: Vec<String> = inputs
        .catalogs
        .iter()
        .map(|c| format!("<code>{}</code>", escape(c)))
        .collect();
    page.push_str("<h2>Inputs</h2>\n<table class=\"kv\">\n");
    page.push_str(&format!(
        "<tr><th>trace</th><td><code>{}</code> ({} jobs)</td></tr>\n",
        escape(&inputs.trace),
        inputs.jobs
    ));
    page.push_str(&format!(
        "<tr><th>cluster</th><td><code>{}</code>: {total_gpus} GPUs ({})</td></tr>\n",
        escape(&inputs.cluster),
        gpus.join(", ")
    ));
    page.push_str(&format!(
        "<tr><th>catalogs</th><td>{}</td></tr>\n</table>\n",
        catalogs.join(", ")
    ));

    page.push_str("<h2>Settings</h2>\n<p>The same for every policy.</p>\n");
    // Listing the serialized fields keeps this section complete when settings are added.
    match serde_json::to_value(&report.settings) {
        Ok(serde_json::Value::Object(fields)) => {
            page.push_str("<table class=\"kv\">\n");
            for (name, value) in &fields {
                let value = match value {
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                page.push_str(&format!(
                    "<tr><th>{}</th><td>{}</td></tr>\n",
                    escape(name),
                    escape(&value)
                ));
            }
            page.push_str("</table>\n");
        }
        Ok(other) => page.push_str(&format!("<pre>{}</pre>\n", escape(&other.to_string()))),
        Err(e) => page.push_str(&format!(
            "<p class=\"error\">settings unavailable: {}</p>\n",
            escape(&e.to_string())
        )),
    }
}

/// The columns of the results table, with what each means (shown on hover); the same as the
/// terminal table's.
const COLUMNS: [(&str, &str); 14] = [
    ("policy", "the placement policy"),
    (
        "avg JCT h",
        "mean job completion time (arrival to finish), hours",
    ),
    ("p50 JCT h", "median job completion time, hours"),
    ("p95 JCT h", "95th percentile of job completion time, hours"),
    (
        "makespan h",
        "time of the last finish from the start of the trace, hours",
    ),
    (
        "avg queue h",
        "mean queueing delay (arrival to first start), hours",
    ),
    (
        "GPU util %",
        "time-weighted share of GPUs running at least one job",
    ),
    (
        "shared jobs",
        "jobs that shared a GPU during their final run",
    ),
    (
        "IndSD avg %",
        "mean individual slowdown of the jobs that shared",
    ),
    ("IndSD p95 %", "95th percentile of the individual slowdown"),
    (
        "IndSD>50% %",
        "share of the jobs that shared slowed by more than 50%",
    ),
    (
        "PacSav avg %",
        "mean packing saving of GPU busy periods with two or more jobs",
    ),
    (
        "OOMs",
        "jobs that failed with an OOM and were resubmitted alone",
    ),
    (
        "decisions/s",
        "jobs started per second of wall time spent deciding",
    ),
];

/// The results table, and the policies that could not run below it.
fn results(page: &mut String, report: &Report, looks: &[(&PolicyReport, Look)]) {
    page.push_str("<h2>Results</h2>\n");
    if looks.is_empty() {
        page.push_str("<p class=\"note\">No policy could run on these inputs.</p>\n");
    } else {
        page.push_str("<div class=\"scroll\"><table class=\"results\">\n<thead><tr>");
        for (name, meaning) in COLUMNS {
            page.push_str(&format!(
                "<th title=\"{}\">{}</th>",
                escape(meaning),
                escape(name)
            ));
        }
        page.push_str("</tr></thead>\n<tbody>\n");
        for (p, look) in looks {
            page.push_str(&format!(
                "<tr><td class=\"name\"><span class=\"swatch\" style=\"{}\"></span>{}</td>",
                look.css_swatch(),
                escape(&p.policy)
            ));
            for cell in super::table::cells(p) {
                page.push_str(&format!("<td class=\"num\">{}</td>", escape(&cell)));
            }
            page.push_str("</tr>\n");
        }
        page.push_str("</tbody>\n</table></div>\n");
        page.push_str(
            "<p class=\"note\">Times in hours. Hover over a column heading for its meaning; \
             definitions are at the end of the page. The colour beside a policy is its line in \
             every plot.</p>\n",
        );
    }
    let skipped: Vec<&PolicyReport> = report
        .policies
        .iter()
        .filter(|p| p.not_applicable.is_some())
        .collect();
    if !skipped.is_empty() {
        page.push_str("<p>Not applicable to these inputs (nothing to report):</p>\n<ul>\n");
        for p in skipped {
            page.push_str(&format!(
                "<li><strong>{}</strong>: {}</li>\n",
                escape(&p.policy),
                escape(p.not_applicable.as_deref().unwrap_or_default())
            ));
        }
        page.push_str("</ul>\n");
    }
}

/// One policy's line in a plot.
struct Series<'a> {
    name: &'a str,
    look: Look,
    points: Vec<(f64, f64)>,
}

/// A line plot, ready to draw.
struct Plot<'a> {
    x_desc: &'static str,
    y_desc: &'static str,
    x: (f64, f64),
    log_x: bool,
    y: (f64, f64),
    series: Vec<Series<'a>>,
    size: (u32, u32),
}

/// The plots, each with a caption, and notes on policies left out of them.
fn plots(page: &mut String, looks: &[(&PolicyReport, Look)]) {
    page.push_str("<h2>Plots</h2>\n");
    if looks.is_empty() {
        page.push_str("<p class=\"note\">No policy ran, so there is nothing to plot.</p>\n");
        return;
    }

    // JCT CDF.
    page.push_str("<h3>Job completion time</h3>\n");
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
    figure(
        page,
        Plot {
            x_desc: "job completion time (h)",
            y_desc: "share of jobs with JCT ≤ x",
            x,
            log_x,
            y: (0.0, 1.0),
            series,
            size: PLOT_SIZE,
        },
        &caption,
    );
    omitted_note(page, &omitted, "no job finished");

    // Utilization and queue over time.
    page.push_str("<h3>Cluster utilization and queue over time</h3>\n");
    let (series, omitted) = collect(looks, |p| {
        timeline_points(&p.timeline, |point| point.busy_gpus_pct)
    });
    let (x, _) = x_range(&series, false);
    // 0–100 %, unless rounding put a bin a hair above it.
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(100.0_f64, f64::max);
    figure(
        page,
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
         work sooner ends the line earlier.",
    );
    let (series, _) = collect(looks, |p| {
        timeline_points(&p.timeline, |point| point.queued)
    });
    let peak = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max);
    figure(
        page,
        Plot {
            x_desc: "time since the start of the trace (h)",
            y_desc: "jobs queued",
            x,
            log_x: false,
            y: (0.0, (peak * 1.05).max(1.0)),
            series,
            size: SMALL_PLOT_SIZE,
        },
        "Jobs waiting in the queue, averaged over the same intervals.",
    );
    omitted_note(page, &omitted, "no timeline recorded");

    // Slowdown distribution.
    page.push_str("<h3>Individual slowdown of jobs that shared a GPU</h3>\n");
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
    figure(
        page,
        Plot {
            x_desc: "individual slowdown (%)",
            y_desc: "share of shared jobs ≤ x",
            x,
            log_x: false,
            y: (0.0, 1.0),
            series,
            size: PLOT_SIZE,
        },
        &caption,
    );
    omitted_note(page, &omitted, "no job shared a GPU");
}

/// At most about 200 points of the CDF of `values` (non-finite ones dropped), as
/// `(value, share of values ≤ it)`: enough for a smooth line, and the page stays small for
/// traces of any length.
fn sample_cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    crate::metrics::cdf(&sorted)
}

/// A staircase CDF cut at `x = hi`: its line goes on flat to `hi` at the share reached there.
fn clip_x(steps: &[(f64, f64)], hi: f64) -> Vec<(f64, f64)> {
    let mut clipped: Vec<(f64, f64)> = steps.iter().copied().take_while(|p| p.0 <= hi).collect();
    if clipped.len() < steps.len() {
        let reached = clipped.last().map_or(0.0, |p| p.1);
        clipped.push((hi, reached));
    }
    clipped
}

/// The series `points_of` makes for each policy, and the names of the policies it made none
/// for (they are left out of the plot).
fn collect<'a>(
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
fn step_cdf(points: impl IntoIterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
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
fn timeline_points(timeline: &[TimePoint], y_of: impl Fn(&TimePoint) -> f64) -> Vec<(f64, f64)> {
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
fn x_range(series: &[Series<'_>], may_log: bool) -> ((f64, f64), bool) {
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

/// The plot as a figure with its caption, or a note when it has nothing to show or could not
/// be drawn.
fn figure(page: &mut String, plot: Plot<'_>, caption: &str) {
    if plot.series.is_empty() {
        page.push_str("<p class=\"note\">No policy has data for this plot.</p>\n");
        return;
    }
    match svg(&plot) {
        Ok(svg) => page.push_str(&format!(
            "<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n",
            escape(caption)
        )),
        Err(e) => page.push_str(&format!(
            "<p class=\"error\">plot unavailable: {}</p>\n",
            escape(&e.to_string())
        )),
    }
}

/// The note naming the policies left out of the plot above it.
fn omitted_note(page: &mut String, omitted: &[&str], why: &str) {
    if omitted.is_empty() {
        return;
    }
    let names: Vec<String> = omitted
        .iter()
        .map(|name| format!("<strong>{}</strong>", escape(name)))
        .collect();
    page.push_str(&format!(
        "<p class=\"note\">Not in this plot ({why}): {}.</p>\n",
        names.join(", ")
    ));
}

/// The plot as an SVG document: the chart on the left, the legend on the right (a legend
/// inside the chart would hide lines).
fn svg(plot: &Plot<'_>) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, plot.size).into_drawing_area();
        root.fill(&WHITE)?;
        // Room for the longest name, but never more than a third of the plot.
        let longest = plot
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        let legend_width =
            (LEGEND_SAMPLE_PX + LEGEND_CHAR_PX * longest as u32).clamp(140, plot.size.0 / 3);
        let (chart_area, legend_area) = root.split_horizontally(plot.size.0 - legend_width);
        let (y0, y1) = plot.y;
        if plot.log_x {
            chart(&chart_area, plot, (plot.x.0..plot.x.1).log_scale(), y0..y1)?;
        } else {
            chart(&chart_area, plot, plot.x.0..plot.x.1, y0..y1)?;
        }
        legend(&legend_area, &plot.series)?;
        root.present()?;
    }
    Ok(svg)
}

/// Draws the axes and the lines of `plot` on `area`, with `x` as the x axis (linear or log).
fn chart<X>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    plot: &Plot<'_>,
    x: X,
    y: std::ops::Range<f64>,
) -> Result<(), Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(16)
        .margin_right(24)
        .x_label_area_size(64)
        .y_label_area_size(88)
        .build_cartesian_2d(x, y)?;
    let tick = |v: &f64| short(*v);
    chart
        .configure_mesh()
        .x_desc(plot.x_desc)
        .y_desc(plot.y_desc)
        .axis_desc_style((FONT_FAMILY, AXIS_FONT))
        .label_style((FONT_FAMILY, TICK_FONT))
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(BLACK.mix(0.04))
        .draw()?;
    for series in &plot.series {
        let points = series.points.iter().copied();
        let style = series.look.shape();
        match series.look.dash {
            None => chart.draw_series(LineSeries::new(points, style))?,
            Some((dash, gap)) => {
                chart.draw_series(DashedLineSeries::new(points, dash, gap, style))?
            }
        };
    }
    Ok(())
}

/// One row per series: a sample of its line and its name.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    series: &[Series<'_>],
) -> Result<(), Box<dyn Error>> {
    let (_, height) = area.dim_in_pixel();
    let top = 24;
    let rows = series.len().max(1) as i32;
    let fits = (area.dim_in_pixel().0.saturating_sub(LEGEND_SAMPLE_PX) / LEGEND_CHAR_PX) as usize;
    // Rows 26 px apart, closer when many policies must fit (the text then overlaps a little
    // rather than leaving the plot).
    let row = ((height as i32 - top - 16) / rows).clamp(8, 26);
    let font = (FONT_FAMILY, LEGEND_FONT)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in series.iter().enumerate() {
        let y = top + row * i as i32 + row / 2;
        let line = vec![(4, y), (40, y)];
        // A little thicker than in the chart: a short sample needs it to show its colour.
        let style = s.look.shape().stroke_width(3);
        match s.look.dash {
            None => area.draw(&PathElement::new(line, style))?,
            Some((dash, gap)) => area.draw(&DashedPathElement::new(line, dash, gap, style))?,
        }
        area.draw(&Text::new(fit(s.name, fits), (48, y), font.clone()))?;
    }
    Ok(())
}

/// `name`, cut to `chars` characters with an ellipsis when longer (the table has it whole).
fn fit(name: &str, chars: usize) -> String {
    if name.chars().count() <= chars {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A tick label: at most three significant digits, no trailing zeros.
fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v:.0}");
    }
    let magnitude = v.abs().log10().floor();
    if magnitude >= 3.0 {
        return format!("{v:.0}");
    }
    let decimals = (2.0 - magnitude).clamp(0.0, 8.0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The end of the page: what the figures mean.
const HOW_TO_READ: &str = r#"<h2>How to read this</h2>
<p>Every policy replayed the same trace on the same cluster with the same settings; the cluster
ran each job at the speeds the catalogs measured, alone or sharing a GPU.</p>
<dl>
<dt>JCT (job completion time)</dt>
<dd>From a job's arrival to its finish, queueing included. Lower is better.</dd>
<dt>makespan</dt>
<dd>When the last job finished, from the start of the trace.</dd>
<dt>queue</dt>
<dd>From a job's arrival to its first start.</dd>
<dt>GPU util</dt>
<dd>The time-weighted share of GPUs running at least one job, from the start to the makespan.</dd>
<dt>IndSD (individual slowdown)</dt>
<dd>For a job that shared a GPU: (co-located time − solo time) / solo time, in %. 0% means
sharing cost it nothing; 100% means it took twice as long as alone. Only jobs that shared count
(the "shared jobs" column); "IndSD&gt;50%" is the share of them slowed by more than half.</dd>
<dt>PacSav (packing saving)</dt>
<dd>For a GPU busy period that held two or more jobs: the time saved against running those jobs
one after another, in %. Higher is better.</dd>
<dt>OOM</dt>
<dd>A group of jobs placed on one GPU that the catalogs never measured together, or whose memory
does not fit: it fails, and its jobs are resubmitted to run alone.</dd>
<dt>decisions/s</dt>
<dd>Jobs started per second of wall time the policy spent deciding: how fast it schedules, not
part of the simulated time.</dd>
</dl>
"#;

/// `text` with the characters HTML gives a meaning escaped, for element content and quoted
/// attribute values alike.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Collector, Inputs};
    use crate::settings::Settings;

    /// A small deterministic generator (xorshift), so the tests need no RNG setup.
    struct Draws(u64);

    impl Draws {
        /// Uniform in (0, 1).
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        /// Log-normal with the given median and spread.
        fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            median * (sigma * z).exp()
        }
    }

    /// A policy's report from a toy run: `jobs` one-GPU jobs arriving over three days (the
    /// same trace for every policy) run first come, first served on `gpus` GPUs, `per_gpu` jobs
    /// a GPU at most. A job that starts on a GPU already in use is slowed by a draw around
    /// `slowdown` (a fraction); `seed` varies those draws between policies.
    fn synthetic(
        name: &str,
        seed: u64,
        jobs: usize,
        gpus: usize,
        per_gpu: usize,
        slowdown: f64,
    ) -> PolicyReport {
        let mut trace = Draws(0x2545_F491_4F6C_DD1D);
        let mut draws = Draws(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut collector = Collector::new(jobs, None);
        // Each slot's time free; slot `k` is on GPU `k % gpus`, so GPUs fill before sharing.
        let mut free = vec![0.0_f64; gpus * per_gpu];
        // (time, change of queued, change of running) of every event.
        let mut events = Vec::new();
        let mut arrival = 0.0;
        for _ in 0..jobs {
            arrival += trace.log_normal(72.0 * 3600.0 / jobs as f64, 1.0);
            let solo = trace.log_normal(3600.0, 1.3);
            let (slot, _) = free
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .unwrap();
            let start = free[slot].max(arrival);
            let shares = slot >= gpus;
            let slowed = shares.then(|| draws.log_normal(slowdown, 0.9));
            let finish = start + solo * (1.0 + slowed.unwrap_or(0.0));
            free[slot] = finish;
            collector.finished(arrival, start, finish, slowed);
            if shares {
                collector.packing_saving(draws.uniform() * 0.5);
            }
            events.extend([(arrival, 1, 0), (start, -1, 1), (finish, 0, -1)]);
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut queued, mut running, mut t) = (0_i64, 0_i64, 0.0);
        for (time, dq, dr) in events {
            let busy = (running as usize).min(gpus);
            collector.interval(t, time - t, busy, queued as usize, None);
            (queued, running, t) = (queued + dq, running + dr, time);
        }
        collector.decision(0.5, jobs);
        collector.report(name, gpus, 3.0)
    }

    fn report(command: &str, policies: Vec<PolicyReport>) -> Report {
        Report {
            command: command.to_owned(),
            inputs: Inputs {
                catalogs: vec![
                    "data/catalogs/gavel-v100.json".into(),
                    "data/catalogs/alnair-mps.json".into(),
                ],
                trace: "data/alibaba/trace-3d.csv".into(),
                jobs: 2000,
                cluster: "cluster.csv".into(),
                gpus: vec![("V100".into(), 32), ("K80".into(), 16)],
            },
            settings: Settings::default(),
            policies,
        }
    }

    /// Nine policies, as a full comparison runs them, and one that could not run.
    fn realistic() -> Report {
        let names = [
            ("exclusive-fifo", 1, 0.0),
            ("random", 2, 0.6),
            ("ffd-util", 2, 0.45),
            ("lucid-style", 2, 0.3),
            ("schedtune-min-jct", 2, 0.35),
            ("jrs-ranking", 2, 0.4),
            ("tandem-balanced", 2, 0.2),
            ("tandem-min-slowdown", 2, 0.12),
            ("tandem-max-packing", 2, 0.28),
        ];
        let mut policies: Vec<PolicyReport> = names
            .iter()
            .enumerate()
            .map(|(i, &(name, per_gpu, slowdown))| {
                synthetic(name, i as u64 + 1, 2000, 48, per_gpu, slowdown)
            })
            .collect();
        policies.insert(
            3,
            PolicyReport::not_applicable(
                "gavel-like",
                "needs throughputs for every GPU model; K80 has none".into(),
            ),
        );
        report(
            "tandem-sim run --trace data/alibaba/trace-3d.csv --cluster cluster.csv --catalog data/catalogs/gavel-v100.json --catalog data/catalogs/alnair-mps.json --seed 1 --html report.html",
            policies,
        )
    }

    #[test]
    fn the_page_shows_command_inputs_table_plots_and_guide_escaped() {
        let mut odd = synthetic("tandem<balanced>", 7, 300, 8, 2, 0.3);
        odd.not_applicable = None;
        let skipped =
            PolicyReport::not_applicable("gavel&co", "needs <throughputs> for \"K80\"".into());
        let page = html(&report(
            "tandem-sim run --trace 'a b.csv' --html <out>",
            vec![odd, skipped],
        ));

        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        assert!(page.contains("<h1>Tandem simulation report</h1>"));
        assert!(
            page.contains("<pre>tandem-sim run --trace &#39;a b.csv&#39; --html &lt;out&gt;</pre>")
        );
        assert!(page.contains("reproduces every number"));
        // Inputs and every setting.
        for text in [
            "data/alibaba/trace-3d.csv",
            "2000 jobs",
            "48 GPUs",
            "32 × V100",
            "gavel-v100.json",
        ] {
            assert!(page.contains(text), "missing {text}");
        }
        for field in [
            "profile_window_s",
            "oom_after_s",
            "window",
            "history_share",
            "min_outcome_s",
            "seed",
        ] {
            assert!(
                page.contains(&format!("<th>{field}</th>")),
                "missing setting {field}"
            );
        }
        // The table has the terminal table's columns.
        for (column, _) in COLUMNS {
            assert!(
                page.contains(&format!(">{}</th>", escape(column))),
                "missing column {column}"
            );
        }
        // JCT CDF, utilization (with its queue companion) and slowdown CDF.
        assert_eq!(page.matches("<svg").count(), 4);
        for label in [
            "job completion time (h)",
            "share of jobs with JCT ≤ x",
            "time since the start of the trace (h)",
            "busy GPUs (% of cluster)",
            "jobs queued",
            "individual slowdown (%)",
            "share of shared jobs ≤ x",
        ] {
            assert!(page.contains(label), "missing axis label {label}");
        }
        // The name is escaped in the table and in the legend of every plot, never raw.
        assert!(!page.contains("tandem<balanced>"));
        assert!(page.matches("tandem&lt;balanced&gt;").count() >= 5);
        // The policy that could not run is listed with its reason, escaped, and not plotted.
        assert!(page.contains(
            "<strong>gavel&amp;co</strong>: needs &lt;throughputs&gt; for &quot;K80&quot;"
        ));
        assert_eq!(page.matches("gavel&amp;co").count(), 1);
        assert!(page.contains("How to read this") && page.contains("PacSav"));
        assert!(!page.contains("plot unavailable"));
    }

    #[test]
    fn every_policy_of_a_full_run_gets_its_own_line() {
        let report = realistic();
        let page = html(&report);
        for p in report
            .policies
            .iter()
            .filter(|p| p.not_applicable.is_none())
        {
            // Table, JCT, utilization, queue and slowdown legends (exclusive-fifo never shares).
            let expected = if p.shared_jobs == 0 { 4 } else { 5 };
            let rows = page.matches(&format!("</span>{}</td>", p.policy)).count();
            let legends = page.matches(&format!(">\n{}\n</text>", p.policy)).count();
            assert_eq!((rows, legends), (1, expected - 1), "{}", p.policy);
        }
        assert!(
            page.contains(
                "Not in this plot (no job shared a GPU): <strong>exclusive-fifo</strong>."
            )
        );
        // JCTs span several decades here: the x axis is logarithmic.
        assert!(page.contains("the x axis is logarithmic"));
        // Colour and dash together tell 40 policies apart.
        let looks: Vec<(RGBColor, Option<(u32, u32)>)> = (0..40)
            .map(|i| (Look::of(i).color, Look::of(i).dash))
            .collect();
        for (i, a) in looks.iter().enumerate() {
            assert!(looks[i + 1..].iter().all(|b| b != a), "look {i} repeats");
        }
    }

    #[test]
    fn degenerate_reports_do_not_panic() {
        let mut empty = PolicyReport::not_applicable("empty", String::new());
        empty.not_applicable = None;
        // One job that took no time, on a run whose makespan is 0.
        let mut instant = Collector::new(1, None);
        instant.finished(0.0, 0.0, 0.0, Some(0.0));
        instant.interval(0.0, 0.0, 0, 0, None);
        let instant = instant.report("instant", 0, 0.0);
        let mut broken = PolicyReport::not_applicable("broken", String::new());
        broken.not_applicable = None;
        broken.jct_cdf = vec![(f64::NAN, 0.5), (f64::INFINITY, 1.0)];
        broken.slowdowns_pct = vec![f64::NAN, -5.0, -5.0];
        broken.timeline = vec![TimePoint {
            t_s: 0.0,
            busy_gpus_pct: f64::NAN,
            queued: 0.0,
        }];
        for policies in [vec![], vec![empty.clone()], vec![empty, instant, broken]] {
            let page = html(&report("", policies));
            assert!(page.ends_with("</html>\n"));
            assert!(!page.contains("plot unavailable"), "{page}");
        }
        let page = html(&report(
            "",
            vec![PolicyReport::not_applicable("only", "why".into())],
        ));
        assert!(page.contains("No policy could run") && !page.contains("<svg"));
    }

    #[test]
    fn axes_and_ticks() {
        let series = |points: Vec<(f64, f64)>| Series {
            name: "p",
            look: Look::of(0),
            points,
        };
        assert!(x_range(&[series(vec![(0.1, 0.0), (50.0, 1.0)])], true).1);
        assert_eq!(
            x_range(&[series(vec![(1.0, 0.0), (50.0, 1.0)])], true),
            ((0.0, 50.0 * 1.03), false)
        );
        assert!(!x_range(&[series(vec![(0.0, 0.0), (50.0, 1.0)])], true).1);
        assert_eq!(
            x_range(&[series(vec![(2.0, 0.0)])], false),
            ((0.0, 2.06), false)
        );
        assert_eq!(
            x_range(&[series(vec![(0.0, 0.0)])], false),
            ((0.0, 1.0), false)
        );
        assert_eq!(x_range(&[], true), ((0.0, 1.0), false));
        let ticks: Vec<String> = [0.0, 0.001, 0.25, 1.0, 2.5, 12.5, 100.0, 1234.6, -20.0]
            .map(short)
            .to_vec();
        assert_eq!(
            ticks,
            [
                "0", "0.001", "0.25", "1", "2.5", "12.5", "100", "1235", "-20"
            ]
        );
        assert_eq!(
            step_cdf([(1.0, 0.5), (2.0, 1.0)]),
            [(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
    }

    #[test]
    fn long_samples_are_thinned_and_long_tails_cut() {
        let values: Vec<f64> = (0..1000).rev().map(f64::from).chain([f64::NAN]).collect();
        let points = sample_cdf(&values);
        assert!(points.len() <= 201);
        assert_eq!(
            (points[0], points.last().copied()),
            ((4.0, 0.005), Some((999.0, 1.0)))
        );
        assert!(sample_cdf(&[f64::NAN]).is_empty());
        let steps = step_cdf([(1.0, 0.5), (10.0, 1.0)]);
        assert_eq!(clip_x(&steps, 5.0), [(1.0, 0.0), (1.0, 0.5), (5.0, 0.5)]);
        assert_eq!(clip_x(&steps, 10.0), steps);
        // One job slowed by 5000% among many slowed by 10–20%: the axis is cut, and says so.
        let mut p = synthetic("p", 1, 300, 8, 2, 0.15);
        p.slowdowns_pct.push(5000.0);
        let page = html(&report("", vec![p]));
        assert!(page.contains("the largest slowdown is 5000%"));
    }

    /// Writes pages for a person to look at: `report.html`, a realistic comparison, and
    /// `report-many.html`, fourteen policies (the palette repeats, with dashes) whose JCTs
    /// span less than two decades (a linear axis). Run
    /// `cargo test -p tandem-sim --lib report::html -- --ignored`, then open the files or
    /// screenshot them with headless Chromium. They go to `/tmp`, or `TANDEM_REPORT_PREVIEW`.
    #[test]
    #[ignore = "writes preview files for a person to look at"]
    fn write_preview_pages() {
        let dir = std::env::var("TANDEM_REPORT_PREVIEW").unwrap_or_else(|_| "/tmp".into());
        let dir = std::path::Path::new(&dir);
        std::fs::write(dir.join("report.html"), html(&realistic())).unwrap();
        let mut many = realistic();
        many.policies.retain(|p| p.not_applicable.is_none());
        let extra: Vec<PolicyReport> = many.policies[..5]
            .iter()
            .map(|p| PolicyReport {
                policy: format!("{}-with-a-rather-long-variant-name", p.policy),
                ..p.clone()
            })
            .collect();
        many.policies.extend(extra);
        for (i, p) in many.policies.iter_mut().enumerate() {
            // Squeeze the JCTs into 1–10 h, a little apart per policy.
            for point in &mut p.jct_cdf {
                point.0 = 3600.0 * (1.0 + 0.05 * i as f64 + point.0.ln_1p() / 2.0);
            }
        }
        std::fs::write(dir.join("report-many.html"), html(&many)).unwrap();
        eprintln!(
            "wrote report.html and report-many.html to {}",
            dir.display()
        );
    }
}
