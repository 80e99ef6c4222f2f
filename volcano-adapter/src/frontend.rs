//! The Volcano front-end's state and decisions.
//!
//! **Where the view comes from.** The cluster view is the one `tandem-kube-adapter` keeps
//! ([`App`]: kube-rs watchers of Nodes and Pods, GPUs' residents rebuilt from the
//! `tandem.dev/gpu` annotation), not the session's snapshot: the snapshot carries no record of
//! which GPU a pod uses, is rebuilt by vc-scheduler every second (and sent to the extender in
//! full, every node's every pod), while the watchers keep the view current between sessions
//! and only what changed reaches the engine. `onSessionOpen` reads one thing from the
//! snapshot, each job's gang size (`MinAvailable`, the PodGroup's `minMember`), and starts the
//! session's caches afresh.
//!
//! **Decisions.** A task that takes a GPU alone ([`Task::alone`]: a gang member, or a task of
//! several GPUs) passes a node with enough idle GPUs and is placed on idle ones; any other
//! GPU task is judged by the engine: one `score-all` per task and view (kept for the session's
//! other predicate calls and its prioritize, so a predicate answered from it costs a hash
//! lookup), the engine's reasons when no node fits, its best GPU on `allocate`. Every
//! placement is recorded in the engine at once, so the session's next task sees it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::{Mutex, RwLock};
use tandem_adapter_core::declaration::Refusal;
use tandem_adapter_core::{EngineError, EngineFailure, EngineState, Placement};
use tandem_api::Job;
use tandem_kube_common::app::App;
use tandem_kube_common::cluster::{ClusterView, DeclaredModel, GpuPod};
use tandem_kube_common::decide::{self, Unfit};
use tandem_kube_common::lean::LeanPod;

use crate::wire::{PredicateResponse, TaskInfo, UNRESOLVABLE, UNSCHEDULABLE};

/// A predicate failure's message when other nodes fit the task.
pub const PASSED_OVER: &str = "Tandem: no GPU of this node fits the task (other nodes do; the engine's reasons are given when none does)";

/// A Volcano task that requests managed GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// What the Kubernetes view knows of its pod.
    pub pod: GpuPod,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Whether its job is a gang (PodGroup `minMember` > 1).
    pub gang: bool,
}

impl Task {
    /// Whether it takes its GPUs alone: gang members start together and must not wait behind,
    /// or slow down, a co-runner; a task of several GPUs is one program spread over them.
    pub fn alone(&self) -> bool {
        self.gang || self.pod.gpus > 1
    }

    /// The engine's job: the pod's keyed id and what it declared.
    pub fn job(&self) -> Job {
        self.pod.job()
    }
}

/// The engine's best score (1..=100) of a shared task on each node where some GPU fits it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskScores {
    /// Score by node; nodes where nothing fits are absent.
    pub fits: HashMap<String, u8>,
}

/// What a cached answer was computed against: the view's epoch, the engine's knowledge epoch,
/// and the placements made since the view was built.
type Epochs = (u64, u64, u64);

/// Scores of shared tasks by UID, with the epochs they were computed in.
type ScoreCache = HashMap<String, (Epochs, Arc<TaskScores>)>;

/// What a session says of one Volcano job (a PodGroup).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionJob {
    /// The gang's size (the PodGroup's `minMember`): more than one makes it a gang.
    pub min_available: i32,
    /// What the PodGroup's annotations declare for its tasks (docs/DECLARING.md), as
    /// (annotation, value): a task's own annotation wins over its group's.
    pub declares: Vec<(&'static str, String)>,
}

