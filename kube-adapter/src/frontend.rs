//! The extender's state: the shared Kubernetes [`App`], and what only the extender protocol
//! needs beside it — which nodes `filter` passes, and the scores `filter`
//! computed, kept for the `prioritize` of the same pod that kube-scheduler sends next.

use std::sync::Arc;

use parking_lot::Mutex;
use tandem_kube_common::app::App;
use tandem_kube_common::cluster::GpuPod;
use tandem_kube_common::decide::{FilterPasses, NodeScores};

/// The scores computed by the last `filter`.
#[derive(Debug)]
struct ScoreCache {
    pod: String,
    /// The view and the knowledge they were computed against.
    epochs: (u64, u64),
    scores: Arc<NodeScores>,
}

/// The kube-scheduler extender's state.
pub struct Extender {
    /// The Kubernetes front-end state every front-end shares.
    pub app: Arc<App>,
    /// Which nodes `filter` passes (`--filter-passes`).
    pub filter_passes: FilterPasses,
    scores: Mutex<Option<ScoreCache>>,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender")
            .field("filter_passes", &self.filter_passes)
            .finish_non_exhaustive()
    }
}

impl Extender {
    /// The extender over `app`, its `filter` passing the nodes `filter_passes` says.
    pub fn new(app: Arc<App>, filter_passes: FilterPasses) -> Self {
        Self {
            app,
            filter_passes,
            scores: Mutex::new(None),
        }
    }

    /// The engine's scores of a one-GPU `pod` on `candidates`: from the last `filter` of the
    /// same pod when nothing changed since (kube-scheduler sends `prioritize` right after
    /// `filter`, over the nodes that passed), else from the engine.
    pub fn cached_scores(&self, pod: &GpuPod, epoch: u64) -> Option<Arc<NodeScores>> {
        let cache = self.scores.lock();
        cache
            .as_ref()
            .filter(|hit| {
                !pod.uid.is_empty()
                    && hit.pod == pod.uid
                    && hit.epochs == (epoch, self.app.core.epoch())
            })
            .map(|hit| Arc::clone(&hit.scores))
    }

    /// Keeps `scores` of `pod` for its `prioritize`.
    pub fn keep_scores(&self, pod: &GpuPod, epoch: u64, scores: Arc<NodeScores>) {
        *self.scores.lock() = Some(ScoreCache {
            pod: pod.uid.clone(),
            epochs: (epoch, self.app.core.epoch()),
            scores,
        });
    }
}
