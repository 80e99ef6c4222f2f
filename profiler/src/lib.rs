//! `tandem-profiler`: the node agent that feeds Tandem black-box telemetry.
//!
//! Everything Tandem decides starts from a job's profile (after PriRecT/JRS's job
//! profiler, without its intrusion): the maximum SM utilization, the maximum memory-access
//! utilization and the maximum device memory a job showed over a short window, and the GPU
//! model it ran on. The profiler measures them on the node, from outside the job:
//!
//! 1. **sample** ([`sample`]): NVML each `--interval-ms` ([`sample::nvml`]), or a recording
//!    ([`sample::replay`], whose format is documented there);
//! 2. **attribute** ([`attribute`]): each GPU process's cgroup names its pod (UID) or Slurm job;
//!    the API server names the pod's namespace and `tandem.dev/job` label (this node's pods
//!    only); processes of no job are ignored;
//! 3. **reduce** ([`window`], [`agent`]): per job, the window's maxima, measured while it ran
//!    alone where it did (see [`window`] for what happens when it never does);
//! 4. **key and post** ([`post`]): `HMAC-SHA256(cluster secret, "<namespace>/<job>")` by the
//!    adapters' own [`tandem_wire::JobKeys`], posted as the intake's own
//!    [`post::ProfilesRequest`] to `POST /v1/profiles` with the bearer token, retried with
//!    back-off. Any adapter serves that intake.
//!
//! What leaves the node is keyed ids, three numbers and a GPU model per job: no process names,
//! command lines, images, users, pids, pod names, namespaces or node names (a test scans the
//! bodies). Logs carry keyed ids only.
//!
//! `tandem-profiler --once` ([`once`]) prints what it sees instead.

pub mod agent;
pub mod attribute;
pub mod once;
mod options;
pub mod post;
pub mod sample;
pub mod window;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tandem_wire::JobKeys;
use tokio::task::JoinSet;

pub use options::{Format, IntakeAuth, Options};

use crate::agent::{Agent, Finished, Settings};
use crate::attribute::{Attributor, PodDirectory, kube::KubePods};
use crate::post::{Backoff, Intake, PostError, ProfileRecord, ProfilesRequest};
use crate::sample::nvml::NvmlSource;
use crate::sample::replay::ReplaySource;
use crate::sample::{SampleError, Source};
use crate::window::Basis;

