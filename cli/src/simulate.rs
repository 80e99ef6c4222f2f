//! `tandem simulate` and `tandem trace`: replay a trace under every policy, and build traces
//! from public sources.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tandem_catalog::Catalog;
use tandem_host::Runtime;
use tandem_sim::policy::PolicyName;
use tandem_sim::{Cluster, Report, Scenario, Settings, Trace, Truth, demo};

use crate::InputError;

/// What to replay and how, as the command line gave it.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) catalogs: Vec<PathBuf>,
    pub(crate) trace: Option<PathBuf>,
    pub(crate) cluster: Option<PathBuf>,
    pub(crate) policies: Vec<String>,
    pub(crate) settings: Settings,
    /// The command line, to print at the top of the report.
    pub(crate) command: String,
}

/// Reads the inputs (or the built-in demo's), replays every policy and returns the report.
pub(crate) fn run(runtime: &Runtime, request: &Request) -> anyhow::Result<Report> {
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
        match e {
            tandem_sim::Error::Input { .. }
            | tandem_sim::Error::Catalog(_)
            | tandem_sim::Error::Read { .. } => InputError::usage(e.to_string()).into(),
            other => other.into(),
        }
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
    };
    let mut progress = Progress::new();
    let report = tandem_sim::compare(
        &scenario,
        &request.settings,
        &policies,
        runtime,
        request.command.clone(),
        &mut |policy, share| progress.update(policy, share),
    )
    .map_err(input)?;
    progress.finish();
    Ok(report)
}

/// Writes `text` to `path` atomically (temporary file in the same folder, then rename),
/// readable by everyone as reports and traces are meant to be shared (the temporary file
/// starts private).
pub(crate) fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    crate::atomic::write(path, |file| {
        file.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o644))
                .with_context(|| format!("cannot make {} readable", path.display()))?;
        }
        Ok(())
    })
}

/// A progress bar on stderr that appears only once a run has lasted a few seconds, and only
/// on a terminal.
struct Progress {
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    policy: String,
}

impl Progress {
    /// Runs shorter than this show no bar.
    const QUIET_FOR: Duration = Duration::from_secs(2);

    fn new() -> Self {
        Self {
            started: Instant::now(),
            bar: None,
            policy: String::new(),
        }
    }

    fn update(&mut self, policy: &str, share: f64) {
        if self.bar.is_none() {
            if self.started.elapsed() < Self::QUIET_FOR || !std::io::stderr().is_terminal() {
                return;
            }
            let bar = indicatif::ProgressBar::new(100);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>20} [{bar:40}] {pos:>3}% of jobs finished, {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            if policy != self.policy {
                self.policy = policy.to_owned();
                bar.set_prefix(self.policy.clone());
                bar.reset();
            }
            bar.set_position((share * 100.0).round() as u64);
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Runs a `tandem trace` subcommand.
pub(crate) fn trace(command: crate::TraceCommand) -> anyhow::Result<()> {
    use tandem_sim::convert;
    let input = |e: tandem_sim::Error| -> anyhow::Error { InputError::usage(e.to_string()).into() };
    // The converters live in tandem-catalog (re-exported as `tandem_sim::convert`).
    let data = |e: tandem_catalog::Error| input(e.into());
    let read = |path: &Path| -> anyhow::Result<String> {
        std::fs::read_to_string(path)
            .map_err(|e| InputError::usage(format!("cannot read {}: {e}", path.display())).into())
    };
    let truth_of = |catalogs: &[PathBuf]| -> anyhow::Result<Truth> {
        let catalogs: Vec<Catalog> = if catalogs.is_empty() {
            demo::catalogs().map_err(input)?
        } else {
            catalogs
                .iter()
                .map(|p| Catalog::read(p).map_err(|e| input(e.into())))
                .collect::<anyhow::Result<_>>()?
        };
        Truth::new(&catalogs).map_err(input)
    };
    let reference = |truth: &Truth, model: &str| -> anyhow::Result<usize> {
        truth.model(model).ok_or_else(|| {
            InputError::usage(format!(
                "--reference-model: `{model}` is not a GPU model of the catalogs"
            ))
            .into()
        })
    };
    match command {
        crate::TraceCommand::Gavel {
            files,
            time_scale,
            first,
            out,
        } => {
            let texts = files
                .iter()
                .map(|p| Ok((p.display().to_string(), read(p)?)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut trace = convert::gavel_traces(&texts).map_err(data)?;
            if let Some(n) = first {
                convert::take_first(&mut trace, n);
            }
            convert::rescale(&mut trace, time_scale).map_err(data)?;
            write(&out, &trace.to_csv())?;
            println!("wrote {} ({} jobs)", out.display(), trace.jobs.len());
        }
        crate::TraceCommand::Alibaba {
            pods,
            nodes,
            catalogs,
            reference_model,
            seed,
            out_trace,
            out_cluster,
        } => {
            let truth = truth_of(&catalogs)?;
            let m = reference(&truth, &reference_model)?;
            let models: Vec<&str> = truth.models().iter().map(|m| m.name.as_str()).collect();
            let (cluster, kept) =
                convert::alibaba_cluster(&read(&nodes)?, &nodes.display().to_string(), &models)
                    .map_err(data)?;
            let types: Vec<String> = truth
                .types()
                .iter()
                .enumerate()
                .filter(|(t, _)| truth.throughput(*t, m).is_some())
                .map(|(_, t)| t.name.clone())
                .collect();
            let (mut trace, summary) =
                convert::alibaba_trace(&read(&pods)?, &pods.display().to_string(), &types, seed)
                    .map_err(data)?;
            convert::scale_to_steps(&mut trace, |name| {
                truth.job_type(name).and_then(|t| truth.throughput(t, m))
            })
            .map_err(data)?;
            write(&out_trace, &trace.to_csv())?;
            write(&out_cluster, &cluster.to_csv())?;
            println!(
                "wrote {} ({} jobs of {} pods) and {} ({} nodes, {} GPUs kept; {} nodes of other models dropped)",
                out_trace.display(),
                trace.jobs.len(),
                summary.pods,
                out_cluster.display(),
                kept.kept_nodes(),
                kept.kept_gpus(),
                kept.dropped_nodes()
            );
        }
        crate::TraceCommand::Synthetic {
            jobs,
            mean_interarrival_s,
            multi_gpu_share,
            min_duration_s,
            max_duration_s,
            catalogs,
            reference_model,
            seed,
            out,
        } => {
            let truth = truth_of(&catalogs)?;
            let m = reference(&truth, &reference_model)?;
            let spec = convert::SyntheticSpec {
                jobs,
                mean_interarrival_s,
                job_types: truth
                    .types()
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| truth.throughput(*t, m).is_some())
                    .map(|(_, t)| (t.name.clone(), 1.0))
                    .collect(),
                multi_gpu_share,
                duration_s: (min_duration_s, max_duration_s),
                seed,
            };
            let trace = convert::synthetic_trace(&spec, |name| {
                truth.job_type(name).and_then(|t| truth.throughput(t, m))
            })
            .map_err(data)?;
            write(&out, &trace.to_csv())?;
            println!("wrote {} ({} jobs)", out.display(), trace.jobs.len());
        }
    }
    Ok(())
}
