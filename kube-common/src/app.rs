//! A Kubernetes front-end's state: where its view of the cluster comes from, and what it
//! placed before the watchers confirm it. The engine, the knowledge base, the intake and the
//! metrics are the core's; what only one scheduler's protocol needs (the extender's scores kept
//! from `filter` for `prioritize`, say) is its front-end's.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::Api;
use kube::runtime::reflector::Store;
use parking_lot::{Mutex, RwLock};
use serde::Deserialize;
use tandem_adapter_core::declaration::{Field, Reference, Source as ModelSource};
use tandem_adapter_core::gpu_models::GpuCosts;
use tandem_adapter_core::outcomes::{Run, Skip};
use tandem_adapter_core::{Core, EngineError, EngineFailure, EngineState};
use tandem_api::ModelSummary;

use crate::assumed::Assumptions;
use crate::cluster::{ClusterView, DeclaredModel, GpuPod, gpu_pod};
use crate::follow::CatchUp;
use crate::placement::Placements;
pub use crate::pushed::Pushed;
use crate::runs::{finished_batch, is_finished, model_of, now_seconds, run_of};

/// Where the cluster view comes from.
pub enum Source {
    /// Watchers on the API server (the normal case).
    Kubernetes {
        /// Client for `bind`.
        client: kube::Client,
        /// Nodes, kept by a reflector.
        nodes: Store<Node>,
        /// Pods, kept by a reflector.
        pods: Store<Pod>,
    },
    /// A fixed cluster read from a file (`--cluster-file`): dry runs and benchmarks. It cannot
    /// bind.
    Fixed(ClusterFile),
    /// Nodes and pods pushed by the scheduler the front-end runs in (kube-scheduler's
    /// informers, for the framework plugin): see [`Pushed`].
    Pushed(Pushed),
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

/// What a Kubernetes front-end decides with beside the core: the extender's handlers, Volcano's
/// session and the framework plugin's extension points each call it.
pub struct App {
    /// The shared core: engine, knowledge base, intake, metrics.
    pub core: Arc<Core>,
    /// The extended resource Tandem manages (for example `nvidia.com/gpu`).
    pub resource: String,
    /// kube-scheduler's `httpTimeout` for this extender: a bind answered later may have been
    /// given up on (and bound by the scheduler itself), so `bind` stops before it.
    pub scheduler_timeout: Duration,
    source: Source,
    view: RwLock<Arc<ClusterView>>,
    dirty: AtomicBool,
    /// Bumped at each rebuild of `view`.
    view_epoch: AtomicU64,
    /// The view epoch the engine was last told (engine-thread tasks compare and update it).
    synced: Arc<AtomicU64>,
    /// Placements made before the watchers show them.
    assumed: Arc<Assumptions>,
    ready: AtomicBool,
    /// Pods already counted as bound without Tandem's record.
    unrecorded: Mutex<HashSet<String>>,
    /// Where each pod holding GPUs runs, as the view knows it (node and GPUs), by UID: a pod
    /// event that does not change it (a pod created pending, the echo of Tandem's own bind)
    /// leaves the view as it is.
    residency: Mutex<HashMap<String, (String, Vec<String>)>>,
    /// Whether placements were made or undone since the view was built. The engine holds them
    /// already, and only a pod of several GPUs reads residents from the view (which GPUs are
    /// idle), so the view is rebuilt for those only ([`App::view_for`]): rebuilding it after
    /// every placement would cost every pod a pass over the whole cluster.
    residents_moved: AtomicBool,
    /// Set when finished pods should be looked through again ([`App::catch_up`]).
    catch_up_due: AtomicBool,
    /// Prices and powers of GPU models (`--gpu-price`, `--gpu-power`).
    costs: GpuCosts,
    /// How placements are signed, and which the view trusts (`--placement-key`).
    placements: Arc<Placements>,
    /// Models pods declared by reference, read from ConfigMaps: by namespace and reference,
    /// with when they were read.
    models: Mutex<HashMap<(String, Reference), ModelRead>>,
}

/// A model read from a ConfigMap: when, and its summary or why it could not be used.
type ModelRead = (Instant, Result<ModelSummary, String>);

/// How long a model read from a ConfigMap is used before it is read again.
const MODEL_FRESH_FOR: Duration = Duration::from_secs(60);

/// How long a ConfigMap that could not be read (missing, or not a model) is believed so.
const MODEL_MISSING_FOR: Duration = Duration::from_secs(10);

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl App {
    /// The front-end over `core`, fed by `source`.
    pub fn new(
        core: Arc<Core>,
        resource: String,
        scheduler_timeout: Duration,
        source: Source,
    ) -> Self {
        let assumed = match source {
            Source::Pushed(_) => Assumptions::until_confirmed(),
            Source::Kubernetes { .. } | Source::Fixed(_) => Assumptions::default(),
        };
        let app = Self {
            core,
            resource,
            scheduler_timeout,
            source,
            view: RwLock::new(Arc::new(ClusterView::default())),
            dirty: AtomicBool::new(true),
            view_epoch: AtomicU64::new(0),
            synced: Arc::new(AtomicU64::new(0)),
            assumed: Arc::new(assumed),
            ready: AtomicBool::new(false),
            unrecorded: Mutex::new(HashSet::new()),
            residency: Mutex::new(HashMap::new()),
            residents_moved: AtomicBool::new(false),
            catch_up_due: AtomicBool::new(false),
            costs: GpuCosts::default(),
            placements: Arc::default(),
            models: Mutex::new(HashMap::new()),
        };
        // No list to wait for: a fixed cluster is whole, a pushed one as current as its
        // scheduler's informers.
        if !matches!(app.source, Source::Kubernetes { .. }) {
            app.set_ready();
        }
        app
    }

    /// The front-end with GPU models priced and powered by `costs`.
    pub fn with_costs(mut self, costs: GpuCosts) -> Self {
        self.costs = costs;
        self
    }

    /// The front-end signing its placements as `placements` says, and trusting only those it
    /// vouches for (without it, placements are unsigned and all trusted).
    pub fn with_placements(mut self, placements: Arc<Placements>) -> Self {
        self.placements = placements;
        self
    }

    /// How the front-end signs placements and which it trusts.
    pub fn placements(&self) -> &Placements {
        &self.placements
    }

    /// The Kubernetes client, when the view comes from watchers.
    pub fn client(&self) -> Option<&kube::Client> {
        match &self.source {
            Source::Kubernetes { client, .. } => Some(client),
            Source::Fixed(_) | Source::Pushed(_) => None,
        }
    }

    /// The pod `namespace/name` as the watcher last saw it, if it did.
    pub fn cached_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        match &self.source {
            Source::Kubernetes { pods, .. } => {
                pods.get(&kube::runtime::reflector::ObjectRef::new(name).within(namespace))
            }
            Source::Fixed(_) | Source::Pushed(_) => None,
        }
    }