/// Why the profiler stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Sampling failed (NVML not available, a bad replay file).
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// An option the agent needs was not given.
    #[error("{0} is required (unless --once)")]
    Missing(&'static str),
    /// A file named by an option could not be read.
    #[error("cannot read {what} {path}")]
    Read {
        /// What the file holds.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The id secret cannot be read or used (the error names the file).
    #[error(transparent)]
    Secret(#[from] tandem_wire::identity::SecretFileError),
    /// No Kubernetes client could be configured.
    #[error("cannot configure the Kubernetes client")]
    Kube(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The intake client could not be built.
    #[error(transparent)]
    Post(#[from] PostError),
    /// Some profiles were not delivered (a replay's end, or shutdown).
    #[error("{0} batch(es) of profiles were not delivered (see the log)")]
    Undelivered(usize),
    /// `--once` could not print its JSON.
    #[error("cannot write JSON")]
    Json(#[source] serde_json::Error),
}

impl Error {
    /// The process's exit code for this error: 3 when NVML is not available, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Sample(SampleError::NvmlUnavailable(_)) => 3,
            _ => 1,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a run of the agent delivered.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Every profile the intake acknowledged, keyed.
    pub posted: Vec<ProfileRecord>,
}

/// Runs `tandem-profiler` with `options`: `--once`, or the agent until its source ends (a
/// replay) or SIGINT/SIGTERM.
pub async fn run(options: Options) -> Result<Summary> {
    let mut source = open_source(options.replay.as_deref())?;
    let pods = match &options.node {
        Some(node) => PodDirectory::Kube(Box::new(KubePods::new(
            kube_client(options.kubeconfig.as_deref()).await?,
            node.clone(),
        ))),
        None => PodDirectory::Off,
    };
    let mut attributor = Attributor::new(options.proc_root.clone(), pods);
    let keys = options
        .id_secret_file
        .as_deref()
        .map(JobKeys::from_file)
        .transpose()?;
    if options.once {
        let Some(snapshot) = source.sample()? else {
            return Ok(Summary::default());
        };
        let view = once::view(&snapshot, &mut attributor, keys.as_ref()).await;
        match options.format {
            Format::Table => print!("{}", once::tables(&view)),
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&view).map_err(Error::Json)?
            ),
        }
        return Ok(Summary::default());
    }
    let keys = keys.ok_or(Error::Missing("--id-secret-file"))?;
    let adapter = options
        .adapter
        .as_deref()
        .ok_or(Error::Missing("--adapter"))?;
    let ca = options
        .adapter_ca
        .as_deref()
        .map(|path| {
            std::fs::read(path).map_err(|source| Error::Read {
                what: "the adapter's CA",
                path: path.to_path_buf(),
                source,
            })
        })
        .transpose()?;
    let backoff = Backoff {
        attempts: options.attempts,
        ..Backoff::default()
    };
    let intake = match options.intake_auth {
        IntakeAuth::Munge => Intake::with_munge(
            adapter,
            &options.munge,
            options.munge_socket.as_deref(),
            backoff,
            ca.as_deref(),
        )?,
        IntakeAuth::Token => {
            let token_file = options
                .intake_token_file
                .as_deref()
                .ok_or(Error::Missing("--intake-token-file"))?;
            // Read again for every post: a projected service-account token rotates.
            Intake::with_token_file(adapter, token_file, backoff, ca.as_deref())?
        }
    };
    let agent = Agent::new(
        attributor,
        Settings {
            window: Duration::from_secs(options.window_seconds),
            grace: Duration::from_secs(options.grace_seconds),
        },
    );
    let delivery = Delivery {
        intake,
        keys,
        require_alone: options.require_alone,
    };
    run_agent(
        source,
        agent,
        delivery,
        Duration::from_millis(options.interval_ms),
    )
    .await
}

fn open_source(replay: Option<&Path>) -> Result<Box<dyn Source + Send>> {
    Ok(match replay {
        Some(path) => Box::new(ReplaySource::open(path)?),
        None => Box::new(NvmlSource::open()?),
    })
}

async fn kube_client(kubeconfig: Option<&Path>) -> Result<kube::Client> {
    let boxed = |e: Box<dyn std::error::Error + Send + Sync>| Error::Kube(e);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(|e| boxed(e.into()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| boxed(e.into()))?
        }
        None => kube::Config::infer().await.map_err(|e| boxed(e.into()))?,
    };
    kube::Client::try_from(config).map_err(|e| boxed(e.into()))
}

/// Where closed windows go: keyed with the cluster's secret and posted to the intake.
#[derive(Debug)]
pub struct Delivery {
    /// The adapter's intake.
    pub intake: Intake,
    /// Keys job identities.
    pub keys: JobKeys,
    /// Hold back profiles not measured alone.
    pub require_alone: bool,
}

/// Posts in flight, each batch on its own task.
type InFlight = JoinSet<Result<Vec<ProfileRecord>, PostError>>;

impl Delivery {
    fn send(&self, in_flight: &mut InFlight, finished: Vec<Finished>) {
        let mut profiles = Vec::new();
        for f in finished {
            let job = f.identity.key(&self.keys);
            let p = &f.reduced.profile;
            if self.require_alone && f.reduced.basis != Basis::Alone {
                tracing::warn!(job, basis = %f.reduced.basis, "profile held back: the job never ran alone (--require-alone)");
                continue;
            }
            if f.reduced.basis != Basis::Alone {
                tracing::warn!(job, basis = %f.reduced.basis, "the job never ran alone in its window: utilization measured while sharing");
            }
            tracing::info!(
                job,
                gpu_model = p.gpu_model,
                gpu_util_pct = p.gpu_util_pct,
                mem_access_pct = p.mem_access_pct,
                mem_used_mib = p.mem_used_mib,
                basis = %f.reduced.basis,
                ticks = f.reduced.ticks,
                alone_ticks = f.reduced.alone_ticks,
                complete = f.complete,
                "profiled"
            );
            profiles.push(ProfileRecord {
                job,
                profile: f.reduced.profile,
            });
        }
        if profiles.is_empty() {
            return;
        }
        let intake = self.intake.clone();
        in_flight.spawn(async move {
            let request = ProfilesRequest { profiles };
            intake.post(&request).await.map(|_| request.profiles)
        });
    }
}

/// Collects finished posts; waits for all of them when `all`.
async fn collect(in_flight: &mut InFlight, summary: &mut Summary, failed: &mut usize, all: bool) {
    loop {
        let next = if all {
            in_flight.join_next().await
        } else {
            in_flight.try_join_next()
        };
        let Some(joined) = next else { return };
        match joined {
            Ok(Ok(records)) => {
                tracing::info!(profiles = records.len(), "the intake filed the profiles");
                summary.posted.extend(records);
            }
            Ok(Err(error)) => {
                *failed += 1;
                tracing::error!(error = %chain(&error), "profiles not delivered");
            }
            Err(error) => {
                *failed += 1;
                tracing::error!(%error, "the delivery task failed");
            }
        }
    }
}

/// The agent's loop: samples `source` (each `interval` if it is live), feeds `agent`, and
/// delivers what it closes, until the source ends (then every open window is closed and
/// delivered) or SIGINT/SIGTERM (then open windows are dropped). Waits for posts in flight.
pub async fn run_agent(
    mut source: Box<dyn Source + Send>,
    mut agent: Agent,
    delivery: Delivery,
    interval: Duration,
) -> Result<Summary> {
    let mut in_flight = InFlight::new();
    let mut summary = Summary::default();
    let mut failed = 0;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stop = std::pin::pin!(shutdown());
    let live = source.is_live();
    tracing::info!(live, "profiling");
    loop {
        if live {
            tokio::select! {
                () = &mut stop => {
                    tracing::info!("stopping: open windows are dropped, posts in flight finish");
                    break;
                }
                _ = ticker.tick() => {}
            }
        }
        let Some(snapshot) = source.sample()? else {
            delivery.send(&mut in_flight, agent.finish_all());
            break;
        };
        let finished = agent.observe(&snapshot).await;
        delivery.send(&mut in_flight, finished);
        collect(&mut in_flight, &mut summary, &mut failed, false).await;
    }
    collect(&mut in_flight, &mut summary, &mut failed, true).await;
    if failed > 0 {
        return Err(Error::Undelivered(failed));
    }
    Ok(summary)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminate = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

pub use tandem_telemetry::report;

pub(crate) use report as chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let io = std::io::Error::other("libnvidia-ml.so.1: cannot open shared object file");
        let error = Error::Read {
            what: "a file",
            path: PathBuf::from("/x"),
            source: io,
        };
        assert_eq!(
            report(&error),
            "cannot read a file /x: libnvidia-ml.so.1: cannot open shared object file"
        );
    }
}
