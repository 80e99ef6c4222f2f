//! The Slurm front-end's state: the GPU nodes read from Slurm and the placements Tandem made,
//! and the decisions made on them.
//!
//! A placement is made at submission (the hook) or, for a job the hook did not place (the
//! service was down, the job was submitted with `srun`), when the job starts on its node. It
//! holds its GPU in the engine's view from then until the job reports its end, or, for a job
//! that never starts (held, cancelled while pending), for `--pending-ttl`. The view the engine
//! decides on is rebuilt from these on the engine thread itself, in the same task as the
//! decision, so two submissions can never both take the last place on a GPU.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tandem_adapter_core::declaration::{Carrier, Declaration, Field, Raw, Refusal, Source};
use tandem_adapter_core::outcomes::Run;
use tandem_adapter_core::{
    Core, EngineError, EngineFailure, EngineState, Placement as EnginePlacement,
};
use tandem_api::{Gpu, GpuSpec, Job, ModelSummary, Objective, Policy, Prediction};

use crate::auth::Callers;
use crate::identity;
use crate::models;
use crate::nodes::{self, SlurmNode};

/// The namespace under which a node profiler keys a Slurm job (by its job id).
const SLURM_PROFILER_NAMESPACE: &str = "slurm";

/// How long a finished placement is remembered, for the outcome of its GPU partner.
const KEEP_FINISHED: Duration = Duration::from_secs(3600);

/// One GPU the service knows, as Slurm names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeGpu {
    /// `<node>/<index>`.
    pub id: String,
    /// Slurm's node name.
    pub node: String,
    /// The CUDA index on the node.
    pub index: u32,
    /// The GPU.
    pub spec: GpuSpec,
}

/// Another GPU of the node the job was placed on, as the engine saw it at that moment.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    /// `<node>/<index>`.
    pub gpu: String,
    /// The engine's score, 0..=100 (0: the job may not go there).
    pub score: u8,
    /// Keyed ids of the Tandem jobs already there.
    pub residents: Vec<String>,
    /// The engine's prediction for the job with those residents (filled just after the
    /// answer, off the submission's path).
    pub prediction: Option<Prediction>,
}

/// A GPU Tandem gave a job.
///
/// Its token and its user are not serialized: the operator's view
/// (`GET /v1/slurm/placements`) must not hand out what claims a placement.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// The placement's token: 128 random bits from the operating system, in hex
    /// ([`new_token`]), so that nobody can guess another job's.
    #[serde(skip)]
    pub token: String,
    /// The uid of the job's user, as Slurm gave it (job_submit.lua's `job_desc.user_id`, the
    /// plugin's `S_JOB_UID`): only a job of this user may take the placement.
    #[serde(skip)]
    pub uid: u32,
    /// The keyed job id.
    pub job: String,
    /// The node.
    pub node: String,
    /// `<node>/<index>`.
    pub gpu: String,
    /// The CUDA index on the node.
    pub index: u32,
    /// The GPU model.
    pub model: String,
    /// When it was placed (seconds since the epoch).
    pub placed_at: f64,
    /// Slurm's job id, once the job started.
    pub slurm_job: Option<u32>,
    /// When the job started.
    pub start: Option<f64>,
    /// When it ended.
    pub end: Option<f64>,
    /// The objective it was placed under.
    pub objective: Objective,
    /// The node's GPUs as the engine judged them for this job.
    pub alternatives: Vec<Alternative>,
}

impl Placement {
    fn run(&self) -> Option<Run> {
        Some(Run {
            uid: self.token.clone(),
            job: self.job.clone(),
            model: self.model.clone(),
            start: self.start?,
            end: self.end,
            // The service reads no declarations yet: a finished run is one run of its job.
            work: 1.0,
        })
    }
}

/// What the service does for a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run on `node`, GPU `index`; the placement's `token`.
    Place {
        /// The node.
        node: String,
        /// The CUDA index.
        index: u32,
        /// The placement's token.
        token: String,
    },
    /// Refuse the job: its memory fits no GPU. Why, for the user.
    Refuse(String),
    /// Leave the job as it is (no GPU can take it now; Slurm queues it). Why.
    Pass(String),
}