    /// Whether a pod of the job of keyed id `job` is bound to node `node`, as the watcher last
    /// saw the pods (finished ones included, until they are deleted: a profiler posts a job's
    /// profile once its window is over, and the job may have ended by then). With a fixed
    /// cluster, among the file's pods; with a pushed one, among the pods pushed and the runs
    /// held.
    pub fn runs_on(&self, job: &str, node: &str) -> bool {
        let on_node = |pod: &Pod| {
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                && crate::cluster::job_key(pod, &self.core.keys) == job
        };
        match &self.source {
            Source::Kubernetes { pods, .. } => pods.state().iter().any(|pod| on_node(pod)),
            Source::Fixed(file) => file.pods.iter().any(on_node),
            Source::Pushed(pushed) => pushed.runs_on(job, node),
        }
    }

    /// Marks the view stale (a watcher saw a change).
    pub fn touch(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Follows a pod event: the view is stale only if the pod started or stopped holding GPUs,
    /// or moved (`gone`: the pod was deleted).
    pub fn pod_changed(&self, pod: &Pod, gone: bool) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if gone {
            self.pod_gone(uid);
        } else {
            self.resides(uid, self.gpu_pod(pod).as_ref());
        }
    }

    /// Follows where the pod `uid` (its view `pod`, `None` if it requests no managed GPU)
    /// holds GPUs: the view is stale if that changed.
    fn resides(&self, uid: &str, pod: Option<&GpuPod>) {
        let now = pod
            .filter(|gp| gp.active)
            .and_then(|gp| Some((gp.node.clone()?, gp.assigned.clone())));
        let mut residency = self.residency.lock();
        let changed = match &now {
            Some(place) => residency.insert(uid.to_owned(), place.clone()).as_ref() != Some(place),
            None => residency.remove(uid).is_some(),
        };
        if changed {
            self.touch();
        }
    }

