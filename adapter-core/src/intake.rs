//! Who may feed the knowledge base through the intake, and how much.
//!
//! Every intake request (`/v1/profiles`, `/v1/outcomes`, and the operator's questions
//! `/v1/predict`, `/v1/estimate`, `/v1/knowledge`) is made by a [`Caller`]: the holder of the
//! operator's intake token (`--intake-token-file`), who may do anything ([`Scope::Any`]), or a
//! node profiler authenticated by a front-end's [`IntakeAuth`] — a Kubernetes service-account
//! token reviewed by the API server, a MUNGE credential on a Slurm node — which may only post
//! profiles of the jobs running on its own node ([`Scope::Node`]; where a job runs is the
//! front-end's [`JobLocator`]). So a node whose credential leaks can lie about its own jobs,
//! and about nothing else.
//!
//! What one caller may add is bounded per minute ([`RateBound`]): the items of the profiles
//! and outcomes it posts, counted whether or not they are learned.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub use axum::http::HeaderMap;
use futures::future::BoxFuture;

/// Who made an intake request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// A name for logs, metrics and the rate bound: `operator` for the intake token, the node's
    /// name (`node/<name>`) for a profiler. Names no job.
    pub name: String,
    /// What the caller may do.
    pub scope: Scope,
}

/// What a [`Caller`] may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Anything the intake serves: the operator's token.
    Any,
    /// Post profiles (`/v1/profiles`) of jobs that run on this node, nothing else: a node
    /// profiler.
    Node(String),
}

impl Caller {
    /// The holder of the operator's intake token.
    pub fn operator() -> Self {
        Self {
            name: "operator".to_owned(),
            scope: Scope::Any,
        }
    }

    /// The profiler of node `node`.
    pub fn node(node: &str) -> Self {
        Self {
            name: format!("node/{node}"),
            scope: Scope::Node(node.to_owned()),
        }
    }
}

/// Why a caller was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that does not prove anything (expired, forged, for another
    /// audience): answered `401`.
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid credential whose holder may not make this request: answered `403`.
    #[error("{0}")]
    Forbidden(String),
    /// The credential could not be checked now (the API server or the MUNGE daemon did not
    /// answer): answered `503`, so a profiler retries.
    #[error("{0}")]
    Unavailable(String),
}

/// How a front-end authenticates the node profilers that post to its intake, beside the
/// operator's token (which the core checks first, [`crate::Core::intake_token`]).
///
/// A Kubernetes front-end reviews the profiler pod's projected service-account token with the
/// API server (`tandem_kube_common::intake`); the Slurm service checks a MUNGE credential.
pub trait IntakeAuth: Send + Sync + 'static {
    /// Who presents these headers: a [`Caller`] of [`Scope::Node`] for a node profiler, or why
    /// not. Called for every intake request whose credential is not the operator's token, so
    /// an implementation caches what is costly to check (for a bounded time and number of
    /// credentials).
    fn authenticate<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Caller, AuthError>>;
}

/// Where jobs run, as the front-end sees its cluster: whether a node-scoped caller
/// ([`Scope::Node`]) may post a profile of a job.
pub trait JobLocator: Send + Sync + 'static {
    /// Whether the job of keyed id `job` has a run (a pod, a Slurm step) on node `node` now.
    fn runs_on(&self, job: &str, node: &str) -> bool;
}

impl<F: Fn(&str, &str) -> bool + Send + Sync + 'static> JobLocator for F {
    fn runs_on(&self, job: &str, node: &str) -> bool {
        self(job, node)
    }
}

/// The default of [`RateBound`]'s items per minute: a node's profiler posts one profile per
/// job, once its first window (a minute) has passed, so even a node of 8 GPUs shared 8 ways
/// sends 64 in a minute; 3,000 is nearly fifty times that, and still keeps one caller from
/// churning a full knowledge base (570,000 profiles) in less than three hours.
pub const DEFAULT_ITEMS_PER_MINUTE: u32 = 3_000;

/// Most callers whose use the bound remembers: past it, those whose allowance is whole again
/// are forgotten first (forgetting them changes nothing), then the one seen longest ago.
const MAX_CALLERS: usize = 16_384;

