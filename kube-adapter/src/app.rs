//! The adapter's shared state: the engine, the cluster view, the knowledge store and what
//! ties them together (bind assumptions, observations, finished pods).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;
use serde::Deserialize;
use tandem_api::Outcome;

use crate::cluster::{ClusterView, GpuPod, gpu_pod};
use crate::engine::{Engine, EngineFailure};
use crate::extender::{GpuScores, score_gpus};
use crate::identity::JobKeys;
use crate::leader::Leadership;
use crate::metrics::{Metrics, Reason};
use crate::outcomes::{Learned, Ledger, Run};
use crate::store::{AdapterState, KnowledgeStore, StoreError};

/// How long a GPU choice made by `bind` is assumed before the pod watcher must confirm it.
const ASSUME_FOR: Duration = Duration::from_secs(60);

/// Where the cluster view comes from.
pub enum Source {
    /// Watchers on the API server (the normal case).
    Kubernetes {
        /// Client for `bind` and the store.
        client: kube::Client,
        /// Nodes, kept by a reflector.
        nodes: Store<Node>,
        /// Pods, kept by a reflector.
        pods: Store<Pod>,
    },
    /// A fixed cluster read from a file (`--cluster-file`): dry runs and benchmarks. It cannot
    /// bind.
    Fixed(ClusterFile),
}

/// A cluster described in a file: nodes and pods as the API server would list them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Node objects.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Pod objects.
    #[serde(default)]
    pub pods: Vec<Pod>,
}

/// A GPU choice made by `bind`, until the watcher shows the annotation.
#[derive(Debug, Clone)]
struct Assumed {
    node: String,
    gpus: Vec<String>,
    at: Instant,
}

/// The scores computed by the last `filter`, kept for the `prioritize` of the same pod that
/// kube-scheduler sends next.
#[derive(Debug)]
struct ScoreCache {
    pod: String,
    epoch: u64,
    nodes: std::collections::HashSet<String>,
    scores: Arc<GpuScores>,
}

/// The persisted part of the adapter's state, with the store version it matches.
#[derive(Debug, Default)]
struct Persisted {
    version: Option<String>,
    ledger: Ledger,
}

