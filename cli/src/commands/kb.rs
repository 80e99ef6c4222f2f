//! `tandem kb`: create, feed and inspect a knowledge base file, and enlarge measured profiles.

use std::path::PathBuf;

use clap::Subcommand;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use tandem_api::Interpolation;

use crate::args::{EngineArgs, Format, ObjectiveArg, SecretArgs};
use crate::kb;
use crate::output::print_as;
use crate::queue::InputError;
use crate::synthesize::{self, Report, Written};

/// The subcommands of `tandem kb`.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create a knowledge base, seeded with the bundled Futurewei profiles unless --empty.
    Init {
        /// The knowledge-base file to create.
        #[arg(long, value_name = "FILE")]
        kb: PathBuf,
        /// Start with no seed profiles at all.
        #[arg(long)]
        empty: bool,
        /// Replace an existing file (what it learned is lost).
        #[arg(long)]
        force: bool,
        /// Objective stored with the knowledge base (a queue file's policy overrides it).
        #[arg(long, value_enum, default_value_t = ObjectiveArg::Balanced)]
        objective: ObjectiveArg,
        /// Seed for clustering and exploration.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        secret: SecretArgs,
    },
    /// Feed profiles and/or outcomes; the file is written only if every one is accepted.
    Observe {
        /// The knowledge-base file.
        #[arg(long, value_name = "FILE")]
        kb: PathBuf,
        /// Profiles: a JSON list of jobs shaped as in a queue file.
        #[arg(long, value_name = "FILE")]
        profiles: Option<PathBuf>,
        /// Outcomes: a JSON list of `{"gpu_model", "jobs", "solo_s", "colocated_s"}` or
        /// `{"gpu_model", "jobs", "speeds"}` (co-located throughput / solo throughput).
        #[arg(long, value_name = "FILE")]
        outcomes: Option<PathBuf>,
        /// Accept outcomes naming jobs that were never profiled: the engine learns them as
        /// workloads known by their outcomes alone (a recurring job keyed to the same id each
        /// time). Without it such an outcome is refused, as it is usually a typo.
        #[arg(long)]
        workloads: bool,
        #[command(flatten)]
        secret: SecretArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Show the clusters and the interference learned between them.
    ///
    /// With --adapter-report, what a running adapter learned instead: the answer of its
    /// `GET /v1/knowledge` (saved, or `-` for standard input), with per GPU model what the
    /// cluster taught (memory model error and margin, speed ratios, counts).
    Show {
        /// The knowledge-base file.
        #[arg(long, value_name = "FILE", required_unless_present = "adapter_report")]
        kb: Option<PathBuf>,
        /// An adapter's `GET /v1/knowledge` answer (`-`: standard input), for example
        /// `curl -H "Authorization: Bearer $TOKEN" https://ADAPTER:8888/v1/knowledge | tandem kb show --adapter-report -`.
        #[arg(long, value_name = "FILE", conflicts_with = "kb")]
        adapter_report: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Enlarge measured workload profiles by interpolation across batch sizes.
    ///
    /// Reads a measured-workload CSV (the Futurewei set: columns Model, Dataset, BS, MGUP,
    /// MGMAP, MaGTSAMP; others are ignored), groups runs by workload (model and dataset, a
    /// dataset's `/version` suffix ignored) and averages runs at the same batch size. The
    /// engine judges four interpolation methods per workload by leaving out each interior
    /// batch size in turn, picks the lowest RMSE, and generates profiles between the measured
    /// batch sizes. Workloads reach the engine as opaque labels (w1, w2, ...), never by name.
    Synthesize {
        /// The measured-workload CSV (for example data/alnair/futurewei_mini_ml_workload.csv).
        #[arg(long, value_name = "FILE")]
        data: PathBuf,
        /// Synthetic batch sizes to generate between each pair of consecutive measured ones
        /// (fewer where the gap holds fewer whole batch sizes).
        #[arg(long, value_name = "N", default_value_t = 3)]
        points_per_gap: u32,
        /// Write the augmented set, measured and synthetic rows, as CSV
        /// (`workload,batch_size,MGUP,MGMAP,MGTSAMP,synthetic`); written atomically.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
}

impl Command {
    /// Runs the subcommand against the engine `engine` names.
    pub(crate) fn execute(self, engine: &EngineArgs) -> anyhow::Result<()> {
        let runtime = engine.runtime()?;
        match self {
            Command::Init {
                kb,
                empty,
                force,
                objective,
                seed,
                secret,
            } => {
                let policy = tandem_api::Policy {
                    objective: objective.into(),
                    ..tandem_api::Policy::default()
                };
                let summary = kb::init(
                    &runtime,
                    &kb,
                    secret.secret_file.as_deref(),
                    &policy,
                    seed,
                    empty,
                    force,
                )?;
                println!(
                    "created {} with {} seed profile(s) in {} cluster(s)",
                    kb.display(),
                    summary.seed_points,
                    summary.clusters.len()
                );
            }
            Command::Observe {
                kb,
                profiles,
                outcomes,
                workloads,
                secret,
                format,
            } => {
                if profiles.is_none() && outcomes.is_none() {
                    return Err(InputError::usage("give --profiles, --outcomes or both").into());
                }
                let mut opened = kb::open(&runtime, &kb, secret.secret_file.as_deref())?;
                let observed = kb::observe(
                    &mut opened,
                    profiles.as_deref(),
                    outcomes.as_deref(),
                    workloads,
                )?;
                print_as(format, &observed, || render_observed(&observed))?;
            }
            Command::Show {
                kb,
                adapter_report: Some(report),
                format,
            } if kb.is_none() => {
                let text = if report.as_os_str() == "-" {
                    std::io::read_to_string(std::io::stdin())?
                } else {
                    std::fs::read_to_string(&report).map_err(|e| {
                        InputError::in_file(&report, "", format!("cannot read the file: {e}"))
                    })?
                };
                let report: AdapterReport = serde_json::from_str(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "{}: not an adapter's GET /v1/knowledge answer: {e}",
                        report.display()
                    )
                })?;
                print_as(format, &report, || {
                    let mut out = render_knowledge(&report.summary);
                    out.push_str(&render_learned(&report.gpu_models));
                    out
                })?;
            }
            Command::Show { kb, format, .. } => {
                let kb = kb.ok_or_else(|| anyhow::anyhow!("--kb or --adapter-report is needed"))?;
                // Showing needs no secret: nothing is keyed.
                let mut recommender = kb::open_unkeyed(&runtime, &kb)?;
                let summary = recommender.describe()?;
                print_as(format, &summary, || render_knowledge(&summary))?;
            }
            Command::Synthesize {
                data,
                points_per_gap,
                out,
                format,
            } => {
                let (report, written) =
                    synthesize::run(&runtime, &data, points_per_gap, out.as_deref())?;
                print_as(format, &report, || {
                    render_synthesis(&report, written.as_ref())
                })?;
            }
        }
        Ok(())
    }
}

