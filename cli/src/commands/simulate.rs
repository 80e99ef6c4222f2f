//! `tandem simulate`: replay a trace under every policy on a simulated cluster.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use tandem_catalog::Catalog;
use tandem_host::Runtime;
use tandem_sim::policy::PolicyName;
use tandem_sim::{Cluster, DeclaredModels, Report, Scenario, Settings, Trace, Truth, demo};

use crate::args::{EngineArgs, Format};
use crate::atomic::write_shared;
use crate::error::from_sim;
use crate::output::print_as;
use crate::queue::InputError;

/// The options of `tandem simulate`.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// Trace CSV (`arrival_s,job_type,gpus,steps`; see `tandem trace`) [default: the built-in
    /// demo trace, sim/data/demo-trace.csv].
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Cluster CSV (`nodes,gpus_per_node,gpu_model`) [default: the demo's 16 K80, 16 P100 and
    /// 16 V100].
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,

    /// Catalog of measured co-locations, repeatable; they are merged [default: the three
    /// Gavel catalogs, K80, P100 and V100, built in].
    #[arg(long = "catalog", value_name = "FILE")]
    catalogs: Vec<PathBuf>,

    /// Models the job types' users declare, CSV (`job_type` and the fields of `tandem
    /// declare`'s summary): the engine predicts each type's GPU utilization from its model, and
    /// ffd-util and lucid-style pack by it where the catalogs measured none [default: with the
    /// built-in catalogs, the built-in models of Gavel's job types,
    /// data/utilization/gavel_models.csv; else none].
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,

    /// Policies to compare, comma-separated, or `all`: exclusive-fifo, random, ffd-util,
    /// schedtune-min-jct, jrs-ranking, lucid-style, tandem-balanced, tandem-min-slowdown,
    /// tandem-max-packing, tandem-balanced-blind (balanced, told no GPU speeds),
    /// tandem-balanced-undeclared (balanced, declared models withheld).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "all"
    )]
    policies: Vec<String>,

    /// Solo profiling window of a job type's first run, in seconds (0: no profiling).
    #[arg(long, value_name = "S", default_value_t = Settings::default().profile_window_s)]
    profile_window_s: f64,

    /// Seconds from the start of a group that cannot run to the OOM of the job that joined.
    #[arg(long, value_name = "S", default_value_t = Settings::default().oom_after_s)]
    oom_after_s: f64,

    /// Queued jobs, from the head, that a policy considers at each decision.
    #[arg(long, value_name = "N", default_value_t = Settings::default().window)]
    window: usize,

    /// Share (0..=1) of the catalogs' measured pairs told to every policy before the run, as
    /// the history a cluster would have.
    #[arg(long, value_name = "F", default_value_t = Settings::default().history_share)]
    history_share: f64,

    /// Shortest sharing, in seconds, reported to the policies as an outcome.
    #[arg(long, value_name = "S", default_value_t = Settings::default().min_outcome_s)]
    min_outcome_s: f64,

    /// Seed of the history split, the random policy, the id keys and the engine.
    #[arg(long, default_value_t = Settings::default().seed)]
    seed: u64,

    /// Write an HTML report with plots (JCT CDF, utilization over time, slowdowns) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,

    /// Write every finished job's final run here, one CSV row per job and policy, in order of
    /// finish (`policy,job,job_type,gpus,gpu_model,arrival_s,first_start_s,final_start_s,
    /// finish_s,solo_s,shared`; `job` is its row in the trace, from 0): which jobs decide the
    /// makespan or the tail, and where they ran.
    #[arg(long, value_name = "FILE")]
    jobs: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl Args {
    /// Replays the trace under every policy asked for and prints (and writes) the report.
    pub(crate) fn execute(self, engine: &EngineArgs) -> anyhow::Result<()> {
        let request = Request {
            catalogs: self.catalogs,
            models: self.models,
            trace: self.trace,
            cluster: self.cluster,
            policies: if self.policies.iter().any(|p| p == "all") {
                PolicyName::ALL
                    .iter()
                    .map(|p| p.as_str().to_owned())
                    .collect()
            } else {
                self.policies
            },
            settings: Settings {
                profile_window_s: self.profile_window_s,
                oom_after_s: self.oom_after_s,
                window: self.window,
                history_share: self.history_share,
                min_outcome_s: self.min_outcome_s,
                seed: self.seed,
            },
            command: std::iter::once("tandem".to_owned())
                .chain(std::env::args().skip(1).map(|arg| shell_quoted(&arg)))
                .collect::<Vec<_>>()
                .join(" "),
        };
        // Bad settings are reported before the engine is loaded.
        request
            .settings
            .check()
            .map_err(|e| InputError::usage(e.to_string()))?;
        let runtime = engine.runtime()?;
        let report = run(&runtime, &request)?;
        if let Some(path) = &self.report {
            write_shared(path, &tandem_sim::report::html(&report))?;
        }
        if let Some(path) = &self.jobs {
            write_shared(path, &jobs_csv(&report)?)?;
        }
        print_as(self.format, &report, || tandem_sim::report::table(&report))?;
        if let Some(path) = &self.report {
            eprintln!("report written to {}", path.display());
        }
        Ok(())
    }
}

