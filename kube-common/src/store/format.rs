//! How a knowledge base is laid out in ConfigMaps, without any API call: the extender's store
//! ([`super::ConfigMapStore`]) and the framework plugin (whose Go side makes the calls) share it.
//!
//! A knowledge base that fits one ConfigMap is written as it always was: the *head*
//! ConfigMap holds the engine's snapshot (`binaryData.engine`) and the core's state
//! (`data["adapter.json"]`), format [`FORMAT`]. A larger one is cut into *shards*: immutable
//! ConfigMaps named after a hash of their content (`<head>-<16 hex digits>`), each holding one
//! chunk of the snapshot (`binaryData.chunk`, at most [`MAX_CHUNK`] bytes); the head, format
//! [`SHARDED_FORMAT`], then holds the core's state, the shard names in order, the snapshot's
//! length and its SHA-256. The head alone changes on a write, so its `resourceVersion` stays
//! the one commit point: a knowledge base is whatever the head lists.
//!
//! Chunks are cut where the content says (a gear rolling hash over the last 64 bytes), not at
//! fixed offsets: a profile inserted in the middle of the snapshot changes the chunk it falls
//! in, and the chunks after it keep their boundaries, hence their names, so a write creates a
//! shard or two instead of rewriting every one.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use sha2::{Digest as _, Sha256};
use tandem_adapter_core::store::{AdapterState, StoreError, Stored};

/// Format tag of a knowledge base held whole in its head ConfigMap.
pub const FORMAT: &str = "tandem-kube-kb/1";

/// Format tag of a head ConfigMap that lists the shards holding the engine's snapshot.
pub const SHARDED_FORMAT: &str = "tandem-kube-kb/2";

/// Largest object the API server stores (its ConfigMap validation: `data` and `binaryData`
/// together).
const MAX_OBJECT_BYTES: usize = 1 << 20;

/// What a knowledge base may take of one ConfigMap: its 1 MiB less room for the object's
/// metadata and encoding. Up to this size it stays whole in the head.
pub const CONFIG_MAP_CAPACITY: usize = MAX_OBJECT_BYTES - 4096;

/// Fewest bytes in a chunk (but the last).
pub const MIN_CHUNK: usize = 256 << 10;

/// Most bytes in a chunk: 896 KiB, under a ConfigMap's 1 MiB with room for the metadata, and a
/// request body (base64 in JSON) well under the API server's 3 MiB.
pub const MAX_CHUNK: usize = 896 << 10;

/// The most a knowledge base may take in all: 64 MiB, about 570,000 job profiles. Each write
/// puts the changed shards into etcd's history until the API server compacts it (every five
/// minutes), so the bound keeps a burst of writes far from etcd's 2 GiB default quota.
pub const CAPACITY: usize = 64 << 20;

/// Most shards a head may list: [`CAPACITY`] in chunks of at least [`MIN_CHUNK`], and the
/// last one. A head listing more is refused before any is fetched.
pub const MAX_SHARDS: usize = CAPACITY.div_ceil(MIN_CHUNK) + 1;

/// Label on the last good copy of a head: the head it is a copy of.
pub const LAST_GOOD_OF_LABEL: &str = "tandem.dev/last-good-of";

/// The name of the ConfigMap holding the last good copy of the head `head`.
pub fn last_good_name(head: &str) -> String {
    format!("{head}-last-good")
}

/// The last good copy of `head` (as written), to create or replace unconditionally: the same
/// data under [`last_good_name`], labelled with [`LAST_GOOD_OF_LABEL`] (not as a shard, so
/// that no collection of shards ever takes it).
pub fn last_good_copy(head: &ConfigMap) -> ConfigMap {
    let name = head.metadata.name.clone().unwrap_or_default();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(last_good_name(&name)),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "tandem".to_owned()),
                (LAST_GOOD_OF_LABEL.to_owned(), name),
            ])),
            ..ObjectMeta::default()
        },
        data: head.data.clone(),
        binary_data: head.binary_data.clone(),
        ..ConfigMap::default()
    }
}

/// Label on every shard: the application it belongs to.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";

/// Label on every shard: the head ConfigMap whose knowledge base it holds a chunk of (listing
/// by it finds the shards to collect).
pub const KNOWLEDGE_OF_LABEL: &str = "tandem.dev/knowledge-of";

/// The label selector of the shards of the head `name`.
pub fn shard_selector(name: &str) -> String {
    format!("{PART_OF_LABEL}=tandem,{KNOWLEDGE_OF_LABEL}={name}")
}

