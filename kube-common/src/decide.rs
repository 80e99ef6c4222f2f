//! Tandem's decisions on Kubernetes nodes for a pod, shared by every Kubernetes front-end: the
//! extender's `filter` and `prioritize`, the framework plugin's PreFilter and Reserve, and
//! Volcano's predicate and allocation.
//!
//! They run on the engine thread ([`EngineState`]) against the engine's view of the cluster,
//! with the front-end's [`ClusterView`] for what a scheduler needs beyond it (nodes Tandem
//! cannot use, idle GPUs for multi-GPU pods). Each front-end turns them into its scheduler's
//! wire format.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use tandem_adapter_core::declaration::{Carrier, Refusal};
use tandem_adapter_core::{EngineFailure, EngineState, NodeScore, Placement};
use tandem_api::{Gpu, Job};

use crate::cluster::{ClusterView, GpuPod};

/// Highest score an extender may give (`extenderv1.MaxExtenderPriority`).
pub const MAX_PRIORITY: i64 = 10;

/// The engine's job for a pod: its keyed id (the engine knows its profile by it) and what it
/// declared.
pub fn job_of(pod: &GpuPod) -> Job {
    pod.job()
}

/// Why Tandem refuses `pod`'s declarations, if it does: one that does not parse, a model
/// reference not read, or a reference speed on a GPU model neither Tandem nor the cluster knows.
pub fn refusal(engine: &EngineState, pod: &GpuPod) -> Option<Refusal> {
    pod.refusal().or_else(|| {
        pod.declared
            .as_ref()
            .ok()?
            .unknown_model(Carrier::Annotations, |model| engine.knows_model(model))
    })
}

/// Why the view alone rules a node out for a pod, before the engine is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// The watchers have not shown the node yet: it may have GPUs in a moment.
    NotSeen,
    /// The node has no GPU Tandem can use, and why (no managed GPUs, an unknown model, ...).
    Unusable(String),
    /// The node has fewer GPUs than the pod asks for.
    TooFew {
        /// GPUs the pod asks for.
        needs: u32,
        /// GPUs the node has.
        has: usize,
    },
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotSeen => {
                f.write_str("Tandem has not seen this node yet (it watches nodes; retry shortly)")
            }
            Self::Unusable(why) => write!(f, "Tandem: {why}"),
            Self::TooFew { needs, has } => {
                write!(f, "Tandem: the pod needs {needs} GPUs, the node has {has}")
            }
        }
    }
}

/// The GPUs of node `name` that may take `pod`, as the view shows them, or why the view alone
/// rules the node out: the check every front-end makes before asking the engine.
pub fn node_gpus<'v>(view: &'v ClusterView, pod: &GpuPod, name: &str) -> Result<&'v [Gpu], Unfit> {
    match view.node(name) {
        None => Err(Unfit::NotSeen),
        Some(Err(why)) => Err(Unfit::Unusable(why.clone())),
        Some(Ok(gpus)) if pod.gpus as usize > gpus.len() => Err(Unfit::TooFew {
            needs: pod.gpus,
            has: gpus.len(),
        }),
        Some(Ok(gpus)) => Ok(gpus),
    }
}

/// How good a node is for a pod taking `needs` GPUs alone, 1..=100, from its `idle` and
/// `total` GPUs: the less of the node it leaves fragmented, the better; 0 when too few are
/// idle.
pub fn alone_score(idle: u32, total: u32, needs: u32) -> u32 {
    if idle >= needs && total > 0 {
        100 - 100 * (idle - needs) / total
    } else {
        0
    }
}

/// Whether `node` has the idle GPUs `pod` needs to take them alone, as the engine sees them
/// now (its placements since the view was built included): `Err` with how many are idle.
pub fn idle_enough(engine: &EngineState, pod: &GpuPod, node: &str) -> Result<(), usize> {
    let idle = engine.idle_gpus(node);
    if idle >= pod.gpus as usize {
        Ok(())
    } else {
        Err(idle)
    }
}

/// [`alone_score`] of `node` for `pod`, from the engine's view.
pub fn alone_score_now(engine: &EngineState, pod: &GpuPod, node: &str) -> u32 {
    let total = engine.handles().of_node(node).len() as u32;
    let idle = engine.idle_gpus(node) as u32;
    alone_score(idle, total, pod.gpus)
}

/// Why no GPU of `node` fits `pod`, in the engine's words (`Tandem: no GPU fits: ...`).
pub fn why_unfit(
    engine: &mut EngineState,
    pod: &GpuPod,
    node: &str,
) -> Result<String, EngineFailure> {
    let why = engine
        .why_not(&job_of(pod), &[node])?
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok(format!("Tandem: no GPU fits: {why}"))
}