    /// Follows the deletion of the pod `uid`: the view is stale if it held GPUs, or was placed
    /// before the pod's events showed it (it holds nothing any more).
    fn pod_gone(&self, uid: &str) {
        let forgotten = self.assumed.remove(uid).is_some();
        let held = self.residency.lock().remove(uid).is_some();
        if held || forgotten {
            self.touch();
        }
    }

    /// Marks the front-end ready (watchers synced).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
        self.core.set_ready();
    }

    /// Whether the front-end can answer with a current view.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The pod's view, if it requests managed GPUs, with a model it declared by reference
    /// as last read ([`App::read_model`]).
    pub fn gpu_pod(&self, pod: &Pod) -> Option<GpuPod> {
        let mut gp = gpu_pod(pod, &self.core.keys, &self.resource, &self.placements)?;
        if let Ok(declaration) = &gp.declared
            && let Some(reference) = declaration.reference()
        {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            // Not read yet: the extender reads it before judging the pod; the watcher, for
            // every front-end, when it sees the pod.
            gp.model = match self.models.lock().get(&(namespace, reference.clone())) {
                Some((_, Ok(summary))) => DeclaredModel::Known(summary.clone()),
                Some((_, Err(why))) => DeclaredModel::Unusable(why.clone()),
                None => DeclaredModel::NotRead,
            };
        }
        Some(gp)
    }

    /// Reads the model `pod` declares by reference (`tandem.dev/model: configmap:NAME/KEY`)
    /// from its ConfigMap, unless it was read lately; the answer is kept for
    /// [`App::gpu_pod`]. Returns whether it read anything.
    pub async fn read_model(&self, pod: &Pod) -> bool {
        let Ok(declaration) = crate::cluster::declared(pod) else {
            return false;
        };
        let Some(reference) = declaration.reference() else {
            return false;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let key = (namespace.clone(), reference.clone());
        let fresh = self.models.lock().get(&key).is_some_and(|(at, read)| {
            at.elapsed()
                < if read.is_ok() {
                    MODEL_FRESH_FOR
                } else {
                    MODEL_MISSING_FOR
                }
        });
        if fresh {
            return false;
        }
        let read = match (&reference.source, self.client()) {
            (ModelSource::ConfigMap { name, key }, Some(client)) => {
                let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
                match maps.get_opt(name).await {
                    Ok(Some(map)) => {
                        let text = map.data.as_ref().and_then(|d| d.get(key));
                        let binary = map.binary_data.as_ref().and_then(|d| d.get(key));
                        match (text, binary) {
                            (Some(text), _) => reference.summarize(text.as_bytes()),
                            (None, Some(bytes)) => reference.summarize(&bytes.0),
                            (None, None) => Err(format!(
                                "ConfigMap {name} in the pod's namespace has no key {key}"
                            )),
                        }
                    }
                    Ok(None) => Err(format!("no ConfigMap {name} in the pod's namespace")),
                    Err(error) => Err(format!("cannot read ConfigMap {name}: {error}")),
                }
            }
            (ModelSource::ConfigMap { .. }, None) => {
                Err("this adapter serves a fixed cluster and reads no ConfigMap".to_owned())
            }
            (ModelSource::File(_), _) => Err("a file is read by the Slurm service only".to_owned()),
        };
        if let Err(why) = &read {
            tracing::debug!(why, "a declared model could not be read");
        }
        self.models.lock().insert(key, (Instant::now(), read));
        // Residents of the view carry the model: build it again.
        self.touch();
        true
    }

    /// Notes what a GPU pod seen by the watcher declared: its model is read if referenced,
    /// and remembered by the core, so the peak a profiler measures for it teaches the memory
    /// model.
    pub async fn note_declared(&self, pod: &Pod) {
        if pod
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(Field::Model.annotation()))
        {
            return;
        }
        self.read_model(pod).await;
        if let Some(gp) = self.gpu_pod(pod)
            && let Some(model) = gp.summary()
        {
            self.core.remember_declared(&gp.job, model);
        }
    }

    /// The current cluster view and its epoch, rebuilt first if a watcher saw a change.
    pub fn view(&self) -> (Arc<ClusterView>, u64) {
        if self.dirty.swap(false, Ordering::AcqRel) {
            self.residents_moved.store(false, Ordering::Release);
            let fresh = Arc::new(self.build_view());
            let mut slot = self.view.write();
            *slot = Arc::clone(&fresh);
            let epoch = self.view_epoch.fetch_add(1, Ordering::AcqRel) + 1;
            return (fresh, epoch);
        }
        let view = Arc::clone(&self.view.read());
        (view, self.view_epoch.load(Ordering::Acquire))
    }

    /// [`App::view`] to decide for `pod`: rebuilt first for a pod of several GPUs if
    /// placements were made or undone since (it reads which GPUs are idle from the view).
    pub fn view_for(&self, pod: &GpuPod) -> (Arc<ClusterView>, u64) {
        if pod.gpus > 1 && self.residents_moved.load(Ordering::Acquire) {
            self.touch();
        }
        self.view()
    }

    fn build_view(&self) -> ClusterView {
        match &self.source {
            Source::Fixed(file) => ClusterView::build(
                &file.nodes,
                file.pods.iter().filter_map(|p| self.gpu_pod(p)),
                &self.resource,
            )
            .with_costs(&self.costs),
            Source::Kubernetes { nodes, pods, .. } => {
                let nodes = nodes.state();
                let pods = pods.state();
                let (list, through) =
                    self.with_assumed(pods.iter().filter_map(|p| self.gpu_pod(p)));
                ClusterView::build(nodes.iter().map(AsRef::as_ref), list, &self.resource)
                    .with_costs(&self.costs)
                    .counting_assumptions(through)
            }
            Source::Pushed(pushed) => pushed.with_cluster(|nodes, pods| {
                let (list, through) = self.with_assumed(pods.values().cloned());
                ClusterView::build(nodes.values(), list, &self.resource)
                    .with_costs(&self.costs)
                    .counting_assumptions(through)
            }),
        }
    }

    /// `pods` with the placements assumed of them laid over, and the pods placed before their
    /// events showed them at all; with the number of the last assumption counted. An
    /// assumption the pod now shows is dropped.
    fn with_assumed(&self, pods: impl Iterator<Item = GpuPod>) -> (Vec<GpuPod>, u64) {
        self.assumed.with_live(|assumed, through| {
            let mut list = Vec::new();
            let mut shown = HashSet::new();
            for mut gp in pods {
                if let Some(a) = assumed.get(&gp.uid) {
                    shown.insert(gp.uid.clone());
                    if gp.assigned.is_empty() {
                        gp.node = a.pod.node.clone();
                        gp.assigned = a.pod.assigned.clone();
                    } else {
                        assumed.remove(&gp.uid);
                    }
                }
                list.push(gp);
            }
            // A pod placed before the watcher saw it at all still holds its GPUs.
            list.extend(
                assumed
                    .iter()
                    .filter(|(uid, _)| !shown.contains(*uid))
                    .map(|(_, a)| a.pod.clone()),
            );
            (list, through)
        })
    }

    /// Runs `work` on the engine thread against a view at least as new as `view` (epoch
    /// `epoch`): the engine is told what changed first, if the view was rebuilt since.
    pub async fn decide<T: Send + 'static>(
        &self,
        call: &'static str,
        (view, epoch): (Arc<ClusterView>, u64),
        work: impl FnOnce(&mut EngineState, &ClusterView) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, EngineError> {
        self.core
            .decide(call, self.synced_first(view, epoch, work))
            .await
    }

    /// `work`, run on the engine after telling it `view` (epoch `epoch`) if it was not told
    /// a view that new yet: what [`App::decide`] runs, and what a caller off the tokio workers
    /// hands [`Core::decide_blocking`] (the framework plugin, in kube-scheduler's cycle).
    pub fn synced_first<T>(
        &self,
        view: Arc<ClusterView>,
        epoch: u64,
        work: impl FnOnce(&mut EngineState, &ClusterView) -> Result<T, EngineFailure> + Send + 'static,
    ) -> impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static {
        let synced = Arc::clone(&self.synced);
        let metrics = Arc::clone(&self.core.metrics);
        let assumed = Arc::clone(&self.assumed);
        move |state| {
            if epoch > synced.load(Ordering::Acquire) {
                // What was placed since the view was built, the view cannot show.
                let newer = assumed.newer_than(view.assumed_through());
                let summary = state.sync(view.gpus_with(&newer))?;
                metrics.observe_view(&summary);
                synced.store(epoch, Ordering::Release);
            }
            work(state, &view)
        }
    }

    /// The placements made before the watchers show them. A placement is recorded there in
    /// the engine-thread step that makes it, so no view synced after it can leave it out.
    pub fn assumptions(&self) -> &Arc<Assumptions> {
        &self.assumed
    }

    /// Records a placement the engine just made ([`Assumptions::record`]), and that the
    /// watcher's echo of it will not make the view stale ([`App::expect_bound`]).
    pub fn assume(&self, pod: &GpuPod, node: &str, gpus: &[String]) {
        self.expect_bound(&pod.uid, node, gpus);
        self.assumed.record(pod, node, gpus);
    }

    /// Notes that the pod `uid` is being bound to `gpus` of `node`, which the engine already
    /// counts: the watcher's echo of the bind leaves the view as it is.
    pub fn expect_bound(&self, uid: &str, node: &str, gpus: &[String]) {
        self.residency
            .lock()
            .insert(uid.to_owned(), (node.to_owned(), gpus.to_vec()));
        self.residents_moved.store(true, Ordering::Release);
    }

    /// Forgets a placement (its bind failed, its allocation was undone).
    pub fn forget(&self, uid: &str) {
        self.residency.lock().remove(uid);
        self.assumed.remove(uid);
        self.residents_moved.store(true, Ordering::Release);
    }

    /// Counts, once per pod, a pod that requests managed GPUs and was bound without Tandem's
    /// record of its GPU: the scheduler's fallback placed it (Tandem failed open, or was too
    /// slow), or another scheduler did.
    pub fn check_recorded(&self, pod: &Pod) {
        let Some(gp) = self.gpu_pod(pod) else {
            return;
        };
        if !gp.active || gp.node.is_none() || !gp.assigned.is_empty() {
            return;
        }
        let first = self.unrecorded.lock().insert(gp.uid.clone());
        let assumed = self.assumed.contains(&gp.uid);
        if first && !assumed {
            self.core.metrics.binds_without_tandem.inc();
            match &gp.untrusted {
                // A placement Tandem did not sign: written by the pod's owner, or changed since.
                Some(why) => tracing::warn!(
                    why,
                    "a GPU pod carries a placement Tandem does not vouch for; counted as bound \
                     without Tandem's GPU record"
                ),
                None => tracing::warn!(
                    "a GPU pod was bound without Tandem's GPU record (fail-open or another \
                     scheduler)"
                ),
            }
        }
    }

    /// Learns from a pod that finished (leader only): see [`Core::run_finished`]. A pushed
    /// cluster learns from the runs it holds instead ([`App::pod_ran`]).
    pub async fn pod_finished(&self, pod: &Pod) {
        let Source::Kubernetes { pods, .. } = &self.source else {
            return;
        };
        if !self.core.leadership.is_leader() {
            return;
        }
        let Some(finished) = self.gpu_pod(pod) else {
            return;
        };
        let [gpu] = finished.assigned.as_slice() else {
            return;
        };
        let (view, _) = self.view();
        let Some(model) = model_of(&view, &finished, gpu) else {
            return;
        };
        let Some(run) = run_of(pod, &finished, &model, &self.core.keys) else {
            self.core.skipped(Skip::NoRunTime);
            return;
        };
        let others: Vec<Run> = pods
            .state()
            .iter()
            .filter_map(|other| {
                let gp = self.gpu_pod(other)?;
                (gp.uid != finished.uid && gp.assigned.as_slice() == [gpu.clone()])
                    .then(|| run_of(other, &gp, &model, &self.core.keys))
                    .flatten()
            })
            .collect();
        self.core.run_finished(run, others, now_seconds()).await;
    }

    /// Asks for a [`App::catch_up`] at the next chance (this replica just became leader, or its
    /// view was just synced).
    pub fn catch_up_soon(&self) {
        self.catch_up_due.store(true, Ordering::Release);
    }

    /// Learns from every finished pod the watcher holds that the ledger has not counted yet,
    /// as one batch (one write at most): what finished while no replica led, while this one
    /// followed, or before it started. Leader only; returns how many runs taught something.
    pub async fn catch_up(&self) -> usize {
        if !self.core.leadership.is_leader() || !self.is_ready() {
            return 0;
        }
        let pods = match &self.source {
            Source::Kubernetes { pods, .. } => pods,
            Source::Pushed(pushed) => {
                let batch = pushed.finished_runs();
                let runs = batch.len();
                let taught = self.core.runs_finished(batch, now_seconds()).await;
                if taught > 0 {
                    tracing::info!(finished = runs, taught, "caught up with finished pods");
                }
                return taught;
            }
            Source::Fixed(_) => return 0,
        };
        let (view, _) = self.view();
        let keys = &self.core.keys;
        // Every pod's run, with the one GPU it held, computed once.
        let pods = pods.state();
        let mut runs = Vec::new();
        for pod in &pods {
            let Some(gp) = self.gpu_pod(pod) else {
                continue;
            };
            let [gpu] = gp.assigned.as_slice() else {
                continue;
            };
            let Some(model) = model_of(&view, &gp, gpu) else {
                continue;
            };
            if let Some(run) = run_of(pod, &gp, &model, keys) {
                runs.push((gpu.clone(), run, is_finished(pod)));
            }
        }
        let batch = finished_batch(runs);
        let runs = batch.len();
        let taught = self.core.runs_finished(batch, now_seconds()).await;
        tracing::info!(finished = runs, taught, "caught up with finished pods");
        taught
    }
}

