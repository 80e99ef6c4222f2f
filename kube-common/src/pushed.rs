//! A cluster pushed to the front-end by the scheduler it runs in: kube-scheduler's informers
//! deliver node and pod events to the framework plugin, which hands them on here. The
//! watchers' reflectors keep that state for the other front-ends; a pushed cluster keeps it
//! itself, with what the events cannot give again: each node's GPU model, read when it comes
//! (a finished pod's run names its model, and the view may not know the node yet), the version
//! of every pod (so the plugin's PreFilter judges a pod it saw without reading it again), and
//! the runs of pods that held one GPU, fed by the plugin's own watch on pods that ran
//! (`App::pod_ran` of [`crate::app`]).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tandem_adapter_core::outcomes::Run;
use tandem_adapter_core::{Core, JobKeys};

use crate::cluster::{GpuPod, node_gpus};
use crate::runs::{HeldRuns, NodeModel, now_seconds};

/// A run that just finished, with the runs beside it on its GPU: what is learned.
pub type Finished = (Run, Vec<Run>);

/// A pushed cluster (`Source::Pushed` of [`crate::app`]).
pub struct Pushed {
    cluster: Mutex<Cluster>,
    /// Finished runs with the runs beside them, learned in the order they finished by one task
    /// off the scheduler's thread (a pair's outcome needs its solo runs learned first).
    learn: tokio::sync::mpsc::UnboundedSender<(Run, Vec<Run>)>,
}

/// What was pushed.
#[derive(Debug, Default)]
struct Cluster {
    /// Nodes by name.
    nodes: HashMap<String, Node>,
    /// The GPU model of each node that has managed GPUs.
    gpu_models: HashMap<String, String>,
    /// Pods requesting managed GPUs, by UID.
    pods: HashMap<String, GpuPod>,
    /// The `resourceVersion` of every pod pushed (managed or not), by UID.
    versions: FxHashMap<String, String>,
    /// Runs of pods that held one GPU: a pod can come before its node, whose GPU model its
    /// run needs, and waits for it.
    runs: HeldRuns,
}

/// What is known of node `name`'s GPU model, for a run on it.
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

impl std::fmt::Debug for Pushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cluster = self.cluster.lock();
        f.debug_struct("Pushed")
            .field("nodes", &cluster.nodes.len())
            .field("pods", &cluster.pods.len())
            .finish_non_exhaustive()
    }
}

