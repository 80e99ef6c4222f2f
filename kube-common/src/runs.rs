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
