//! The tables `tandem eval` prints for a person (JSON output is plain serde of the reports).

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};

use crate::{memory, pairs, utilization};

/// `eval pairs`: the settings, one row per method, then the learning curve.
pub fn pairs(report: &pairs::Report) -> String {
    let s = &report.settings;
    let solo = if s.solo_times_measured {
        "measured solo times".to_owned()
    } else {
        format!(
            "solo times not measured: {:.0} s assumed for every job",
            pairs::ASSUMED_SOLO_S
        )
    };
    let mut out = format!(
        "catalog {} ({}), GPU model {} ({} MiB)\n\
         {} job types ({solo}); {} measured pairs of two types ({} self-pairs left out)\n\
         train share {}: {} pairs observed by Tandem and the JRS ranking, {} held out\n\
         {} queues of {} distinct job types, seed {}\n{}",
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
        match s.declared_models {
            0 => String::new(),
            n => format!(
                "{n} of {} job types declare their models to Tandem (memory and interference \
                 predicted from them)\n",
                s.job_types
            ),
        },
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
        "of oracle %",
        "IndSD p95 %",
        "OOMs",
        "held out",
        "unseen MAE pp",
        "seen MAE pp",
        "naive MAE pp",
        "90% cover %",
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
            figure(row.of_oracle_pct, 1),
            figure(row.slowdown_p95_pct, 1),
            row.ooms.to_string(),
            row.held_out_pairs.to_string(),
            figure(row.slowdown_mae_pp, 1),
            figure(row.seen_slowdown_mae_pp, 1),
            figure(row.naive_slowdown_mae_pp, 1),
            figure(row.interval_coverage_pct, 1),
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
    for column in 0..13 {
        if let Some(c) = curve.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&format!("{curve}\n"));
    out.push_str(
        "MAE: mean absolute error of the predicted IndSD of both jobs of each pair, in percentage\n\
         points, on the held-out (unseen) and the observed (seen) pairs; naive: predicting the\n\
         training pairs' mean IndSD for every held-out job; 90% cover: share of held-out jobs whose\n\
         measured IndSD falls inside the predicted 90% interval (goal: about 90)\n",
    );
    for note in notes {
        out.push_str(&format!("engine: {note}\n"));
    }
    out.push_str(&mixed_durations(&report.mixed_durations));
    if let Some(path) = &report.profile_path {
        out.push_str(&profile_path(report, path));
    }
    out
}

/// The mixed-duration protocol of `eval pairs`: one row per method, Tandem's with the lengths
/// hidden and declared.
fn mixed_durations(mixed: &pairs::MixedDurations) -> String {
    let mut out = format!(
        "\nmixed durations: the same queues, each job running its type's solo time times a factor\n\
         within 1/{spread}..{spread} (log-uniform); partners share until the first finishes, then the\n\
         other runs alone. Tandem with the lengths hidden, and declared (work and speeds told);\n\
         oracle-observed: the oracle over the observed pairs only, the most a method can save\n\
         that lets jobs of unknown memory share only once seen sharing, as Tandem's guard does\n",
        spread = mixed.length_spread
    );
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "method",
        "lengths",
        "pairs/queue",
        "PacSav %",
        "OOMs",
        "of oracle %",
    ]);
    for row in &mixed.methods {
        table.add_row([
            row.method.to_owned(),
            row.lengths.unwrap_or("–").to_owned(),
            format!("{:.2}", row.pairs_per_queue),
            figure(row.packing_saving_pct, 1),
            row.ooms.to_string(),
            figure(row.of_oracle_pct, 1),
        ]);
    }
    right_align(&mut table, 2..6);
    out.push_str(&format!("{table}\n"));
    out
}

