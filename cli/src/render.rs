//! Tables for people. JSON output is plain serde of the engine's answer.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use tandem_api::{Interpolation, Recommendation};

use crate::queue::Request;
use crate::synthesize::{Report, Written};

/// The placements as a table, then the unplaced jobs and why.
pub(crate) fn recommendation(answer: &Recommendation, request: &Request) -> String {
    let policy = &request.policy;
    let caps: String = policy
        .model_caps
        .iter()
        .map(|c| format!(", {} on a {}", c.max_jobs, c.gpu_model))
        .collect();
    let mut out = format!(
        "{} job(s) queued, {} GPU(s), objective {}, at most {} job(s) per GPU{caps}\n",
        request.queue.len(),
        request.gpus.len(),
        policy.objective,
        policy.max_jobs_per_gpu
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
    out.push_str(&format!(
        "memory model: {} measured peak(s), guard margin {:.1}%; speeds of {} workload(s)\n",
        summary.memory_rows, summary.memory_margin_pct, summary.speed_workloads
    ));
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

/// Per workload: the blinded score of each method, the method chosen and what was generated.
pub(crate) fn synthesis(report: &Report, written: Option<&Written>) -> String {
    let measured: usize = report.measured.iter().map(|m| m.samples.len()).sum();
    let generated: usize = report
        .synthesis
        .generated
        .iter()
        .map(|g| g.samples.len())
        .sum();
    let mut out = format!(
        "{} workload(s), {measured} measured batch size(s); {generated} profile(s) generated, up to {} per gap\n",
        report.measured.len(),
        report.points_per_gap
    );
    let mut table = Table::new();
    let mut header = vec!["workload".to_owned(), "batch sizes".to_owned()];
    header.extend(Interpolation::ALL.iter().map(|m| m.to_string()));
    header.extend(["best".to_owned(), "generated".to_owned()]);
    table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    for series in &report.measured {
        let workload = &series.workload;
        let mut row = vec![workload.clone(), series.samples.len().to_string()];
        for method in Interpolation::ALL {
            let score = report
                .synthesis
                .scores
                .iter()
                .find(|s| s.workload == *workload && s.method == method);
            row.push(match score.map(|s| (s.rmse, s.mae)) {
                Some((Some(rmse), Some(mae))) => format!("{rmse:.2} / {mae:.2}"),
                _ => "-".into(),
            });
        }
        let best = report
            .synthesis
            .best
            .iter()
            .find(|b| b.workload == *workload);
        row.push(best.map_or_else(|| "-".into(), |b| b.method.to_string()));
        let count: usize = report
            .synthesis
            .generated
            .iter()
            .filter(|g| g.workload == *workload)
            .map(|g| g.samples.len())
            .sum();
        row.push(count.to_string());
        table.add_row(row);
    }
    // Numbers right, names (workload, best method) left.
    for column in [1, 2, 3, 4, 5, 7] {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&format!("{table}\n"));
    out.push_str(&format!(
        "method columns: RMSE / MAE in percentage points over {}, each interior batch size\n\
         predicted from the others (blinded evaluation); - with fewer than 3 batch sizes\n",
        report.features.join(", ")
    ));
    if let Some(written) = written {
        out.push_str(&format!(
            "wrote {} ({} measured and {} synthetic row(s))\n",
            written.path.display(),
            written.measured,
            written.synthetic
        ));
    }
    out
}

/// `eval pairs`: the settings, one row per method, then the learning curve.
pub(crate) fn evaluation(report: &crate::eval::Report) -> String {
    let s = &report.settings;
    let solo = if s.solo_times_measured {
        "measured solo times".to_owned()
    } else {
        format!(
            "solo times not measured: {:.0} s assumed for every job",
            crate::eval::ASSUMED_SOLO_S
        )
    };
    let mut out = format!(
        "catalog {} ({}), GPU model {} ({} MiB)\n\
         {} job types ({solo}); {} measured pairs of two types ({} self-pairs left out)\n\
         train share {}: {} pairs observed by Tandem and the JRS ranking, {} held out\n\
         {} queues of {} distinct job types, seed {}\n",
        report.catalog.name,
        report.catalog.file.display(),
        s.gpu_model,
        s.memory_mib,
        s.job_types,
        s.measured_pairs,
        s.self_pairs_skipped,
        s.train_share,
        s.training_pairs,
        s.held_out_pairs,
        s.queues,
        s.queue_size,
        s.seed,
    );

    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "method",
        "pairs/queue",
        "PacSav %",
        "IndSD mean %",
        "IndSD p95 %",
        "pairs IndSD>50% %",
        "OOMs",
        "of oracle %",
    ]);
    let mut notes = Vec::new();
    for row in &report.methods {
        if !row.applicable {
            let mut cells = vec![row.method.to_owned()];
            cells.extend(std::iter::repeat_n("n/a".to_owned(), 7));
            table.add_row(cells);
            notes.push(format!(
                "{}: not applicable: {}",
                row.method,
                row.reason.as_deref().unwrap_or("no reason given")
            ));
            continue;
        }
        table.add_row([
            row.method.to_owned(),
            figure(row.pairs_per_queue, 2),
            figure(row.packing_saving_pct, 1),
            figure(row.slowdown_mean_pct, 1),
            figure(row.slowdown_p95_pct, 1),
            figure(row.high_slowdown_pairs_pct, 1),
            row.ooms.map_or_else(|| "–".into(), |o| o.to_string()),
            figure(row.of_oracle_pct, 1),
        ]);
        if let Some(training) = &row.engine
            && training.outcomes_rejected > 0
        {
            notes.push(format!(
                "{}: the engine refused {} of {} training outcomes (first: {})",
                row.method,
                training.outcomes_rejected,
                training.outcomes_rejected + training.outcomes_observed,
                training.first_rejection.as_deref().unwrap_or("?")
            ));
        }
    }
    for column in 1..8 {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&format!("{table}\n"));
    out.push_str(
        "PacSav: time saved against running each queue one job after another (mean over queues);\n\
         IndSD: individual slowdown of the jobs that shared a GPU in a measured pair; OOMs: pairs\n\
         formed that the catalog never measured (they save nothing and have no slowdown); – : none\n",
    );
    for note in notes {
        out.push_str(&format!("{note}\n"));
    }

    out.push_str(
        "\nlearning curve: tandem-balanced trained on a share of the measured pairs; the same queues,\n\
         and predictions for the pairs held out\n",
    );
    let mut curve = Table::new();
    curve.load_preset(UTF8_FULL_CONDENSED).set_header([
        "train share",
        "outcomes seen",
        "PacSav %",
        "IndSD p95 %",
        "OOMs",
        "held out",
        "IndSD MAE pp",
        "naive MAE pp",
        "PacSav Spearman",
        "predict errors",
    ]);
    let mut notes = Vec::new();
    for row in &report.learning_curve {
        let seen = if row.engine.outcomes_rejected > 0 {
            format!("{} of {}", row.engine.outcomes_observed, row.training_pairs)
        } else {
            row.engine.outcomes_observed.to_string()
        };
        curve.add_row([
            format!("{:.2}", row.train_share),
            seen,
            figure(row.packing_saving_pct, 1),
            figure(row.slowdown_p95_pct, 1),
            row.ooms.to_string(),
            row.held_out_pairs.to_string(),
            figure(row.slowdown_mae_pp, 1),
            figure(row.naive_slowdown_mae_pp, 1),
            figure(row.packing_saving_spearman, 2),
            row.predict_errors.to_string(),
        ]);
        for message in [&row.engine.first_rejection, &row.first_predict_error]
            .into_iter()
            .flatten()
        {
            if !notes.contains(message) {
                notes.push(message.clone());
            }
        }
    }
    for column in 0..10 {
        if let Some(c) = curve.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&format!("{curve}\n"));
    out.push_str(
        "MAE: mean absolute error of the predicted IndSD of both jobs of each held-out pair, in\n\
         percentage points; naive: predicting the training pairs' mean IndSD for every job\n",
    );
    for note in notes {
        out.push_str(&format!("engine: {note}\n"));
    }
    out
}

