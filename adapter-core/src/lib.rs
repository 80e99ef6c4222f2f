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
//! - [`declaration`]: what a job may tell Tandem (priority, work, model), one vocabulary for
//!   every scheduler, parsed and checked once;
//! - [`learning`]: what the cluster teaches beyond profiles and outcomes (peaks of declared
//!   jobs, speeds of finished runs), learned off the decision path, and the operator's view of
//!   it per GPU model;
//! - [`gpu_models`]: GPU model names as the engine knows them, for adapters and profilers;
//! - [`http`]: the intake for node profilers and the operations endpoints (`/v1/*`,
//!   `/healthz`, `/readyz`, `/metrics`); [`intake`]: who may post there ([`intake::IntakeAuth`]:
//!   the operator's token, or a node profiler for its own node's jobs) and how much;
//! - [`startup`]: the options every adapter takes ([`CoreArgs`]) and the engine it starts
//!   with, resumed from its store or bootstrapped from the seed profiles.
//!
//! A front-end implements [`Frontend`]: the scheduler's verbs as routes, answered from the
//! core (Spin's trigger pattern: each trigger implements one trait over a shared runtime). It
//! maps the scheduler's objects to the engine's jobs and GPUs and its answers back, and
//! nothing else.

pub mod declaration;
mod duration;
pub mod engine;
pub mod gpu_models;
pub mod http;
pub mod identity;
pub mod intake;
mod leadership;
pub mod learning;
pub mod metrics;
pub mod outcomes;
mod persistence;
pub mod program;
mod runs;
pub mod serve;
pub mod startup;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use tandem_api::ModelSummary;

pub use engine::{
    CallError, Engine, EngineError, EngineFailure, EngineState, NodeScore, Placement,
};
pub use identity::JobKeys;
pub use leadership::Leadership;
use learning::DeclaredModels;
use metrics::Metrics;

pub use duration::parse_duration;
pub use startup::{CoreArgs, Resumed, SEED, resume_or_bootstrap, resume_or_bootstrap_keyed};
use store::{KnowledgeStore, StoreError};

/// Longest one engine call may run off the decision path, where the core retrains the memory
/// model on a fresh instance ([`Core::observe_off_thread`]): a refit takes a fifth of a second
/// on an idle machine, several times that on a loaded one, and nothing waits on it to schedule.
pub const TRAINING_DEADLINE: Duration = Duration::from_secs(60);

/// The engine component every adapter binary embeds ([`tandem_engine_embedded::COMPONENT`]).
pub use tandem_engine_embedded::COMPONENT as EMBEDDED_ENGINE;

/// A scheduler front-end on the core: its verbs, answered from the shared engine.
pub trait Frontend: Send + Sync + 'static {
    /// The scheduler it speaks to, for logs (for example `kube-scheduler extender`).
    const TYPE: &'static str;

    /// The scheduler's verbs as the metrics label them (the paths of [`Frontend::routes`]
    /// without their first `/`): their fail-open and unauthorized counters are exported at
    /// zero from the start, so that a dashboard or an alert sees the series before the first
    /// event.
    const VERBS: &'static [&'static str];

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
    /// Most bytes of request bodies in flight at once, all requests together: a request whose
    /// declared body would pass it gets `429` before its body is read, so a flood of large
    /// bodies costs a bounded amount of memory (see `docs/RELIABILITY.md`).
    pub max_inflight_body_bytes: usize,

    /// Longest a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// Longest a scheduling decision waits for a busy engine (one that finds it idle may run at
    /// once: [`Core::decide`]); past it the front-end fails open.
    pub decision_wait: Duration,
    /// Longest an observation waits for the engine.
    pub observation_wait: Duration,
    /// Most items (profiles, outcomes) one intake caller may post per minute, 0 for no bound
    /// ([`intake::RateBound`]); a request past it gets `429` with `Retry-After`.
    pub intake_items_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 << 20,
            max_inflight_body_bytes: 96 << 20,

            request_timeout: Duration::from_secs(4),
            decision_wait: Duration::from_secs(1),
            observation_wait: Duration::from_secs(10),
            intake_items_per_minute: intake::DEFAULT_ITEMS_PER_MINUTE,
        }
    }
}

