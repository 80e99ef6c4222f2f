//! `tandem recommend`: which queued jobs share which GPU.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args as ClapArgs;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use tandem_api::Recommendation;

use crate::args::{EngineArgs, Format, ObjectiveArg, SecretArgs};
use crate::loaded::{Loaded, load_queue};
use crate::output::{print_as, right_align};
use crate::queue::Request;

/// The options of `tandem recommend`.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// Queue file (JSON): `{"gpus": [...], "policy": {...}, "jobs": [...]}`; see examples/.
    #[arg(long, value_name = "FILE")]
    queue: PathBuf,

    /// Knowledge base to recommend from (see `tandem kb`); without one, the engine starts
    /// from the bundled seed profiles and has learned nothing.
    #[arg(long, value_name = "FILE")]
    kb: Option<PathBuf>,

    #[command(flatten)]
    secret: SecretArgs,

    /// What to optimize; overrides the queue file's `policy.objective`.
    #[arg(long, value_enum)]
    objective: Option<ObjectiveArg>,

    /// Seed for the engine's exploration; the same seed and queue give the same answer.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl Args {
    /// Asks the engine for placements and prints them with the caller's ids.
    pub(crate) fn execute(&self, engine: &EngineArgs) -> anyhow::Result<()> {
        let Loaded {
            request,
            mut recommender,
            keys,
            queued,
            gpus,
        } = load_queue(
            engine,
            &self.queue,
            self.kb.as_deref(),
            &self.secret,
            self.seed,
            self.objective,
        )?;
        let mut answer = recommender
            .recommend(&queued, &gpus)
            .with_context(|| format!("{}: the engine rejected the queue", self.queue.display()))?;
        for placement in &mut answer.placements {
            for id in placement
                .jobs
                .iter_mut()
                .chain(placement.residents.iter_mut())
            {
                *id = keys.original(id).to_owned();
            }
        }
        for unplaced in &mut answer.unplaced {
            unplaced.job = keys.original(&unplaced.job).to_owned();
        }
        print_as(self.format, &answer, || render(&answer, &request))
    }
}

/// The placements as a table, then the unplaced jobs and why.
fn render(answer: &Recommendation, request: &Request) -> String {
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
        right_align(&mut table, 3..7);
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
