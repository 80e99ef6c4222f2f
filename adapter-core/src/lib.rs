//! What every Tandem scheduler adapter shares.
//!
//! An adapter puts Tandem inside a scheduler people already run (kube-scheduler, Volcano,
//! Slurm). Everything that does not depend on which scheduler lives here, once:
//!
//! - [`engine`]: the engine component on its own thread behind a bounded channel, with time
//!   limits that fire whatever the engine does, and the cluster view it keeps, fed by deltas;
//! - [`Core`]: keyed identities, observations applied and stored before they are acknowledged
//!   (the knowledge base behind a [`store::KnowledgeStore`]), outcome estimation from finished
//!   runs ([`outcomes`]), leadership, metrics;
//! - [`gpu_models`]: GPU model names as the engine knows them, for adapters and profilers;
//! - [`http`]: the intake for node profilers and the operations endpoints (`/v1/*`,
//!   `/healthz`, `/readyz`, `/metrics`).
//!
//! A front-end implements [`Frontend`]: the scheduler's verbs as routes, answered from the
//! core (Spin's trigger pattern: each trigger implements one trait over a shared runtime). It
//! maps the scheduler's objects to the engine's jobs and GPUs and its answers back, and
//! nothing else.

pub mod engine;
pub mod gpu_models;
pub mod http;
pub mod identity;
mod leadership;
pub mod metrics;
pub mod outcomes;
pub mod serve;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use tandem_api::Outcome;

pub use engine::{CallError, Engine, EngineFailure, EngineState, NodeScore};
pub use identity::JobKeys;
pub use leadership::Leadership;
use metrics::{Metrics, Reason};
use outcomes::{Learned, Ledger, Run};
use store::{AdapterState, KnowledgeStore, StoreError};

/// The engine component every adapter binary embeds, built by the build script.
pub static EMBEDDED_ENGINE: &[u8] = include_bytes!(env!("TANDEM_ENGINE_COMPONENT"));

/// A scheduler front-end on the core: its verbs, answered from the shared engine.
pub trait Frontend: Send + Sync + 'static {
    /// The scheduler it speaks to, for logs (for example `kube-scheduler extender`).
    const TYPE: &'static str;

    /// The scheduler's verbs, served beside the core's endpoints.
    fn routes(self: Arc<Self>) -> Router;

    /// Whether it can answer with a current view of the cluster (`/readyz`).
    fn is_ready(&self) -> bool;
}

/// Limits on every request and engine call.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// Longest a scheduling decision waits for the engine; past it the front-end fails open.
    pub decision_wait: Duration,
    /// Longest an observation waits for the engine.
    pub observation_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 << 20,
            request_timeout: Duration::from_secs(4),
            decision_wait: Duration::from_secs(1),
            observation_wait: Duration::from_secs(10),
        }
    }
}

/// A signal that the process is shutting down, cheap to clone and wait on.
#[derive(Debug, Clone)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// A shutdown signal and the switch that triggers it.
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Self) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Self(rx))
    }

    /// Waits until shutdown is triggered (or its switch is dropped).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|down| *down).await;
    }
}

/// What the core shares with every request of every front-end.
pub struct Core {
    /// The engine thread.
    pub engine: Engine,
    /// Keys job identities.
    pub keys: JobKeys,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Leadership of this replica.
    pub leadership: Arc<Leadership>,
    /// Bearer token the intake endpoints require; the intake is off without one.
    pub intake_token: Option<String>,
    /// Limits of requests and engine calls.
    pub limits: Limits,
    store: Option<Box<dyn KnowledgeStore>>,
    /// Version of the stored knowledge base the engine matches; writes are serialized here.
    version: tokio::sync::Mutex<Option<String>>,
    /// Bumped whenever what the engine knows changes.
    epoch: AtomicU64,
    ready: AtomicBool,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// How a core starts.
pub struct CoreConfig {
    /// The engine, with what it knows.
    pub engine: EngineState,
    /// Keys job identities.
    pub keys: JobKeys,
    /// Leadership of this replica.
    pub leadership: Arc<Leadership>,
    /// Bearer token of the intake, if it is on.
    pub intake_token: Option<String>,
    /// Where the knowledge base is stored, if anywhere.
    pub store: Option<Box<dyn KnowledgeStore>>,
    /// The stored version and ledger the engine was loaded from, if any.
    pub stored: Option<(String, Ledger)>,
    /// Limits.
    pub limits: Limits,
    /// Engine calls that may wait in the queue before more are refused.
    pub queue: usize,
}

impl Core {
    /// Starts the engine thread and assembles the core.
    pub fn start(config: CoreConfig) -> std::io::Result<Self> {
        let metrics = Arc::new(Metrics::default());
        let (version, ledger) = config
            .stored
            .map_or((None, None), |(v, l)| (Some(v), Some(l)));
        let mut engine = config.engine;
        if let Some(ledger) = ledger {
            engine.ledger = ledger;
        }
        let engine = Engine::start(engine, config.queue, Arc::clone(&metrics))?;
        Ok(Self {
            engine,
            keys: config.keys,
            metrics,
            leadership: config.leadership,
            intake_token: config.intake_token,
            limits: config.limits,
            store: config.store,
            version: tokio::sync::Mutex::new(version),
            epoch: AtomicU64::new(0),
            ready: AtomicBool::new(false),
        })
    }