/// Everything a request handler needs.
pub struct App {
    /// The engine.
    pub engine: Engine,
    /// Keys pod identities.
    pub keys: JobKeys,
    /// The extended resource Tandem manages (for example `nvidia.com/gpu`).
    pub resource: String,
    /// Metrics.
    pub metrics: Metrics,
    /// Leadership of this replica.
    pub leadership: Arc<Leadership>,
    /// Bearer token the intake endpoints require; intake is off without one.
    pub intake_token: Option<String>,
    /// Where the knowledge base is stored, if anywhere.
    pub store: Option<KnowledgeStore>,
    source: Source,
    view: RwLock<Arc<ClusterView>>,
    dirty: AtomicBool,
    assumed: Mutex<HashMap<String, Assumed>>,
    ready: AtomicBool,
    persisted: tokio::sync::Mutex<Persisted>,
    /// Bumped whenever the view or the engine's knowledge changes: cached scores are only as
    /// good as the epoch they were computed in.
    epoch: AtomicU64,
    scores: Mutex<Option<ScoreCache>>,
    /// Serializes binds, so two pods never take the last place on one GPU at once.
    pub bind_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Assembles the state. `stored` is the knowledge base version and ledger the engine was
    /// loaded from, if any.
    #[expect(
        clippy::too_many_arguments,
        reason = "a constructor of the whole state"
    )]
    pub fn new(
        engine: Engine,
        keys: JobKeys,
        resource: String,
        leadership: Arc<Leadership>,
        intake_token: Option<String>,
        store: Option<KnowledgeStore>,
        source: Source,
        stored: Option<(String, Ledger)>,
    ) -> Self {
        let (version, ledger) = stored.map_or((None, Ledger::default()), |(v, l)| (Some(v), l));
        let app = Self {
            engine,
            keys,
            resource,
            metrics: Metrics::default(),
            leadership,
            intake_token,
            store,
            source,
            view: RwLock::new(Arc::new(ClusterView::default())),
            dirty: AtomicBool::new(true),
            assumed: Mutex::new(HashMap::new()),
            ready: AtomicBool::new(false),
            persisted: tokio::sync::Mutex::new(Persisted { version, ledger }),
            epoch: AtomicU64::new(0),
            scores: Mutex::new(None),
            bind_lock: tokio::sync::Mutex::new(()),
        };
        if matches!(app.source, Source::Fixed(_)) {
            app.ready.store(true, Ordering::Release);
        }
        app
    }

    /// The Kubernetes client, unless the cluster is fixed.
    pub fn client(&self) -> Option<&kube::Client> {
        match &self.source {
            Source::Kubernetes { client, .. } => Some(client),
            Source::Fixed(_) => None,
        }
    }

    /// Marks the view stale (a watcher saw a change).
    pub fn touch(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Marks the adapter ready (watchers synced).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether the adapter can answer with a current view.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The pod's view, if it requests managed GPUs.
    pub fn gpu_pod(&self, pod: &Pod) -> Option<GpuPod> {
        gpu_pod(pod, &self.keys, &self.resource)
    }

    /// The current cluster view, rebuilt first if a watcher saw a change since the last one.
    pub fn view(&self) -> Arc<ClusterView> {
        if self.dirty.swap(false, Ordering::AcqRel) {
            let fresh = Arc::new(self.build_view());
            self.epoch.fetch_add(1, Ordering::AcqRel);
            *self
                .view
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&fresh);
            return fresh;
        }
        Arc::clone(
            &self
                .view
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn build_view(&self) -> ClusterView {
        match &self.source {
            Source::Fixed(file) => ClusterView::build(
                &file.nodes,
                file.pods.iter().filter_map(|p| self.gpu_pod(p)),
                &self.resource,
            ),
            Source::Kubernetes { nodes, pods, .. } => {
                let nodes = nodes.state();
                let mut assumed = self
                    .assumed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                assumed.retain(|_, a| a.at.elapsed() < ASSUME_FOR);
                let mut list = Vec::new();
                for pod in pods.state() {
                    let Some(mut gp) = self.gpu_pod(&pod) else {
                        continue;
                    };
                    if let Some(a) = assumed.get(&gp.uid) {
                        if gp.assigned.is_empty() {
                            gp.node = Some(a.node.clone());
                            gp.assigned = a.gpus.clone();
                        } else {
                            assumed.remove(&gp.uid);
                        }
                    }
                    list.push(gp);
                }
                ClusterView::build(nodes.iter().map(AsRef::as_ref), list, &self.resource)
            }
        }
    }

    /// The engine's scores of a one-GPU `pod` on the GPUs of `candidates` in `view`: from the
    /// last `filter` of the same pod when nothing changed since (kube-scheduler sends
    /// `prioritize` right after `filter`, over the nodes that passed), else from the engine.
    pub fn scores(
        &self,
        pod: &GpuPod,
        view: &ClusterView,
        candidates: &[String],
    ) -> Result<Arc<GpuScores>, EngineFailure> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut cache = self
            .scores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.as_ref()
            && !pod.uid.is_empty()
            && hit.pod == pod.uid
            && hit.epoch == epoch
            && candidates.iter().all(|n| hit.nodes.contains(n))
        {
            return Ok(Arc::clone(&hit.scores));
        }
        let scores = Arc::new(score_gpus(&self.engine, view, pod, candidates)?);
        *cache = Some(ScoreCache {
            pod: pod.uid.clone(),
            epoch,
            nodes: candidates.iter().cloned().collect(),
            scores: Arc::clone(&scores),
        });
        Ok(scores)
    }

    /// Records `bind`'s choice so the next decision sees it before the watcher does.
    pub fn assume(&self, uid: &str, node: &str, gpus: Vec<String>) {
        self.assumed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                uid.to_owned(),
                Assumed {
                    node: node.to_owned(),
                    gpus,
                    at: Instant::now(),
                },
            );
        self.touch();
    }

    /// Applies observations to the engine and stores the result before returning: what this
    /// returns `Ok` for is acknowledged and survives a crash.
    pub async fn observe<T>(
        &self,
        apply: impl FnOnce(&Engine, &mut Ledger) -> Result<T, EngineFailure>,
    ) -> Result<T, ObserveError> {
        if !self.leadership.is_leader() {
            return Err(ObserveError::NotLeader(self.leadership.holder()));
        }
        let mut persisted = self.persisted.lock().await;
        let answer = apply(&self.engine, &mut persisted.ledger);
        // Even a failed batch may have applied its first observations.
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let answer = answer.inspect_err(|_| {
            self.metrics.engine_errors.inc();
        })?;
        self.write(&mut persisted).await?;
        Ok(answer)
    }

    async fn write(&self, persisted: &mut Persisted) -> Result<(), ObserveError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let (engine, profiles) = self.engine.snapshot();
        let adapter = AdapterState {
            profiles: profiles.into_iter().collect(),
            ledger: persisted.ledger.clone(),
        };
        match store
            .save(persisted.version.as_deref(), &engine, &adapter)
            .await
        {
            Ok(version) => {
                persisted.version = Some(version);
                Ok(())
            }
            Err(error) => {
                self.metrics.store_errors.inc();
                if matches!(error, StoreError::Conflict(_)) {
                    // Someone else wrote: take their state, so ours matches the store again.
                    if let Err(reload) = self.reload_locked(persisted).await {
                        tracing::error!(%reload, "cannot reload the knowledge base after a conflict");
                    }
                }
                Err(error.into())
            }
        }
    }

    /// Loads the stored knowledge base if it changed since we last read or wrote it. Returns
    /// whether it changed.
    pub async fn reload(&self) -> Result<bool, ObserveError> {
        let mut persisted = self.persisted.lock().await;
        self.reload_locked(&mut persisted).await
    }

    async fn reload_locked(&self, persisted: &mut Persisted) -> Result<bool, ObserveError> {
        let Some(store) = &self.store else {
            return Ok(false);
        };
        let Some(stored) = store.load().await? else {
            return Ok(false);
        };
        if persisted.version.as_deref() == Some(stored.version.as_str()) {
            return Ok(false);
        }
        self.engine
            .replace(&stored.engine, stored.adapter.profile_map())?;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        persisted.version = Some(stored.version);
        persisted.ledger = stored.adapter.ledger;
        Ok(true)
    }

    /// Learns from a pod that finished (leader only): a solo sample, or an outcome once both
    /// pods of a shared GPU are done. See [`crate::outcomes`].
    pub async fn pod_finished(&self, pod: &Pod) {
        let Source::Kubernetes { pods, .. } = &self.source else {
            return;
        };
        if !self.leadership.is_leader() {
            return;
        }
        let Some(finished) = self.gpu_pod(pod) else {
            return;
        };
        let [gpu] = finished.assigned.as_slice() else {
            return;
        };
        let model = self
            .view()
            .node(finished.node.as_deref().unwrap_or_default())
            .and_then(|entry| entry.as_ref().ok())
            .and_then(|gpus| gpus.iter().find(|g| &g.id == gpu))
            .map(|g| g.spec.model.clone());
        let Some(model) = model else {
            return;
        };
        let Some(run) = run_of(pod, &finished, &model) else {
            self.skipped("no start or finish time");
            return;
        };
        let others: Vec<Run> = pods
            .state()
            .iter()
            .filter_map(|other| {
                let gp = self.gpu_pod(other)?;
                (gp.uid != finished.uid && gp.assigned.as_slice() == [gpu.clone()])
                    .then(|| run_of(other, &gp, &model))
                    .flatten()
            })
            .collect();
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        let mut learned = Learned::Skipped("already counted");
        let result = self
            .observe(|engine, ledger| {
                learned = ledger.learn(&run, &others, now);
                if let Learned::Outcome(outcome) = &learned {
                    engine.observe_outcome(outcome)?;
                }
                Ok(())
            })
            .await;
        match (&learned, result) {
            (_, Err(error)) => tracing::warn!(%error, "could not record a finished pod"),
            (Learned::Outcome(Outcome { gpu_model, .. }), Ok(())) => {
                self.metrics.outcomes_learned.inc();
                tracing::info!(
                    gpu_model,
                    "learned a co-location outcome from finished pods"
                );
            }
            (Learned::Solo, Ok(())) => tracing::debug!("recorded a solo run"),
            (Learned::Skipped(reason), Ok(())) => self.skipped(reason),
        }
    }

    fn skipped(&self, reason: &str) {
        self.metrics
            .outcomes_skipped
            .get_or_create(&Reason {
                reason: reason.to_owned(),
            })
            .inc();
    }
}