/// A gear table: one pseudo-random word per byte value (SplitMix64 from a fixed seed, so every
/// writer cuts the same content at the same places).
const GEAR: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut state: u64 = 0x7a6e_6465_6d2d_6b62;
    let mut i = 0;
    while i < 256 {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
};

/// A cut where the 18 top bits of the gear hash are zero: one chance in 262,144 per byte past
/// [`MIN_CHUNK`], so chunks average about 512 KiB.
const CUT_MASK: u64 = ((1 << 18) - 1) << (64 - 18);

/// Where `data` is cut into chunks: content-defined, each [`MIN_CHUNK`]..=[`MAX_CHUNK`] bytes
/// (the last one may be shorter).
pub fn chunk_bounds(data: &[u8]) -> Vec<Range<usize>> {
    let mut bounds = Vec::with_capacity(data.len() / MIN_CHUNK + 1);
    let mut start = 0;
    while start < data.len() {
        let end = start + cut(&data[start..]);
        bounds.push(start..end);
        start = end;
    }
    bounds
}

/// The length of the chunk `data` starts with.
fn cut(data: &[u8]) -> usize {
    if data.len() <= MIN_CHUNK {
        return data.len();
    }
    let end = data.len().min(MAX_CHUNK);
    let mut hash: u64 = 0;
    // Start hashing 64 bytes before the minimum: the gear hash only depends on the last 64
    // bytes, so a cut depends on the content around it and nothing before.
    for (i, &byte) in data.iter().enumerate().take(end).skip(MIN_CHUNK - 64) {
        hash = (hash << 1).wrapping_add(GEAR[usize::from(byte)]);
        if i >= MIN_CHUNK && hash & CUT_MASK == 0 {
            return i + 1;
        }
    }
    end
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The content-addressed name of the shard of `head` holding `chunk`.
pub fn shard_name(head: &str, chunk: &[u8]) -> String {
    format!("{head}-{}", &sha256_hex(chunk)[..16])
}

fn labels(head: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "tandem".to_owned()),
        (PART_OF_LABEL.to_owned(), "tandem".to_owned()),
        (KNOWLEDGE_OF_LABEL.to_owned(), head.to_owned()),
    ])
}

fn malformed(name: &str, why: impl Into<String>) -> StoreError {
    StoreError::Malformed {
        name: format!("ConfigMap {name}"),
        why: why.into(),
    }
}

/// A head ConfigMap, read: the knowledge base itself, or the list of shards holding it.
#[derive(Debug)]
pub enum Head {
    /// The knowledge base, whole (format [`FORMAT`]).
    Inline(Stored),
    /// The shards to read (format [`SHARDED_FORMAT`]).
    Sharded(ShardedHead),
}

/// A head that lists shards: what they must add up to.
#[derive(Debug, Clone)]
pub struct ShardedHead {
    /// The head's name.
    pub name: String,
    /// The head's `resourceVersion`.
    pub version: String,
    /// The core's state.
    pub adapter: AdapterState,
    /// The shard names, in snapshot order (content-addressed, so a name may recur).
    pub shards: Vec<String>,
    /// Bytes of the engine's snapshot.
    pub length: usize,
    /// SHA-256 of the engine's snapshot, in hex.
    pub digest: String,
}

/// Why shards could not be put back together.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    /// A shard the head lists is not there: a writer replaced the head and collected it after
    /// this head was read. Read the head again.
    #[error("shard ConfigMap {0} listed by the head is gone")]
    Missing(String),
    /// The shards do not add up to what the head says.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ShardedHead {
    /// The shard names, each once.
    pub fn distinct_shards(&self) -> BTreeSet<&str> {
        self.shards.iter().map(String::as_str).collect()
    }

    /// Puts the snapshot back together from the shards (by name; extra ones are ignored) and
    /// checks its length and digest. The head's length was bounded by [`CAPACITY`] when it
    /// was read, and no shard may take the snapshot past it.
    pub fn assemble(self, shards: &BTreeMap<String, ConfigMap>) -> Result<Stored, AssembleError> {
        let mut engine = Vec::with_capacity(self.length.min(CAPACITY));
        for name in &self.shards {
            let shard = shards
                .get(name)
                .ok_or_else(|| AssembleError::Missing(name.clone()))?;
            let chunk = shard
                .binary_data
                .as_ref()
                .and_then(|b| b.get("chunk"))
                .ok_or_else(|| malformed(name, "binaryData.chunk is missing"))?;
            if chunk.0.len() > MAX_CHUNK || engine.len() + chunk.0.len() > self.length {
                return Err(malformed(
                    &self.name,
                    format!(
                        "its shards hold more than the {} bytes the head says (shard {name} has \
                         {} bytes)",
                        self.length,
                        chunk.0.len()
                    ),
                )
                .into());
            }
            engine.extend_from_slice(&chunk.0);
        }
        if engine.len() != self.length {
            return Err(malformed(
                &self.name,
                format!(
                    "its shards hold {} bytes, the head says {} (a shard was replaced?)",
                    engine.len(),
                    self.length
                ),
            )
            .into());
        }
        let digest = sha256_hex(&engine);
        if digest != self.digest {
            return Err(malformed(
                &self.name,
                format!(
                    "its shards' SHA-256 is {digest}, the head says {} (a shard was replaced?)",
                    self.digest
                ),
            )
            .into());
        }
        Ok(Stored {
            engine,
            adapter: self.adapter,
            version: self.version,
        })
    }
}