/// A number with `decimals` decimals, or – when there is none.
fn figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.decimals$}"))
}

/// `tandem eval memory`: errors per split and predictor, then the guard.
pub(crate) fn memory_evaluation(report: &crate::eval::memory::Report) -> String {
    let mut out = format!(
        "{} measured peaks ({} networks × 4 batch sizes × {} GPUs, SchedTune); random split seed {}\n",
        report.rows, report.networks, report.gpus, report.seed
    );
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "split",
        "predictor",
        "RMSE MiB",
        "avg error %",
        "max error %",
    ]);
    for s in &report.scores {
        table.add_row([
            s.split.as_str().to_owned(),
            s.method.to_owned(),
            format!("{:.0}", s.rmse_mib),
            format!("{:.2}", s.avg_error_pct),
            format!("{:.1}", s.max_error_pct),
        ]);
    }
    right_align(&mut table, 2..5);
    out.push_str(&format!("{table}\n"));
    out.push_str(&format!(
        "anchor: SchedTune reports {:.2}% average error on a random split\n\n",
        report.schedtune_avg_error_pct
    ));
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "split",
        "held out",
        "would-be OOMs",
        "caught",
        "margin % (per fold)",
        "over-reserved avg %",
        "over-reserved avg MiB",
    ]);
    for g in &report.guards {
        table.add_row([
            g.split.as_str().to_owned(),
            g.rows.to_string(),
            g.would_be_ooms.to_string(),
            format!(
                "{} ({:.0}%)",
                g.caught,
                100.0 * g.caught as f64 / g.would_be_ooms.max(1) as f64
            ),
            format!("{:.1}-{:.1}", g.margin_pct.0, g.margin_pct.1),
            format!("{:.1}", g.over_reserved_avg_pct),
            format!("{:.0}", g.over_reserved_avg_mib),
        ]);
    }
    right_align(&mut table, 1..7);
    out.push_str(&format!(
        "guard: reserve prediction × (1 + margin); would-be OOM = true peak above the bare prediction\n{table}\n"
    ));
    out.push_str(&format!(
        "the engine's margin, trained on all {} rows: {:.1}%\n",
        report.rows, report.engine_margin_pct
    ));
    out
}

