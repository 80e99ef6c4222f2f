//! Pods as runs for learning from finished pods ([`tandem_adapter_core::outcomes`]): when a
//! pod held its one GPU, and which runs shared that GPU with it. Every Kubernetes front-end
//! reads runs this way, whether its pods come from kube-rs watchers or from kube-scheduler's
//! informers.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use tandem_adapter_core::JobKeys;
use tandem_adapter_core::outcomes::Run;

use crate::cluster::{ClusterView, GpuPod};

/// Now, in seconds since the epoch.
pub fn now_seconds() -> f64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// Whether the pod's phase is final (`Succeeded` or `Failed`).
pub fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The GPU model of `gpu`, where the view knows `pod`'s node.
pub fn model_of(view: &ClusterView, pod: &GpuPod, gpu: &str) -> Option<String> {
    view.node(pod.node.as_deref().unwrap_or_default())
        .and_then(|entry| entry.as_ref().ok())
        .and_then(|gpus| gpus.iter().find(|g| g.id == gpu))
        .map(|g| g.spec.model.clone())
}

/// A pod's run: from its containers' start to their finish (or the pod's start time).
pub fn run_of(pod: &Pod, gp: &GpuPod, model: &str, keys: &JobKeys) -> Option<Run> {
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
    Some(Run {
        // The ledger is stored: it holds the UID keyed, never as is.
        uid: keys.key_run(&gp.uid),
        job: gp.job.clone(),
        model: model.to_owned(),
        start: start?,
        end: if is_finished(pod) { Some(end?) } else { None },
        work: gp.declared.as_ref().map_or(1.0, |d| d.work_done()),
    })
}

/// Every finished run with the runs that held the same GPU around it, earliest finish first
/// (as live events would have come): what catching up with finished pods teaches, as one batch.
/// `runs` are `(GPU, run, finished)`.
pub fn finished_batch(runs: impl IntoIterator<Item = (String, Run, bool)>) -> Vec<(Run, Vec<Run>)> {
    let mut by_gpu: HashMap<String, Vec<(Run, bool)>> = HashMap::new();
    for (gpu, run, finished) in runs {
        by_gpu.entry(gpu).or_default().push((run, finished));
    }
    let mut batch = Vec::new();
    for runs in by_gpu.values() {
        for (run, finished) in runs {
            if !finished {
                continue;
            }
            let others: Vec<Run> = runs
                .iter()
                .filter(|(other, _)| other.uid != run.uid)
                .map(|(other, _)| other.clone())
                .collect();
            batch.push((run.clone(), others));
        }
    }
    batch.sort_by(|a, b| a.0.end.unwrap_or(0.0).total_cmp(&b.0.end.unwrap_or(0.0)));
    batch
}

/// What a pod's node says of its run: the GPU model of its GPUs, that it has none Tandem
/// manages, or that it has not been seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeModel<'a> {
    /// The node's managed GPUs are of this model.
    Known(&'a str),
    /// The node is known and has no managed GPU: its pods hold no run.
    Unmanaged,
    /// The node has not been seen yet: its pods wait for it.
    NotSeen,
}

/// The run of a pod that held one GPU.
#[derive(Debug, Clone)]
struct Held {
    gpu: String,
    run: Run,
    finished: bool,
}

/// The runs of pods that held one GPU, kept for their partners' and taught once finished: what
/// a front-end whose pods come as events (the framework plugin) keeps, where a watcher's store
/// keeps the pods themselves ([`crate::app::App::pod_finished`] reads runs from it).
///
/// Events of one stream come in order, so a run that finishes meets the partner that started
/// before it. A pod may come before its node (whose GPU model its run needs): it waits, and is
/// held once the node comes ([`HeldRuns::node_came`]).
#[derive(Debug, Default)]
pub struct HeldRuns {
    /// Runs by pod UID.
    held: HashMap<String, Held>,
    /// Pods holding one GPU on a node not seen yet, by node name, each in its latest version,
    /// in the order their events came.
    waiting: HashMap<String, Vec<Pod>>,
}

impl HeldRuns {
    /// Holds the run of `pod` (its view `gp`) if it holds one GPU of a node of a known model;
    /// a pod on a node not seen yet waits for it. Returns the run with the runs held beside it
    /// on its GPU when it just finished: what is to be learned.
    pub fn hold(
        &mut self,
        pod: &Pod,
        gp: &GpuPod,
        node: NodeModel<'_>,
        keys: &JobKeys,
    ) -> Option<(Run, Vec<Run>)> {
        let held = self.run_held(pod, gp, node, keys)?;
        self.keep(gp.uid.clone(), held)
    }