/// Reads a head ConfigMap (whoever fetched it: the extender's store, or the framework plugin's
/// Go side), at its `resourceVersion`. Heads written before shards existed read as
/// [`Head::Inline`].
pub fn read_head(map: ConfigMap) -> Result<Head, StoreError> {
    let name = map.metadata.name.clone().unwrap_or_default();
    let version = map.metadata.resource_version.clone().unwrap_or_default();
    let mut data = map.data.unwrap_or_default();
    let adapter = data
        .get("adapter.json")
        .map(|text| serde_json::from_str(text))
        .transpose()
        .map_err(|e| malformed(&name, format!("data[adapter.json]: {e}")))?
        .unwrap_or_default();
    match data.get("format").map(String::as_str) {
        Some(FORMAT) => {
            let engine = map
                .binary_data
                .and_then(|mut b| b.remove("engine"))
                .ok_or_else(|| malformed(&name, "binaryData.engine is missing"))?
                .0;
            Ok(Head::Inline(Stored {
                engine,
                adapter,
                version,
            }))
        }
        Some(SHARDED_FORMAT) => {
            let mut field = |key: &str| {
                data.remove(key)
                    .ok_or_else(|| malformed(&name, format!("data[{key}] is missing")))
            };
            let shards: Vec<String> = field("shards")?.lines().map(str::to_owned).collect();
            let length: usize = field("engine-bytes")?
                .parse()
                .map_err(|e| malformed(&name, format!("data[engine-bytes]: {e}")))?;
            // A head is refused before anything is allocated or fetched for it on its word.
            if length > CAPACITY {
                return Err(malformed(
                    &name,
                    format!(
                        "data[engine-bytes] is {length}, more than a knowledge base may take \
                         ({CAPACITY})"
                    ),
                ));
            }
            if shards.len() > MAX_SHARDS || shards.len() > length / MIN_CHUNK + 1 {
                return Err(malformed(
                    &name,
                    format!(
                        "data[shards] lists {} shards, more than {length} bytes take (at most \
                         {MAX_SHARDS})",
                        shards.len()
                    ),
                ));
            }
            let digest = field("engine-sha256")?;
            Ok(Head::Sharded(ShardedHead {
                name,
                version,
                adapter,
                shards,
                length,
                digest,
            }))
        }
        other => Err(malformed(
            &name,
            format!("format is {other:?}, expected {FORMAT:?} or {SHARDED_FORMAT:?}"),
        )),
    }
}

/// Reads a knowledge base held whole in its head ConfigMap; a head that lists shards is
/// refused (read it with [`read_head`] and the shards).
pub fn from_config_map(map: ConfigMap) -> Result<Stored, StoreError> {
    let name = map.metadata.name.clone().unwrap_or_default();
    match read_head(map)? {
        Head::Inline(stored) => Ok(stored),
        Head::Sharded(head) => Err(malformed(
            &name,
            format!("it lists {} shards; read them too", head.shards.len()),
        )),
    }
}

fn adapter_json(adapter: &AdapterState) -> Result<String, StoreError> {
    serde_json::to_string(adapter).map_err(|e| StoreError::Backend(Box::new(e)))
}