fn right_align(table: &mut Table, columns: std::ops::Range<usize>) {
    for column in columns {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Which figures `tandem predict` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Estimates {
    /// Figures per job and GPU model.
    PerModel(PerModel),
    /// Peak GPU utilization, one row per job (it does not depend on the GPU model).
    Utilization,
}

/// Which per-model figures `tandem predict` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PerModel {
    /// Memory: source, peak, reservation, fit.
    Memory,
    /// Speed, run time, cost, energy.
    Runtime,
}

/// The engine's estimates for one queued job.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct JobEstimates {
    /// The job's id, as in the queue file.
    pub job: String,
    /// One per GPU model.
    pub estimates: Vec<tandem_api::Estimate>,
}

/// `tandem predict`: one row per job and GPU model.
pub(crate) fn estimates(
    rows: &[JobEstimates],
    specs: &[tandem_api::GpuSpec],
    what: Estimates,
) -> String {
    let dash = || "-".to_owned();
    let mut table = Table::new();
    let what = match what {
        Estimates::PerModel(what) => what,
        Estimates::Utilization => {
            table
                .load_preset(UTF8_FULL_CONDENSED)
                .set_header(["job", "peak GPU utilization %"]);
            for row in rows {
                let util = row.estimates.first().and_then(|e| e.utilization_pct);
                table.add_row([
                    row.job.clone(),
                    util.map_or_else(dash, |u| format!("{u:.1}")),
                ]);
            }
            right_align(&mut table, 1..2);
            return format!("{table}\n");
        }
    };
    let header: &[&str] = match what {
        PerModel::Memory => &[
            "job",
            "GPU model",
            "memory from",
            "peak MiB",
            "reserved MiB",
            "fits",
        ],
        PerModel::Runtime => &[
            "job",
            "GPU model",
            "speed /s",
            "run time s",
            "cost",
            "energy kJ",
        ],
    };
    table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    for row in rows {
        for e in &row.estimates {
            let memory = specs
                .iter()
                .find(|s| s.model == e.gpu_model)
                .map_or(0, |s| s.memory_mib);
            let cells = match what {
                PerModel::Memory => [
                    e.memory_source.to_string(),
                    e.peak_mem_mib.map_or_else(dash, |m| m.to_string()),
                    e.reserved_mib
                        .map_or_else(dash, |m| format!("{m} / {memory}")),
                    if e.fits_empty { "yes" } else { "no" }.to_owned(),
                ],
                PerModel::Runtime => [
                    e.speed.map_or_else(dash, |v| format!("{v:.3}")),
                    e.solo_s.map_or_else(dash, |v| format!("{v:.0}")),
                    e.cost.map_or_else(dash, |v| format!("{v:.2}")),
                    e.energy_kj.map_or_else(dash, |v| format!("{v:.0}")),
                ],
            };
            let mut line = vec![row.job.clone(), e.gpu_model.clone()];
            line.extend(cells);
            table.add_row(line);
        }
    }
    right_align(&mut table, 2..6);
    format!("{table}\n")
}

