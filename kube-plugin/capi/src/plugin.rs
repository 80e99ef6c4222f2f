//! The framework plugin's state and decisions, in safe Rust: what the C functions of the crate
//! root call under their handle's lock.
//!
//! kube-scheduler runs one scheduling cycle at a time (PreFilter, Filter, Score, Reserve for
//! one pod), while its informers deliver node and pod events from other goroutines. The
//! plugin therefore keeps its own copy of what the extender's watchers keep — GPU nodes and
//! the pods holding their GPUs — and brings the engine's view up to date lazily, at the next
//! PreFilter after something that matters changed. Every decision is the extender's
//! ([`tandem_kube_common::decide`]): the same OOM guard, sharing cap, reasons and scores, on
//! the same core ([`Core`]): its engine thread, knowledge base, intake and metrics
//! ([`crate::served`]).
//!
//! What it does is counted in the adapters' metric families ([`Metrics`]), which the core
//! serves at `/metrics` on the intake's address: decisions and their latency per verb
//! ([`PREFILTER`], [`RESERVE`]), engine calls and their failures, refused declarations, the
//! view's size and rebuilds, and the knowledge base's size and writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use tandem_adapter_core::metrics::{Answered, Metrics, Verb};
use tandem_adapter_core::outcomes::Run;
use tandem_adapter_core::{Core, EngineFailure, EngineState, Placement};
use tandem_kube_common::cluster::{ClusterView, GpuPod, node_gpus};
use tandem_kube_common::decide;
use tandem_kube_common::lean::LeanPod;
use tandem_kube_common::placement::Placements;
use tandem_kube_common::runs::{HeldRuns, NodeModel, now_seconds};

use crate::Error;
use crate::config::Config;
use crate::prepared::{Prepared, Reservation, Reserved};

/// A GPU choice made in Reserve, until a pod event shows the pod bound there.
#[derive(Debug, Clone)]
struct Assumed {
    pod: GpuPod,
}

/// The nodes' names, sorted: the table PreFilter's verdicts follow, in order (the Go side keeps
/// it by its generation), rebuilt when a node comes or goes, not per pod.
#[derive(Debug)]
struct NodeTable {
    table: Arc<[String]>,
    /// Bumped whenever `table` changes; the first table is generation 1, so a caller holding
    /// none says 0.
    generation: u64,
    /// Whether `table` is behind the nodes.
    stale: bool,
}

impl Default for NodeTable {
    fn default() -> Self {
        Self {
            table: Arc::from(Vec::new()),
            generation: 0,
            stale: true,
        }
    }
}

/// The plugin's verb PreFilter, as its metrics name it.
pub const PREFILTER: &str = "prefilter";
/// The plugin's verb Reserve, as its metrics name it.
pub const RESERVE: &str = "reserve";

/// The plugin's state: what it knows of the cluster, over the core.
pub struct Plugin {
    core: Arc<Core>,
    /// Finished runs with the runs beside them, learned in the order they finished by one task
    /// off the scheduler's goroutine (a pair's outcome needs its solo runs learned first).
    learn: tokio::sync::mpsc::UnboundedSender<(Run, Vec<Run>)>,
    /// What the plugin did, in the adapters' metric families (the core's).
    metrics: Arc<Metrics>,
    config: Config,
    /// How Reserve signs placements, and which the view trusts.
    placements: Arc<Placements>,
    /// Nodes by name.
    nodes: HashMap<String, Node>,
    /// The GPU model of each node that has managed GPUs, read when the node comes or changes
    /// (a finished pod's run names its model; the view may not know the node yet).
    gpu_models: HashMap<String, String>,
    /// The table PreFilter's verdicts follow, which the Go side keeps by generation.
    names: NodeTable,
    /// Pods requesting managed GPUs, by UID.
    pods: HashMap<String, GpuPod>,
    /// The `resourceVersion` of every pod seen (managed or not), by UID: PreFilter judges a
    /// pod whose version it saw from what it kept, without reading the pod again.
    versions: FxHashMap<String, String>,
    /// Reserve's choices not yet confirmed by a pod event, by pod UID.
    assumed: HashMap<String, Assumed>,
    /// Runs of pods that held one GPU, from the plugin's own watch: its pods can come before
    /// kube-scheduler's informer delivers their node, whose GPU model a run needs; they wait
    /// for it ([`Plugin::set_node`]).
    runs: HeldRuns,
    /// The view the engine was last told, or is to be told when `untold`; rebuilt when
    /// `dirty`.
    view: Arc<ClusterView>,
    dirty: bool,
    /// Whether the engine has not been told `view` yet (the call that was to tell it failed).
    untold: bool,
    /// Whether Reserve or Unreserve changed residents since the view was built. The engine
    /// holds them already, and only multi-GPU pods read residents from the view (idle GPUs),
    /// so the view is rebuilt for those only: rebuilding it after every placement would cost
    /// every pod a pass over the whole cluster.
    residents_moved: bool,
    /// The pod of the running scheduling cycle, as PreFilter saw it.
    cycle: Option<GpuPod>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .finish_non_exhaustive()
    }
}