impl Pushed {
    /// An empty cluster whose finished runs teach `core`, on `tasks`.
    pub fn new(core: Arc<Core>, tasks: &tokio::runtime::Handle) -> Self {
        let (learn, mut finished) = tokio::sync::mpsc::unbounded_channel::<(Run, Vec<Run>)>();
        // Ends when the source, holding the sender, is dropped.
        tasks.spawn(async move {
            while let Some(first) = finished.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = finished.try_recv() {
                    batch.push(more);
                }
                core.runs_finished(batch, now_seconds()).await;
            }
        });
        Self {
            cluster: Mutex::default(),
            learn,
        }
    }

    /// Runs `build` over the nodes and the pods requesting managed GPUs.
    pub(crate) fn with_cluster<R>(
        &self,
        build: impl FnOnce(&HashMap<String, Node>, &HashMap<String, GpuPod>) -> R,
    ) -> R {
        let cluster = self.cluster.lock();
        build(&cluster.nodes, &cluster.pods)
    }

    /// Whether a pod of the job of keyed id `job` is bound to `node`: a pod pushed, or one
    /// whose run is held (a finished pod stays there until it is deleted).
    pub(crate) fn runs_on(&self, job: &str, node: &str) -> bool {
        let cluster = self.cluster.lock();
        cluster
            .pods
            .values()
            .any(|p| p.job == job && p.node.as_deref() == Some(node))
            || cluster.runs.runs_on(job, node)
    }

    /// Every finished run held with the runs beside it (the ledger skips those counted).
    pub(crate) fn finished_runs(&self) -> Vec<(Run, Vec<Run>)> {
        self.cluster.lock().runs.finished()
    }

    /// Node `node` was added or changed; `None` when nothing the view reads of it changed (a
    /// heartbeat). Else whether it is new, and the runs to learn from: pods that came before
    /// their node are held now (`gpu_pod` reads them), or never (a node without managed GPUs).
    pub(crate) fn push_node(
        &self,
        node: Node,
        resource: &str,
        keys: &JobKeys,
        gpu_pod: impl Fn(&Pod) -> Option<GpuPod>,
    ) -> Option<(bool, Vec<Finished>)> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut cluster = self.cluster.lock();
        let same = cluster.nodes.get(&name).is_some_and(|old| {
            old.metadata.labels == node.metadata.labels
                && old.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
                    == node.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
        });
        if same {
            return None;
        }
        match node_gpus(&node, resource) {
            Ok((_, spec)) => cluster.gpu_models.insert(name.clone(), spec.model),
            Err(_) => cluster.gpu_models.remove(&name),
        };
        let new = cluster.nodes.insert(name.clone(), node).is_none();
        let cluster = &mut *cluster;
        let model = match cluster.gpu_models.get(&name) {
            Some(model) => NodeModel::Known(model),
            None => NodeModel::Unmanaged,
        };
        let learned = cluster.runs.node_came(&name, model, keys, gpu_pod);
        Some((new, learned))
    }

    /// Node `name` is gone; whether it was known.
    pub(crate) fn drop_node(&self, name: &str) -> bool {
        let mut cluster = self.cluster.lock();
        cluster.gpu_models.remove(name);
        cluster.runs.node_gone(name);
        cluster.nodes.remove(name).is_some()
    }

    /// The names of the nodes, sorted.
    pub(crate) fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.cluster.lock().nodes.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// The pod `uid` at `version` is `pod` (`None`: it requests no managed GPU).
    pub(crate) fn push_pod(&self, uid: &str, version: Option<&str>, pod: Option<&GpuPod>) {
        let mut cluster = self.cluster.lock();
        match version {
            Some(version) => cluster.versions.insert(uid.to_owned(), version.to_owned()),
            None => cluster.versions.remove(uid),
        };
        match pod {
            Some(pod) => cluster.pods.insert(uid.to_owned(), pod.clone()),
            None => cluster.pods.remove(uid),
        };
    }

    /// The pod `uid` is gone.
    pub(crate) fn drop_pod(&self, uid: &str) {
        let mut cluster = self.cluster.lock();
        cluster.versions.remove(uid);
        cluster.pods.remove(uid);
    }

    /// The pod `uid` as pushed at `resource_version`, if that version was pushed.
    pub(crate) fn pod(&self, uid: &str, resource_version: &str) -> Option<Option<GpuPod>> {
        let cluster = self.cluster.lock();
        (cluster.versions.get(uid).map(String::as_str) == Some(resource_version))
            .then(|| cluster.pods.get(uid).cloned())
    }

    /// Holds the run of `pod` (its view `gp`); the run to learn from if it just finished.
    pub(crate) fn ran(&self, pod: &Pod, gp: &GpuPod, keys: &JobKeys) -> Option<(Run, Vec<Run>)> {
        let node = gp.node.as_deref().unwrap_or_default();
        let mut cluster = self.cluster.lock();
        let Cluster {
            nodes,
            gpu_models,
            runs,
            ..
        } = &mut *cluster;
        runs.hold(pod, gp, node_model(gpu_models, nodes, node), keys)
    }

    /// The run of pod `uid` is no one's partner any more.
    pub(crate) fn forget_run(&self, uid: &str) {
        self.cluster.lock().runs.forget(uid);
    }

    /// Queues `finished` for the learning task.
    pub(crate) fn learn(&self, finished: (Run, Vec<Run>)) {
        // Only a stopped runtime closes the queue: then nothing is learned anyway.
        let _ = self.learn.send(finished);
    }
}
