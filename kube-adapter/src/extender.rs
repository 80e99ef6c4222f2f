//! The kube-scheduler extender protocol: wire types and the three decisions.
//!
//! kube-scheduler sends the Go structs of `k8s.io/kube-scheduler/extender/v1`, which carry no
//! JSON tags, so their keys are the Go field names (`Pod`, `NodeNames`, `FailedNodes`). Go
//! decodes keys case-insensitively; these types accept the PascalCase kube-scheduler sends and
//! answer in it.
//!
//! The decisions are pure functions of the engine and a [`ClusterView`]; the HTTP layer in
//! [`crate::http`] parses, times and counts them, and `bind` talks to the API server there.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};
use tandem_api::{Gpu, Job};

use crate::cluster::{ClusterView, GpuPod};
use crate::engine::{Engine, EngineFailure};

/// Highest score an extender may give (`extenderv1.MaxExtenderPriority`).
pub const MAX_PRIORITY: i64 = 10;

/// A list of nodes as kube-scheduler sends it (`v1.NodeList`; only `items` matters).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeList {
    /// The nodes.
    #[serde(default)]
    pub items: Vec<Node>,
}

/// `ExtenderArgs`: the pod and the candidate nodes of a `filter` or `prioritize` call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    pub pod: Pod,
    /// Candidate nodes, in full (when the extender is not `nodeCacheCapable`).
    #[serde(default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names (when it is).
    #[serde(default)]
    pub node_names: Option<Vec<String>>,
}

impl ExtenderArgs {
    /// The candidate nodes' names, whichever way they were sent.
    pub fn candidates(&self) -> Vec<String> {
        match (&self.node_names, &self.nodes) {
            (Some(names), _) => names.clone(),
            (None, Some(list)) => list
                .items
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect(),
            (None, None) => Vec::new(),
        }
    }
}

/// `ExtenderFilterResult`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct FilterResult {
    /// Nodes that passed, in full (answering a request that sent nodes in full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<serde_json::Value>,
    /// Names of nodes that passed (answering a request that sent names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_names: Option<Vec<String>>,
    /// Nodes that failed, and why; preemption might help.
    pub failed_nodes: BTreeMap<String, String>,
    /// Nodes that failed, and why; preemption cannot help.
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// Set when the extender could not judge at all.
    pub error: String,
}

/// `HostPriority`: one node's score.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    /// Node name.
    pub host: String,
    /// 0..=10.
    pub score: i64,
}

/// `ExtenderBindingArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BindingArgs {
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Pod UID.
    #[serde(rename = "PodUID", alias = "PodUid")]
    pub pod_uid: String,
    /// Node chosen.
    pub node: String,
}

/// `ExtenderBindingResult`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct BindingResult {
    /// Empty on success.
    pub error: String,
}