/// Every policy's finished jobs as CSV (see `--jobs`).
fn jobs_csv(report: &Report) -> anyhow::Result<String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record([
        "policy",
        "job",
        "job_type",
        "gpus",
        "gpu_model",
        "arrival_s",
        "first_start_s",
        "final_start_s",
        "finish_s",
        "solo_s",
        "shared",
    ])?;
    let seconds = |s: f64| format!("{s:.1}");
    for policy in &report.policies {
        for job in &policy.finished {
            out.write_record([
                policy.policy.clone(),
                job.job.to_string(),
                job.job_type.clone(),
                job.gpus.to_string(),
                job.gpu_model.clone(),
                seconds(job.arrival_s),
                seconds(job.first_start_s),
                seconds(job.final_start_s),
                seconds(job.finish_s),
                seconds(job.solo_s),
                job.shared.to_string(),
            ])?;
        }
    }
    Ok(String::from_utf8(out.into_inner()?)?)
}

/// `arg` as a POSIX shell reads it back: unchanged when it holds only safe characters, else in
/// single quotes (a quote inside becomes `'\''`), so a printed command can be pasted.
fn shell_quoted(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// What to replay and how, as the command line gave it.
#[derive(Debug)]
struct Request {
    catalogs: Vec<PathBuf>,
    models: Option<PathBuf>,
    trace: Option<PathBuf>,
    cluster: Option<PathBuf>,
    policies: Vec<String>,
    settings: Settings,
    /// The command line, to print at the top of the report.
    command: String,
}

/// Reads the inputs (or the built-in demo's), replays every policy and returns the report.
fn run(runtime: &Runtime, request: &Request) -> anyhow::Result<Report> {
    let policies = request
        .policies
        .iter()
        .map(|name| {
            PolicyName::parse(name).ok_or_else(|| {
                let all: Vec<&str> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
                InputError::usage(format!(
                    "--policies: unknown policy `{name}` (known: all, {})",
                    all.join(", ")
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let input = |e: tandem_sim::Error| -> anyhow::Error {
        from_sim(e, |e| {
            matches!(
                e,
                tandem_sim::Error::Input { .. }
                    | tandem_sim::Error::Prediction {
                        source: tandem_host::Error::Engine(tandem_api::EngineError::InvalidInput(
                            _
                        )),
                        ..
                    }
            )
        })
    };
    let catalogs: Vec<Catalog> = if request.catalogs.is_empty() {
        demo::catalogs().map_err(input)?
    } else {
        request
            .catalogs
            .iter()
            .map(|path| Catalog::read(path).map_err(|e| input(e.into())))
            .collect::<anyhow::Result<_>>()?
    };
    let truth = Truth::new(&catalogs).map_err(input)?;
    // Gavel's declared models name Gavel's job types: they come with the built-in catalogs
    // only, and other catalogs get them by `--models`.
    let declared = match &request.models {
        Some(path) => Some(DeclaredModels::read(path).map_err(|e| input(e.into()))?),
        None if request.catalogs.is_empty() => Some(demo::declared_models().map_err(input)?),
        None => None,
    };
    let (trace, trace_name) = match &request.trace {
        Some(path) => (
            Trace::read(path).map_err(|e| input(e.into()))?,
            path.display().to_string(),
        ),
        None => (demo::trace().map_err(input)?, demo::TRACE_PATH.to_owned()),
    };
    let (cluster, cluster_name) = match &request.cluster {
        Some(path) => (
            Cluster::read(path).map_err(|e| input(e.into()))?,
            path.display().to_string(),
        ),
        None => (
            demo::cluster().map_err(input)?,
            demo::CLUSTER_PATH.to_owned(),
        ),
    };
    let scenario = Scenario {
        truth: &truth,
        cluster: &cluster,
        cluster_name,
        trace: &trace,
        trace_name,
        declared: declared.as_ref(),
    };
    let progress = Progress::new();
    let report = tandem_sim::compare(
        &scenario,
        &request.settings,
        &policies,
        runtime,
        request.command.clone(),
        &|policy, share| progress.update(policy, share),
    )
    .map_err(input)?;
    progress.finish();
    Ok(report)
}

/// Progress bars on stderr, one per policy being replayed (several replay at once), that
/// appear only once a run has lasted a few seconds, and only on a terminal.
struct Progress {
    started: Instant,
    on_terminal: bool,
    bars: indicatif::MultiProgress,
    shown: Mutex<HashMap<String, indicatif::ProgressBar>>,
}

impl Progress {
    /// Runs shorter than this show no bar.
    const QUIET_FOR: Duration = Duration::from_secs(2);

    fn new() -> Self {
        Self {
            started: Instant::now(),
            on_terminal: std::io::stderr().is_terminal(),
            bars: indicatif::MultiProgress::new(),
            shown: Mutex::new(HashMap::new()),
        }
    }

    /// Called from the thread replaying `policy`.
    fn update(&self, policy: &str, share: f64) {
        if !self.on_terminal || self.started.elapsed() < Self::QUIET_FOR {
            return;
        }
        // A bar is only drawn: a panic elsewhere while holding the lock leaves nothing to fix.
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        if !shown.contains_key(policy) {
            let bar = self.bars.add(indicatif::ProgressBar::new(100));
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>26} [{bar:40}] {pos:>3}% of jobs finished, {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(policy.to_owned());
            shown.insert(policy.to_owned(), bar);
        }
        if let Some(bar) = shown.get(policy) {
            bar.set_position((share * 100.0).round() as u64);
            if share >= 1.0 {
                bar.finish_and_clear();
            }
        }
    }

    fn finish(self) {
        let shown = self
            .shown
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        for bar in shown.values() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quoted;

    #[test]
    fn printed_commands_paste_back_into_a_shell() {
        assert_eq!(shell_quoted("--report"), "--report");
        assert_eq!(shell_quoted("a/b-c_d.csv"), "a/b-c_d.csv");
        assert_eq!(shell_quoted("my trace.csv"), "'my trace.csv'");
        assert_eq!(shell_quoted("it's"), "'it'\\''s'");
        assert_eq!(shell_quoted(""), "''");
    }
}