/// The profile path of `eval pairs`: each type's cluster, the methods' rows beside random, the
/// per-type JRS ranking and the oracle of the main table, then the measured pairs by cluster.
fn profile_path(report: &pairs::Report, path: &pairs::ProfilePath) -> String {
    let mut out = String::from(
        "\nprofile path: every job given with its profile; the engine places it in a cluster and\n\
         predicts from the clusters. cold: nothing observed; warm: the training pairs observed,\n\
         the queues' jobs new (new ids); recurring: the queues carry the observed ids\n",
    );
    let clusters: Vec<String> = path
        .clusters
        .iter()
        .map(|c| format!("{} -> {} ({:.2})", c.job_type, c.cluster, c.uncertainty))
        .collect();
    out.push_str(&format!(
        "clusters (uncertainty): {}\n{} of {} measured pairs sum to more than the GPU's memory by \
         their profiles (the guard refuses them)\n",
        clusters.join("; "),
        path.pairs_over_memory,
        report.settings.measured_pairs,
    ));
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
    let main = |name: &str| report.methods.iter().find(|row| row.method == name);
    let rows = main("random")
        .into_iter()
        .chain(main("jrs-ranking"))
        .chain(&path.methods)
        .chain(main("oracle"));
    for row in rows {
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
    }
    right_align(&mut table, 1..8);
    out.push_str(&format!("{table}\n"));
    for row in &path.methods {
        if let Some(training) = &row.engine
            && training.outcomes_rejected > 0
        {
            out.push_str(&format!(
                "{}: the engine refused {} of {} training outcomes (first: {})\n",
                row.method,
                training.outcomes_rejected,
                training.outcomes_rejected + training.outcomes_observed,
                training.first_rejection.as_deref().unwrap_or("?")
            ));
        }
    }

    let predictions: Vec<String> = path
        .predictions
        .iter()
        .map(|row| {
            format!(
                "{}: {} pairs, IndSD MAE {} pp, PacSav Spearman {}, worst IndSD Spearman {}, \
                 {} predict errors{}",
                row.phase,
                row.pairs,
                figure(row.slowdown_mae_pp, 1),
                figure(row.packing_saving_spearman, 2),
                figure(row.worst_slowdown_spearman, 2),
                row.predict_errors,
                row.first_predict_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" (first: {e})"))
            )
        })
        .collect();
    out.push_str(&format!(
        "predictions for measured pairs of new jobs (cold: every pair; warm: the held-out \
         pairs):\n  {}\n",
        predictions.join("\n  ")
    ));

    out.push_str(
        "\nprofile path learning curve: tandem-balanced after a share of the measured pairs, the\n\
         queued jobs new; predictions for the pairs held out, both jobs new\n",
    );
    let mut curve = Table::new();
    curve.load_preset(UTF8_FULL_CONDENSED).set_header([
        "train share",
        "outcomes seen",
        "PacSav %",
        "of oracle %",
        "IndSD p95 %",
        "OOMs",
        "held out",
        "predicted",
        "unseen MAE pp",
        "PacSav Spearman",
        "worst IndSD Spearman",
    ]);
    for row in &path.curve {
        let seen = if row.engine.outcomes_rejected > 0 {
            format!("{} of {}", row.engine.outcomes_observed, row.training_pairs)
        } else {
            row.engine.outcomes_observed.to_string()
        };
        let held_out = &row.held_out;
        curve.add_row([
            format!("{:.2}", row.train_share),
            seen,
            figure(row.packing_saving_pct, 1),
            figure(row.of_oracle_pct, 1),
            figure(row.slowdown_p95_pct, 1),
            row.ooms.to_string(),
            held_out.pairs.to_string(),
            (held_out.pairs - held_out.predict_errors).to_string(),
            figure(held_out.slowdown_mae_pp, 1),
            figure(held_out.packing_saving_spearman, 2),
            figure(held_out.worst_slowdown_spearman, 2),
        ]);
    }
    right_align(&mut curve, 0..11);
    out.push_str(&format!("{curve}\n"));
    out.push_str(
        "predicted: held-out pairs the engine could predict (it refuses a pair whose profiles need\n\
         more memory than the GPU)\n",
    );

    out.push_str("\nmeasured pairs by the clusters of their two jobs\n");
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "clusters",
        "pairs",
        "PacSav mean %",
        "IndSD mean %",
        "IndSD max %",
        "pairs IndSD>50%",
    ]);
    for row in path.cluster_pairs.iter().chain(&path.within_across) {
        table.add_row([
            row.clusters.clone(),
            row.pairs.to_string(),
            figure(row.packing_saving_pct, 1),
            figure(row.slowdown_mean_pct, 1),
            figure(row.slowdown_max_pct, 1),
            row.high_slowdown_pairs.to_string(),
        ]);
    }
    right_align(&mut table, 1..6);
    out.push_str(&format!("{table}\n"));
    out
}

/// A number with `decimals` decimals, or – when there is none.
fn figure(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.decimals$}"))
}

/// `tandem eval memory`: errors per split and predictor, then the guard.
pub fn memory(report: &memory::Report) -> String {
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

/// `tandem eval utilization`: errors per split and predictor, then per held-out network.
pub fn utilization(report: &utilization::Report) -> String {
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

/// Right-aligns `columns` of `table` (numbers line up on their last digit).
fn right_align(table: &mut Table, columns: std::ops::Range<usize>) {
    for column in columns {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}