/// What a scheduler pushes. With another source these do nothing: its watchers (or its file)
/// say what the cluster holds.
impl App {
    fn pushed(&self) -> Option<&Pushed> {
        match &self.source {
            Source::Pushed(pushed) => Some(pushed),
            Source::Kubernetes { .. } | Source::Fixed(_) => None,
        }
    }

    /// A node was added or changed. Only what the view reads of a node matters: a status
    /// update (a heartbeat) changes nothing. Returns whether the node is new.
    pub fn push_node(&self, node: Node) -> bool {
        let Some(pushed) = self.pushed() else {
            return false;
        };
        let keys = &self.core.keys;
        let Some((new, learned)) =
            pushed.push_node(node, &self.resource, keys, |pod| self.gpu_pod(pod))
        else {
            return false;
        };
        self.touch();
        for finished in learned {
            self.teach(pushed, finished);
        }
        new
    }

    /// Node `name` is gone. Returns whether it was known.
    pub fn drop_node(&self, name: &str) -> bool {
        let known = self.pushed().is_some_and(|pushed| pushed.drop_node(name));
        if known {
            self.touch();
        }
        known
    }

    /// The names of the nodes pushed, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.pushed().map(Pushed::node_names).unwrap_or_default()
    }

    /// A pod was added or changed. The view is stale only when the pod started or stopped
    /// holding GPUs, or moved: the echo of Tandem's own placement changes nothing. A pod that
    /// declared a model is remembered, so that the peak a profiler reports for it teaches the
    /// memory model. Runs come from [`App::pod_ran`] instead.
    pub fn push_pod(&self, pod: &Pod) {
        let Some(pushed) = self.pushed() else {
            return;
        };
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let gp = self.gpu_pod(pod);
        if let Some(gp) = &gp
            && let Some(model) = gp.summary()
        {
            self.core.remember_declared(&gp.job, model);
        }
        pushed.push_pod(uid, pod.metadata.resource_version.as_deref(), gp.as_ref());
        self.resides(uid, gp.as_ref());
    }

    /// The pod with UID `uid` is gone.
    pub fn drop_pod(&self, uid: &str) {
        if let Some(pushed) = self.pushed() {
            pushed.drop_pod(uid);
        }
        self.pod_gone(uid);
    }

    /// The pod with UID `uid` as pushed at `resource_version`: `None` when that version was not
    /// pushed (its event is still on the way); `Some(None)` for a pod that requests no managed
    /// GPU.
    pub fn pushed_pod(&self, uid: &str, resource_version: &str) -> Option<Option<GpuPod>> {
        self.pushed()?.pod(uid, resource_version)
    }

    /// A pod that started or finished, from one ordered stream of every run (the plugin's own
    /// watch on pods past `Pending`): its run is kept for its partners', and teaches once it
    /// finished (on the leader). Not from the pods pushed: kube-scheduler's informer drops
    /// pods once they finish, and two streams keep no order between them, so a run finishing
    /// in one could miss the partner that started before it in the other.
    pub fn pod_ran(&self, pod: &Pod) {
        let Some(pushed) = self.pushed() else {
            return;
        };
        let Some(gp) = self.gpu_pod(pod) else {
            return;
        };
        if let Some(finished) = pushed.ran(pod, &gp, &self.core.keys) {
            self.teach(pushed, finished);
        }
    }

    /// A pod that ran is gone: its run is no one's partner any more.
    pub fn forget_run(&self, uid: &str) {
        if let Some(pushed) = self.pushed() {
            pushed.forget_run(uid);
        }
    }

    /// On the leader, learns from a run that just finished, with the runs beside it on its
    /// GPU (by the learning task, in the order they come).
    fn teach(&self, pushed: &Pushed, finished: (Run, Vec<Run>)) {
        if self.core.leadership.is_leader() {
            pushed.learn(finished);
        }
    }
}