/// What `kb observe` did.
fn render_observed(observed: &kb::Observed) -> String {
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

/// An adapter's `GET /v1/knowledge` answer: the engine's summary and, per GPU model, what
/// the cluster taught (`tandem_adapter_core::learning::KnowledgeReport`; read here as the
/// fields it names, so a newer adapter's extra fields are ignored).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct AdapterReport {
    #[serde(flatten)]
    summary: tandem_api::KnowledgeSummary,
    #[serde(default)]
    gpu_models: Vec<LearnedOnModel>,
}

/// What the cluster taught on one GPU model (`ModelReport` of the adapter core).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LearnedOnModel {
    gpu_model: String,
    profiles: u32,
    outcomes: u32,
    speeds: u32,
    #[serde(default)]
    speed_vs: Vec<SpeedVs>,
    memory: LearnedMemory,
}

/// One model's speed over another's.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SpeedVs {
    gpu_model: String,
    ratio: f64,
    jobs: u32,
}

/// The memory model's record on one GPU model.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LearnedMemory {
    peaks: u32,
    mean_error_pct: Option<f64>,
    max_under_pct: Option<f64>,
    beyond_reservation: u32,
    margin_pct: f32,
    last: Option<serde_json::Value>,
}

/// Per GPU model, what an adapter learned from its cluster.
fn render_learned(models: &[LearnedOnModel]) -> String {
    if models.is_empty() {
        return "nothing learned per GPU model yet\n".to_owned();
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "GPU model",
        "profiles",
        "outcomes",
        "speeds",
        "speed vs",
        "peaks",
        "mean error %",
        "max under %",
        "beyond reservation",
        "margin %",
        "last peak MiB: measured, predicted before -> after",
    ]);
    let figure = |value: Option<f64>| value.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
    for m in models {
        let speed_vs = m
            .speed_vs
            .iter()
            .map(|r| format!("{:.2}x {} ({} jobs)", r.ratio, r.gpu_model, r.jobs))
            .collect::<Vec<_>>()
            .join(", ");
        let last = m.memory.last.as_ref().map_or_else(
            || "-".into(),
            |l| {
                format!(
                    "{}, {} -> {}",
                    l["measured_mib"], l["predicted_before_mib"], l["predicted_after_mib"]
                )
            },
        );
        table.add_row([
            m.gpu_model.clone(),
            m.profiles.to_string(),
            m.outcomes.to_string(),
            m.speeds.to_string(),
            if speed_vs.is_empty() {
                "-".into()
            } else {
                speed_vs
            },
            m.memory.peaks.to_string(),
            figure(m.memory.mean_error_pct),
            figure(m.memory.max_under_pct),
            m.memory.beyond_reservation.to_string(),
            format!("{:.1}", m.memory.margin_pct),
            last,
        ]);
    }
    format!("learned per GPU model:\n{table}\n")
}

/// The clusters and the measured matrix of a knowledge base.
fn render_knowledge(summary: &tandem_api::KnowledgeSummary) -> String {
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
fn render_synthesis(report: &Report, written: Option<&Written>) -> String {
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
