//! Where the knowledge base is kept: the trait every backend implements, and what is stored.
//!
//! A stored knowledge base is the engine's snapshot plus what the core keeps beside it
//! ([`AdapterState`]: the outcome ledger), under an opaque *version* the backend assigns. Every
//! write names the version it replaces, so a writer that missed someone else's write gets
//! [`StoreError::Conflict`] instead of silently overwriting it. Kubernetes adapters keep it in
//! a ConfigMap written with `resourceVersion` preconditions (`tandem-kube-adapter`'s
//! `ConfigMapStore`); a single-controller scheduler such as Slurm keeps it in a file.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::outcomes::Ledger;

/// What the core stores beside the engine's snapshot.
///
/// Knowledge bases written before the cluster view (WIT 0.4.0) also carry the last profile of
/// each keyed id (`profiles`); the engine knows them from its snapshot, so they are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdapterState {
    /// Solo history and processed runs, for outcome estimation.
    pub ledger: Ledger,
}

/// A stored knowledge base and the version it was read at.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The engine's snapshot.
    pub engine: Vec<u8>,
    /// The core's state.
    pub adapter: AdapterState,
    /// The backend's version of what was read.
    pub version: String,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Someone else wrote since our last read.
    #[error("the knowledge base {0} changed since it was last read (another writer?)")]
    Conflict(String),
    /// The stored object is not a knowledge base this adapter can read.
    #[error("{name} is not a Tandem knowledge base: {why}")]
    Malformed {
        /// What was read.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The state does not fit the backend.
    #[error("the knowledge base is {size} bytes, more than {backend} holds ({limit} bytes)")]
    TooLarge {
        /// Bytes to write.
        size: usize,
        /// The backend.
        backend: &'static str,
        /// Most it holds.
        limit: usize,
    },
    /// The backend failed.
    #[error("{0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A place to keep the knowledge base.
pub trait KnowledgeStore: Send + Sync + 'static {
    /// Reads the knowledge base; `None` if none was stored yet.
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>>;

    /// Writes the knowledge base: creates it when `version` is `None`, else replaces the one at
    /// that version. Returns the new version.
    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>>;
}
