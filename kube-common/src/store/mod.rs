//! The knowledge base, kept in the cluster: the core's [`KnowledgeStore`] on ConfigMaps.
//!
//! The *head* ConfigMap (`tandem-knowledge`) holds the engine's snapshot and what the core
//! keeps beside it (`data["adapter.json"]`: the outcome ledger) while they fit its 1 MiB; a
//! larger knowledge base goes into immutable, content-addressed *shard* ConfigMaps that the
//! head lists ([`format`] has the layout). Every write of the head is conditional on the
//! `resourceVersion` last read or written, so a writer that missed someone else's change gets
//! a conflict instead of silently overwriting it; only the leader (see [`crate::leader`])
//! writes at all. A restarted or second replica reads it at start, so it resumes with
//! everything acknowledged.
//!
//! A write creates the shards the head does not list yet, then replaces the head: until the
//! head is replaced readers see the old knowledge base whole, after it the new one. Then the
//! writer collects the shards the new head no longer lists. A reader that read a head and
//! then finds one of its shards gone (collected after a newer head was written) reads the
//! head again.
//!
//! Shards are deleted only by the writer that dropped them from the head (or created them for
//! a head it failed to write), with the object's `uid` as a precondition, or when nothing
//! lists them after [`GRACE`]; a writer never reuses a shard the head it replaces does not
//! list (it may be collected any moment) but creates its own under another name. So no head
//! ever lists a collected shard.
//!
//! After each write of the head, the writer copies it to the *last good* ConfigMap
//! (`<head>-last-good`, [`last_good_copy`]): the same data, listing the same shards. Every
//! knowledge base the core writes was loaded back into an engine first, so the copy is good
//! when written; when the head cannot be used — garbage or an absurd length in its
//! `engine-bytes`, shards that do not add up to its length or checksum, a snapshot the engine
//! refuses — the core loads the copy instead ([`ConfigMapStore::read_last_good`]), with a
//! Kubernetes Event on the head (reason [`FALLBACK_REASON`]), and its next write replaces the
//! head. Shards are collected only right after the copy was written, so the copy never lists a
//! collected shard either.

mod format;

/// A knowledge base read from a head (or its last good copy) and the shards it lists.
enum Assembled {
    /// All of it, with the `uid` of every shard.
    Whole(Box<Stored>, BTreeMap<String, String>),
    /// A shard it lists is gone (a writer replaced it since the head was read): its name.
    ShardGone(String),
}

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use parking_lot::Mutex;
use tandem_adapter_core::store::{AdapterState, KnowledgeStore, StoreError, Stored};

pub use format::{
    AssembleError, CAPACITY, CONFIG_MAP_CAPACITY, Encoded, FORMAT, Head, KNOWLEDGE_OF_LABEL,
    LAST_GOOD_OF_LABEL, MAX_CHUNK, MAX_SHARDS, MIN_CHUNK, PART_OF_LABEL, SHARDED_FORMAT, Sharded,
    ShardedHead, chunk_bounds, encode, from_config_map, last_good_copy, last_good_name, read_head,
    shard_name, shard_selector, to_config_map,
};

/// How long an unlisted shard is left alone unless its writer collects it: a writer that
/// crashed between creating shards and writing the head leaves them behind, and the next
/// successful write collects them once they are this old. A write that took half of it to
/// create its shards is abandoned rather than risk listing a shard that was collected.
pub const GRACE: Duration = Duration::from_secs(600);

/// How many times a read starts over from the head when a shard it lists is gone.
const READ_ATTEMPTS: usize = 3;

/// The reason of the Event that says the last good knowledge base was loaded.
pub const FALLBACK_REASON: &str = "KnowledgeFallback";

fn api_error(error: kube::Error) -> StoreError {
    StoreError::Backend(Box::new(error))
}

/// The status code and reason the API server answered with, if it answered.
fn refusal(error: &kube::Error) -> Option<(u16, &str)> {
    match error {
        kube::Error::Api(status) => Some((status.code, status.reason.as_str())),
        _ => None,
    }
}