/// The Volcano front-end: the Kubernetes view and the session's state.
pub struct Volcano {
    /// The Kubernetes view (and the core in it).
    pub app: Arc<App>,
    /// What `prioritize` multiplies the engine's score by.
    pub score_weight: f64,
    /// The session's jobs by `JobID`, from the last `onSessionOpen`.
    jobs: RwLock<HashMap<String, SessionJob>>,
    /// Tasks by UID, parsed once per session (`None`: not a task Tandem manages).
    tasks: Mutex<HashMap<String, Option<Arc<Task>>>>,
    /// Scores of shared tasks by UID, with the epochs they were computed in.
    scores: Arc<Mutex<ScoreCache>>,
    /// Bumped by every allocate and deallocate (they change the engine's view without a
    /// rebuild).
    placements: AtomicU64,
    /// What `allocate` placed, by task UID: node and GPUs, for `deallocate`.
    placed: Mutex<HashMap<String, (String, Vec<String>)>>,
}

impl std::fmt::Debug for Volcano {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volcano")
            .field("score_weight", &self.score_weight)
            .finish_non_exhaustive()
    }
}

impl Volcano {
    /// The front-end over `app`.
    pub fn new(app: Arc<App>, score_weight: f64) -> Self {
        Self {
            app,
            score_weight,
            jobs: RwLock::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            scores: Arc::new(Mutex::new(HashMap::new())),
            placements: AtomicU64::new(0),
            placed: Mutex::new(HashMap::new()),
        }
    }

    /// A new session: its jobs' gang sizes and declarations; the previous session's caches are
    /// dropped.
    pub fn open_session(&self, jobs: HashMap<String, SessionJob>) {
        *self.jobs.write() = jobs;
        self.tasks.lock().clear();
        self.scores.lock().clear();
        // Rebuild the view now if a watcher saw a change, rather than in the first predicate.
        let _ = self.app.view();
    }

    /// The session ended: nothing of it is kept.
    pub fn close_session(&self) {
        self.tasks.lock().clear();
        self.scores.lock().clear();
    }

    /// The task, if it requests managed GPUs (its pod is parsed once per session). `Err`
    /// names what is wrong with the pod.
    pub fn task(&self, info: &TaskInfo) -> Result<Option<Arc<Task>>, String> {
        if let Some(known) = self.tasks.lock().get(&info.uid) {
            return Ok(known.clone());
        }
        let mut pod: Pod = serde_json::from_str::<LeanPod>(info.pod.get())
            .map_err(|e| e.to_string())?
            .0;
        let (gang, declares) = {
            let jobs = self.jobs.read();
            let job = jobs.get(&info.job);
            (
                job.is_some_and(|job| job.min_available > 1),
                job.map(|job| job.declares.clone()).unwrap_or_default(),
            )
        };
        if !declares.is_empty() {
            // What the PodGroup declares, for what the pod itself does not.
            let annotations = pod.metadata.annotations.get_or_insert_default();
            for (key, value) in declares {
                annotations.entry(key.to_owned()).or_insert(value);
            }
            self.note_group_declared(&pod);
        }
        let task = self.app.gpu_pod(&pod).map(|gpu_pod| {
            Arc::new(Task {
                pod: GpuPod {
                    // Volcano's TaskID is the pod's UID; a Pod without one (a hand-made
                    // request) still gets its task's.
                    uid: if gpu_pod.uid.is_empty() {
                        info.uid.clone()
                    } else {
                        gpu_pod.uid.clone()
                    },
                    ..gpu_pod
                },
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                gang,
            })
        });
        self.tasks.lock().insert(info.uid.clone(), task.clone());
        Ok(task)
    }