/// A pod's run: from its containers' start to their finish (or the pod's start time).
fn run_of(pod: &Pod, gp: &GpuPod, model: &str) -> Option<Run> {
    let status = pod.status.as_ref()?;
    let seconds = |t: &k8s_openapi::jiff::Timestamp| t.as_millisecond() as f64 / 1000.0;
    let mut start = status.start_time.as_ref().map(|t| seconds(&t.0));
    let mut end = None;
    for c in status.container_statuses.iter().flatten() {
        if let Some(done) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) {
            if let Some(s) = &done.started_at {
                let s = seconds(&s.0);
                start = Some(start.map_or(s, |old: f64| old.min(s)));
            }
            if let Some(f) = &done.finished_at {
                let f = seconds(&f.0);
                end = Some(end.map_or(f, |old: f64| old.max(f)));
            }
        } else if let Some(running) = c.state.as_ref().and_then(|s| s.running.as_ref())
            && let Some(s) = &running.started_at
        {
            let s = seconds(&s.0);
            start = Some(start.map_or(s, |old: f64| old.min(s)));
        }
    }
    let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    Some(Run {
        uid: gp.uid.clone(),
        job: gp.job.clone(),
        model: model.to_owned(),
        start: start?,
        end: if finished { Some(end?) } else { None },
    })
}

/// Why an observation was not acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// Another replica leads; observations go there.
    #[error("this replica does not lead (leader: {}); send observations to the leader", .0.as_deref().unwrap_or("unknown"))]
    NotLeader(Option<String>),
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The knowledge base could not be stored.
    #[error("not stored: {0}")]
    Store(#[from] StoreError),
}