/// GPUs of the candidate nodes, in candidate order.
fn candidate_gpus<'v>(view: &'v ClusterView, candidates: &[String]) -> Vec<&'v Gpu> {
    candidates
        .iter()
        .filter_map(|name| match view.node(name) {
            Some(Ok(gpus)) => Some(gpus.iter()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The engine's job for a pod: its keyed id, with the profile the engine observed under it.
pub fn job_of(pod: &GpuPod) -> Job {
    Job::new(pod.job.clone())
}

/// Why a node without a usable GPU failed.
fn unusable(view: &ClusterView, name: &str) -> String {
    match view.node(name) {
        None => "Tandem has not seen this node yet (it watches nodes; retry shortly)".to_owned(),
        Some(Err(why)) => why.clone(),
        Some(Ok(_)) => unreachable!("only nodes without usable GPUs are unusable"),
    }
}

/// The engine's score (0..=100) of a one-GPU pod on GPUs of the candidate nodes, by GPU id.
/// A GPU scores 0 exactly when the pod does not fit it (the engine's contract), so one `score`
/// call serves both `filter` and `prioritize`.
pub type GpuScores = HashMap<String, u8>;

/// Scores `pod` on every GPU of `candidates` with one engine call.
pub fn score_gpus(
    engine: &Engine,
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
) -> Result<GpuScores, EngineFailure> {
    let gpus = candidate_gpus(view, candidates);
    let scores = engine.score(&job_of(pod), &gpus)?;
    Ok(gpus
        .iter()
        .zip(scores)
        .map(|(g, score)| (g.id.clone(), score))
        .collect())
}

/// What `filter` decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filtered {
    /// Nodes that may take the pod.
    pub passed: Vec<String>,
    /// Nodes that may not, and why; preemption might change that.
    pub failed: BTreeMap<String, String>,
    /// Nodes that may not, and why; preemption cannot change that.
    pub unresolvable: BTreeMap<String, String>,
}

/// Judges where `pod` may go: the OOM guard and sharing cap of the engine for one-GPU pods
/// (from `scores`, see [`score_gpus`]; the engine is asked why only about GPUs of nodes that
/// fail); enough idle GPUs for a pod that needs several (those never share).
pub fn filter(
    engine: &Engine,
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
    scores: &GpuScores,
) -> Result<Filtered, EngineFailure> {
    let mut out = Filtered::default();
    let mut refused: Vec<(&String, &Gpu)> = Vec::new();
    for name in candidates {
        let gpus = match view.node(name) {
            Some(Ok(gpus)) => gpus,
            _ => {
                out.unresolvable
                    .insert(name.clone(), format!("Tandem: {}", unusable(view, name)));
                continue;
            }
        };
        if pod.gpus as usize > gpus.len() {
            out.unresolvable.insert(
                name.clone(),
                format!(
                    "Tandem: the pod needs {} GPUs, the node has {}",
                    pod.gpus,
                    gpus.len()
                ),
            );
            continue;
        }
        if pod.gpus > 1 {
            let idle = gpus.iter().filter(|g| g.residents.is_empty()).count();
            if idle >= pod.gpus as usize {
                out.passed.push(name.clone());
            } else {
                out.failed.insert(
                    name.clone(),
                    format!(
                        "Tandem: the pod needs {} idle GPUs (multi-GPU pods do not share), {idle} are idle",
                        pod.gpus
                    ),
                );
            }
            continue;
        }
        if gpus
            .iter()
            .any(|g| scores.get(&g.id).is_some_and(|&s| s > 0))
        {
            out.passed.push(name.clone());
        } else {
            refused.extend(gpus.iter().map(|g| (name, g)));
        }
    }
    if !refused.is_empty() {
        // Only failing nodes need the engine's words.
        let gpus: Vec<&Gpu> = refused.iter().map(|(_, g)| *g).collect();
        let fits = engine.filter(&job_of(pod), &gpus)?;
        let mut reasons: BTreeMap<&String, Vec<String>> = BTreeMap::new();
        for ((name, gpu), fit) in refused.iter().zip(fits) {
            reasons
                .entry(name)
                .or_default()
                .push(format!("GPU {}: {}", gpu.id, fit.reason));
        }
        for (name, why) in reasons {
            out.failed.insert(
                name.clone(),
                format!("Tandem: no GPU fits: {}", why.join("; ")),
            );
        }
    }
    Ok(out)
}

/// Scores the candidate nodes 0..=10: the engine's best GPU score on each node (from
/// `scores`), relative to the best node (which gets 10), so the engine's ranking survives the
/// protocol's 11 levels.
pub fn prioritize(
    view: &ClusterView,
    pod: &GpuPod,
    candidates: &[String],
    scores: &GpuScores,
) -> Vec<HostPriority> {
    let best: Vec<u32> = candidates
        .iter()
        .map(|name| {
            let Some(Ok(gpus)) = view.node(name) else {
                return 0;
            };
            if pod.gpus > 1 {
                // Multi-GPU pods run alone: prefer the node they leave the least fragmented.
                let idle = gpus.iter().filter(|g| g.residents.is_empty()).count() as u32;
                return if idle >= pod.gpus {
                    100 - 100 * (idle - pod.gpus) / gpus.len().max(1) as u32
                } else {
                    0
                };
            }
            gpus.iter()
                .filter_map(|g| scores.get(&g.id))
                .map(|&s| u32::from(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let top = best.iter().copied().max().unwrap_or(0);
    candidates
        .iter()
        .zip(best)
        .map(|(name, score)| HostPriority {
            host: name.clone(),
            score: if top == 0 {
                0
            } else {
                (i64::from(score) * MAX_PRIORITY + i64::from(top) / 2) / i64::from(top)
            },
        })
        .collect()
}

/// The GPUs of `node` that `pod` should run on: the engine's best-scored fitting GPU for a
/// one-GPU pod; the first idle ones for a pod that needs several. `Err` says why none.
pub fn choose_gpus(
    engine: &Engine,
    view: &ClusterView,
    pod: &GpuPod,
    node: &str,
) -> Result<Result<Vec<String>, String>, EngineFailure> {
    let gpus = match view.node(node) {
        Some(Ok(gpus)) => gpus,
        _ => return Ok(Err(unusable(view, node))),
    };
    if pod.gpus > 1 {
        let idle: Vec<String> = gpus
            .iter()
            .filter(|g| g.residents.is_empty())
            .take(pod.gpus as usize)
            .map(|g| g.id.clone())
            .collect();
        return Ok(if idle.len() == pod.gpus as usize {
            Ok(idle)
        } else {
            Err(format!(
                "the pod needs {} idle GPUs, {} are idle",
                pod.gpus,
                idle.len()
            ))
        });
    }
    let list: Vec<&Gpu> = gpus.iter().collect();
    let job = job_of(pod);
    let fits = engine.filter(&job, &list)?;
    let scores = engine.score(&job, &list)?;
    let best = fits
        .iter()
        .zip(&scores)
        .enumerate()
        .filter(|(_, (fit, _))| fit.fits)
        // Highest score; the lowest index among equals (max_by_key keeps the last maximum).
        .max_by_key(|(i, (_, score))| (**score, std::cmp::Reverse(*i)))
        .map(|(i, _)| gpus[i].id.clone());
    Ok(best.map(|gpu| vec![gpu]).ok_or_else(|| {
        let reasons: Vec<String> = fits
            .iter()
            .map(|f| format!("GPU {}: {}", f.gpu, f.reason))
            .collect();
        format!("no GPU on the node fits any more: {}", reasons.join("; "))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::gpu_pod;
    use crate::cluster::tests::{node, pod};
    use crate::identity::JobKeys;
    use tandem_api::{Outcome, Policy, Profile};
    use tandem_host::{HostConfig, Runtime};

    const RESOURCE: &str = "nvidia.com/gpu";

    fn keys() -> JobKeys {
        JobKeys::new(vec![3; 32]).unwrap()
    }

    fn profile(util: f32, access: f32, mem: u32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: access,
            mem_used_mib: mem,
            gpu_model: "V100".into(),
        }
    }

    /// The real engine component, with profiles for jobs `x`, `y`, `p`, `big` and outcomes
    /// saying `p` suffers little beside `x` and a lot beside `y`.
    fn engine() -> Engine {
        let runtime = Runtime::from_bytes(crate::EMBEDDED_ENGINE, HostConfig::default()).unwrap();
        let recommender = runtime.bootstrap(&Policy::default(), 1).unwrap();
        let engine = Engine::new(runtime, recommender, HashMap::new());
        let k = keys();
        for (job, p) in [
            ("x", profile(35.0, 12.0, 4_000)),
            ("y", profile(92.0, 70.0, 5_000)),
            ("p", profile(45.0, 20.0, 4_500)),
            ("big", profile(60.0, 30.0, 20_000)),
        ] {
            engine.observe_profile(&k.key("default", job), &p).unwrap();
        }
        for _ in 0..3 {
            for (partner, colocated) in [("x", [112.0, 110.0]), ("y", [195.0, 160.0])] {
                engine
                    .observe_outcome(&Outcome {
                        gpu_model: "V100".into(),
                        jobs: vec![k.key("default", "p"), k.key("default", partner)],
                        solo_s: vec![100.0, 100.0],
                        colocated_s: colocated.to_vec(),
                    })
                    .unwrap();
            }
        }
        engine
    }

    fn view(pods: &[Pod]) -> ClusterView {
        let nodes = [
            node("a", 1, "Tesla-V100", Some(16_384)),
            node("b", 1, "Tesla-V100", Some(16_384)),
            node("cpu", 0, "none", None),
        ];
        let k = keys();
        ClusterView::build(
            &nodes,
            pods.iter().filter_map(|p| gpu_pod(p, &k, RESOURCE)),
            RESOURCE,
        )
    }

    fn pending(job: &str, gpus: u32) -> GpuPod {
        gpu_pod(&pod(job, gpus, None, None), &keys(), RESOURCE).unwrap()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn filter_gives_the_memory_reason_and_separates_unresolvable_nodes() {
        let engine = engine();
        let view = view(&[]);
        let candidates = names(&["a", "cpu", "ghost"]);
        let big = pending("big", 1);
        let scores = score_gpus(&engine, &view, &big, &candidates).unwrap();
        let out = filter(&engine, &view, &big, &candidates, &scores).unwrap();
        assert!(out.passed.is_empty());
        assert!(
            out.failed["a"].contains("needs 20000 MiB"),
            "{:?}",
            out.failed
        );
        assert!(out.unresolvable["cpu"].contains("no nvidia.com/gpu"));
        assert!(out.unresolvable["ghost"].contains("not seen this node"));
        let (p, candidates) = (pending("p", 1), names(&["a", "b"]));
        let scores = score_gpus(&engine, &view, &p, &candidates).unwrap();
        let fits = filter(&engine, &view, &p, &candidates, &scores).unwrap();
        assert_eq!(fits.passed, ["a", "b"]);
    }

    #[test]
    fn prioritize_prefers_the_co_runner_the_engine_predicts_better() {
        let engine = engine();
        let view = view(&[
            pod("x", 1, Some("a"), Some("a/0")),
            pod("y", 1, Some("b"), Some("b/0")),
        ]);
        let (p, candidates) = (pending("p", 1), names(&["a", "b"]));
        let gpu_scores = score_gpus(&engine, &view, &p, &candidates).unwrap();
        let scores = prioritize(&view, &p, &candidates, &gpu_scores);
        assert_eq!(scores[0].host, "a");
        assert_eq!(scores[0].score, MAX_PRIORITY);
        assert!(scores[1].score < scores[0].score, "{scores:?}");
        let chosen = choose_gpus(&engine, &view, &pending("p", 1), "a").unwrap();
        assert_eq!(chosen, Ok(vec!["a/0".to_owned()]));
    }

    #[test]
    fn multi_gpu_pods_need_idle_gpus() {
        let engine = engine();
        let view = view(&[]);
        let out = filter(
            &engine,
            &view,
            &pending("p", 2),
            &names(&["a"]),
            &GpuScores::new(),
        )
        .unwrap();
        assert!(out.unresolvable["a"].contains("needs 2 GPUs, the node has 1"));
        let chosen = choose_gpus(&engine, &view, &pending("p", 2), "a").unwrap();
        assert!(chosen.unwrap_err().contains("needs 2 idle GPUs"));
    }

    #[test]
    fn several_runs_of_one_job_do_not_break_the_engine_call() {
        let engine = engine();
        // Two runs of `x` hold GPUs on two nodes, and a third is pending: the contract wants
        // unique ids per call, so repeats go under aliases with x's profile.
        let mut second = pod("x-2", 1, Some("b"), Some("b/0"));
        second.metadata.labels = Some(BTreeMap::from([(
            crate::identity::JOB_LABEL.to_owned(),
            "x".to_owned(),
        )]));
        let view = view(&[pod("x", 1, Some("a"), Some("a/0")), second]);
        let (x, candidates) = (pending("x", 1), names(&["a", "b"]));
        let scores = score_gpus(&engine, &view, &x, &candidates).unwrap();
        let out = filter(&engine, &view, &x, &candidates, &scores).unwrap();
        assert_eq!(out.passed, ["a", "b"], "{out:?}");
    }
}