/// A declared model summary, one field per row.
pub(crate) fn summary(summary: &tandem_api::ModelSummary) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_header(["field", "value"]);
    let rows = [
        ("parameters MiB", format!("{:.2}", summary.params_mib)),
        (
            "activations MiB (one batch)",
            format!("{:.2}", summary.activations_mib),
        ),
        ("input MiB (one batch)", format!("{:.3}", summary.input_mib)),
        ("batch size", summary.batch_size.to_string()),
        (
            "forward GFLOPs (one batch)",
            format!("{:.3}", summary.gflops),
        ),
        ("convolution layers", summary.conv_layers.to_string()),
        ("linear layers", summary.linear_layers.to_string()),
        ("activation layers", summary.activation_layers.to_string()),
        ("other layers", summary.other_layers.to_string()),
    ];
    for (field, value) in rows {
        table.add_row([field.to_owned(), value]);
    }
    right_align(&mut table, 1..2);
    format!("{table}\n")
}

pub(crate) fn utilization_evaluation(report: &crate::eval::utilization::Report) -> String {
    let mut out = format!(
        "{} measured runs ({} networks in {} families, maximum GPU utilization on a Tesla P100, \
         Futurewei); random split seed {}\n",
        report.runs, report.networks, report.families, report.seed
    );
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "split",
        "predictor",
        "RMSLE (%)",
        "RMSLE (fraction)",
        "MAE points",
    ]);
    for s in &report.scores {
        table.add_row([
            s.split.as_str().to_owned(),
            s.method.to_owned(),
            format!("{:.3}", s.rmsle_pct),
            format!("{:.3}", s.rmsle_fraction),
            format!("{:.1}", s.mae_points),
        ]);
    }
    right_align(&mut table, 2..5);
    out.push_str(&format!("{table}\n"));
    out.push_str(&format!(
        "anchor: Yeung et al. report an RMSLE of {:.3} with a random forest (unit not stated)\n\n",
        report.yeung_rmsle
    ));
    out.push_str("tandem-forest, leave-one-model-out, per held-out network:\n");
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "network",
        "runs",
        "measured %",
        "RMSLE (%)",
        "MAE points",
    ]);
    for n in &report.per_network {
        table.add_row([
            n.network.to_owned(),
            n.runs.to_string(),
            format!("{:.1}-{:.1}", n.measured_pct.0, n.measured_pct.1),
            format!("{:.3}", n.rmsle_pct),
            format!("{:.1}", n.mae_points),
        ]);
    }
    right_align(&mut table, 1..5);
    out.push_str(&format!("{table}\n"));
    out
}
