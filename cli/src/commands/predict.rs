//! `tandem predict`: what the engine expects of each queued job on each GPU model.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

use crate::args::{EngineArgs, Format, SecretArgs};
use crate::loaded::{Loaded, load_queue};
use crate::output::{print_as, right_align};

/// The subcommands of `tandem predict`, one per kind of figure.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Peak memory of each queued job on each GPU model, and what the guard reserves.
    Memory(PredictArgs),
    /// Speed, run time, cost and energy of each queued job on each GPU model.
    Runtime(PredictArgs),
    /// Peak GPU utilization of each queued job alone.
    ///
    /// Its profile's (from the queue file or the knowledge base) when it has one, else
    /// predicted from its declared model by the engine's forest (trained on runs measured on a
    /// Tesla P100; see `tandem eval utilization`). The same on every GPU model.
    Utilization(PredictArgs),
}

/// The options every `tandem predict` subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct PredictArgs {
    /// Queue file (JSON), as for `tandem recommend`.
    #[arg(long, value_name = "FILE")]
    queue: PathBuf,

    /// Knowledge base to predict from (see `tandem kb`); it is read, never changed (speeds
    /// in the queue file count for this prediction only).
    #[arg(long, value_name = "FILE")]
    kb: Option<PathBuf>,

    #[command(flatten)]
    secret: SecretArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl Command {
    /// Asks the engine for every queued job's estimates and prints the figures asked for.
    pub(crate) fn execute(&self, engine: &EngineArgs) -> anyhow::Result<()> {
        match self {
            Command::Memory(args) => predict(engine, args, Estimates::PerModel(PerModel::Memory)),
            Command::Runtime(args) => predict(engine, args, Estimates::PerModel(PerModel::Runtime)),
            Command::Utilization(args) => predict(engine, args, Estimates::Utilization),
        }
    }
}

fn predict(engine: &EngineArgs, args: &PredictArgs, what: Estimates) -> anyhow::Result<()> {
    let Loaded {
        mut recommender,
        keys,
        queued,
        gpus,
        ..
    } = load_queue(
        engine,
        &args.queue,
        args.kb.as_deref(),
        &args.secret,
        0,
        None,
    )?;
    let mut specs: Vec<tandem_api::GpuSpec> = Vec::new();
    for gpu in &gpus {
        if !specs.iter().any(|s| s.model == gpu.spec.model) {
            specs.push(gpu.spec.clone());
        }
    }
    let mut rows = Vec::new();
    for job in &queued {
        let estimates = recommender.estimate(job, &specs).with_context(|| {
            format!(
                "{}: the engine rejected job `{}`",
                args.queue.display(),
                keys.original(&job.id)
            )
        })?;
        rows.push(JobEstimates {
            job: keys.original(&job.id).to_owned(),
            estimates,
        });
    }
    print_as(args.format, &rows, || render(&rows, &specs, what))
}

/// Which figures `tandem predict` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Estimates {
    /// Figures per job and GPU model.
    PerModel(PerModel),
    /// Peak GPU utilization, one row per job (it does not depend on the GPU model).
    Utilization,
}

/// Which per-model figures `tandem predict` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PerModel {
    /// Memory: source, peak, reservation, fit.
    Memory,
    /// Speed, run time, cost, energy.
    Runtime,
}

/// The engine's estimates for one queued job.
#[derive(Debug, Clone, serde::Serialize)]
struct JobEstimates {
    /// The job's id, as in the queue file.
    job: String,
    /// One per GPU model.
    estimates: Vec<tandem_api::Estimate>,
}

/// `tandem predict`: one row per job and GPU model.
fn render(rows: &[JobEstimates], specs: &[tandem_api::GpuSpec], what: Estimates) -> String {
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
