//! The terminal table: one row per policy.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::metrics::{PolicyReport, Report};

/// The report as a table for the terminal, with the reproducing command and the inputs above
/// it; below it, how many of each policy's OOMs were memory overflows (where some were not),
/// where the utilization baselines' utilization came from (when predicted), and the policies
/// that could not run.
pub fn table(report: &Report) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "policy",
            "avg JCT h",
            "p50 JCT h",
            "p95 JCT h",
            "makespan h",
            "avg queue h",
            "GPU util %",
            "shared jobs",
            "IndSD avg %",
            "IndSD p95 %",
            "IndSD>50% %",
            "PacSav avg %",
            "OOMs",
            "decisions/s",
        ]);
    let mut skipped = Vec::new();
    let mut unmeasured = Vec::new();
    for p in &report.policies {
        if let Some(why) = &p.not_applicable {
            skipped.push(format!("{}: not applicable: {why}", p.policy));
            continue;
        }
        if p.ooms > p.memory_ooms {
            unmeasured.push(format!(
                "{}: {} of {} OOMs over memory; the others are groups with a pair the catalogs never measured",
                p.policy, p.memory_ooms, p.ooms
            ));
        }
        let row = std::iter::once(p.policy.clone()).chain(cells(p));
        table.add_row(row.enumerate().map(|(i, text)| {
            let cell = Cell::new(text);
            if i == 0 {
                cell
            } else {
                cell.set_alignment(CellAlignment::Right)
            }
        }));
    }
    let gpus: Vec<String> = report
        .inputs
        .gpus
        .iter()
        .map(|(model, n)| format!("{n} {model}"))
        .collect();
    let mut text = format!(
        "$ {}\ntrace: {} ({} jobs); cluster: {} ({}); catalogs: {}\n{table}\n",
        report.command,
        report.inputs.trace,
        report.inputs.jobs,
        report.inputs.cluster,
        gpus.join(", "),
        report.inputs.catalogs.join(", "),
    );
    let predicted = report
        .inputs
        .predicted_utilization
        .as_ref()
        .map(|p| p.note());
    for line in unmeasured.into_iter().chain(predicted).chain(skipped) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The figures of a row after the policy name, formatted as in the terminal table.
pub(crate) fn cells(p: &PolicyReport) -> [String; 13] {
    let hours = |s: f64| format!("{:.2}", s / 3600.0);
    let slowdown = p.slowdown_pct;
    [
        hours(p.jct_s.mean),
        hours(p.jct_s.p50),
        hours(p.jct_s.p95),
        hours(p.makespan_s),
        hours(p.queueing_s.mean),
        format!("{:.1}", p.gpu_util_pct),
        p.shared_jobs.to_string(),
        slowdown.map_or("-".into(), |s| format!("{:.1}", s.mean)),
        slowdown.map_or("-".into(), |s| format!("{:.1}", s.p95)),
        format!("{:.1}", p.slowdown_over_50_pct),
        p.packing_saving_pct
            .map_or("-".into(), |s| format!("{:.1}", s.mean)),
        p.ooms.to_string(),
        format!("{:.0}", p.decisions_per_s),
    ]
}