/// Places `pod` on `node` and records it in the engine at once: idle GPUs if it takes them
/// `alone`, else the engine's best GPU (with the memory the guard reserves there).
pub fn place(
    engine: &mut EngineState,
    pod: &GpuPod,
    node: &str,
    alone: bool,
) -> Result<Placement, EngineFailure> {
    let job = job_of(pod);
    if alone {
        engine.place_alone(&job, node, pod.gpus)
    } else {
        engine.place(&job, node, pod.gpus)
    }
}

/// The engine's best score (0..=100) of a one-GPU pod on each candidate node, by node name.
/// A node scores 0 exactly when no GPU of it fits the pod, so one `score-all` over the
/// engine's view serves both `filter` and `prioritize`.
pub type NodeScores = HashMap<String, u8>;

/// The engine's best score (0..=100) of a one-GPU pod on each of `candidates`, in their order,
/// from one `score-all` over the engine's view (0: no GPU of the node fits the pod).
pub fn candidate_scores(
    engine: &mut EngineState,
    pod: &GpuPod,
    candidates: &[String],
) -> Result<Vec<u8>, EngineFailure> {
    Ok(candidate_bests(engine, pod, candidates)?
        .into_iter()
        .map(|best| best.score)
        .collect())
}

/// [`candidate_scores`] with the GPU that scored best on each node.
pub fn candidate_bests(
    engine: &mut EngineState,
    pod: &GpuPod,
    candidates: &[String],
) -> Result<Vec<NodeScore>, EngineFailure> {
    if refusal(engine, pod).is_some() {
        return Ok(vec![NodeScore::default(); candidates.len()]);
    }
    if let Ok(declaration) = &pod.declared
        && let Some(work) = &declaration.work
    {
        engine.tell_speeds(&pod.job, &work.speeds)?;
    }
    engine.node_scores(&job_of(pod), candidates)
}

/// [`candidate_scores`] by node name, for `prioritize` to reuse after `filter`.
pub fn score_nodes(
    engine: &mut EngineState,
    pod: &GpuPod,
    candidates: &[String],
) -> Result<NodeScores, EngineFailure> {
    let scores = candidate_scores(engine, pod, candidates)?;
    Ok(candidates.iter().cloned().zip(scores).collect())
}

/// Tandem's verdict on one candidate node for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The node may take the pod; how good it is for it, 1..=100 (see [`node_score`]).
    Fits(u32),
    /// It may not, and why; preemption might change that.
    Fails(Cow<'static, str>),
    /// It may not, and why; preemption cannot change that.
    Unresolvable(String),
}

/// Which nodes the extender's `filter` passes (`--filter-passes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FilterPasses {
    /// Only the node Tandem ranks first (the first of equals, in the scheduler's order). With
    /// one node left kube-scheduler places the pod there without calling `prioritize` or
    /// running its own scoring plugins: one round trip per pod fewer, and the choice is
    /// Tandem's alone (as GPU-sharing extenders such as HAMi's do).
    #[default]
    Best,
    /// Every node where the pod fits: the scheduler ranks them by `prioritize`, weighted
    /// against its own plugins' scores (its soft preferences, such as preferred node affinity
    /// or topology spread, then count too).
    Fitting,
}

/// What `filter` decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filtered {
    /// Nodes that may take the pod.
    pub passed: Vec<String>,
    /// Nodes that may not, and why; preemption might change that. Empty when a node passed.
    pub failed: BTreeMap<String, String>,
    /// Nodes that may not, and why; preemption cannot change that. Empty when a node passed.
    pub unresolvable: BTreeMap<String, String>,
}