/// Who may call a front-end's scheduler verbs (`/filter`, `/bind`, `/v1/slurm/submit`, ...).
///
/// The verbs decide where pods run and `bind` binds them with the adapter's own service
/// account, so a caller must prove it is the scheduler: with a client certificate signed by the
/// client CA the server was started with ([`serve::Tls::client_ca`], mutual TLS:
/// kube-scheduler's extender `tlsConfig`), or with the bearer token (`Authorization: Bearer
/// <token>`, or the token as the password of HTTP Basic authentication, which a scheduler sends
/// when its URL carries it as `https://tandem:<token>@host/`). Without either configured the
/// verbs are open, and the adapter says so loudly at start.
#[derive(Debug, Clone, Default)]
pub struct SchedulerAuth {
    /// Whether a verified client certificate admits a caller.
    pub client_certificates: bool,
    /// The bearer token that admits a caller, if any.
    pub token: Option<String>,
}

impl SchedulerAuth {
    /// Whether the verbs are open to anyone.
    pub fn is_open(&self) -> bool {
        !self.client_certificates && self.token.is_none()
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
    /// The operator's bearer token for the intake endpoints (scope [`intake::Scope::Any`]);
    /// without it and without an [`intake::IntakeAuth`], the intake is off.
    pub intake_token: Option<String>,
    /// How node profilers authenticate to the intake, if they may ([`Core::with_intake_auth`]).
    intake_auth: Option<Arc<dyn intake::IntakeAuth>>,
    /// Where jobs run, for node-scoped callers ([`Core::locate_jobs_with`]).
    locator: std::sync::OnceLock<Arc<dyn intake::JobLocator>>,
    /// What each intake caller may add per minute.
    pub(crate) rate: intake::RateBound,
    /// Limits of requests and engine calls.
    pub limits: Limits,
    /// Who may call the scheduler verbs.
    pub scheduler_auth: SchedulerAuth,
    store: Option<Box<dyn KnowledgeStore>>,
    /// The engine's runtime under [`TRAINING_DEADLINE`], for instances built off the engine
    /// thread.
    trainer: tandem_host::Runtime,
    /// Models jobs declared, for the peaks profilers report later.
    declared: parking_lot::Mutex<DeclaredModels>,
    /// Whether a decision that finds the engine idle runs in place ([`Engine::decide`]): only
    /// where the sandbox's deadline for one engine call is within [`Limits::decision_wait`], so
    /// that a looping engine still costs a caller one answer in about that time.
    decide_in_place: bool,
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

/// How a core starts: the engine and the keys of job ids, then what differs between
/// front-ends, each set by its own method (the defaults suit a replica alone with nothing
/// stored); [`CoreConfig::start`] starts it.
///
/// ```no_run
/// # fn doc(engine: tandem_adapter_core::EngineState, keys: tandem_adapter_core::JobKeys)
/// #     -> Result<(), tandem_adapter_core::StartError> {
/// use tandem_adapter_core::CoreConfig;
/// let core = CoreConfig::new(engine, keys).queue(1024).start()?;
/// # Ok(()) }
/// ```
pub struct CoreConfig {
    engine: EngineState,
    keys: JobKeys,
    leadership: Arc<Leadership>,
    intake_token: Option<String>,
    store: Option<Box<dyn KnowledgeStore>>,
    stored: Option<Resumed>,
    limits: Limits,
    queue: usize,
    inline: bool,
}

impl std::fmt::Debug for CoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreConfig")
            .field("limits", &self.limits)
            .field("queue", &self.queue)
            .field("inline", &self.inline)
            .finish_non_exhaustive()
    }
}

impl CoreConfig {
    /// Engine calls that may wait in the queue before more are refused, unless
    /// [`CoreConfig::queue`] says otherwise.
    pub const DEFAULT_QUEUE: usize = 256;

    /// A core over `engine` (with what it knows), keying job ids with `keys`: alone (it writes
    /// and leads), nothing stored, the intake closed to bearer tokens, default limits, the
    /// engine on a thread of its own.
    pub fn new(engine: EngineState, keys: JobKeys) -> Self {
        Self {
            engine,
            keys,
            leadership: Arc::new(Leadership::alone()),
            intake_token: None,
            store: None,
            stored: None,
            limits: Limits::default(),
            queue: Self::DEFAULT_QUEUE,
            inline: false,
        }
    }

