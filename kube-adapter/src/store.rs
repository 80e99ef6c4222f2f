//! The knowledge base, kept in the cluster: the core's [`KnowledgeStore`] on a ConfigMap.
//!
//! One ConfigMap holds the engine's snapshot (`binaryData.engine`) and what the core keeps
//! beside it (`data["adapter.json"]`: the outcome ledger). Every write is conditional on the
//! `resourceVersion` last read or written, so a writer that missed someone else's change gets
//! a conflict instead of silently overwriting it; only the leader (see [`crate::leader`])
//! writes at all. A restarted or second replica reads it at start, so it resumes with
//! everything acknowledged.
//!
//! A ConfigMap holds at most 1 MiB; a write that would exceed it fails loudly (and the
//! observation is not acknowledged). The engine snapshot of a knowledge base with thousands of
//! profiles and outcomes stays well under that.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tandem_adapter_core::store::{AdapterState, KnowledgeStore, StoreError, Stored};

/// Format tag of the stored knowledge base.
pub const FORMAT: &str = "tandem-kube-kb/1";

/// Largest object the API server stores.
const MAX_BYTES: usize = 1 << 20;

/// What the knowledge base may take of a ConfigMap: its 1 MiB less room for the object's
/// metadata and encoding.
pub const CAPACITY: usize = MAX_BYTES - 4096;

fn api_error(error: kube::Error) -> StoreError {
    StoreError::Backend(Box::new(error))
}

/// The ConfigMap the knowledge base lives in.
#[derive(Clone)]
pub struct ConfigMapStore {
    api: Api<ConfigMap>,
    name: String,
}

impl std::fmt::Debug for ConfigMapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigMapStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ConfigMapStore {
    /// The ConfigMap `name` in `namespace`.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }

    /// Reads the knowledge base; `None` if none was stored yet.
    pub async fn read(&self) -> Result<Option<Stored>, StoreError> {
        let Some(map) = self.api.get_opt(&self.name).await.map_err(api_error)? else {
            return Ok(None);
        };
        from_config_map(map).map(Some)
    }

    /// Writes the knowledge base: creates it when `version` is `None`, else replaces the one
    /// at that `resourceVersion`. Returns the new version.
    pub async fn write(
        &self,
        version: Option<&str>,
        engine: &[u8],
        adapter: &AdapterState,
    ) -> Result<String, StoreError> {
        let map = to_config_map(&self.name, version, engine, adapter)?;
        let params = PostParams::default();
        let written = match version {
            None => self.api.create(&params, &map).await,
            Some(_) => self.api.replace(&self.name, &params, &map).await,
        };
        match written {
            Ok(map) => Ok(map.metadata.resource_version.unwrap_or_default()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Err(StoreError::Conflict(format!("ConfigMap {}", self.name)))
            }
            Err(e) => Err(api_error(e)),
        }
    }
}

/// Reads a knowledge base from the ConfigMap holding it (whoever fetched it: this store, or
/// the framework plugin's Go side), at the ConfigMap's `resourceVersion`.
pub fn from_config_map(map: ConfigMap) -> Result<Stored, StoreError> {
    let name = map.metadata.name.clone().unwrap_or_default();
    let malformed = |why: String| StoreError::Malformed {
        name: format!("ConfigMap {name}"),
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
    Ok(Stored {
        engine,
        adapter,
        version: map.metadata.resource_version.unwrap_or_default(),
    })
}

/// The ConfigMap `name` holding a knowledge base: to create when `version` is `None`, else to
/// replace the one at that `resourceVersion`. Fails when it would not fit a ConfigMap.
pub fn to_config_map(
    name: &str,
    version: Option<&str>,
    engine: &[u8],
    adapter: &AdapterState,
) -> Result<ConfigMap, StoreError> {
    let adapter_json =
        serde_json::to_string(adapter).map_err(|e| StoreError::Backend(Box::new(e)))?;
    let size = engine.len() + adapter_json.len();
    if size > CAPACITY {
        return Err(StoreError::TooLarge {
            size,
            backend: "a ConfigMap",
            limit: CAPACITY,
        });
    }
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
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
    })
}

impl KnowledgeStore for ConfigMapStore {
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        Box::pin(self.read())
    }

    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(self.write(version, engine, adapter))
    }

    fn capacity(&self) -> Option<usize> {
        Some(CAPACITY)
    }

    fn name(&self) -> String {
        format!("ConfigMap {}", self.name)
    }
}