/// Judges `pod` on each of `candidates`, in their order: the OOM guard and sharing cap of the
/// engine for a one-GPU pod (from `scores`, [`candidate_scores`] of the same candidates; the
/// engine is asked why nodes fail only when every node does), enough idle GPUs for a pod that
/// needs several (those never share). The decision of the extender's `filter` and of the
/// framework plugin's PreFilter. The engine's view must hold `view`'s GPUs (as
/// [`EngineState::sync`] leaves it): a node the engine scored is taken to be in `view`.
pub fn judge(
    engine: &mut EngineState,
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
    scores: &[u8],
) -> Result<Vec<Verdict>, EngineFailure> {
    if let Some(refused) = refusal(engine, pod) {
        // Nothing the scheduler can change makes a bad declaration good.
        let why = format!("Tandem: refused: {refused}");
        return Ok(vec![Verdict::Unresolvable(why); candidates.len()]);
    }
    let mut verdicts = Vec::with_capacity(candidates.len());
    let mut unfit: Vec<usize> = Vec::new();
    for (at, name) in candidates.iter().enumerate() {
        let engine_score = scores.get(at).copied().unwrap_or(0);
        if pod.gpus == 1 && engine_score > 0 {
            // The engine scored a GPU of the node, so the node is in the view with usable
            // GPUs (the engine's view is the view's GPUs): no lookup by name, which at
            // thousands of nodes costs a cache miss or two per candidate.
            verdicts.push(Verdict::Fits(u32::from(engine_score)));
            continue;
        }
        let gpus = match node_gpus(view, pod, name) {
            Ok(gpus) => gpus,
            Err(unfit) => {
                verdicts.push(Verdict::Unresolvable(unfit.to_string()));
                continue;
            }
        };
        let engine_score = scores.get(at).copied().unwrap_or(0);
        match fit_score(gpus, pod, engine_score) {
            score if score > 0 => verdicts.push(Verdict::Fits(score)),
            _ if pod.gpus > 1 => {
                let idle = gpus.iter().filter(|g| g.residents.is_empty()).count();
                verdicts.push(Verdict::Fails(Cow::Owned(format!(
                    "Tandem: the pod needs {} idle GPUs (multi-GPU pods do not share), {idle} are idle",
                    pod.gpus
                ))));
            }
            _ => {
                unfit.push(at);
                verdicts.push(Verdict::Fails(Cow::Borrowed(PASSED_OVER)));
            }
        }
    }
    let any_fits = verdicts.iter().any(|v| matches!(v, Verdict::Fits(_)));
    if !any_fits && !unfit.is_empty() {
        // The pod fits nowhere: the scheduler shows these reasons to its user, so they are
        // worth the engine's words, asked for all nodes at once. Otherwise reasons for nodes
        // passed over are read by nobody once the pod is placed, and asking the engine for
        // them was most of a filter's cost when the cluster filled up.
        let names: Vec<&str> = unfit.iter().map(|&at| candidates[at].as_str()).collect();
        let reasons = engine.why_not(&job_of(pod), &names)?;
        for (at, why) in unfit.into_iter().zip(reasons) {
            verdicts[at] = Verdict::Fails(Cow::Owned(format!("Tandem: no GPU fits: {why}")));
        }
    }
    Ok(verdicts)
}

/// The extender's `filter`: [`judge`] with `scores` ([`candidate_scores`] of the same
/// candidates, in their order; empty for a pod of several GPUs), as node lists, passing the
/// nodes `passes` says. With [`FilterPasses::Best`], the other nodes where the pod fits are in
/// neither list: the scheduler drops them without a reason to keep. Failed nodes and their
/// reasons are given only when no node passes: the one case where the scheduler shows them,
/// and where preemption tells the failed nodes from the unresolvable ones.
pub fn filter(
    engine: &mut EngineState,
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
    scores: &[u8],
    passes: FilterPasses,
) -> Result<Filtered, EngineFailure> {
    let verdicts = judge(engine, view, pod, candidates, scores)?;
    let mut out = Filtered::default();
    let mut best: Option<(u32, &String)> = None;
    for (name, verdict) in candidates.iter().zip(&verdicts) {
        let Verdict::Fits(score) = *verdict else {
            continue;
        };
        match passes {
            FilterPasses::Fitting => out.passed.push(name.clone()),
            FilterPasses::Best => {
                if best.is_none_or(|(top, _)| score > top) {
                    best = Some((score, name));
                }
            }
        }
    }
    out.passed.extend(best.map(|(_, name)| name.clone()));
    if !out.passed.is_empty() {
        // The pod goes to a node that passed: the others' reasons would be read by nobody,
        // and each costs the scheduler a decoded entry and a status (hundreds per pod once
        // nodes fill up at thousands of nodes).
        return Ok(out);
    }
    for (name, verdict) in candidates.iter().zip(verdicts) {
        match verdict {
            Verdict::Fits(_) => {}
            Verdict::Fails(why) => {
                out.failed.insert(name.clone(), why.into_owned());
            }
            Verdict::Unresolvable(why) => {
                out.unresolvable.insert(name.clone(), why);
            }
        }
    }
    Ok(out)
}

/// A failed node's reason when other nodes passed.
pub const PASSED_OVER: &str = "Tandem: no GPU of this node fits the pod (other nodes do; the engine's reasons are given when none does)";

