//! Placements the engine made before the pod watcher can show them: a GPU held for a pod by
//! the extender's `filter`, a pod bound by `bind`, a task allocated in a Volcano session.
//!
//! The engine is told of a placement at once, on its own thread; the view it is synced to is
//! rebuilt from the watchers, which show the placement only once the API server has it. Two
//! things keep the engine from forgetting a placement in between:
//! - a view rebuilt later counts every assumption the watcher does not show yet
//!   (`App::view`), even for a pod too new for the watcher;
//! - each assumption is numbered, and a view remembers the last number it counted
//!   ([`crate::cluster::ClusterView::assumed_through`]): when the engine is synced to a view
//!   built before a placement, the newer placements are laid over it ([`Assumptions::newer_than`]).
//!
//! Without the second, a `bind` answered while another request rebuilt the view from an older
//! state would leave the engine believing the pod's GPU idle, and give it to the next pod.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tandem_api::Job;

use crate::cluster::GpuPod;

/// How long a placement is assumed before the pod watcher must confirm it, where nothing else
/// says that it was given up ([`Assumptions::default`]).
pub const ASSUME_FOR: Duration = Duration::from_secs(60);

/// One placement, until the watcher shows it.
#[derive(Debug, Clone)]
pub struct Assumed {
    /// The pod as placed: its node and GPUs set.
    pub pod: GpuPod,
    at: Instant,
    seq: u64,
}

impl Assumed {
    /// The node it was placed on.
    pub fn node(&self) -> &str {
        self.pod.node.as_deref().unwrap_or_default()
    }

    /// The GPUs it was placed on.
    pub fn gpus(&self) -> &[String] {
        &self.pod.assigned
    }

    fn live(&self, keep_for: Option<Duration>) -> bool {
        keep_for.is_none_or(|keep_for| self.at.elapsed() < keep_for)
    }
}

#[derive(Debug, Default)]
struct Inner {
    by_uid: HashMap<String, Assumed>,
    /// The number of the last assumption made.
    last: u64,
}

/// The assumptions of one front-end, by pod UID. Shared with the engine thread, which records
/// a placement in the same step that makes it.
#[derive(Debug)]
pub struct Assumptions {
    inner: Mutex<Inner>,
    /// How long an assumption lives unconfirmed; `None`: until it is confirmed or forgotten.
    keep_for: Option<Duration>,
}

/// Assumptions that expire after [`ASSUME_FOR`]: an extender is not told when the scheduler
/// gives up on a pod it filtered for.
impl Default for Assumptions {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            keep_for: Some(ASSUME_FOR),
        }
    }
}

impl Assumptions {
    /// Assumptions kept until the pod's events confirm them or the front-end forgets them:
    /// kube-scheduler tells a framework plugin of every placement it gives up (Unreserve),
    /// however long binding takes.
    pub fn until_confirmed() -> Self {
        Self {
            inner: Mutex::default(),
            keep_for: None,
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Assumes `pod` placed on `gpus` of `node`, replacing what was assumed of it before.
    pub fn record(&self, pod: &GpuPod, node: &str, gpus: &[String]) {
        let mut inner = self.lock();
        inner.last += 1;
        let seq = inner.last;
        let pod = GpuPod {
            node: Some(node.to_owned()),
            assigned: gpus.to_vec(),
            ..pod.clone()
        };
        inner.by_uid.insert(
            pod.uid.clone(),
            Assumed {
                pod,
                at: Instant::now(),
                seq,
            },
        );
    }

    /// What is assumed of the pod `uid`, unless it expired.
    pub fn get(&self, uid: &str) -> Option<Assumed> {
        let keep_for = self.keep_for;
        self.lock()
            .by_uid
            .get(uid)
            .filter(|a| a.live(keep_for))
            .cloned()
    }

    /// Whether anything is assumed of the pod `uid`.
    pub fn contains(&self, uid: &str) -> bool {
        self.lock()
            .by_uid
            .get(uid)
            .is_some_and(|a| a.live(self.keep_for))
    }

    /// Forgets the pod `uid`; returns what was assumed of it.
    pub fn remove(&self, uid: &str) -> Option<Assumed> {
        self.lock().by_uid.remove(uid)
    }

    /// Runs `build` over the live assumptions (expired ones are dropped first) and the number
    /// of the last one: the view's rebuild, which drops what the watcher now shows.
    pub fn with_live<R>(&self, build: impl FnOnce(&mut HashMap<String, Assumed>, u64) -> R) -> R {
        let mut inner = self.lock();
        inner.by_uid.retain(|_, a| a.live(self.keep_for));
        let last = inner.last;
        build(&mut inner.by_uid, last)
    }

    /// The residents of the live assumptions made after number `seq`, by GPU: what a view that
    /// counted assumptions up to `seq` lacks.
    pub fn newer_than(&self, seq: u64) -> HashMap<String, Vec<Job>> {
        let inner = self.lock();
        let mut residents: HashMap<String, Vec<Job>> = HashMap::new();
        if inner.last <= seq {
            return residents;
        }
        for assumed in inner.by_uid.values() {
            if assumed.seq > seq && assumed.live(self.keep_for) {
                for gpu in assumed.gpus() {
                    residents
                        .entry(gpu.clone())
                        .or_default()
                        .push(assumed.pod.resident());
                }
            }
        }
        residents
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> GpuPod {
        let keys = tandem_adapter_core::JobKeys::new(vec![7; 32]).unwrap();
        crate::cluster::gpu_pod(
            &crate::cluster::testing::pod(name, 1, None, None),
            &keys,
            "nvidia.com/gpu",
            &crate::placement::Placements::default(),
        )
        .unwrap()
    }

    #[test]
    fn only_assumptions_after_a_number_are_newer() {
        let assumed = Assumptions::default();
        assumed.record(&pod("a"), "n1", &["n1/0".into()]);
        let through = assumed.with_live(|_, last| last);
        assert!(assumed.newer_than(through).is_empty());
        assumed.record(&pod("b"), "n1", &["n1/1".into()]);
        let newer = assumed.newer_than(through);
        assert_eq!(newer.keys().collect::<Vec<_>>(), ["n1/1"]);
        assert_eq!(newer["n1/1"][0].id, pod("b").job);
        // Recording a pod again renumbers it: a placement moved is newer than the view.
        assumed.record(&pod("a"), "n2", &["n2/0".into()]);
        let newer = assumed.newer_than(through);
        assert!(newer.contains_key("n2/0") && !newer.contains_key("n1/0"));
        let a = assumed.get("uid-a").unwrap();
        assert_eq!((a.node(), a.gpus()), ("n2", &["n2/0".to_owned()][..]));
        assert!(assumed.remove("uid-a").is_some() && !assumed.contains("uid-a"));
    }

    #[test]
    fn an_assumption_expires_unless_it_lasts_until_confirmed() {
        let expiring = Assumptions {
            keep_for: Some(Duration::ZERO),
            ..Assumptions::default()
        };
        let lasting = Assumptions::until_confirmed();
        for assumed in [&expiring, &lasting] {
            assumed.record(&pod("a"), "n1", &["n1/0".into()]);
        }
        assert!(!expiring.contains("uid-a") && expiring.newer_than(0).is_empty());
        assert!(lasting.contains("uid-a") && lasting.newer_than(0).contains_key("n1/0"));
        assert_eq!(lasting.with_live(|live, _| live.len()), 1);
        assert_eq!(expiring.with_live(|live, _| live.len()), 0);
    }
}
