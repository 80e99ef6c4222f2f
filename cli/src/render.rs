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

/// What `kb observe` did.
pub(crate) fn observed(observed: &crate::kb::Observed) -> String {
    let mut out = String::new();
    if !observed.profiles.is_empty() {
        let mut table = Table::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_header(["job", "cluster", "uncertainty"]);
        for p in &observed.profiles {
            table.add_row([
                p.job.clone(),
                p.cluster.to_string(),
                format!("{:.2}", p.uncertainty),
            ]);
        }
        out.push_str(&format!(
            "{} profile(s) filed\n{table}\n",
            observed.profiles.len()
        ));
    }
    out.push_str(&format!("{} outcome(s) learned\n", observed.outcomes));
    out
}

/// The clusters and the measured matrix of a knowledge base.
pub(crate) fn knowledge(summary: &tandem_api::KnowledgeSummary) -> String {
    let mut out = format!(
        "{} profile(s) observed, {} seed profile(s), {} outcome(s) learned ({} pairwise observations)\n",
        summary.profiles, summary.seed_points, summary.outcomes, summary.residual_observations
    );
    let mut clusters = Table::new();
    clusters.load_preset(UTF8_FULL_CONDENSED).set_header([
        "cluster",
        "GPU util %",
        "mem access %",
        "mem share %",
        "members",
        "radius",
    ]);
    for c in &summary.clusters {
        clusters.add_row([
            c.id.to_string(),
            format!("{:.1}", c.gpu_util_pct),
            format!("{:.1}", c.mem_access_pct),
            format!("{:.1}", c.mem_share_pct),
            c.members.to_string(),
            format!("{:.3}", c.radius),
        ]);
    }
    out.push_str(&format!("{clusters}\n"));
    if summary.pairs.is_empty() {
        out.push_str("no interference measured yet\n");
    } else {
        let mut pairs = Table::new();
        pairs.load_preset(UTF8_FULL_CONDENSED).set_header([
            "rank",
            "cluster",
            "next to",
            "outcomes",
            "slowdown % (mean ± sd)",
            "packing saving %",
        ]);
        let mut sorted: Vec<_> = summary.pairs.iter().collect();
        sorted.sort_by_key(|p| p.rank);
        for p in sorted {
            pairs.add_row([
                p.rank.to_string(),
                p.cluster.to_string(),
                p.partner.to_string(),
                p.observations.to_string(),
                format!("{:.1} ± {:.1}", p.slowdown_pct, p.slowdown_std_pct),
                p.packing_saving_pct
                    .map_or_else(|| "-".into(), |s| format!("{s:.1}")),
            ]);
        }
        out.push_str(&format!("{pairs}\n"));
    }
    out
}