    /// Runs a scheduling decision on the engine thread, waiting at most
    /// [`Limits::decision_wait`].
    pub async fn decide<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
    ) -> Result<T, CallError> {
        self.engine
            .call(call, self.limits.decision_wait, work)
            .await
    }

    /// Answers an operator's question (`/v1/predict`, `/v1/knowledge`) on the engine thread,
    /// waiting at most [`Limits::observation_wait`]: nothing waits on it to schedule, so it is
    /// not held to a scheduling decision's deadline (right after a start, while the view is
    /// first fed, a question can queue behind that work).
    pub async fn query<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> T + Send + 'static,
    ) -> Result<T, CallError> {
        self.engine
            .call(call, self.limits.observation_wait, work)
            .await
    }

    /// Bumped whenever what the engine knows changes (an observation, a reload): answers
    /// cached by a front-end are as good as the epoch they were computed in.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Marks the core ready (the front-end's view is synced).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether the core was marked ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Applies observations on the engine thread and stores the result before returning: what
    /// this returns `Ok` for is acknowledged and survives a crash. Only the leader observes.
    pub async fn observe<T: Send + 'static>(
        &self,
        apply: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, ObserveError> {
        if !self.leadership.is_leader() {
            return Err(ObserveError::NotLeader(self.leadership.holder()));
        }
        let mut version = self.version.lock().await;
        let store = self.store.is_some();
        let (answer, snapshot) = self
            .engine
            .call("observe", self.limits.observation_wait, move |state| {
                let answer = apply(state);
                // A snapshot that cannot be taken (the save trapped) is not written; the
                // observations stay in the engine's journal and reach the store with the next.
                let snapshot = store
                    .then(|| match state.recommender().snapshot() {
                        Ok(engine) => Some((
                            engine.to_vec(),
                            AdapterState {
                                ledger: state.ledger.clone(),
                            },
                        )),
                        Err(error) => {
                            tracing::warn!(%error, "could not snapshot the engine for the store");
                            None
                        }
                    })
                    .flatten();
                (answer, snapshot)
            })
            .await?;
        // Even a failed batch may have applied its first observations.
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let answer = answer.inspect_err(|_| {
            self.metrics.engine_errors.inc();
        })?;
        if let (Some(store), Some((engine, adapter))) = (&self.store, snapshot) {
            match store.save(version.as_deref(), &engine, &adapter).await {
                Ok(written) => *version = Some(written),
                Err(error) => {
                    self.metrics.store_errors.inc();
                    if matches!(error, StoreError::Conflict(_)) {
                        // Someone else wrote: take their state, so ours matches the store.
                        if let Err(reload) = self.reload_locked(&mut version).await {
                            tracing::error!(%reload, "cannot reload the knowledge base after a conflict");
                        }
                    }
                    return Err(error.into());
                }
            }
        }
        Ok(answer)
    }

    /// Loads the stored knowledge base if it changed since it was last read or written.
    /// Returns whether it changed.
    pub async fn reload(&self) -> Result<bool, ObserveError> {
        let mut version = self.version.lock().await;
        self.reload_locked(&mut version).await
    }

    async fn reload_locked(&self, version: &mut Option<String>) -> Result<bool, ObserveError> {
        let Some(store) = &self.store else {
            return Ok(false);
        };
        let Some(stored) = store.load().await? else {
            return Ok(false);
        };
        if version.as_deref() == Some(stored.version.as_str()) {
            return Ok(false);
        }
        let engine = stored.engine;
        let ledger = stored.adapter.ledger;
        self.engine
            .call("reload", self.limits.observation_wait, move |state| {
                state.replace(&engine)?;
                state.ledger = ledger;
                Ok::<_, EngineFailure>(())
            })
            .await??;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *version = Some(stored.version);
        Ok(true)
    }

    /// Learns from a run that finished (leader only): a solo sample, or an outcome once both
    /// runs of a shared GPU are done (see [`outcomes`]). `others` are the runs that used the
    /// same GPU around it.
    pub async fn run_finished(&self, run: Run, others: Vec<Run>, now: f64) {
        if !self.leadership.is_leader() {
            return;
        }
        let result = self
            .observe(move |state| {
                let learned = state.ledger.learn(&run, &others, now);
                if let Learned::Outcome(outcome) = &learned {
                    state
                        .recommender()
                        .observe_outcome(outcome)
                        .map_err(engine::failed("observe-outcome"))?;
                }
                Ok(learned)
            })
            .await;
        match result {
            Err(error) => tracing::warn!(%error, "could not record a finished run"),
            Ok(Learned::Outcome(Outcome { gpu_model, .. })) => {
                self.metrics.outcomes_learned.inc();
                tracing::info!(
                    gpu_model,
                    "learned a co-location outcome from finished runs"
                );
            }
            Ok(Learned::Solo) => tracing::debug!("recorded a solo run"),
            Ok(Learned::Skipped(reason)) => self.skipped(reason),
        }
    }

    /// Counts a finished run that taught nothing, by reason.
    pub fn skipped(&self, reason: &str) {
        self.metrics
            .outcomes_skipped
            .get_or_create(&Reason {
                reason: reason.to_owned(),
            })
            .inc();
    }
}

/// Why an observation was not acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// Another replica leads; observations go there.
    #[error("this replica does not lead (leader: {}); send observations to the leader", .0.as_deref().unwrap_or("unknown"))]
    NotLeader(Option<String>),
    /// The engine did not answer in time.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The knowledge base could not be stored.
    #[error("not stored: {0}")]
    Store(#[from] StoreError),
}