/// How good node `name` is for `pod`, 0..=100 (0: it cannot take it): the engine's best GPU
/// score there (from `scores`, see [`score_nodes`]) for a one-GPU pod; for a pod of several
/// GPUs (which run alone), how little of the node it leaves fragmented. What `prioritize`
/// ranks by, and [`Verdict::Fits`] carries.
pub fn node_score(view: &ClusterView, pod: &GpuPod, name: &str, scores: &NodeScores) -> u32 {
    let Some(Ok(gpus)) = view.node(name) else {
        return 0;
    };
    fit_score(gpus, pod, scores.get(name).copied().unwrap_or(0))
}

/// [`node_score`] for a node of `gpus`, the engine's best score there being `engine_score`.
fn fit_score(gpus: &[Gpu], pod: &GpuPod, engine_score: u8) -> u32 {
    if pod.gpus > 1 {
        // Multi-GPU pods run alone: prefer the node they leave the least fragmented.
        let idle = gpus.iter().filter(|g| g.residents.is_empty()).count() as u32;
        return alone_score(idle, gpus.len() as u32, pod.gpus);
    }
    u32::from(engine_score)
}

/// Scores the candidate nodes 0..=[`MAX_PRIORITY`], in their order: the engine's best GPU score
/// on each node (from `scores`), relative to the best node (which gets the most), so the
/// engine's ranking survives the extender protocol's 11 levels.
pub fn prioritize(
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
    scores: &NodeScores,
) -> Vec<i64> {
    let best: Vec<u32> = candidates
        .iter()
        .map(|name| node_score(view, pod, name, scores))
        .collect();
    let top = best.iter().copied().max().unwrap_or(0);
    best.into_iter()
        .map(|score| {
            if top == 0 {
                0
            } else {
                (i64::from(score) * MAX_PRIORITY + i64::from(top) / 2) / i64::from(top)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::gpu_pod;
    use crate::cluster::testing::{engine, keys, node, pod};
    use crate::placement::Placements;
    use k8s_openapi::api::core::v1::Pod;

    const RESOURCE: &str = "nvidia.com/gpu";

    fn view(pods: &[Pod]) -> ClusterView {
        let nodes = [
            node("a", 1, "Tesla-V100", Some(16_384)),
            node("b", 1, "Tesla-V100", Some(16_384)),
            node("cpu", 0, "none", None),
        ];
        let k = keys();
        ClusterView::build(
            &nodes,
            pods.iter()
                .filter_map(|p| gpu_pod(p, &k, RESOURCE, &Placements::default())),
            RESOURCE,
        )
    }

    fn pending(job: &str, gpus: u32) -> GpuPod {
        gpu_pod(
            &pod(job, gpus, None, None),
            &keys(),
            RESOURCE,
            &Placements::default(),
        )
        .unwrap()
    }

    /// [`filter`] of `pod` on `candidates`, scored by one `score-all` as the extender does.
    fn filtered(
        engine: &mut EngineState,
        view: &ClusterView,
        pod: &GpuPod,
        candidates: &[String],
        passes: FilterPasses,
    ) -> Filtered {
        let scores = candidate_scores(engine, pod, candidates).unwrap();
        filter(engine, view, pod, candidates, &scores, passes).unwrap()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn filter_gives_the_memory_reason_and_separates_unresolvable_nodes() {
        let view = view(&[]);
        let mut engine = engine(&view);
        let candidates = names(&["a", "b", "cpu", "ghost"]);
        let big = pending("big", 1);
        let out = filtered(&mut engine, &view, &big, &candidates, FilterPasses::Fitting);
        assert!(out.passed.is_empty());
        // Fitting nowhere, each failed node carries the engine's reasons for its own GPUs.
        for node in ["a", "b"] {
            let reason = &out.failed[node];
            assert!(reason.contains("needs 20000 MiB"), "{reason}");
            assert!(reason.contains(&format!("GPU {node}/0:")), "{reason}");
            assert_eq!(reason.matches("/0:").count(), 1, "{reason}");
        }
        assert!(out.unresolvable["cpu"].contains("no nvidia.com/gpu"));
        assert!(out.unresolvable["ghost"].contains("not seen this node"));
        let (p, candidates) = (pending("p", 1), names(&["a", "b"]));
        let fits = filtered(&mut engine, &view, &p, &candidates, FilterPasses::Fitting);
        assert_eq!(fits.passed, ["a", "b"]);
        // Equal nodes: the first in the scheduler's order is the best.
        let best = filtered(&mut engine, &view, &p, &candidates, FilterPasses::Best);
        assert_eq!(best.passed, ["a"]);
        assert!(
            best.failed.is_empty() && best.unresolvable.is_empty(),
            "{best:?}"
        );
    }

    #[test]
    fn prioritize_prefers_the_co_runner_the_engine_predicts_better() {
        let view = view(&[
            pod("x", 1, Some("a"), Some("a/0")),
            pod("y", 1, Some("b"), Some("b/0")),
        ]);
        let mut engine = engine(&view);
        let (p, candidates) = (pending("p", 1), names(&["a", "b"]));
        let node_scores = score_nodes(&mut engine, &p, &candidates).unwrap();
        let scores = prioritize(&view, &p, &candidates, &node_scores);
        assert_eq!(scores[0], MAX_PRIORITY);
        assert!(scores[1] < scores[0], "{scores:?}");
        let chosen = engine.place(&job_of(&p), "a", 1).unwrap();
        assert_eq!(chosen.into_result(), Ok(vec!["a/0".to_owned()]));
    }

    #[test]
    fn best_passes_only_the_node_the_engine_ranks_first() {
        let view = view(&[
            pod("y", 1, Some("a"), Some("a/0")),
            pod("x", 1, Some("b"), Some("b/0")),
        ]);
        let mut engine = engine(&view);
        // b, beside the co-runner p suffers little from, wins though a comes first.
        let (p, candidates) = (pending("p", 1), names(&["a", "b", "cpu"]));
        let best = filtered(&mut engine, &view, &p, &candidates, FilterPasses::Best);
        assert_eq!(best.passed, ["b"], "{best:?}");
        // The CPU node's reason is left out with the others: the pod goes to b.
        assert!(
            best.failed.is_empty() && best.unresolvable.is_empty(),
            "{best:?}"
        );
        let all = filtered(&mut engine, &view, &p, &candidates, FilterPasses::Fitting);
        assert_eq!(all.passed, ["a", "b"], "{all:?}");
    }

    #[test]
    fn nodes_passed_over_are_not_explained_when_another_node_fits() {
        // Node a's only GPU holds two jobs (the cap); b is idle.
        let view = view(&[
            pod("x", 1, Some("a"), Some("a/0")),
            pod("y", 1, Some("a"), Some("a/0")),
        ]);
        let mut engine = engine(&view);
        let (p, candidates) = (pending("p", 1), names(&["a", "b"]));
        let out = filtered(&mut engine, &view, &p, &candidates, FilterPasses::Fitting);
        assert_eq!(out.passed, ["b"], "{out:?}");
        assert!(
            out.failed.is_empty() && out.unresolvable.is_empty(),
            "{out:?}"
        );
        // The verdict is still there for the plugin, which reports per node.
        let scores = candidate_scores(&mut engine, &p, &candidates).unwrap();
        let verdicts = judge(&mut engine, &view, &p, &candidates, &scores).unwrap();
        assert_eq!(verdicts[0], Verdict::Fails(Cow::Borrowed(PASSED_OVER)));
    }

    #[test]
    fn multi_gpu_pods_need_idle_gpus() {
        let view = view(&[]);
        let mut engine = engine(&view);
        let out = filter(
            &mut engine,
            &view,
            &pending("p", 2),
            &names(&["a"]),
            &[],
            FilterPasses::Fitting,
        )
        .unwrap();
        assert!(out.unresolvable["a"].contains("needs 2 GPUs, the node has 1"));
        let chosen = engine.place(&job_of(&pending("p", 2)), "a", 2).unwrap();
        assert!(
            chosen
                .into_result()
                .unwrap_err()
                .contains("needs 2 idle GPUs")
        );
    }

    #[test]
    fn several_runs_of_one_job_share_what_the_engine_knows_of_it() {
        // Two runs of `x` hold GPUs on two nodes, and a third is pending: the view holds one
        // id on several GPUs, and the engine judges each beside its profile.
        let mut second = pod("x-2", 1, Some("b"), Some("b/0"));
        second.metadata.labels = Some(BTreeMap::from([(
            tandem_adapter_core::identity::JOB_LABEL.to_owned(),
            "x".to_owned(),
        )]));
        let view = view(&[pod("x", 1, Some("a"), Some("a/0")), second]);
        let mut engine = engine(&view);
        let (x, candidates) = (pending("x", 1), names(&["a", "b"]));
        let out = filtered(&mut engine, &view, &x, &candidates, FilterPasses::Fitting);
        assert_eq!(out.passed, ["a", "b"], "{out:?}");
    }
}
