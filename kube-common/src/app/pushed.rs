//! A cluster pushed to the front-end by the scheduler it runs in: kube-scheduler's informers
//! deliver node and pod events to the framework plugin, which hands them on here. The
//! watchers' reflectors keep that state for the other front-ends; a pushed cluster keeps it
//! itself, with what the events cannot give again: each node's GPU model, read when it comes
//! (a finished pod's run names its model, and the view may not know the node yet), the version
//! of every pod (so the plugin's PreFilter judges a pod it saw without reading it again), and
//! the runs of pods that held one GPU, fed by the plugin's own watch on pods that ran
//! ([`App::pod_ran`]).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tandem_adapter_core::Core;
use tandem_adapter_core::outcomes::Run;

use super::{App, Source};
use crate::cluster::{GpuPod, node_gpus};
use crate::runs::{HeldRuns, NodeModel, now_seconds};

/// A pushed cluster ([`Source::Pushed`]).
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
    pub(super) fn with_cluster<R>(
        &self,
        build: impl FnOnce(&HashMap<String, Node>, &HashMap<String, GpuPod>) -> R,
    ) -> R {
        let cluster = self.cluster.lock();
        build(&cluster.nodes, &cluster.pods)
    }

    /// Whether a pod of the job of keyed id `job` is bound to `node`: a pod pushed, or one
    /// whose run is held (a finished pod stays there until it is deleted).
    pub(super) fn runs_on(&self, job: &str, node: &str) -> bool {
        let cluster = self.cluster.lock();
        cluster
            .pods
            .values()
            .any(|p| p.job == job && p.node.as_deref() == Some(node))
            || cluster.runs.runs_on(job, node)
    }

    /// Every finished run held with the runs beside it (the ledger skips those counted).
    pub(super) fn finished_runs(&self) -> Vec<(Run, Vec<Run>)> {
        self.cluster.lock().runs.finished()
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
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut cluster = pushed.cluster.lock();
        let same = cluster.nodes.get(&name).is_some_and(|old| {
            old.metadata.labels == node.metadata.labels
                && old.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
                    == node.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
        });
        if same {
            return false;
        }
        match node_gpus(&node, &self.resource) {
            Ok((_, spec)) => cluster.gpu_models.insert(name.clone(), spec.model),
            Err(_) => cluster.gpu_models.remove(&name),
        };
        let new = cluster.nodes.insert(name.clone(), node).is_none();
        self.touch();
        // Pods that came before their node: held now, or never (a node without managed GPUs).
        let cluster = &mut *cluster;
        let model = match cluster.gpu_models.get(&name) {
            Some(model) => NodeModel::Known(model),
            None => NodeModel::Unmanaged,
        };
        let learned = cluster
            .runs
            .node_came(&name, model, &self.core.keys, |pod| self.gpu_pod(pod));
        for finished in learned {
            self.teach(pushed, finished);
        }
        new
    }

    /// Node `name` is gone. Returns whether it was known.
    pub fn drop_node(&self, name: &str) -> bool {
        let Some(pushed) = self.pushed() else {
            return false;
        };
        let mut cluster = pushed.cluster.lock();
        cluster.gpu_models.remove(name);
        cluster.runs.node_gone(name);
        let known = cluster.nodes.remove(name).is_some();
        if known {
            self.touch();
        }
        known
    }

    /// The names of the nodes pushed, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let Some(pushed) = self.pushed() else {
            return Vec::new();
        };
        let mut names: Vec<String> = pushed.cluster.lock().nodes.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// A pod was added or changed. The view is stale only when the pod started or stopped
    /// holding GPUs, or moved: the echo of Tandem's own placement changes nothing. A pod that
    /// declared a model is remembered, so that the peak a profiler reports for it teaches the
    /// memory model. Runs come from [`App::pod_ran`] instead.
    pub fn push_pod(&self, pod: &Pod) {
        let Some(pushed) = self.pushed() else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let gp = self.gpu_pod(pod);
        if let Some(gp) = &gp
            && let Some(model) = gp.summary()
        {
            self.core.remember_declared(&gp.job, model);
        }
        {
            let mut cluster = pushed.cluster.lock();
            match &pod.metadata.resource_version {
                Some(version) => cluster.versions.insert(uid.clone(), version.clone()),
                None => cluster.versions.remove(&uid),
            };
            match &gp {
                Some(gp) => cluster.pods.insert(uid.clone(), gp.clone()),
                None => cluster.pods.remove(&uid),
            };
        }
        self.resides(&uid, gp.as_ref());
    }

    /// The pod with UID `uid` is gone.
    pub fn drop_pod(&self, uid: &str) {
        if let Some(pushed) = self.pushed() {
            let mut cluster = pushed.cluster.lock();
            cluster.versions.remove(uid);
            cluster.pods.remove(uid);
        }
        self.pod_gone(uid);
    }

    /// The pod with UID `uid` as pushed at `resource_version`: `None` when that version was not
    /// pushed (its event is still on the way); `Some(None)` for a pod that requests no managed
    /// GPU.
    pub fn pushed_pod(&self, uid: &str, resource_version: &str) -> Option<Option<GpuPod>> {
        let cluster = self.pushed()?.cluster.lock();
        (cluster.versions.get(uid).map(String::as_str) == Some(resource_version))
            .then(|| cluster.pods.get(uid).cloned())
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
        let node = gp.node.as_deref().unwrap_or_default();
        let finished = {
            let mut cluster = pushed.cluster.lock();
            let Cluster {
                nodes,
                gpu_models,
                runs,
                ..
            } = &mut *cluster;
            runs.hold(
                pod,
                &gp,
                node_model(gpu_models, nodes, node),
                &self.core.keys,
            )
        };
        if let Some(finished) = finished {
            self.teach(pushed, finished);
        }
    }

    /// A pod that ran is gone: its run is no one's partner any more.
    pub fn forget_run(&self, uid: &str) {
        if let Some(pushed) = self.pushed() {
            pushed.cluster.lock().runs.forget(uid);
        }
    }

    /// On the leader, learns from a run that just finished, with the runs beside it on its
    /// GPU (by the learning task, in the order they come).
    fn teach(&self, pushed: &Pushed, finished: (Run, Vec<Run>)) {
        if self.core.leadership.is_leader() {
            // Only a stopped runtime closes the queue: then nothing is learned anyway.
            let _ = pushed.learn.send(finished);
        }
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
    use crate::cluster::ClusterView;
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
