//! The knowledge base, kept in the cluster.
//!
//! One ConfigMap holds the engine's snapshot (`binaryData.engine`) and what the adapter keeps
//! beside it (`data["adapter.json"]`: profiles per keyed id and the outcome [`Ledger`]). Every
//! write is conditional on the `resourceVersion` last read or written, so a writer that missed
//! someone else's change gets a conflict instead of silently overwriting it; only the leader
//! (see [`crate::leader`]) writes at all. A restarted or second replica reads it at start, so it
//! resumes with everything acknowledged.
//!
//! A ConfigMap holds at most 1 MiB; a write that would exceed it fails loudly (and the
//! observation is not acknowledged). The engine snapshot of a knowledge base with thousands of
//! profiles and outcomes stays well under that.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde::{Deserialize, Serialize};
use tandem_api::Profile;

use crate::outcomes::Ledger;

/// Format tag of the stored knowledge base.
pub const FORMAT: &str = "tandem-kube-kb/1";

/// Largest object the API server stores.
const MAX_BYTES: usize = 1 << 20;

/// What the adapter stores beside the engine's snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdapterState {
    /// Last profile observed per keyed id.
    pub profiles: BTreeMap<String, Profile>,
    /// Solo history and processed pods, for outcome estimation.
    pub ledger: Ledger,
}

impl AdapterState {
    /// The profiles as the engine wrapper keeps them.
    pub fn profile_map(&self) -> HashMap<String, Profile> {
        self.profiles
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// A stored knowledge base and the version it was read at.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The engine's snapshot.
    pub engine: Vec<u8>,
    /// The adapter's state.
    pub adapter: AdapterState,
    /// `resourceVersion` of the ConfigMap.
    pub version: String,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Someone else wrote since our last read.
    #[error("the knowledge base ConfigMap {0} changed since it was last read (another writer?)")]
    Conflict(String),
    /// The stored object is not a knowledge base this adapter can read.
    #[error("ConfigMap {name} is not a Tandem knowledge base: {why}")]
    Malformed {
        /// The ConfigMap.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The state does not fit in a ConfigMap.
    #[error("the knowledge base is {0} bytes, more than a ConfigMap holds (1 MiB)")]
    TooLarge(usize),
    /// The API server failed.
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

/// The ConfigMap the knowledge base lives in.
#[derive(Clone)]
pub struct KnowledgeStore {
    api: Api<ConfigMap>,
    name: String,
}

impl std::fmt::Debug for KnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl KnowledgeStore {
    /// The ConfigMap `name` in `namespace`.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }

    /// Reads the knowledge base; `None` if none was stored yet.
    pub async fn load(&self) -> Result<Option<Stored>, StoreError> {
        let Some(map) = self.api.get_opt(&self.name).await? else {
            return Ok(None);
        };
        let malformed = |why: String| StoreError::Malformed {
            name: self.name.clone(),
            why,
        };
        let data = map.data.unwrap_or_default();
        match data.get("format").map(String::as_str) {
            Some(FORMAT) => {}
            other => {
                return Err(malformed(format!(
                    "format is {other:?}, expected {FORMAT:?}"
                )));
            }
        }
        let engine = map
            .binary_data
            .and_then(|mut b| b.remove("engine"))
            .ok_or_else(|| malformed("binaryData.engine is missing".into()))?
            .0;
        let adapter = data
            .get("adapter.json")
            .map(|text| serde_json::from_str(text))
            .transpose()
            .map_err(|e| malformed(format!("data[adapter.json]: {e}")))?
            .unwrap_or_default();
        Ok(Some(Stored {
            engine,
            adapter,
            version: map.metadata.resource_version.unwrap_or_default(),
        }))
    }

    /// Writes the knowledge base: creates it when `version` is `None`, else replaces the one
    /// at that `resourceVersion`. Returns the new version.
    pub async fn save(
        &self,
        version: Option<&str>,
        engine: &[u8],
        adapter: &AdapterState,
    ) -> Result<String, StoreError> {
        let adapter_json = serde_json::to_string(adapter).expect("adapter state serializes");
        let size = engine.len() + adapter_json.len();
        if size > MAX_BYTES - 4096 {
            return Err(StoreError::TooLarge(size));
        }
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version: version.map(str::to_owned),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_owned(),
                    "tandem".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("format".to_owned(), FORMAT.to_owned()),
                ("adapter.json".to_owned(), adapter_json),
            ])),
            binary_data: Some(BTreeMap::from([(
                "engine".to_owned(),
                ByteString(engine.to_vec()),
            )])),
            ..ConfigMap::default()
        };
        let params = PostParams::default();
        let written = match version {
            None => self.api.create(&params, &map).await,
            Some(_) => self.api.replace(&self.name, &params, &map).await,
        };
        match written {
            Ok(map) => Ok(map.metadata.resource_version.unwrap_or_default()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Err(StoreError::Conflict(self.name.clone()))
            }
            Err(e) => Err(e.into()),
        }
    }
}