/// An extender's writer learns from the finished pods its pod watcher holds.
impl CatchUp for App {
    fn ask(&self) {
        self.catch_up_soon();
    }

    fn due(&self, overdue: bool) -> bool {
        self.is_ready() && (self.catch_up_due.swap(false, Ordering::AcqRel) || overdue)
    }

    async fn run(&self) -> ControlFlow<()> {
        self.catch_up().await;
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tandem_adapter_core::startup::resume_or_bootstrap;
    use tandem_adapter_core::{CoreConfig, EMBEDDED_ENGINE};
    use tandem_api::Policy;
    use tandem_host::{HostConfig, Runtime};

    use super::*;
    use crate::cluster::testing::{keys, node, pod};

    /// A front-end over a pushed cluster with one node of two V100s.
    async fn app() -> App {
        let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default()).unwrap();
        let (engine, stored) = resume_or_bootstrap(runtime, None, &Policy::default())
            .await
            .unwrap();
        let core = CoreConfig::new(engine, keys())
            .resumed(stored)
            .queue(16)
            .start()
            .unwrap();
        let core = Arc::new(core);
        let source = Source::Pushed(Pushed::new(
            Arc::clone(&core),
            &tokio::runtime::Handle::current(),
        ));
        let app = App::new(core, "nvidia.com/gpu".into(), Duration::ZERO, source);
        let v100 = || node("n1", 2, "Tesla-V100-SXM2-16GB", Some(16_384));
        assert!(app.push_node(v100()), "a node pushed first is new");
        assert!(!app.push_node(v100()), "a heartbeat is no change");
        app
    }