    /// The run `pod` holds on one GPU of a node of model `node`, or `None`; a pod whose node
    /// was not seen waits.
    fn run_held(
        &mut self,
        pod: &Pod,
        gp: &GpuPod,
        node: NodeModel<'_>,
        keys: &JobKeys,
    ) -> Option<Held> {
        let [gpu] = gp.assigned.as_slice() else {
            return None;
        };
        let name = gp.node.as_deref()?;
        let model = match node {
            NodeModel::Known(model) => model,
            NodeModel::Unmanaged => return None,
            NodeModel::NotSeen => {
                let waiting = self.waiting.entry(name.to_owned()).or_default();
                waiting.retain(|p| p.metadata.uid.as_deref() != Some(gp.uid.as_str()));
                waiting.push(pod.clone());
                return None;
            }
        };
        Some(Held {
            gpu: gpu.clone(),
            run: run_of(pod, gp, model, keys)?,
            finished: is_finished(pod),
        })
    }

    /// Keeps run `held` of pod `uid`; a run that just finished is returned with the runs held
    /// beside it on its GPU.
    fn keep(&mut self, uid: String, held: Held) -> Option<(Run, Vec<Run>)> {
        let newly = held.finished && self.held.get(&uid).is_none_or(|old| !old.finished);
        let learned = newly.then(|| {
            let others = self
                .held
                .iter()
                .filter(|(other_uid, other)| **other_uid != uid && other.gpu == held.gpu)
                .map(|(_, other)| other.run.clone())
                .collect();
            (held.run.clone(), others)
        });
        self.held.insert(uid, held);
        learned
    }

    /// Node `name` came, of model `node`: the pods that waited for it are held. Every run is
    /// held first, so that each finished one meets the partners it ran beside whatever order
    /// their events came in; the finished ones are returned in the order they finished (a
    /// pair's outcome needs its solo runs learned first). `view` is each pod's view, as the
    /// front-end reads it.
    pub fn node_came(
        &mut self,
        name: &str,
        node: NodeModel<'_>,
        keys: &JobKeys,
        view: impl Fn(&Pod) -> Option<GpuPod>,
    ) -> Vec<(Run, Vec<Run>)> {
        let Some(pods) = self.waiting.remove(name) else {
            return Vec::new();
        };
        let mut runs = Vec::with_capacity(pods.len());
        for pod in &pods {
            let Some(gp) = view(pod) else {
                continue;
            };
            if let Some(held) = self.run_held(pod, &gp, node, keys) {
                self.held.entry(gp.uid.clone()).or_insert_with(|| Held {
                    finished: false,
                    ..held.clone()
                });
                runs.push((gp.uid, held));
            }
        }
        runs.sort_by(|(_, a), (_, b)| {
            let end = |held: &Held| held.run.end.unwrap_or(f64::INFINITY);
            end(a).total_cmp(&end(b))
        });
        runs.into_iter()
            .filter_map(|(uid, held)| self.keep(uid, held))
            .collect()
    }

    /// Node `name` is gone: its waiting pods will never be held.
    pub fn node_gone(&mut self, name: &str) {
        self.waiting.remove(name);
    }

    /// The pod `uid` is gone: its run is no one's partner any more.
    pub fn forget(&mut self, uid: &str) {
        self.held.remove(uid);
        if !self.waiting.is_empty() {
            for pods in self.waiting.values_mut() {
                pods.retain(|p| p.metadata.uid.as_deref() != Some(uid));
            }
            self.waiting.retain(|_, pods| !pods.is_empty());
        }
    }

    /// Whether a held run of the job of keyed id `job` is on `node` (a finished pod stays until
    /// it is deleted).
    pub fn runs_on(&self, job: &str, node: &str) -> bool {
        self.held.values().any(|h| {
            h.run.job == job
                && h.gpu
                    .strip_prefix(node)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Every finished run held, with the runs beside it ([`finished_batch`]): for a new leader
    /// to catch up with what finished while it did not lead.
    pub fn finished(&self) -> Vec<(Run, Vec<Run>)> {
        finished_batch(
            self.held
                .values()
                .map(|held| (held.gpu.clone(), held.run.clone(), held.finished)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(uid: &str, end: Option<f64>) -> Run {
        Run {
            uid: uid.into(),
            job: format!("job-{uid}"),
            model: "V100".into(),
            start: 0.0,
            end,
            work: 1.0,
        }
    }

    #[test]
    fn a_batch_pairs_each_finished_run_with_its_gpus_others_earliest_first() {
        let batch = finished_batch([
            ("g/0".to_owned(), run("a", Some(20.0)), true),
            ("g/0".to_owned(), run("b", None), false),
            ("g/1".to_owned(), run("c", Some(10.0)), true),
        ]);
        let uids: Vec<(&str, Vec<&str>)> = batch
            .iter()
            .map(|(run, others)| {
                (
                    run.uid.as_str(),
                    others.iter().map(|o| o.uid.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(uids, vec![("c", vec![]), ("a", vec!["b"])]);
    }
}