    /// Notes what `pod` declares through its PodGroup, which the pod watcher (reading the
    /// pod's own annotations) does not see: a model referenced there is read in the background
    /// (until then the task fails for now, [`DeclaredModel::NotRead`]; the next session parses it
    /// again), and a declared model is remembered for the peaks a profiler reports.
    fn note_group_declared(&self, pod: &Pod) {
        let Some(gpu_pod) = self.app.gpu_pod(pod) else {
            return;
        };
        if let Some(model) = gpu_pod.summary() {
            self.app.core.remember_declared(&gpu_pod.job, model);
        }
        if matches!(gpu_pod.model, DeclaredModel::NotRead)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (app, pod) = (Arc::clone(&self.app), pod.clone());
            runtime.spawn(async move {
                app.read_model(&pod).await;
            });
        }
    }

    /// The epochs an answer computed now is valid for, with the view.
    pub fn current(&self) -> ((Arc<ClusterView>, u64), Epochs) {
        let (view, epoch) = self.app.view();
        let epochs = (
            epoch,
            self.app.core.epoch(),
            self.placements.load(Ordering::Acquire),
        );
        ((view, epoch), epochs)
    }

    /// The scores of `task` computed in `epochs`, if any.
    pub fn cached_scores(&self, task: &Task, epochs: Epochs) -> Option<Arc<TaskScores>> {
        self.scores
            .lock()
            .get(&task.pod.uid)
            .filter(|(at, _)| *at == epochs)
            .map(|(_, scores)| Arc::clone(scores))
    }

    /// The engine's scores of a shared task on every node of the view, from the cache when
    /// computed in `epochs`, else from one `score-all` (on the engine thread, where the cache
    /// is checked again: the session's predicate calls for one task arrive together).
    pub async fn scores(
        &self,
        task: &Arc<Task>,
        view: (Arc<ClusterView>, u64),
        epochs: Epochs,
    ) -> Result<Arc<TaskScores>, EngineError> {
        if let Some(scores) = self.cached_scores(task, epochs) {
            return Ok(scores);
        }
        let cache = Arc::clone(&self.scores);
        let task = Arc::clone(task);
        self.app
            .decide("score-all", view, move |engine, view| {
                if let Some((at, scores)) = cache.lock().get(&task.pod.uid)
                    && *at == epochs
                {
                    return Ok(Arc::clone(scores));
                }
                let scores = Arc::new(score_all(engine, view, &task)?);
                cache
                    .lock()
                    .insert(task.pod.uid.clone(), (epochs, Arc::clone(&scores)));
                Ok(scores)
            })
            .await
    }

    /// Records `task`'s placement on `node` (for `deallocate`, and so that view rebuilds keep
    /// it until the pod watcher shows it), and invalidates the session's scores.
    pub fn record(&self, task: &Task, node: &str, gpus: &[String]) {
        self.app.assume(&task.pod, node, gpus);
        self.placed
            .lock()
            .insert(task.pod.uid.clone(), (node.to_owned(), gpus.to_vec()));
        self.placements.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets `task`'s placement; returns the GPUs it had.
    pub fn unrecord(&self, task: &Task) -> Option<Vec<String>> {
        let placed = self.placed.lock().remove(&task.pod.uid);
        self.app.forget(&task.pod.uid);
        self.placements.fetch_add(1, Ordering::AcqRel);
        placed.map(|(_, gpus)| gpus)
    }
}

/// The engine's scores of a shared `task` on every node of `view`, from one `score-all`
/// ([`decide::score_nodes`]).
pub fn score_all(
    engine: &mut EngineState,
    view: &ClusterView,
    task: &Task,
) -> Result<TaskScores, EngineFailure> {
    let nodes: Vec<String> = view
        .gpus()
        .map(|gpu| gpu.node.as_str())
        .collect::<HashSet<_>>()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut fits = decide::score_nodes(engine, &task.pod, &nodes)?;
    fits.retain(|_, score| *score > 0);
    Ok(TaskScores { fits })
}

/// Why Tandem will not place `task` for what its pod declares (annotations, see
/// `docs/DECLARING.md`), if anything: a value that does not parse fails every node for good
/// (counted by the caller); a model reference whose ConfigMap was not read yet fails for now.
pub fn declaration_check(task: &Task) -> Option<(PredicateResponse, Option<Refusal>)> {
    let refusal = task.pod.refusal()?;
    if matches!(task.pod.model, DeclaredModel::NotRead) {
        let why = format!(
            "Tandem: the model of {}: {}",
            refusal.value, refusal.problem
        );
        return Some((PredicateResponse::fail(UNSCHEDULABLE, why), None));
    }
    let why = format!("Tandem: refused: {refusal}");
    Some((PredicateResponse::fail(UNRESOLVABLE, why), Some(refusal)))
}