/// Why a start was not answered with a grant.
#[derive(Debug)]
pub enum StartError {
    /// The engine gave no answer to use.
    Engine(EngineError),
    /// The start claims what is another user's: a placement token made for another user's
    /// job, or a job another user's start already claimed. Why, for the caller (`403`).
    Refused(String),
}

impl From<EngineError> for StartError {
    fn from(error: EngineError) -> Self {
        Self::Engine(error)
    }
}

/// Why a job's end was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishError {
    /// The run time is not one the job can have had (`400`).
    Elapsed(String),
    /// The job is not the named user's (`403`).
    NotOwner(String),
}

/// Most a reported run time may exceed the time since the service saw the job start: the
/// plugin starts its clock before it asks for the GPU, and the report travels after the end.
pub const ELAPSED_SLACK: Duration = Duration::from_secs(30);

/// What a starting job gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// GPU `index` of the node, and the MPS thread percentage if MPS is configured.
    Gpu {
        /// The CUDA index.
        index: u32,
        /// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
        mps_percentage: Option<u32>,
    },
    /// No GPU: the job keeps what Slurm gave it. Why.
    None(String),
}

/// A submission, as the hook describes it.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    /// The submitting user's uid.
    pub uid: u32,
    /// The name the user chose (`--tandem-name`), if any.
    pub name: Option<String>,
    /// The objective the user asked for (`--tandem=OBJECTIVE`), if any.
    pub objective: Option<Objective>,
    /// What the job declared with the SPANK plugin's `--tandem-priority`, `--tandem-work`,
    /// `--tandem-model` and `--tandem-batch-size`, as given (checked at submission).
    pub declaration: Raw,
}

/// A job starting on a node, as the SPANK plugin describes it.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// Slurm's job id.
    pub slurm_job: u32,
    /// The node it starts on (Slurm's name for it).
    pub node: String,
    /// The placement token the hook gave it, if any.
    pub token: Option<String>,
    /// The submission's description, for a job the hook did not place.
    pub submission: Submission,
}

/// Settings of the front-end.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Memory per GPU type.
    pub gpu_memory: Vec<(String, u32)>,
    /// Memory of an unknown type.
    pub default_gpu_memory_mib: u32,
    /// The engine's policy (its objective is the default one).
    pub policy: Policy,
    /// MPS share of a GPU, split between the jobs on it, when MPS is configured.
    pub mps_percentage: Option<u32>,
    /// How long an unstarted placement holds its GPU.
    pub pending_ttl: Duration,
    /// Where `--tandem-model=file:PATH` references are read from; without it they are
    /// refused.
    pub model_dir: Option<PathBuf>,
    /// Largest model file read from `model_dir`, in bytes.
    pub model_file_limit: u64,
}

#[derive(Debug, Default)]
struct Table {
    placements: BTreeMap<String, Placement>,
    by_job: HashMap<u32, String>,
}

impl Table {
    fn insert(&mut self, placement: Placement) {
        if let Some(job) = placement.slurm_job {
            self.by_job.insert(job, placement.token.clone());
        }
        self.placements.insert(placement.token.clone(), placement);
    }

    fn remove(&mut self, token: &str) {
        if let Some(p) = self.placements.remove(token)
            && let Some(job) = p.slurm_job
        {
            self.by_job.remove(&job);
        }
    }

    /// Whether a placement holds its GPU now.
    fn holds(p: &Placement, now: f64, ttl: Duration) -> bool {
        p.end.is_none() && (p.start.is_some() || now - p.placed_at < ttl.as_secs_f64())
    }
}