fn head_meta(name: &str, version: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        resource_version: version.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_owned(),
            "tandem".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

/// The head ConfigMap `name` holding a knowledge base whole: to create when `version` is
/// `None`, else to replace the one at that `resourceVersion`. Fails when it would not fit one
/// ConfigMap ([`CONFIG_MAP_CAPACITY`]); [`encode`] shards what does not.
pub fn to_config_map(
    name: &str,
    version: Option<&str>,
    engine: &[u8],
    adapter: &AdapterState,
) -> Result<ConfigMap, StoreError> {
    let adapter_json = adapter_json(adapter)?;
    let size = engine.len() + adapter_json.len();
    if size > CONFIG_MAP_CAPACITY {
        return Err(StoreError::TooLarge {
            size,
            backend: "a ConfigMap",
            limit: CONFIG_MAP_CAPACITY,
        });
    }
    Ok(ConfigMap {
        metadata: head_meta(name, version),
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

/// A knowledge base laid out for writing.
#[derive(Debug)]
pub enum Encoded<'a> {
    /// Whole in the head.
    Inline(Box<ConfigMap>),
    /// Cut into shards; the head lists them.
    Sharded(Sharded<'a>),
}

/// A knowledge base cut into shards, before they are written. Shards are created first, then
/// the head ([`Sharded::head`]) is created or replaced.
#[derive(Debug)]
pub struct Sharded<'a> {
    name: String,
    version: Option<String>,
    adapter_json: String,
    engine: &'a [u8],
    chunks: Vec<Range<usize>>,
    names: Vec<String>,
}

impl Sharded<'_> {
    /// The shards' names, in snapshot order (a name may recur).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The shard ConfigMaps to create, each once, in snapshot order.
    pub fn shards(&self) -> Vec<ConfigMap> {
        let mut seen = BTreeSet::new();
        self.names
            .iter()
            .enumerate()
            .filter(|(_, name)| seen.insert(name.as_str()))
            .map(|(i, _)| self.shard(i))
            .collect()
    }

    /// The shard ConfigMap holding chunk `index`.
    pub fn shard(&self, index: usize) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.names[index].clone()),
                labels: Some(labels(&self.name)),
                ..ObjectMeta::default()
            },
            // Immutable: a name stands for its content, and the API server stops watching it.
            immutable: Some(true),
            binary_data: Some(BTreeMap::from([(
                "chunk".to_owned(),
                ByteString(self.engine[self.chunks[index].clone()].to_vec()),
            )])),
            ..ConfigMap::default()
        }
    }

    /// Gives the shard named `old` the name `new` (when `old` is taken by an object the head
    /// being replaced does not list: it may be collected any moment, so it is not reused).
    pub fn rename(&mut self, old: &str, new: &str) {
        for name in &mut self.names {
            if name == old {
                new.clone_into(name);
            }
        }
    }

    /// The head ConfigMap listing the shards.
    pub fn head(&self) -> ConfigMap {
        ConfigMap {
            metadata: head_meta(&self.name, self.version.as_deref()),
            data: Some(BTreeMap::from([
                ("format".to_owned(), SHARDED_FORMAT.to_owned()),
                ("adapter.json".to_owned(), self.adapter_json.clone()),
                ("shards".to_owned(), self.names.join("\n")),
                ("engine-bytes".to_owned(), self.engine.len().to_string()),
                ("engine-sha256".to_owned(), sha256_hex(self.engine)),
            ])),
            ..ConfigMap::default()
        }
    }
}

/// Lays out a knowledge base for the head `name`: whole in the head if it fits one ConfigMap,
/// else in shards. Fails past [`CAPACITY`].
pub fn encode<'a>(
    name: &str,
    version: Option<&str>,
    engine: &'a [u8],
    adapter: &AdapterState,
) -> Result<Encoded<'a>, StoreError> {
    let adapter_json = adapter_json(adapter)?;
    let size = engine.len() + adapter_json.len();
    if size <= CONFIG_MAP_CAPACITY {
        return to_config_map(name, version, engine, adapter)
            .map(|head| Encoded::Inline(Box::new(head)));
    }
    if size > CAPACITY {
        return Err(StoreError::TooLarge {
            size,
            backend: "the ConfigMaps of a sharded knowledge base",
            limit: CAPACITY,
        });
    }
    // The head holds the core's state and the list; it must fit one ConfigMap itself.
    if adapter_json.len() > CONFIG_MAP_CAPACITY / 2 {
        return Err(StoreError::TooLarge {
            size: adapter_json.len(),
            backend: "the head ConfigMap (the core's state)",
            limit: CONFIG_MAP_CAPACITY / 2,
        });
    }
    let chunks = chunk_bounds(engine);
    let names = chunks
        .iter()
        .map(|range| shard_name(name, &engine[range.clone()]))
        .collect();
    Ok(Encoded::Sharded(Sharded {
        name: name.to_owned(),
        version: version.map(str::to_owned),
        adapter_json,
        engine,
        chunks,
        names,
    }))
}
