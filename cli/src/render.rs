//! Tables for people. JSON output is plain serde of the engine's answer.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use tandem_api::Recommendation;

use crate::queue::Request;

/// The placements as a table, then the unplaced jobs and why.
pub(crate) fn recommendation(answer: &Recommendation, request: &Request) -> String {
    let mut out = format!(
        "{} job(s) queued, {} GPU(s), objective {}, at most {} job(s) per GPU\n",
        request.queue.len(),
        request.gpus.len(),
        request.policy.objective,
        request.policy.max_jobs_per_gpu
    );
    if answer.placements.is_empty() {
        out.push_str("no placements\n");
    } else {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "GPU",
            "jobs",
            "residents",
            "slowdown %",
            "packing saving %",
            "uncertainty",
            "memory MiB",
        ]);
        for placement in &answer.placements {
            let capacity = request
                .gpus
                .iter()
                .find(|g| g.id == placement.gpu)
                .map_or(0, |g| g.spec.memory_mib);
            let slowdowns: Vec<String> = placement
                .predicted
                .slowdown_pct
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect();
            table.add_row([
                placement.gpu.clone(),
                placement.jobs.join(", "),
                if placement.residents.is_empty() {
                    "-".into()
                } else {
                    placement.residents.join(", ")
                },
                slowdowns.join(", "),
                format!("{:.1}", placement.predicted.packing_saving_pct),
                format!("{:.2}", placement.predicted.uncertainty),
                format!("{} / {capacity}", placement.predicted.peak_mem_mib),
            ]);
        }
        for column in 3..7 {
            if let Some(c) = table.column_mut(column) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        out.push_str(&table.to_string());
        out.push('\n');
    }
    if !answer.unplaced.is_empty() {
        out.push_str(&format!("{} job(s) not placed:\n", answer.unplaced.len()));
        for unplaced in &answer.unplaced {
            out.push_str(&format!("  {}: {}\n", unplaced.job, unplaced.reason));
        }
    }
    out
}