pub(crate) fn input<T: serde::de::DeserializeOwned>(
    what: &'static str,
    json: &[u8],
) -> Result<T, Error> {
    // The fast path first: tracking the path costs every object (pods are read twice a
    // cycle), and is only needed to name the field of an object that does not parse.
    serde_json::from_slice(json).or_else(|_| {
        let mut de = serde_json::Deserializer::from_slice(json);
        serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Input {
            what,
            why: e.to_string(),
        })
    })
}

/// The result label of a call that failed with `error`: `rejected` for what the scheduler
/// sent or asked, `error` for the engine.
fn failure_result(error: &Error) -> Answered {
    match error {
        Error::Input { .. } | Error::NotPrepared(_) => Answered::Rejected,
        _ => Answered::Error,
    }
}

impl Plugin {
    /// The plugin over `core`, configured by `config`; learning from finished pods runs on
    /// `tasks`.
    pub fn new(config: Config, core: Arc<Core>, tasks: tokio::runtime::Handle) -> Self {
        let metrics = Arc::clone(&core.metrics);
        let (learn, mut finished) = tokio::sync::mpsc::unbounded_channel::<(Run, Vec<Run>)>();
        let learner = Arc::clone(&core);
        // Ends when the plugin, holding the sender, is dropped.
        tasks.spawn(async move {
            while let Some(first) = finished.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = finished.try_recv() {
                    batch.push(more);
                }
                learner.runs_finished(batch, now_seconds()).await;
            }
        });
        // The plugin never lets a pod through without Tandem (an engine failure is an error
        // status, and the scheduler tries the pod again): its fail-opens stay at zero, and are
        // exported so that a dashboard over every adapter finds them.
        for verb in [PREFILTER, RESERVE] {
            metrics
                .fail_opens
                .get_or_create(&Verb {
                    verb: verb.to_owned(),
                })
                .inc_by(0);
        }
        Self {
            core,
            learn,
            metrics,
            config,
            placements: Arc::default(),
            nodes: HashMap::new(),
            gpu_models: HashMap::new(),
            names: NodeTable::default(),
            pods: HashMap::new(),
            versions: FxHashMap::default(),
            assumed: HashMap::new(),
            runs: HeldRuns::default(),
            view: Arc::new(ClusterView::default()),
            dirty: true,
            untold: false,
            residents_moved: false,
            cycle: None,
        }
    }

    /// The plugin signing its placements as `placements` says and trusting only those it
    /// vouches for (without it, placements are unsigned and all trusted).
    pub fn with_placements(mut self, placements: Arc<Placements>) -> Self {
        self.placements = placements;
        self
    }

    /// The pod's view, if it requests managed GPUs, its placement read as the key vouches.
    fn gpu_pod(&self, pod: &Pod) -> Option<GpuPod> {
        tandem_kube_common::cluster::gpu_pod(
            pod,
            &self.core.keys,
            &self.config.resource,
            &self.placements,
        )
    }

    /// The plugin's metrics, shared: a scrape reads them without waiting for the plugin.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The core the plugin decides on.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Runs `work`, the engine's part of `call`, on the engine thread (where the intake's
    /// observations run too), timing it and counting its failure.
    fn on_engine<T: Send + 'static>(
        &self,
        call: &'static str,
        work: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let result = match self.core.engine.call_blocking(work) {
            Ok(answer) => answer.map_err(Error::Engine),
            Err(error) => Err(Error::Call(error)),
        };
        self.metrics
            .observe_engine_call(call, started.elapsed().as_secs_f64());
        if result.is_err() {
            self.metrics.engine_errors.inc();
        }
        result
    }

    /// Counts an answer of `verb` begun at `started`: `ok`, or the failure's result label.
    fn decided<T>(&self, verb: &str, started: Instant, result: &Result<T, Error>) {
        let label = match result {
            Ok(_) => Answered::Ok,
            Err(error) => failure_result(error),
        };
        self.metrics
            .record(verb, label, started.elapsed().as_secs_f64());
    }

    /// A node was added or changed (the Node object as JSON).
    pub fn set_node(&mut self, json: &[u8]) -> Result<(), Error> {
        let node: Node = input("Node", json)?;
        let name = node.metadata.name.clone().unwrap_or_default();
        // Only what the view reads of a node matters: status updates (heartbeats) do not.
        let same = self.nodes.get(&name).is_some_and(|old| {
            old.metadata.labels == node.metadata.labels
                && old.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
                    == node.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
        });
        if !same {
            match node_gpus(&node, &self.config.resource) {
                Ok((_, spec)) => self.gpu_models.insert(name.clone(), spec.model),
                Err(_) => self.gpu_models.remove(&name),
            };
            if self.nodes.insert(name.clone(), node).is_none() {
                self.names.stale = true;
            }
            self.dirty = true;
            // Pods that came before their node: held now, or never (a node without managed
            // GPUs).
            let model = node_model(&self.gpu_models, &self.nodes, &name);
            let (keys, resource, placements) =
                (&self.core.keys, &self.config.resource, &self.placements);
            let learned = self.runs.node_came(&name, model, keys, |pod| {
                tandem_kube_common::cluster::gpu_pod(pod, keys, resource, placements)
            });
            for finished in learned {
                self.teach(finished);
            }
        }
        Ok(())
    }

    /// Node `name` is gone.
    pub fn delete_node(&mut self, name: &str) {
        self.gpu_models.remove(name);
        self.runs.node_gone(name);
        if self.nodes.remove(name).is_some() {
            self.names.stale = true;
            self.dirty = true;
        }
    }

    /// A pod was added or changed (the Pod object as JSON). The view is stale only when the
    /// pod started or stopped holding GPUs, or moved; the echo of Tandem's own choice (the
    /// pod bound where Reserve put it) changes nothing. A pod that declared a model is
    /// remembered, so that the peak a profiler reports for it teaches the memory model. Runs
    /// come from the plugin's own watch instead ([`Plugin::pod_ran`]).
    pub fn set_pod(&mut self, json: &[u8]) -> Result<(), Error> {
        let pod = input::<LeanPod>("Pod", json)?.0;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let Some(now) = self.gpu_pod(&pod) else {
            self.delete_pod(&uid);
            self.saw(uid, &pod);
            return Ok(());
        };
        self.saw(uid.clone(), &pod);
        if let Some(model) = now.summary() {
            self.core.remember_declared(&now.job, model);
        }
        let holds = |p: &GpuPod| p.active && p.node.is_some();
        let place = |p: &GpuPod| (p.node.clone(), p.assigned.clone());
        if holds(&now) {
            if let Some(assumed) = self.assumed.remove(&uid) {
                if place(&assumed.pod) != place(&now) {
                    self.dirty = true;
                }
            } else if self
                .pods
                .get(&uid)
                .is_none_or(|old| !holds(old) || place(old) != place(&now))
            {
                self.dirty = true;
            }
        } else if self.pods.get(&uid).is_some_and(holds) || self.assumed.remove(&uid).is_some() {
            self.dirty = true;
        }
        self.pods.insert(uid, now);
        Ok(())
    }

    /// A pod that started or finished (the Pod object, from the plugin's own watch on pods
    /// past `Pending`, see [`crate::served`]). Its run is kept for its partners', and teaches
    /// once it finished (on the leader). Runs come from that one watch, not from
    /// kube-scheduler's informer ([`Plugin::set_pod`]): it drops pods once they finish, and
    /// two streams keep no order between them, so a run finishing in one could miss the
    /// partner that started before it in the other.
    pub fn pod_ran(&mut self, pod: &Pod) {
        if let Some(gp) = self.gpu_pod(pod) {
            self.hold(pod, &gp);
        }
    }

    /// Whether a pod of the job of keyed id `job` that requests managed GPUs is bound to
    /// `node`: one the scheduler's informer holds, or one whose run is held (a finished pod
    /// stays there until it is deleted), so a node's profiler may post its profile.
    pub fn runs_on(&self, job: &str, node: &str) -> bool {
        self.pods
            .values()
            .any(|p| p.job == job && p.node.as_deref() == Some(node))
            || self.runs.runs_on(job, node)
    }

    /// A pod that ran is gone: its run is no one's partner any more.
    pub fn forget_run(&mut self, uid: &str) {
        self.runs.forget(uid);
    }

    /// Keeps the run of `pod` if it holds one GPU, and learns from it when it just finished.
    fn hold(&mut self, pod: &Pod, gp: &GpuPod) {
        let node = gp.node.as_deref().unwrap_or_default();
        let model = node_model(&self.gpu_models, &self.nodes, node);
        if let Some(finished) = self.runs.hold(pod, gp, model, &self.core.keys) {
            self.teach(finished);
        }
    }

    /// On the leader, learns from a run that just finished, with the runs beside it on its
    /// GPU (by the task off the scheduler's goroutine, in the order they come).
    fn teach(&self, finished: (Run, Vec<Run>)) {
        if self.core.leadership.is_leader() {
            // Only a stopped runtime closes the queue: then nothing is learned anyway.
            let _ = self.learn.send(finished);
        }
    }

    /// Every finished run the plugin holds with the runs beside it, for the leader to catch up
    /// with what finished while it did not lead (the ledger skips those already counted).
    pub fn finished_runs(&self) -> Vec<(Run, Vec<Run>)> {
        self.runs.finished()
    }

    /// Remembers which version of pod `uid` the plugin holds.
    fn saw(&mut self, uid: String, pod: &Pod) {
        match &pod.metadata.resource_version {
            Some(version) => {
                self.versions.insert(uid, version.clone());
            }
            None => {
                self.versions.remove(&uid);
            }
        }
    }

    /// The pod with UID `uid` is gone.
    pub fn delete_pod(&mut self, uid: &str) {
        self.versions.remove(uid);
        let held = self
            .pods
            .remove(uid)
            .is_some_and(|p| p.active && p.node.is_some());
        if held || self.assumed.remove(uid).is_some() {
            self.dirty = true;
        }
    }

    /// Rebuilds the view if something changed; the view the engine is still to be told, if
    /// any (the next engine call tells it, see [`Plugin::told`]).
    fn refresh(&mut self) -> Option<Arc<ClusterView>> {
        if self.dirty {
            let pods = self
                .pods
                .values()
                .filter(|p| !self.assumed.contains_key(&p.uid))
                .chain(self.assumed.values().map(|a| &a.pod))
                .cloned();
            let view = ClusterView::build(self.nodes.values(), pods, &self.config.resource)
                .with_costs(&self.config.costs());
            self.view = Arc::new(view);
            self.dirty = false;
            self.residents_moved = false;
            self.untold = true;
        }
        self.untold.then(|| Arc::clone(&self.view))
    }

    /// Records that the engine call given `told` (from [`Plugin::refresh`]) succeeded.
    fn told(&mut self, told: Option<Arc<ClusterView>>) {
        if told.is_some() {
            self.untold = false;
        }
    }

    /// The node table PreFilter's verdicts follow, brought up to date.
    fn names(&mut self) -> Arc<[String]> {
        if self.names.stale {
            let mut names: Vec<String> = self.nodes.keys().cloned().collect();
            names.sort_unstable();
            self.names.table = Arc::from(names);
            self.names.generation += 1;
            self.names.stale = false;
        }
        Arc::clone(&self.names.table)
    }

    /// PreFilter: judges the pod (JSON) on every node Tandem knows, with one engine call for
    /// the scores (and one more for the reasons when no node fits).
    pub fn prefilter(&mut self, json: &[u8]) -> Result<Prepared, Error> {
        let started = Instant::now();
        let pod = match input::<LeanPod>("Pod", json) {
            Ok(pod) => pod.0,
            Err(error) => {
                let failed = Err(error);
                self.decided(PREFILTER, started, &failed);
                return failed;
            }
        };
        let pod = self.gpu_pod(&pod);
        self.judge(pod, started)
    }

    /// PreFilter for the pod with UID `uid` at `resource_version`, from what its events told
    /// (the scheduler's pods come from the same informer): `None` when the plugin has not
    /// seen that version (its event is still on the way), and [`Plugin::prefilter`] must be
    /// given the pod.
    pub fn prefilter_known(
        &mut self,
        uid: &str,
        resource_version: &str,
    ) -> Result<Option<Prepared>, Error> {
        if self.versions.get(uid).map(String::as_str) != Some(resource_version) {
            // Not an answer: the call with the pod that follows is the one counted.
            return Ok(None);
        }
        let started = Instant::now();
        let pod = self.pods.get(uid).cloned();
        self.judge(pod, started).map(Some)
    }

    /// PreFilter's verdicts for `pod` (`None`: a pod Tandem does not manage, which is no
    /// decision of Tandem's and is not counted), asked at `started`.
    fn judge(&mut self, pod: Option<GpuPod>, started: Instant) -> Result<Prepared, Error> {
        self.cycle = None;
        let Some(pod) = pod else {
            return Ok(Prepared::unmanaged());
        };
        if pod.gpus > 1 && self.residents_moved {
            self.dirty = true;
        }
        let told = self.refresh();
        let names = self.names();
        let (view, tell, judged, metrics) = (
            Arc::clone(&self.view),
            told.clone(),
            pod.clone(),
            Arc::clone(&self.metrics),
        );
        let table = Arc::clone(&names);
        let answer = self.on_engine(PREFILTER, move |state| {
            if let Some(view) = tell {
                metrics.observe_view(&state.sync(view.gpus().cloned())?);
            }
            let scores = if judged.gpus == 1 {
                decide::candidate_scores(state, &judged, &table)?
            } else {
                Vec::new()
            };
            let verdicts = decide::judge(state, &view, &judged, &table, &scores)?;
            Ok((verdicts, decide::refusal(state, &judged)))
        });
        if answer.is_ok() {
            self.told(told);
        }
        let prepared = answer.map(|(verdicts, refusal)| {
            // Counted once per scheduling attempt, as the extender counts once per filter.
            if let Some(refusal) = refusal {
                self.metrics.refused(&refusal);
            }
            Prepared {
                managed: true,
                generation: self.names.generation,
                names,
                verdicts,
            }
        });
        self.decided(PREFILTER, started, &prepared);
        if prepared.is_ok() {
            self.cycle = Some(pod);
        }
        prepared
    }

    /// Reserve: chooses the pod's GPUs on `node` and records them in the engine at once, so
    /// the next pod's decision sees them, or rejects the node.
    pub fn reserve(&mut self, uid: &str, node: &str) -> Result<Reservation, Error> {
        let started = Instant::now();
        let reserved = self.choose(uid, node);
        let label = match &reserved {
            Ok(Reservation::Reserved(_)) => Answered::Ok,
            Ok(Reservation::Rejected(_)) => Answered::Rejected,
            Err(error) => failure_result(error),
        };
        self.metrics
            .record(RESERVE, label, started.elapsed().as_secs_f64());
        reserved
    }

    /// Reserve's choice, uncounted.
    fn choose(&mut self, uid: &str, node: &str) -> Result<Reservation, Error> {
        let pod = match self.cycle.take() {
            Some(pod) if pod.uid == uid => pod,
            _ => return Err(Error::NotPrepared(uid.to_owned())),
        };
        let job = decide::job_of(&pod);
        let told = self.refresh();
        let (tell, metrics, on, gpus) = (
            told.clone(),
            Arc::clone(&self.metrics),
            node.to_owned(),
            pod.gpus,
        );
        let chosen = self.on_engine(RESERVE, move |state| {
            if let Some(view) = tell {
                metrics.observe_view(&state.sync(view.gpus().cloned())?);
            }
            state.place(&job, &on, gpus)
        })?;
        self.told(told);
        match chosen {
            Placement::Refused(reason) => Ok(Reservation::Rejected(format!("Tandem: {reason}"))),
            Placement::Placed { gpus, reserved_mib } => {
                // Signed over the pod's UID; Bind writes them on the Binding, whose UID
                // precondition pins the pod.
                let annotations = match self.placements.annotations(uid, &gpus, reserved_mib) {
                    Ok(annotations) => annotations,
                    Err(error) => {
                        let (job, undo) = (pod.job.clone(), gpus);
                        self.on_engine("unreserve", move |state| state.unplace(&job, &undo))?;
                        return Ok(Reservation::Rejected(format!(
                            "Tandem: the engine's GPUs are no placement: {error}"
                        )));
                    }
                };
                let assumed = GpuPod {
                    node: Some(node.to_owned()),
                    assigned: gpus,
                    active: true,
                    ..pod
                };
                self.assumed
                    .insert(uid.to_owned(), Assumed { pod: assumed });
                // The engine holds the choice already; the view catches up when a multi-GPU
                // pod needs it.
                self.residents_moved = true;
                Ok(Reservation::Reserved(Reserved { annotations }))
            }
        }
    }

    /// Unreserve: undoes Reserve's choice for the pod (binding failed or was abandoned).
    pub fn unreserve(&mut self, uid: &str) -> Result<(), Error> {
        if let Some(assumed) = self.assumed.remove(uid) {
            let (job, gpus) = (assumed.pod.job, assumed.pod.assigned);
            self.on_engine("unreserve", move |state| state.unplace(&job, &gpus))?;
            self.residents_moved = true;
        }
        Ok(())
    }
}

/// What the plugin knows of node `name`'s GPU model, for a run on it.
fn node_model<'a>(
    gpu_models: &'a HashMap<String, String>,
    nodes: &HashMap<String, Node>,
    name: &str,
) -> NodeModel<'a> {
    match gpu_models.get(name) {
        Some(model) => NodeModel::Known(model),
        None if nodes.contains_key(name) => NodeModel::Unmanaged,
        None => NodeModel::NotSeen,
    }
}