    /// The residents of each GPU of node `n1` in `view`, by pod count.
    fn residents(view: &ClusterView) -> Vec<usize> {
        let Some(Ok(gpus)) = view.node("n1") else {
            panic!("n1 is in the view");
        };
        gpus.iter().map(|g| g.residents.len()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_placement_holds_its_gpu_until_undone_and_its_echo_leaves_the_view() {
        let app = app().await;
        let pending = pod("a", 1, None, None);
        app.push_pod(&pending);
        let (_, before) = app.view();
        let a = app.gpu_pod(&pending).unwrap();
        app.assumptions().record(&a, "n1", &["n1/0".into()]);
        app.expect_bound(&a.uid, "n1", &["n1/0".into()]);
        assert_eq!(
            app.view_for(&a).1,
            before,
            "a one-GPU pod decides on the view as it is: the engine holds the placement"
        );
        app.push_pod(&pod("a", 1, Some("n1"), Some("n1/0")));
        assert_eq!(
            app.view().1,
            before,
            "the echo of a placement changes nothing"
        );

        // A pod of two GPUs reads which are idle from the view: rebuilt for it.
        let big = app.gpu_pod(&pod("big", 2, None, None)).unwrap();
        app.forget(&a.uid);
        app.assumptions().record(&a, "n1", &["n1/1".into()]);
        app.expect_bound(&a.uid, "n1", &["n1/1".into()]);
        let (view, after) = app.view_for(&big);
        assert!(after > before);
        assert_eq!(
            residents(&view),
            [1, 0],
            "the pod's own annotation holds n1/0"
        );

        // Deleted, the pod holds nothing.
        app.drop_pod(&a.uid);
        assert_eq!(residents(&app.view().0), [0, 0]);
        assert_eq!(app.pushed_pod(&a.uid, ""), None, "a deleted pod is unseen");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_pod_is_known_at_the_version_pushed_and_a_placement_before_its_event_counts() {
        let app = app().await;
        let mut managed = pod("a", 1, None, None);
        managed.metadata.resource_version = Some("7".into());
        app.push_pod(&managed);
        assert_eq!(
            app.pushed_pod("uid-a", "6"),
            None,
            "another version is unseen"
        );
        let known = app.pushed_pod("uid-a", "7").unwrap().unwrap();
        assert_eq!(known.uid, "uid-a");
        let mut cpu = pod("cpu", 0, None, None);
        cpu.metadata.resource_version = Some("3".into());
        app.push_pod(&cpu);
        assert_eq!(
            app.pushed_pod("uid-cpu", "3"),
            Some(None),
            "known, and not managed"
        );

        // Placed before kube-scheduler's informer delivered it at all.
        let early = app.gpu_pod(&pod("early", 1, None, None)).unwrap();
        app.assumptions().record(&early, "n1", &["n1/1".into()]);
        app.touch();
        assert_eq!(residents(&app.view().0), [0, 1]);
        assert!(!app.runs_on(&known.job, "n1"), "a pending pod runs nowhere");
        assert_eq!(app.node_names(), ["n1"]);
        assert!(app.drop_node("n1") && !app.drop_node("n1"));
    }
}