/// What the view alone says of `node` for `task` ([`decide::node_gpus`]), as Volcano's
/// predicate: a failure, or `None` when the engine (or the idle count) must judge. A node not
/// seen yet may pass in a moment, so it fails as unschedulable, not unresolvable.
pub fn node_check(view: &ClusterView, task: &Task, node: &str) -> Option<PredicateResponse> {
    let unfit = decide::node_gpus(view, &task.pod, node).err()?;
    let code = match unfit {
        Unfit::NotSeen => UNSCHEDULABLE,
        Unfit::Unusable(_) | Unfit::TooFew { .. } => UNRESOLVABLE,
    };
    Some(PredicateResponse::fail(code, unfit.to_string()))
}

/// Whether `node` has the idle GPUs a task that takes them alone needs
/// ([`decide::idle_enough`]), as Volcano's predicate.
pub fn predicate_alone(engine: &EngineState, task: &Task, node: &str) -> PredicateResponse {
    let Err(idle) = decide::idle_enough(engine, &task.pod, node) else {
        return PredicateResponse::pass();
    };
    let why = if task.gang {
        "gang members take GPUs alone"
    } else {
        "multi-GPU tasks take GPUs alone"
    };
    PredicateResponse::fail(
        UNSCHEDULABLE,
        format!(
            "Tandem: the task needs {} idle GPU(s) ({why}), {idle} idle here",
            task.pod.gpus
        ),
    )
}

/// The predicate of a shared task on `node` from its `scores`: passes where a GPU fits; where
/// none does, the engine's reasons when no node fits at all ([`decide::why_unfit`]: what a
/// person reading the PodGroup's condition needs), else [`PASSED_OVER`] (reasons nobody reads
/// cost an engine call per node).
pub fn predicate_shared(
    engine: &mut EngineState,
    task: &Task,
    node: &str,
    scores: &TaskScores,
) -> Result<PredicateResponse, EngineFailure> {
    if scores.fits.contains_key(node) {
        return Ok(PredicateResponse::pass());
    }
    if !scores.fits.is_empty() {
        return Ok(PredicateResponse::fail(UNSCHEDULABLE, PASSED_OVER));
    }
    let why = decide::why_unfit(engine, &task.pod, node)?;
    Ok(PredicateResponse::fail(UNSCHEDULABLE, why))
}

/// How good each of `nodes` is for `task`, 0..=100 before the weight: the engine's best GPU
/// score for a shared task (from `scores`); for a task taking GPUs alone,
/// [`decide::alone_score_now`].
pub fn node_scores(
    engine: &EngineState,
    task: &Task,
    nodes: &[String],
    scores: Option<&TaskScores>,
) -> Vec<u32> {
    nodes
        .iter()
        .map(|node| {
            if task.alone() {
                decide::alone_score_now(engine, &task.pod, node)
            } else {
                scores
                    .and_then(|s| s.fits.get(node))
                    .copied()
                    .map_or(0, u32::from)
            }
        })
        .collect()
}