/// A bound on the items (profiles, outcomes) each caller may add per minute: a token bucket
/// per caller, holding a minute's worth and refilled continuously.
#[derive(Debug)]
pub struct RateBound {
    per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Items the caller may still add.
    allowance: f64,
    /// When `allowance` was last brought up to date.
    at: Instant,
}

/// A request refused by the [`RateBound`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{caller} may add at most {per_minute} items per minute (--intake-items-per-minute); this \
     request has {items}, {allowed} are allowed now: retry in {} s",
    .retry_after.as_secs()
)]
pub struct RateLimited {
    /// The caller.
    pub caller: String,
    /// The bound.
    pub per_minute: u32,
    /// Items in the refused request.
    pub items: usize,
    /// Items the caller may add now.
    pub allowed: u64,
    /// When the request would be admitted (a request larger than the bound never is: it is
    /// answered `413` instead).
    pub retry_after: Duration,
}

impl RateBound {
    /// A bound of `per_minute` items per caller (0: no bound).
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The bound, items per minute (0: none).
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Takes `items` from `caller`'s allowance at `now`, or says when they would fit.
    pub fn admit(&self, caller: &str, items: usize, now: Instant) -> Result<(), RateLimited> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock();
        if buckets.len() >= MAX_CALLERS && !buckets.contains_key(caller) {
            forget_some(&mut buckets, capacity, per_second, now);
        }
        let bucket = buckets.entry(caller.to_owned()).or_insert(Bucket {
            allowance: capacity,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.allowance = (bucket.allowance + elapsed * per_second).min(capacity);
        bucket.at = now;
        let wanted = items as f64;
        if wanted <= bucket.allowance {
            bucket.allowance -= wanted;
            return Ok(());
        }
        let missing = wanted.min(capacity) - bucket.allowance;
        Err(RateLimited {
            caller: caller.to_owned(),
            per_minute: self.per_minute,
            items,
            allowed: bucket.allowance.floor() as u64,
            retry_after: Duration::from_secs((missing / per_second).ceil().max(1.0) as u64),
        })
    }
}

/// Makes room among `buckets`: forgets every caller whose allowance is whole again by `now`,
/// or else the one seen longest ago.
fn forget_some(
    buckets: &mut HashMap<String, Bucket>,
    capacity: f64,
    per_second: f64,
    now: Instant,
) {
    let whole = |b: &Bucket| {
        b.allowance + now.saturating_duration_since(b.at).as_secs_f64() * per_second >= capacity
    };
    buckets.retain(|_, b| !whole(b));
    if buckets.len() >= MAX_CALLERS
        && let Some(oldest) = buckets
            .iter()
            .min_by_key(|(_, b)| b.at)
            .map(|(name, _)| name.clone())
    {
        buckets.remove(&oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_gets_a_minutes_worth_then_what_refills() {
        let bound = RateBound::new(60);
        let start = Instant::now();
        bound.admit("node/a", 50, start).unwrap();
        // Another caller has an allowance of its own.
        bound.admit("node/b", 60, start).unwrap();
        let refused = bound.admit("node/a", 20, start).unwrap_err();
        assert_eq!((refused.allowed, refused.items), (10, 20));
        // 10 more are missing, at one per second.
        assert_eq!(refused.retry_after, Duration::from_secs(10));
        let message = refused.to_string();
        assert!(
            message.starts_with("node/a may add at most 60 items per minute"),
            "{message}"
        );
        bound
            .admit("node/a", 20, start + Duration::from_secs(10))
            .unwrap();
        // Refilled to a minute's worth, never more.
        let later = start + Duration::from_secs(3_600);
        bound.admit("node/a", 60, later).unwrap();
        assert!(bound.admit("node/a", 1, later).is_err());
    }

    #[test]
    fn no_bound_admits_anything_and_the_callers_remembered_are_bounded() {
        let open = RateBound::new(0);
        open.admit("operator", usize::MAX, Instant::now()).unwrap();
        let bound = RateBound::new(10);
        let now = Instant::now();
        for n in 0..MAX_CALLERS + 10 {
            bound.admit(&format!("node/{n}"), 5, now).unwrap();
        }
        assert!(bound.buckets.lock().len() <= MAX_CALLERS);
    }
}