/// The calls the store makes, so that its unit tests run it on an in-memory API.
pub(crate) trait ConfigMapApi: Send + Sync + 'static {
    /// GET; `None` when absent.
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, kube::Result<Option<ConfigMap>>>;
    /// POST (409 `AlreadyExists` when the name is taken).
    fn create(&self, map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>>;
    /// PUT, conditional on the map's `resourceVersion` (409 `Conflict`).
    fn replace(&self, map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>>;
    /// The metadata of the ConfigMaps matching a label selector.
    fn list_metadata<'a>(
        &'a self,
        selector: &'a str,
    ) -> BoxFuture<'a, kube::Result<Vec<ObjectMeta>>>;
    /// DELETE, conditional on the object's `uid` (409 when it is another object by now).
    fn delete<'a>(&'a self, name: &'a str, uid: &'a str) -> BoxFuture<'a, kube::Result<()>>;
    /// Creates a Warning Event about the ConfigMap `name` (with `uid`, if known).
    fn warn<'a>(
        &'a self,
        name: &'a str,
        uid: Option<&'a str>,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, kube::Result<()>>;
}

impl ConfigMapApi for Api<ConfigMap> {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, kube::Result<Option<ConfigMap>>> {
        Box::pin(self.get_opt(name))
    }

    fn create(&self, map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>> {
        Box::pin(async move { Api::create(self, &PostParams::default(), &map).await })
    }

    fn replace(&self, map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>> {
        Box::pin(async move {
            let name = map.metadata.name.clone().unwrap_or_default();
            Api::replace(self, &name, &PostParams::default(), &map).await
        })
    }

    fn list_metadata<'a>(
        &'a self,
        selector: &'a str,
    ) -> BoxFuture<'a, kube::Result<Vec<ObjectMeta>>> {
        Box::pin(async move {
            let list = Api::list_metadata(self, &ListParams::default().labels(selector)).await?;
            Ok(list.items.into_iter().map(|item| item.metadata).collect())
        })
    }

    fn delete<'a>(&'a self, name: &'a str, uid: &'a str) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            Api::delete(self, name, &params).await.map(|_| ())
        })
    }

    fn warn<'a>(
        &'a self,
        name: &'a str,
        uid: Option<&'a str>,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, kube::Result<()>> {
        use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
        Box::pin(async move {
            let namespace = self.namespace().unwrap_or("default").to_owned();
            let now = k8s_openapi::jiff::Timestamp::now();
            let event = Event {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{name}.")),
                    namespace: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                involved_object: ObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("ConfigMap".to_owned()),
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.clone()),
                    uid: uid.map(str::to_owned),
                    ..ObjectReference::default()
                },
                reason: Some(reason.to_owned()),
                // An Event's message is cut at 1 KiB by the API server's rules (1024 bytes).
                message: Some(cut(message, 1_000).to_owned()),
                type_: Some("Warning".to_owned()),
                count: Some(1),
                first_timestamp: Some(Time(now)),
                last_timestamp: Some(Time(now)),
                event_time: Some(MicroTime(now)),
                action: Some("LoadLastGood".to_owned()),
                reporting_component: Some("tandem".to_owned()),
                reporting_instance: Some(
                    std::env::var("POD_NAME").unwrap_or_else(|_| "tandem".to_owned()),
                ),
                source: Some(EventSource {
                    component: Some("tandem".to_owned()),
                    host: None,
                }),
                ..Event::default()
            };
            Api::<Event>::namespaced(self.clone().into_client(), &namespace)
                .create(&PostParams::default(), &event)
                .await
                .map(|_| ())
        })
    }
}

