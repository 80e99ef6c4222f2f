//! The page of the HTML report, written with `maud`: every value taken from the report goes
//! through its `(…)` splices, which escape it, so no name from a trace, catalog or policy can
//! become markup. The only text inserted unescaped is this file's own style sheet and the SVG
//! that plotters drew (which escapes its own text).

use maud::{DOCTYPE, Markup, PreEscaped, html as markup};

use super::plots::look::Look;
use super::plots::sections::{Part, sections};
use crate::metrics::{PolicyReport, Report};
use crate::report::table::cells;

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
    // The Content-Security-Policy makes the browser refuse anything but the inline styles, so
    // the page provably loads nothing from elsewhere.
    let page = markup! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy"
                    content="default-src 'none'; style-src 'unsafe-inline'";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Tandem simulation report" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "Tandem simulation report" }
                (header(report))
                (results(report, &looks))
                (plots(&looks))
                (how_to_read())
            }
        }
    };
    let mut page = page.into_string();
    page.push('\n');
    page
}

/// The page's style sheet (static, ours).
const STYLE: &str = r#"body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
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
"#;

/// The command, the inputs and the settings.
fn header(report: &Report) -> Markup {
    let inputs = &report.inputs;
    let total_gpus: usize = inputs.gpus.iter().map(|(_, n)| n).sum();
    markup! {
        p { "Running this command reproduces every number and plot on this page:" }
        pre { (report.command) }
        h2 { "Inputs" }
        table.kv {
            tr { th { "trace" } td { code { (inputs.trace) } " (" (inputs.jobs) " jobs)" } }
            tr {
                th { "cluster" }
                td {
                    code { (inputs.cluster) } ": " (total_gpus) " GPUs ("
                    @for (i, (model, n)) in inputs.gpus.iter().enumerate() {
                        @if i > 0 { ", " }
                        (n) " × " (model)
                    }
                    ")"
                }
            }
            tr {
                th { "catalogs" }
                td {
                    @for (i, catalog) in inputs.catalogs.iter().enumerate() {
                        @if i > 0 { ", " }
                        code { (catalog) }
                    }
                }
            }
            @if let Some(predicted) = &inputs.predicted_utilization {
                tr {
                    th { "utilization" }
                    td { (predicted.note()) }
                }
            }
        }
        h2 { "Settings" }
        p { "The same for every policy." }
        (settings(report))
    }
}

/// The settings table. Listing the serialized fields keeps it complete when settings are
/// added.
fn settings(report: &Report) -> Markup {
    match serde_json::to_value(&report.settings) {
        Ok(serde_json::Value::Object(fields)) => markup! {
            table.kv {
                @for (name, value) in &fields {
                    tr {
                        th { (name) }
                        td {
                            @match value {
                                serde_json::Value::String(text) => (text),
                                other => (other.to_string()),
                            }
                        }
                    }
                }
            }
        },
        Ok(other) => markup! { pre { (other.to_string()) } },
        Err(e) => markup! { p.error { "settings unavailable: " (e.to_string()) } },
    }
}

/// The columns of the results table, with what each means (shown on hover); the same as the
/// terminal table's.
pub(crate) const COLUMNS: [(&str, &str); 14] = [
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
fn results(report: &Report, looks: &[(&PolicyReport, Look)]) -> Markup {
    let skipped: Vec<&PolicyReport> = report
        .policies
        .iter()
        .filter(|p| p.not_applicable.is_some())
        .collect();
    markup! {
        h2 { "Results" }
        @if looks.is_empty() {
            p.note { "No policy could run on these inputs." }
        } @else {
            div.scroll {
                table.results {
                    thead {
                        tr {
                            @for (name, meaning) in COLUMNS {
                                th title=(meaning) { (name) }
                            }
                        }
                    }
                    tbody {
                        @for (p, look) in looks {
                            tr {
                                td.name { span.swatch style=(look.css_swatch()) {} (p.policy) }
                                @for cell in cells(p) {
                                    td.num { (cell) }
                                }
                            }
                        }
                    }
                }
            }
            p.note {
                "Times in hours. Hover over a column heading for its meaning; definitions are at \
                 the end of the page. The colour beside a policy is its line in every plot."
            }
        }
        @if !skipped.is_empty() {
            p { "Not applicable to these inputs (nothing to report):" }
            ul {
                @for p in skipped {
                    li {
                        strong { (p.policy) } ": " (p.not_applicable.as_deref().unwrap_or_default())
                    }
                }
            }
        }
    }
}

/// The plots, each with a caption, and notes on policies left out of them.
fn plots(looks: &[(&PolicyReport, Look)]) -> Markup {
    markup! {
        h2 { "Plots" }
        @if looks.is_empty() {
            p.note { "No policy ran, so there is nothing to plot." }
        } @else {
            @for section in sections(looks) {
                h3 { (section.title) }
                @for part in &section.parts {
                    (plot_part(part))
                }
            }
        }
    }
}

/// A figure, or the note that stands for it or follows it.
fn plot_part(part: &Part<'_>) -> Markup {
    match part {
        Part::Figure { svg, caption } => markup! {
            figure {
                (PreEscaped(svg))
                figcaption { (caption) }
            }
        },
        Part::NoData => markup! { p.note { "No policy has data for this plot." } },
        Part::Unavailable(why) => markup! { p.error { "plot unavailable: " (why) } },
        Part::Omitted { policies, why } => markup! {
            p.note {
                "Not in this plot (" (why) "): "
                @for (i, name) in policies.iter().enumerate() {
                    @if i > 0 { ", " }
                    strong { (name) }
                }
                "."
            }
        },
    }
}

/// The end of the page: what the figures mean.
fn how_to_read() -> Markup {
    markup! {
        h2 { "How to read this" }
        p {
            "Every policy replayed the same trace on the same cluster with the same settings; the \
             cluster ran each job at the speeds the catalogs measured, alone or sharing a GPU."
        }
        dl {
            dt { "JCT (job completion time)" }
            dd { "From a job's arrival to its finish, queueing included. Lower is better." }
            dt { "makespan" }
            dd { "When the last job finished, from the start of the trace." }
            dt { "queue" }
            dd { "From a job's arrival to its first start." }
            dt { "GPU util" }
            dd {
                "The time-weighted share of GPUs running at least one job, from the start to the \
                 makespan."
            }
            dt { "IndSD (individual slowdown)" }
            dd {
                "For a job that shared a GPU: (co-located time − solo time) / solo time, in %. 0% \
                 means sharing cost it nothing; 100% means it took twice as long as alone. Only \
                 jobs that shared count (the \"shared jobs\" column); \"IndSD>50%\" is the share \
                 of them slowed by more than half."
            }
            dt { "PacSav (packing saving)" }
            dd {
                "For a GPU busy period that held two or more jobs: the time saved against running \
                 those jobs one after another, in %. Higher is better."
            }
            dt { "OOM" }
            dd {
                "A group of jobs placed on one GPU that the catalogs never measured together, or \
                 whose memory does not fit: it fails, and its jobs are resubmitted to run alone."
            }
            dt { "decisions/s" }
            dd {
                "Jobs started per second of wall time the policy spent deciding: how fast it \
                 schedules, not part of the simulated time."
            }
        }
    }
}