    /// The replica's leadership, shared with whatever elects it.
    pub fn leadership(mut self, leadership: Arc<Leadership>) -> Self {
        self.leadership = leadership;
        self
    }

    /// The intake's bearer token, if it takes one.
    pub fn intake_token(mut self, token: Option<String>) -> Self {
        self.intake_token = token;
        self
    }

    /// Where the knowledge base is stored.
    pub fn store(mut self, store: Box<dyn KnowledgeStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The stored version and core state the engine was loaded from, if any (what
    /// [`resume_or_bootstrap`] answered beside the engine).
    pub fn resumed(mut self, stored: Option<Resumed>) -> Self {
        self.stored = stored;
        self
    }

    /// The limits requests and engine calls run under.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Engine calls that may wait in the queue before more are refused.
    pub fn queue(mut self, queue: usize) -> Self {
        self.queue = queue;
        self
    }

    /// Runs the engine inline ([`Engine::inline`]: on the thread of whoever decides, under a
    /// lock) rather than on a thread of its own: for a front-end that decides from a thread of
    /// its own, blocking.
    pub fn inline(mut self) -> Self {
        self.inline = true;
        self
    }

    /// Starts the core ([`Core::start`]).
    pub fn start(self) -> Result<Core, StartError> {
        Core::start(self)
    }
}

impl Core {
    /// Starts the engine thread and assembles the core. Refuses a stored knowledge base keyed
    /// with another secret than `config.keys` ([`StoreError::KeyMismatch`]).
    pub fn start(config: CoreConfig) -> Result<Self, StartError> {
        let metrics = Arc::new(Metrics::default());
        let mut engine = config.engine;
        let mut version = None;
        if let Some(resumed) = config.stored {
            let name = config
                .store
                .as_ref()
                .map_or_else(|| "the knowledge base".to_owned(), |s| s.name());
            resumed
                .adapter
                .check_key(&name, &config.keys.fingerprint())?;
            if resumed.fell_back.is_some() {
                metrics.knowledge_fallbacks.inc();
            }
            engine.ledger = resumed.adapter.ledger;
            engine.lessons = resumed.adapter.lessons;
            version = Some(resumed.version);
        }
        let trainer = engine.runtime().with_call_deadline(TRAINING_DEADLINE);
        let decide_in_place =
            engine.runtime().config().call_deadline <= config.limits.decision_wait;
        if let Some(limit) = config.store.as_ref().and_then(|s| s.capacity()) {
            metrics
                .store_limit_bytes
                .set(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let engine = if config.inline {
            Engine::inline(engine, config.queue, Arc::clone(&metrics))
        } else {
            Engine::start(engine, config.queue, Arc::clone(&metrics)).map_err(StartError::Thread)?
        };
        // The first declared job would otherwise train the memory and utilization models on
        // the scheduler's time; this runs before the front-end is ready. Training takes longer
        // than a decision may on a busy node (half a second and more), so it runs under the
        // training deadline: under the decision one it was interrupted, the instance rebuilt
        // with cold models, and the first request that needed them failed the same way.
        let warming = trainer.clone();
        engine.detach(move |state| {
            let decisions = state.runtime().clone();
            let warmed = warming
                .adopt(state.recommender())
                .and_then(|()| learning::warm_up(state.recommender()));
            if let Err(error) = warmed {
                tracing::warn!(error = %tandem_telemetry::report(&error), "could not warm the engine's models up");
            }
            if let Err(error) = decisions.adopt(state.recommender()) {
                tracing::error!(error = %tandem_telemetry::report(&error), "could not put the engine back under the decision deadline");
            }
        });
        Ok(Self {
            engine,
            keys: config.keys,
            metrics,
            leadership: config.leadership,
            intake_token: config.intake_token,
            intake_auth: None,
            locator: std::sync::OnceLock::new(),
            rate: intake::RateBound::new(config.limits.intake_items_per_minute),
            limits: config.limits,
            scheduler_auth: SchedulerAuth::default(),
            store: config.store,
            trainer,
            decide_in_place,
            declared: parking_lot::Mutex::new(DeclaredModels::default()),
            version: tokio::sync::Mutex::new(version),
            epoch: AtomicU64::new(0),
            ready: AtomicBool::new(false),
        })
    }

    /// Requires `auth` of every caller of the scheduler verbs.
    pub fn with_scheduler_auth(mut self, auth: SchedulerAuth) -> Self {
        if auth.is_open() {
            tracing::warn!(
                "the scheduler verbs are unauthenticated: anyone who reaches this port can bind \
                 pods; give a client CA (mutual TLS) or a scheduler token"
            );
        }
        self.scheduler_auth = auth;
        self
    }

    /// Admits node profilers to the intake as `auth` authenticates them (besides the
    /// operator's token): each may post profiles of the jobs running on its node only, which
    /// the front-end tells with [`Core::locate_jobs_with`].
    pub fn with_intake_auth(mut self, auth: Arc<dyn intake::IntakeAuth>) -> Self {
        self.intake_auth = Some(auth);
        self
    }

    /// Tells the intake where jobs run (the front-end's view of its cluster), so that a node
    /// profiler may post profiles of its own node's jobs; until it is told, a node-scoped
    /// caller is refused. Set once: later calls are ignored.
    pub fn locate_jobs_with(&self, locator: Arc<dyn intake::JobLocator>) {
        let _ = self.locator.set(locator);
    }

    /// How node profilers authenticate, if they may.
    pub(crate) fn intake_auth(&self) -> Option<&Arc<dyn intake::IntakeAuth>> {
        self.intake_auth.as_ref()
    }

    /// Where jobs run, if the front-end said.
    pub(crate) fn locator(&self) -> Option<&Arc<dyn intake::JobLocator>> {
        self.locator.get()
    }

    /// Runs a scheduling decision on the engine, waiting at most [`Limits::decision_wait`]: in
    /// place when the engine is idle ([`Engine::decide`]) and one engine call's deadline is
    /// within that wait, else on the engine thread. The error says whether the engine did not
    /// answer or answered with a failure.
    pub async fn decide<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, EngineError> {
        let wait = self.limits.decision_wait;
        let answer = if self.decide_in_place {
            self.engine.decide(call, wait, work).await
        } else {
            self.engine.call(call, wait, work).await
        };
        Ok(answer??)
    }

    /// [`Core::decide`] from a thread that is not a tokio worker and waits as long as the
    /// engine takes (a scheduler's own thread: kube-scheduler's cycle calls the framework
    /// plugin, whose engine runs on the caller's thread, see [`CoreConfig::inline`]).
    pub fn decide_blocking<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, EngineError> {
        let started = Instant::now();
        let answer = self.engine.call_blocking(work);
        self.metrics
            .observe_engine_call(call, started.elapsed().as_secs_f64());
        Ok(answer??)
    }

    /// Answers an operator's question (`/v1/predict`, `/v1/knowledge`) on the engine thread,
    /// waiting at most [`Limits::observation_wait`]: nothing waits on it to schedule, so it is
    /// not held to a scheduling decision's deadline (right after a start, while the view is
    /// first fed, a question can queue behind that work).
    pub async fn query<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, EngineError> {
        Ok(self
            .engine
            .call(call, self.limits.observation_wait, work)
            .await??)
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

    /// Remembers the model job `job` (keyed) declared, so that a profile posted for it later
    /// also teaches the memory model (see [`learning`]).
    pub fn remember_declared(&self, job: &str, model: &ModelSummary) {
        self.declared.lock().remember(job, model);
    }

    /// The model job `job` declared last, if the core met its declaration.
    pub fn declared_model(&self, job: &str) -> Option<ModelSummary> {
        self.declared.lock().get(job).cloned()
    }

    /// Counts a declaration refused at a scheduler's call, by field.
    pub fn refused(&self, refusal: &declaration::Refusal) {
        self.metrics.refused(refusal);
    }
}

/// Why a core could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The engine thread could not be started.
    #[error("cannot start the engine thread")]
    Thread(#[source] std::io::Error),
    /// The stored knowledge base cannot be used (keyed with another secret).
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// The knowledge base holding the observations does not load back into a fresh engine,
    /// so it was not stored (and the observations were not learned).
    #[error(
        "the knowledge base these observations make does not load back into the engine ({0}); \
         nothing was stored"
    )]
    Unloadable(String),
}

/// An engine call's error as an observation's: not answered, or answered with a failure.
impl From<EngineError> for ObserveError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Call(call) => Self::Call(call),
            EngineError::Failed(failure) => Self::Engine(failure),
        }
    }
}