/// The longest prefix of `text` of at most `bytes` bytes that ends at a character boundary.
fn cut(text: &str, bytes: usize) -> &str {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What this store last read or wrote: the head's version and the `uid` of every shard it
/// lists, so the next write reuses them and collects those it drops.
#[derive(Debug, Default, Clone)]
struct Known {
    version: Option<String>,
    shards: BTreeMap<String, String>,
}

/// The ConfigMaps the knowledge base lives in: the head `name` and its shards.
#[derive(Clone)]
pub struct ConfigMapStore {
    api: Arc<dyn ConfigMapApi>,
    name: String,
    known: Arc<Mutex<Known>>,
}

impl std::fmt::Debug for ConfigMapStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigMapStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ConfigMapStore {
    /// The head ConfigMap `name` in `namespace` (and its shards there).
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self::on(Api::<ConfigMap>::namespaced(client, namespace), name)
    }

    pub(crate) fn on(api: impl ConfigMapApi, name: &str) -> Self {
        Self {
            api: Arc::new(api),
            name: name.to_owned(),
            known: Arc::default(),
        }
    }

    fn known(&self) -> parking_lot::MutexGuard<'_, Known> {
        self.known.lock()
    }

    fn remember(&self, version: &str, shards: BTreeMap<String, String>) {
        *self.known() = Known {
            version: Some(version.to_owned()),
            shards,
        };
    }

    /// Reads the knowledge base; `None` if none was stored yet.
    pub async fn read(&self) -> Result<Option<Stored>, StoreError> {
        for attempt in 1..=READ_ATTEMPTS {
            let Some(map) = self.api.get(&self.name).await.map_err(api_error)? else {
                return Ok(None);
            };
            match self.assemble(map).await? {
                Assembled::Whole(stored, uids) => {
                    self.remember(&stored.version, uids);
                    return Ok(Some(*stored));
                }
                Assembled::ShardGone(shard) if attempt < READ_ATTEMPTS => {
                    tracing::debug!(%shard, attempt, "a shard of the knowledge base is gone; reading the head again");
                }
                Assembled::ShardGone(shard) => {
                    return Err(StoreError::Malformed {
                        name: format!("ConfigMap {}", self.name),
                        why: format!(
                            "shard ConfigMap {shard} it lists is missing ({READ_ATTEMPTS} reads)"
                        ),
                    });
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Reads the last good copy of the head ([`last_good_copy`]) and its shards, at the head's
    /// version (the next write replaces the head); `None` when there is no head or no copy.
    pub async fn read_last_good(&self) -> Result<Option<Stored>, StoreError> {
        let Some(head) = self.api.get(&self.name).await.map_err(api_error)? else {
            return Ok(None);
        };
        let version = head.metadata.resource_version.clone().unwrap_or_default();
        let copy_name = last_good_name(&self.name);
        let Some(copy) = self.api.get(&copy_name).await.map_err(api_error)? else {
            return Ok(None);
        };
        match self.assemble(copy).await? {
            Assembled::Whole(mut stored, uids) => {
                stored.version = version;
                self.remember(&stored.version, uids);
                Ok(Some(*stored))
            }
            Assembled::ShardGone(shard) => Err(StoreError::Malformed {
                name: format!("ConfigMap {copy_name}"),
                why: format!("shard ConfigMap {shard} it lists is missing"),
            }),
        }
    }

    /// The knowledge base `map` (a head, or its last good copy) holds, with the `uid` of every
    /// shard it lists, or the shard it lists that is gone.
    async fn assemble(&self, map: ConfigMap) -> Result<Assembled, StoreError> {
        let head = match read_head(map)? {
            Head::Inline(stored) => return Ok(Assembled::Whole(Box::new(stored), BTreeMap::new())),
            Head::Sharded(head) => head,
        };
        let names = head.distinct_shards();
        let fetched = futures::future::try_join_all(names.iter().map(|name| self.api.get(name)))
            .await
            .map_err(api_error)?;
        let shards: BTreeMap<String, ConfigMap> = names
            .iter()
            .zip(fetched)
            .filter_map(|(name, map)| Some(((*name).to_owned(), map?)))
            .collect();
        let uids = shards
            .iter()
            .map(|(name, map)| (name.clone(), map.metadata.uid.clone().unwrap_or_default()))
            .collect();
        match head.assemble(&shards) {
            Ok(stored) => Ok(Assembled::Whole(Box::new(stored), uids)),
            Err(AssembleError::Missing(shard)) => Ok(Assembled::ShardGone(shard)),
            Err(AssembleError::Store(error)) => Err(error),
        }
    }

    /// Says on the head, with an Event, that the last good copy was loaded in its place.
    pub async fn warn_fallback(&self, why: &str) {
        let uid = match self.api.get(&self.name).await {
            Ok(head) => head.and_then(|h| h.metadata.uid),
            Err(_) => None,
        };
        let message = format!(
            "the knowledge base in ConfigMap {} cannot be used ({why}); loaded its last good copy \
             {} instead",
            self.name,
            last_good_name(&self.name)
        );
        if let Err(error) = self
            .api
            .warn(&self.name, uid.as_deref(), FALLBACK_REASON, &message)
            .await
        {
            tracing::warn!(%error, "cannot create the Event that says the last good knowledge base was loaded");
        }
    }

    /// The shards the head at `version` lists, by name, with their `uid`: what this store
    /// remembers if it last read or wrote that version; else read from the cluster. A
    /// conflict if the head is no longer at `version`.
    async fn listed(&self, version: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let known = self.known().clone();
        if known.version.as_deref() == Some(version) {
            return Ok(known.shards);
        }
        let conflict = || StoreError::Conflict(format!("ConfigMap {}", self.name));
        let map = self
            .api
            .get(&self.name)
            .await
            .map_err(api_error)?
            .ok_or_else(conflict)?;
        if map.metadata.resource_version.as_deref() != Some(version) {
            return Err(conflict());
        }
        let Head::Sharded(head) = read_head(map)? else {
            return Ok(BTreeMap::new());
        };
        let listed = head.distinct_shards();
        let existing = self
            .api
            .list_metadata(&shard_selector(&self.name))
            .await
            .map_err(api_error)?;
        Ok(existing
            .into_iter()
            .filter_map(|meta| Some((meta.name?, meta.uid?)))
            .filter(|(name, _)| listed.contains(name.as_str()))
            .collect())
    }

    /// Writes the knowledge base: creates it when `version` is `None`, else replaces the one
    /// at that `resourceVersion`. Returns the new version.
    pub async fn write(
        &self,
        version: Option<&str>,
        engine: &[u8],
        adapter: &AdapterState,
    ) -> Result<String, StoreError> {
        let replaced = match version {
            Some(version) => self.listed(version).await?,
            None => BTreeMap::new(),
        };
        let (head, created) = match encode(&self.name, version, engine, adapter)? {
            Encoded::Inline(head) => (*head, BTreeMap::new()),
            Encoded::Sharded(mut sharded) => {
                let created = self.create_shards(&mut sharded, &replaced).await?;
                (sharded.head(), created)
            }
        };
        let copy = last_good_copy(&head);
        let written = match version {
            None => self.api.create(head).await,
            Some(_) => self.api.replace(head).await,
        };
        let written = match written {
            Ok(map) => map,
            Err(error) => {
                // The API server refused the head: the shards created for it are nobody's.
                // (After a transport error the head may have been written; they stay, and
                // the next write collects them if they are not listed.)
                if let Some((code, _)) = refusal(&error) {
                    self.delete_all(&created).await;
                    if code == 409 {
                        return Err(StoreError::Conflict(format!("ConfigMap {}", self.name)));
                    }
                }
                return Err(api_error(error));
            }
        };
        let new_version = written
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let listed: BTreeMap<String, String> = match read_head(written)? {
            Head::Inline(_) => BTreeMap::new(),
            Head::Sharded(head) => head
                .distinct_shards()
                .into_iter()
                .map(|name| {
                    let uid = created.get(name).or_else(|| replaced.get(name));
                    (name.to_owned(), uid.cloned().unwrap_or_default())
                })
                .collect(),
        };
        let ours: BTreeSet<String> = replaced
            .into_values()
            .chain(created.into_values())
            .collect();
        // The copy lists what the head lists: shards dropped by both may go. Without it, the
        // last good copy still lists the shards it listed, so none is collected this time.
        if self.write_last_good(copy).await {
            self.collect(&listed, &ours).await;
        }
        self.remember(&new_version, listed);
        Ok(new_version)
    }

    /// Replaces (or creates) the last good copy with `copy`, unconditionally: whoever writes
    /// the head writes the copy after it. Whether it was written.
    async fn write_last_good(&self, copy: ConfigMap) -> bool {
        let written = match self.api.replace(copy.clone()).await {
            Err(error) if matches!(refusal(&error), Some((404, _))) => {
                self.api.create(copy).await.map(drop)
            }
            other => other.map(drop),
        };
        match written {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "cannot write the last good copy of the knowledge base; it stays one write behind");
                false
            }
        }
    }

    /// Creates the shards of `sharded` that the head being replaced does not list (`replaced`,
    /// by name). Returns those created, by name, with their `uid`.
    async fn create_shards(
        &self,
        sharded: &mut Sharded<'_>,
        replaced: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, StoreError> {
        let started = Instant::now();
        let mut created = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for index in 0..sharded.names().len() {
            let name = sharded.names()[index].clone();
            if replaced.contains_key(&name) || !seen.insert(name.clone()) {
                continue;
            }
            let mut attempt = 0u32;
            loop {
                let shard = sharded.shard(index);
                let shard_name = shard.metadata.name.clone().unwrap_or_default();
                match self.api.create(shard).await {
                    Ok(map) => {
                        created.insert(shard_name, map.metadata.uid.unwrap_or_default());
                        break;
                    }
                    // Taken by a shard the replaced head does not list: left by a crashed or
                    // concurrent writer, or dropped by the last write and not yet collected.
                    // It may go any moment, so this write takes a name of its own.
                    Err(error)
                        if refusal(&error) == Some((409, "AlreadyExists")) && attempt < 8 =>
                    {
                        attempt += 1;
                        let unique = format!("{name}-{}", unique_suffix(attempt));
                        sharded.rename(&shard_name, &unique);
                    }
                    Err(error) => {
                        self.delete_all(&created).await;
                        return Err(api_error(error));
                    }
                }
            }
        }
        if started.elapsed() > GRACE / 2 {
            self.delete_all(&created).await;
            return Err(StoreError::Backend(
                format!(
                    "creating the knowledge base's shards took {:?}; the oldest may be collected \
                     as unlisted before the head lists them, so the write is abandoned",
                    started.elapsed()
                )
                .into(),
            ));
        }
        Ok(created)
    }

    /// Deletes `shards` (name, `uid`), as far as it can: what is left is collected later.
    async fn delete_all(&self, shards: &BTreeMap<String, String>) {
        for (name, uid) in shards {
            self.delete_shard(name, uid).await;
        }
    }

    async fn delete_shard(&self, name: &str, uid: &str) {
        match self.api.delete(name, uid).await {
            Ok(()) => tracing::debug!(shard = name, "collected a shard of the knowledge base"),
            // Gone already, or another object by that name since: not ours to delete.
            Err(error) if matches!(refusal(&error), Some((404 | 409, _))) => {}
            Err(error) => {
                tracing::warn!(shard = name, %error, "cannot delete a shard of the knowledge base; the next write collects it");
            }
        }
    }

    /// After a successful write: deletes every shard of this knowledge base the head does not
    /// list (`listed`) that this store knows is no longer anyone's (`ours`: listed by the head
    /// it replaced, or created for it), or that nothing listed for [`GRACE`].
    async fn collect(&self, listed: &BTreeMap<String, String>, ours: &BTreeSet<String>) {
        let existing = match self.api.list_metadata(&shard_selector(&self.name)).await {
            Ok(existing) => existing,
            Err(error) => {
                tracing::warn!(%error, "cannot list the knowledge base's shards; the next write collects them");
                return;
            }
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        let grace = k8s_openapi::jiff::SignedDuration::try_from(GRACE).unwrap_or_default();
        for meta in existing {
            let (Some(name), Some(uid)) = (meta.name, meta.uid) else {
                continue;
            };
            if listed.contains_key(&name) {
                continue;
            }
            let stale = meta
                .creation_timestamp
                .is_some_and(|created| now.duration_since(created.0) > grace);
            if ours.contains(&uid) || stale {
                self.delete_shard(&name, &uid).await;
            }
        }
    }
}

/// A suffix no other writer picks: the time and this process, for the rare shard whose
/// content-addressed name is taken.
fn unique_suffix(attempt: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:x}{attempt:x}", std::process::id(), nanos)
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

    fn load_last_good(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        Box::pin(self.read_last_good())
    }

    fn report_fallback<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            tracing::error!(
                configmap = %self.name,
                why,
                "the newest knowledge base cannot be used; loaded its last good copy"
            );
            self.warn_fallback(why).await;
        })
    }

    fn capacity(&self) -> Option<usize> {
        Some(CAPACITY)
    }

    fn name(&self) -> String {
        format!("ConfigMap {}", self.name)
    }
}