/// Everything the Slurm verbs need beside the core.
pub struct App {
    /// The shared core: engine, knowledge base, intake, metrics.
    pub core: Arc<Core>,
    settings: Settings,
    gpus: RwLock<Arc<Vec<NodeGpu>>>,
    table: Arc<Mutex<Table>>,
    /// Set when the view changed outside the engine thread (a job ended, nodes were re-read).
    dirty: Arc<AtomicBool>,
    /// Who may call the verbs.
    callers: Callers,
    ready: AtomicBool,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Seconds since the epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The engine's view of the cluster: Slurm's GPUs with the Tandem jobs holding them.
fn view(gpus: &[NodeGpu], table: &Table, now: f64, ttl: Duration) -> Vec<Gpu> {
    let mut residents: HashMap<&str, Vec<Job>> = HashMap::new();
    for p in table.placements.values() {
        if Table::holds(p, now, ttl) {
            residents.entry(&p.gpu).or_default().push(Job::new(&p.job));
        }
    }
    gpus.iter()
        .map(|g| Gpu {
            id: g.id.clone(),
            node: g.node.clone(),
            spec: g.spec.clone(),
            residents: residents.remove(g.id.as_str()).unwrap_or_default(),
        })
        .collect()
}

/// Bytes of a placement token.
const TOKEN_BYTES: usize = 16;

/// A new placement token: 16 bytes (128 bits) from the operating system's random source, in hex.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0_u8; TOKEN_BYTES];
    getrandom::getrandom(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `token` has the shape of a placement token (32 lower-case hex digits).
pub fn is_token(token: &str) -> bool {
    token.len() == 2 * TOKEN_BYTES
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl App {
    /// The front-end over `core`, answering the callers `callers` admits.
    pub fn new(core: Arc<Core>, settings: Settings, callers: Callers) -> Self {
        Self {
            core,
            settings,
            gpus: RwLock::new(Arc::new(Vec::new())),
            table: Arc::new(Mutex::new(Table::default())),
            dirty: Arc::new(AtomicBool::new(true)),
            callers,
            ready: AtomicBool::new(false),
        }
    }

    /// Who may call the verbs.
    pub fn callers(&self) -> &Callers {
        &self.callers
    }

    /// Whether the GPU nodes were read at least once.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Replaces the GPU nodes with what Slurm reported; returns how many GPUs that is.
    pub fn set_nodes(&self, nodes: &[SlurmNode]) -> usize {
        let mut gpus = Vec::new();
        for node in nodes.iter().filter(|n| n.usable) {
            let mut index = 0;
            for (kind, count) in &node.gpus {
                let spec = nodes::spec(
                    kind,
                    &self.settings.gpu_memory,
                    self.settings.default_gpu_memory_mib,
                );
                for _ in 0..*count {
                    gpus.push(NodeGpu {
                        id: format!("{}/{index}", node.name),
                        node: node.name.clone(),
                        index,
                        spec: spec.clone(),
                    });
                    index += 1;
                }
            }
        }
        let count = gpus.len();
        let mut slot = self.gpus.write();
        if **slot != gpus {
            *slot = Arc::new(gpus);
            self.dirty.store(true, Ordering::Release);
        }
        self.ready.store(true, Ordering::Release);
        self.core.set_ready();
        count
    }

    /// The GPUs known now.
    pub fn gpus(&self) -> Arc<Vec<NodeGpu>> {
        Arc::clone(&self.gpus.read())
    }

    /// Every placement remembered, oldest first.
    pub fn placements(&self) -> Vec<Placement> {
        let mut all: Vec<Placement> = self.table.lock().placements.values().cloned().collect();
        all.sort_by(|a, b| a.placed_at.total_cmp(&b.placed_at));
        all
    }

    /// Whether the job keyed `job` holds a placement on `node` now: the keyed id Tandem placed
    /// it under, or the one a node profiler keys a Slurm job with (`slurm/<job id>`,
    /// docs/PROFILER.md), for a node profiler's intake.
    pub fn runs_on(&self, job: &str, node: &str) -> bool {
        let table = self.table.lock();
        let ttl = self.settings.pending_ttl;
        let now = now();
        table.placements.values().any(|p| {
            p.node == node
                && Table::holds(p, now, ttl)
                && (p.job == job
                    || p.slurm_job.is_some_and(|id| {
                        self.core
                            .keys
                            .key(SLURM_PROFILER_NAMESPACE, &id.to_string())
                            == job
                    }))
        })
    }

    /// Forgets placements that never started within the TTL and finished ones kept long enough.
    pub fn sweep(&self) {
        let now = now();
        let ttl = self.settings.pending_ttl;
        let mut table = self.table.lock();
        let stale: Vec<String> = table
            .placements
            .values()
            .filter(|p| match p.end {
                Some(end) => now - end > KEEP_FINISHED.as_secs_f64(),
                None => p.start.is_none() && now - p.placed_at >= ttl.as_secs_f64(),
            })
            .map(|p| p.token.clone())
            .collect();
        for token in &stale {
            table.remove(token);
        }
        if !stale.is_empty() {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// What a submission declared, checked, with its model's summary (the inline one, or the
    /// one read from `--model-dir`); a refusal names the option and value.
    async fn declared(&self, raw: &Raw) -> Result<(Declaration, Option<ModelSummary>), Refusal> {
        let declaration = Declaration::parse(raw, Carrier::Options)?;
        if let Some(refusal) = declaration.unknown_model(Carrier::Options, |model| {
            tandem_adapter_core::gpu_models::is_known(model)
                || self.settings.gpu_memory.iter().any(|(m, _)| m == model)
        }) {
            return Err(refusal);
        }
        let model = match (declaration.inline_model(), declaration.reference()) {
            (Some(summary), _) => Some(summary.clone()),
            (None, Some(reference)) => {
                let given = raw.model.as_deref().unwrap_or_default();
                let refuse =
                    |problem: String| Refusal::new(Field::Model, Carrier::Options, given, problem);
                let Source::File(path) = &reference.source else {
                    return Err(refuse("Slurm reads file: references only".into()));
                };
                let Some(dir) = &self.settings.model_dir else {
                    return Err(refuse(
                        "this cluster's Tandem service reads no model files (it runs without \
                         --model-dir)"
                            .into(),
                    ));
                };
                let (dir, path, limit) =
                    (dir.clone(), path.clone(), self.settings.model_file_limit);
                let bytes = tokio::task::spawn_blocking(move || models::read(&dir, &path, limit))
                    .await
                    .map_err(|e| refuse(format!("cannot read the model file: {e}")))?
                    .map_err(|e| refuse(e.to_string()))?;
                Some(reference.summarize(&bytes).map_err(refuse)?)
            }
            (None, None) => None,
        };
        Ok((declaration, model))
    }

    fn keyed(&self, submission: &Submission, token: &str) -> String {
        let name = submission
            .name
            .clone()
            .unwrap_or_else(|| format!("submission-{token}"));
        self.core
            .keys
            .key(&identity::namespace(submission.uid), &name)
    }

    /// Runs `work` on the engine thread with the view synced to the table, under `objective`.
    async fn decide<T: Send + 'static>(
        &self,
        call: &'static str,
        objective: Objective,
        work: impl FnOnce(&mut EngineState, &mut Table, &[NodeGpu]) -> Result<T, EngineFailure>
        + Send
        + 'static,
    ) -> Result<T, EngineError> {
        let gpus = self.gpus();
        let table = Arc::clone(&self.table);
        let dirty = Arc::clone(&self.dirty);
        let metrics = Arc::clone(&self.core.metrics);
        let policy = self.settings.policy.clone();
        let ttl = self.settings.pending_ttl;
        self.core
            .decide(call, move |state| {
                let mut table = table.lock();
                if dirty.swap(false, Ordering::AcqRel) {
                    match state.sync(view(&gpus, &table, now(), ttl)) {
                        Ok(summary) => metrics.observe_view(&summary),
                        Err(error) => {
                            dirty.store(true, Ordering::Release);
                            return Err(error);
                        }
                    }
                }
                // A job's own objective holds for its decision only.
                let switched = objective != policy.objective;
                if switched {
                    let own = Policy {
                        objective,
                        ..policy.clone()
                    };
                    state
                        .recommender()
                        .set_policy(&own)
                        .map_err(tandem_adapter_core::engine::failed("set-policy"))?;
                }
                let answer = work(state, &mut table, gpus.as_slice());
                if switched {
                    state
                        .recommender()
                        .set_policy(&policy)
                        .map_err(tandem_adapter_core::engine::failed("set-policy"))?;
                }
                answer
            })
            .await
    }

    /// Decides where a submitted job runs: the best GPU of the cluster if one can take it, a
    /// refusal if its memory fits no GPU even empty, else nothing (Slurm queues it).
    pub async fn submit(self: &Arc<Self>, submission: Submission) -> Result<Verdict, EngineError> {
        let (declaration, model) = match self.declared(&submission.declaration).await {
            Ok(declared) => declared,
            Err(refusal) => {
                self.core.refused(&refusal);
                return Ok(Verdict::Refuse(refusal.to_string()));
            }
        };
        let Ok(token) = new_token() else {
            return Ok(Verdict::Pass(
                "the operating system's random source gave no placement token".into(),
            ));
        };
        let keyed = self.keyed(&submission, &token);
        let uid = submission.uid;
        let objective = submission
            .objective
            .unwrap_or(self.settings.policy.objective);
        let answer = self
            .decide("submit", objective, move |state, table, gpus| {
                let job = declaration.job(&keyed, model.as_ref());
                let scores = state
                    .recommender()
                    .score_all(&job)
                    .map_err(tandem_adapter_core::engine::failed("score-all"))?;
                let score_of = |g: &NodeGpu| {
                    state
                        .handles()
                        .of(&g.id)
                        .and_then(|h| scores.get(h as usize).copied())
                        .unwrap_or(0)
                };
                // Highest score; the first GPU listed among equals.
                let best = gpus
                    .iter()
                    .map(|g| (score_of(g), g))
                    .filter(|(score, _)| *score > 0)
                    .fold(None::<(u8, &NodeGpu)>, |best, (score, g)| match best {
                        Some((top, _)) if top >= score => best,
                        _ => Some((score, g)),
                    });
                let Some((_, best)) = best else {
                    return refuse_or_pass(state, &job, gpus);
                };
                let node = best.node.clone();
                let alternatives: Vec<Alternative> = gpus
                    .iter()
                    .filter(|g| g.node == node)
                    .map(|g| Alternative {
                        gpu: g.id.clone(),
                        score: score_of(g),
                        residents: state
                            .handles()
                            .of(&g.id)
                            .and_then(|h| state.gpu(h))
                            .map(|gpu| gpu.residents.iter().map(|r| r.id.clone()).collect())
                            .unwrap_or_default(),
                        prediction: None,
                    })
                    .collect();
                let placed = match state.place(&job, &node, 1)? {
                    EnginePlacement::Placed { gpus, .. } => gpus,
                    EnginePlacement::Refused(why) => return Ok(Verdict::Pass(why)),
                };
                let Some(gpu) = placed
                    .first()
                    .and_then(|id| gpus.iter().find(|g| &g.id == id))
                else {
                    return Ok(Verdict::Pass("the engine chose no GPU".into()));
                };
                table.insert(Placement {
                    token: token.clone(),
                    uid,
                    job: keyed,
                    node: node.clone(),
                    gpu: gpu.id.clone(),
                    index: gpu.index,
                    model: gpu.spec.model.clone(),
                    placed_at: now(),
                    slurm_job: None,
                    start: None,
                    end: None,
                    objective,
                    alternatives,
                });
                Ok(Verdict::Place {
                    node,
                    index: gpu.index,
                    token,
                })
            })
            .await;
        if let Ok(Verdict::Place { token, .. }) = &answer {
            let app = Arc::clone(self);
            let token = token.clone();
            tokio::spawn(async move { app.predict_alternatives(token).await });
        }
        answer
    }

    /// Fills a placement's alternatives with the engine's predictions, off the submission's
    /// path (an operator, or the end-to-end test, reads them at `/v1/slurm/placements`).
    async fn predict_alternatives(&self, token: String) {
        let (job, alternatives, gpus) = {
            let table = self.table.lock();
            let Some(p) = table.placements.get(&token) else {
                return;
            };
            (p.job.clone(), p.alternatives.clone(), self.gpus())
        };
        let asked = alternatives.clone();
        let predictions = self
            .core
            .decide("predict", move |state| {
                // A prediction that fails leaves its alternative without one.
                Ok(asked
                    .iter()
                    .map(|a| {
                        let spec = gpus.iter().find(|g| g.id == a.gpu)?.spec.clone();
                        let mut group: Vec<Job> = a.residents.iter().map(Job::new).collect();
                        group.insert(0, Job::new(&job));
                        state.recommender().predict(&group, &spec).ok()
                    })
                    .collect::<Vec<_>>())
            })
            .await;
        let Ok(predictions) = predictions else {
            return;
        };
        let mut table = self.table.lock();
        if let Some(p) = table.placements.get_mut(&token) {
            for (alternative, prediction) in p.alternatives.iter_mut().zip(predictions) {
                alternative.prediction = prediction;
            }
        }
    }

    /// The GPU a job starting on its node gets: the one placed at submission, or, for a job
    /// the hook did not place, the engine's choice on that node now.
    ///
    /// The job's user is the uid Slurm gave the plugin (`start.submission.uid`): a placement
    /// token made for another user's job is refused, and so is a job id another user's start
    /// already claimed, each without touching that placement.
    pub async fn start(&self, start: Start) -> Result<Grant, StartError> {
        let mps = self.settings.mps_percentage;
        let ttl = self.settings.pending_ttl;
        let grant = move |table: &Table, token: &str| {
            let p = &table.placements[token];
            let sharing = table
                .placements
                .values()
                .filter(|o| o.gpu == p.gpu && Table::holds(o, now(), ttl))
                .count()
                .max(1) as u32;
            Grant::Gpu {
                index: p.index,
                mps_percentage: mps.map(|m| (m / sharing).max(1)),
            }
        };
        let uid = start.submission.uid;
        let slurm_job = start.slurm_job;
        {
            let mut table = self.table.lock();
            // Every step of a job asks; the first answer holds for all of them.
            if let Some(token) = table.by_job.get(&slurm_job).cloned() {
                let owner = table.placements[&token].uid;
                if owner != uid {
                    return Err(StartError::Refused(format!(
                        "job {slurm_job} was started for uid {owner}, not uid {uid}"
                    )));
                }
                return Ok(grant(&table, &token));
            }
            if let Some(token) = &start.token
                && let Some(p) = table.placements.get_mut(token)
            {
                if p.uid != uid {
                    return Err(StartError::Refused(format!(
                        "the placement token of job {slurm_job} (uid {uid}) was made for another \
                         user's job: a placement is taken only by a job of the user it was made \
                         for"
                    )));
                }
                if p.node == start.node && p.slurm_job.is_none() {
                    p.slurm_job = Some(slurm_job);
                    p.start = Some(now());
                    let token = token.clone();
                    table.by_job.insert(slurm_job, token.clone());
                    return Ok(grant(&table, &token));
                }
                // Placed elsewhere than it runs (Slurm chose another node): give that GPU
                // back. A token another job of the user already took is left to that job.
                if p.slurm_job.is_none() {
                    table.remove(token);
                    self.dirty.store(true, Ordering::Release);
                }
            }
        }
        let Ok(token) = new_token() else {
            return Ok(Grant::None(
                "the operating system's random source gave no placement token".into(),
            ));
        };
        let keyed = self.keyed(&start.submission, &token);
        let objective = start
            .submission
            .objective
            .unwrap_or(self.settings.policy.objective);
        let node = start.node.clone();
        let answer = self
            .decide("start", objective, move |state, table, gpus| {
                // Another step of the job may have been placed while this one waited.
                if let Some(token) = table.by_job.get(&slurm_job).cloned() {
                    return Ok(if table.placements[&token].uid == uid {
                        Ok(grant(table, &token))
                    } else {
                        Err(format!(
                            "job {slurm_job} was started for another uid than {uid}"
                        ))
                    });
                }
                let job = Job::new(&keyed);
                let placed = match state.place(&job, &node, 1)? {
                    EnginePlacement::Placed { gpus, .. } => gpus,
                    EnginePlacement::Refused(why) => return Ok(Ok(Grant::None(why))),
                };
                let Some(gpu) = placed
                    .first()
                    .and_then(|id| gpus.iter().find(|g| &g.id == id))
                else {
                    return Ok(Ok(Grant::None("the engine chose no GPU".into())));
                };
                let started = now();
                table.insert(Placement {
                    token: token.clone(),
                    uid,
                    job: keyed,
                    node,
                    gpu: gpu.id.clone(),
                    index: gpu.index,
                    model: gpu.spec.model.clone(),
                    placed_at: started,
                    slurm_job: Some(slurm_job),
                    start: Some(started),
                    end: None,
                    objective,
                    alternatives: Vec::new(),
                });
                Ok(Ok(grant(table, &token)))
            })
            .await?;
        answer.map_err(StartError::Refused)
    }

    /// Records that a job ended after `elapsed` seconds of run time (the service's own clock
    /// when not given), frees its GPU and learns from it (a solo run, or an outcome with the job
    /// that shared its GPU). Returns whether the job was one Tandem placed.
    ///
    /// `uid`, when given, is the job's user as Slurm knows it: the end of another user's job is
    /// refused. A run time must be positive, finite and at most the time since the job started
    /// here plus [`ELAPSED_SLACK`]; anything else is refused, so a report cannot make a job
    /// look longer or shorter than it was beyond that.
    pub async fn finish(
        &self,
        slurm_job: u32,
        elapsed: Option<f64>,
        uid: Option<u32>,
    ) -> Result<bool, FinishError> {
        let end = now();
        let (run, others) = {
            let mut table = self.table.lock();
            let Some(token) = table.by_job.get(&slurm_job).cloned() else {
                return Ok(false);
            };
            let Some(p) = table.placements.get_mut(&token) else {
                return Ok(false);
            };
            if let Some(uid) = uid
                && uid != p.uid
            {
                return Err(FinishError::NotOwner(format!(
                    "job {slurm_job} is not uid {uid}'s: its end is not recorded"
                )));
            }
            if let Some(elapsed) = elapsed {
                check_elapsed(slurm_job, elapsed, p.start.map(|start| end - start))?;
            }
            if p.end.is_some() {
                // Another step of the job reported first.
                return Ok(true);
            }
            p.end = Some(end);
            if let Some(elapsed) = elapsed {
                p.start = Some(end - elapsed);
            }
            let (gpu, run) = (p.gpu.clone(), p.run());
            let others: Vec<Run> = table
                .placements
                .values()
                .filter(|o| o.gpu == gpu && o.token != token)
                .filter_map(Placement::run)
                .collect();
            (run, others)
        };
        self.dirty.store(true, Ordering::Release);
        if let Some(run) = run {
            self.core.run_finished(run, others, end).await;
        }
        Ok(true)
    }
}

/// Checks a reported run time against the time `since` the job started here (if it did).
fn check_elapsed(slurm_job: u32, elapsed: f64, since: Option<f64>) -> Result<(), FinishError> {
    if !elapsed.is_finite() || elapsed <= 0.0 {
        return Err(FinishError::Elapsed(format!(
            "`elapsed` of job {slurm_job} is {elapsed}: a run time is a positive number of seconds"
        )));
    }
    let most = since.unwrap_or(0.0).max(0.0) + ELAPSED_SLACK.as_secs_f64();
    if elapsed > most {
        return Err(FinishError::Elapsed(format!(
            "`elapsed` of job {slurm_job} is {elapsed} s, and it started {:.1} s ago",
            since.unwrap_or(0.0).max(0.0)
        )));
    }
    Ok(())
}

/// No GPU can take the job now: refused if its memory fits no GPU of the cluster even empty,
/// else left to Slurm's queue.
fn refuse_or_pass(
    state: &mut EngineState,
    job: &Job,
    gpus: &[NodeGpu],
) -> Result<Verdict, EngineFailure> {
    if gpus.is_empty() {
        return Ok(Verdict::Pass("no GPU node is known".into()));
    }
    let mut specs: Vec<&GpuSpec> = gpus.iter().map(|g| &g.spec).collect();
    specs.dedup();
    let mut why = Vec::new();
    for spec in specs {
        // The engine answers `infeasible` when the job alone overflows the GPU.
        match state
            .recommender()
            .predict(std::slice::from_ref(job), spec)
            .map_err(tandem_adapter_core::engine::failed("predict"))
        {
            Ok(alone) if alone.peak_mem_mib <= spec.memory_mib => {
                return Ok(Verdict::Pass(
                    "no GPU can take it now; Slurm queues it".into(),
                ));
            }
            Ok(alone) => why.push(format!(
                "it needs {} MiB, a {} has {} MiB",
                alone.peak_mem_mib, spec.model, spec.memory_mib
            )),
            Err(failure) if failure.is_refusal() => why.push(failure.source.to_string()),
            Err(failure) => return Err(failure),
        }
    }
    let mut nodes: Vec<&str> = gpus.iter().map(|g| g.node.as_str()).collect();
    nodes.dedup();
    let reasons = state.why_not(job, &nodes)?;
    Ok(Verdict::Refuse(format!(
        "the job's predicted GPU memory fits no GPU of this cluster: {}; {}",
        why.join("; "),
        reasons.join("; ")
    )))
}

#[cfg(test)]
mod tests;