/// Places `task` on `node` ([`decide::place`]): idle GPUs if it takes them alone, else the
/// engine's best GPU; recorded in the engine at once.
pub fn place(
    engine: &mut EngineState,
    task: &Task,
    node: &str,
) -> Result<Placement, EngineFailure> {
    decide::place(engine, &task.pod, node, task.alone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use tandem_kube_common::cluster::gpu_pod;
    use tandem_kube_common::cluster::testing::{self, engine, keys};
    use tandem_kube_common::placement::Placements;

    const RESOURCE: &str = "nvidia.com/gpu";

    /// A node of `count` 16 GiB V100s.
    fn node(name: &str, count: u32) -> Node {
        testing::node(name, count, "Tesla-V100", Some(16_384))
    }

    /// A pending pod of `gpus` GPUs, or one bound `at` a node and GPU.
    fn pod(name: &str, gpus: u32, at: Option<(&str, &str)>) -> Pod {
        testing::pod(name, gpus, at.map(|(node, _)| node), at.map(|(_, gpu)| gpu))
    }

    fn task(name: &str, gpus: u32, gang: bool) -> Task {
        Task {
            pod: gpu_pod(
                &pod(name, gpus, None),
                &keys(),
                RESOURCE,
                &Placements::default(),
            )
            .unwrap(),
            namespace: "default".into(),
            name: name.into(),
            gang,
        }
    }

    fn view(nodes: &[Node], pods: &[Pod]) -> ClusterView {
        let k = keys();
        ClusterView::build(
            nodes,
            pods.iter()
                .filter_map(|p| gpu_pod(p, &k, RESOURCE, &Placements::default())),
            RESOURCE,
        )
    }

    #[test]
    fn a_task_that_fits_nowhere_fails_every_node_with_the_engines_reason() {
        let view = view(&[node("a", 1), node("cpu", 0)], &[]);
        let mut engine = engine(&view);
        let big = task("big", 1, false);
        let scores = score_all(&mut engine, &view, &big).unwrap();
        assert!(scores.fits.is_empty());
        let failed = predicate_shared(&mut engine, &big, "a", &scores).unwrap();
        assert_eq!(failed.code, UNSCHEDULABLE);
        assert!(failed.message.contains("needs 20000 MiB"), "{failed:?}");
        let cpu = node_check(&view, &big, "cpu").unwrap();
        assert_eq!(cpu.code, UNRESOLVABLE);
        assert!(cpu.message.contains("no nvidia.com/gpu"), "{cpu:?}");
        assert_eq!(
            node_check(&view, &big, "ghost").unwrap().code,
            UNSCHEDULABLE
        );
    }

    #[test]
    fn prioritize_prefers_the_co_runner_the_engine_predicts_better() {
        let view = view(
            &[node("a", 1), node("b", 1)],
            &[
                pod("x", 1, Some(("a", "a/0"))),
                pod("y", 1, Some(("b", "b/0"))),
            ],
        );
        let mut engine = engine(&view);
        let p = task("p", 1, false);
        let scores = score_all(&mut engine, &view, &p).unwrap();
        let nodes = ["a".to_owned(), "b".to_owned()];
        let ranked = node_scores(&engine, &p, &nodes, Some(&scores));
        assert!(ranked[0] > ranked[1], "{ranked:?}");
        // p is profiled (4,500 MiB on a V100): that is what the guard reserves beside x.
        assert_eq!(
            place(&mut engine, &p, "a").unwrap(),
            Placement::Placed {
                gpus: vec!["a/0".into()],
                reserved_mib: Some(4_500)
            }
        );
    }

    #[test]
    fn gang_members_take_idle_gpus_only_and_see_each_others_placements() {
        let view = view(&[node("a", 2)], &[pod("x", 1, Some(("a", "a/0")))]);
        let mut engine = engine(&view);
        let first = task("g-0", 1, true);
        let second = task("g-1", 1, true);
        assert!(first.alone() && !task("p", 1, false).alone() && task("m", 2, false).alone());
        assert_eq!(
            predicate_alone(&engine, &first, "a"),
            PredicateResponse::pass()
        );
        // A gang member takes an idle GPU, and reserves its memory there as any one-GPU task
        // does: a node that enforces memory honours no one-GPU placement without it.
        let placed = place(&mut engine, &first, "a").unwrap();
        let reserved = engine.reservation(&first.job(), "a/1").unwrap();
        assert!(reserved.is_some());
        assert_eq!(
            placed,
            Placement::Placed {
                gpus: vec!["a/1".into()],
                reserved_mib: reserved
            }
        );
        // The GPU the first member took is no longer idle: the second fails here.
        let failed = predicate_alone(&engine, &second, "a");
        assert_eq!(failed.code, UNSCHEDULABLE);
        assert!(
            failed.message.contains("gang members take GPUs alone"),
            "{failed:?}"
        );
        assert!(matches!(
            place(&mut engine, &second, "a").unwrap(),
            Placement::Refused(_)
        ));
        engine.unplace(&first.pod.job, &["a/1".to_owned()]).unwrap();
        assert_eq!(node_scores(&engine, &second, &["a".into()], None), [100]);
    }
}
