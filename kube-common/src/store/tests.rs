//! The store on an in-memory API server that keeps the rules the store relies on:
//! `resourceVersion` preconditions on replace, `AlreadyExists` on create, `uid` preconditions on
//! delete, immutable objects.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::core::Status;
use tandem_adapter_core::store::{AdapterState, StoreError};

use super::*;

/// An in-memory namespace of ConfigMaps, shared by every store made [`FakeApi::store`].
#[derive(Clone, Default)]
pub(crate) struct FakeApi {
    objects: Arc<Mutex<BTreeMap<String, ConfigMap>>>,
    revision: Arc<AtomicU64>,
    /// Creates, replaces and deletes, for tests that count what a write cost.
    writes: Arc<AtomicUsize>,
    /// Events created: the object's name, reason and message.
    events: Arc<Mutex<Vec<(String, String, String)>>>,
}

fn refused(code: u16, reason: &str, message: String) -> kube::Error {
    kube::Error::Api(Box::new(Status {
        code,
        reason: reason.to_owned(),
        message,
        ..Status::default()
    }))
}

impl FakeApi {
    pub(crate) fn store(&self, name: &str) -> ConfigMapStore {
        ConfigMapStore::on(self.clone(), name)
    }

    fn names(&self) -> Vec<String> {
        self.objects.lock().unwrap().keys().cloned().collect()
    }

    fn stamp(&self, map: &mut ConfigMap) {
        let revision = self.revision.fetch_add(1, Ordering::AcqRel) + 1;
        map.metadata.resource_version = Some(revision.to_string());
    }
}

impl ConfigMapApi for FakeApi {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, kube::Result<Option<ConfigMap>>> {
        let map = self.objects.lock().unwrap().get(name).cloned();
        Box::pin(std::future::ready(Ok(map)))
    }

    fn create(&self, mut map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>> {
        let name = map.metadata.name.clone().unwrap_or_default();
        let mut objects = self.objects.lock().unwrap();
        let result = match objects.entry(name) {
            std::collections::btree_map::Entry::Occupied(taken) => Err(refused(
                409,
                "AlreadyExists",
                format!("configmaps {:?} already exists", taken.key()),
            )),
            std::collections::btree_map::Entry::Vacant(slot) => {
                self.writes.fetch_add(1, Ordering::AcqRel);
                self.stamp(&mut map);
                map.metadata.uid = Some(format!(
                    "uid-{}",
                    map.metadata.resource_version.as_deref().unwrap_or_default()
                ));
                map.metadata.creation_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::now(),
                    ));
                slot.insert(map.clone());
                Ok(map)
            }
        };
        Box::pin(std::future::ready(result))
    }

    fn replace(&self, mut map: ConfigMap) -> BoxFuture<'_, kube::Result<ConfigMap>> {
        let name = map.metadata.name.clone().unwrap_or_default();
        let mut objects = self.objects.lock().unwrap();
        let result = match objects.get(&name) {
            None => Err(refused(
                404,
                "NotFound",
                format!("configmaps {name:?} not found"),
            )),
            // Without a resourceVersion a ConfigMap's update is unconditional.
            Some(old)
                if map.metadata.resource_version.is_some()
                    && old.metadata.resource_version != map.metadata.resource_version =>
            {
                Err(refused(
                    409,
                    "Conflict",
                    format!("the object {name:?} has been modified"),
                ))
            }
            Some(old) if old.immutable == Some(true) => {
                Err(refused(422, "Invalid", format!("{name:?} is immutable")))
            }
            Some(old) => {
                self.writes.fetch_add(1, Ordering::AcqRel);
                map.metadata.uid.clone_from(&old.metadata.uid);
                map.metadata
                    .creation_timestamp
                    .clone_from(&old.metadata.creation_timestamp);
                self.stamp(&mut map);
                objects.insert(name, map.clone());
                Ok(map)
            }
        };
        Box::pin(std::future::ready(result))
    }

    fn list_metadata<'a>(
        &'a self,
        selector: &'a str,
    ) -> BoxFuture<'a, kube::Result<Vec<ObjectMeta>>> {
        let wanted: Vec<(&str, &str)> = selector
            .split(',')
            .filter_map(|term| term.split_once('='))
            .collect();
        let metas = self
            .objects
            .lock()
            .unwrap()
            .values()
            .filter(|map| {
                let labels = map.metadata.labels.clone().unwrap_or_default();
                wanted
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|map| map.metadata.clone())
            .collect();
        Box::pin(std::future::ready(Ok(metas)))
    }

    fn delete<'a>(&'a self, name: &'a str, uid: &'a str) -> BoxFuture<'a, kube::Result<()>> {
        let mut objects = self.objects.lock().unwrap();
        let result = match objects.get(name) {
            None => Err(refused(
                404,
                "NotFound",
                format!("configmaps {name:?} not found"),
            )),
            Some(map) if map.metadata.uid.as_deref() != Some(uid) => Err(refused(
                409,
                "Conflict",
                format!("uid precondition failed for {name:?}"),
            )),
            Some(_) => {
                self.writes.fetch_add(1, Ordering::AcqRel);
                objects.remove(name);
                Ok(())
            }
        };
        Box::pin(std::future::ready(result))
    }

    fn warn<'a>(
        &'a self,
        name: &'a str,
        _uid: Option<&'a str>,
        reason: &'a str,
        message: &'a str,
    ) -> BoxFuture<'a, kube::Result<()>> {
        self.events
            .lock()
            .unwrap()
            .push((name.to_owned(), reason.to_owned(), message.to_owned()));
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A snapshot-like byte string of `n` bytes: JSON records, so content-defined cuts find places
/// to cut, and every record distinct.
fn snapshot_of(records: std::ops::Range<usize>) -> Vec<u8> {
    let mut bytes = b"{\"profiles\":{".to_vec();
    for n in records {
        bytes.extend_from_slice(
            format!(
                "\"{n:032x}\":{{\"gpu_util_pct\":{},\"mem_used_mib\":{}}},",
                n * 37 % 90,
                600 + n * 733 % 9000
            )
            .as_bytes(),
        );
    }
    bytes.extend_from_slice(b"}}");
    bytes
}

/// The head, its last good copy: the ConfigMaps of a knowledge base that are not shards.
const HEADS: [&str; 2] = ["tandem-knowledge", "tandem-knowledge-last-good"];

/// The shards in the namespace, and the names the head lists (which its last good copy lists
/// too).
fn shards_and_listed(api: &FakeApi) -> (Vec<String>, Vec<String>) {
    let shards = api
        .names()
        .into_iter()
        .filter(|name| !HEADS.contains(&name.as_str()))
        .collect();
    let objects = api.objects.lock().unwrap().clone();
    if let Some(copy) = objects.get(HEADS[1]) {
        assert_eq!(
            (copy.data.as_ref(), copy.binary_data.as_ref()),
            (
                objects[HEADS[0]].data.as_ref(),
                objects[HEADS[0]].binary_data.as_ref()
            ),
            "the last good copy is not the head's"
        );
    }
    let head = api
        .objects
        .lock()
        .unwrap()
        .get("tandem-knowledge")
        .cloned()
        .unwrap();
    let mut listed: Vec<String> = match read_head(head).unwrap() {
        Head::Inline(_) => Vec::new(),
        Head::Sharded(head) => head
            .distinct_shards()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    listed.sort();
    (shards, listed)
}

#[test]
fn chunks_are_bounded_and_cut_by_content() {
    let data = snapshot_of(0..100_000);
    let bounds = chunk_bounds(&data);
    assert_eq!(bounds.first().unwrap().start, 0);
    assert_eq!(bounds.last().unwrap().end, data.len());
    for pair in bounds.windows(2) {
        assert_eq!(pair[0].end, pair[1].start);
    }
    for range in &bounds[..bounds.len() - 1] {
        assert!((MIN_CHUNK..=MAX_CHUNK).contains(&range.len()), "{range:?}");
    }
    // One record inserted near the start moves the bytes after it, not the cuts: all chunks
    // but the one it fell into keep their content.
    let mut inserted = data.clone();
    let at = 1000;
    inserted.splice(
        at..at,
        b"\"inserted\":{\"gpu_util_pct\":1},".iter().copied(),
    );
    let before: BTreeSet<&[u8]> = bounds.iter().map(|r| &data[r.clone()]).collect();
    let after: Vec<&[u8]> = chunk_bounds(&inserted)
        .into_iter()
        .map(|r| &inserted[r])
        .collect();
    let new = after
        .iter()
        .filter(|chunk| !before.contains(*chunk))
        .count();
    println!(
        "{} bytes in {} chunks; one inserted record changed {new}",
        data.len(),
        bounds.len()
    );
    assert!(new <= 2, "{new} of {} chunks changed", after.len());
}

#[tokio::test]
async fn a_small_knowledge_base_stays_whole_in_the_head_as_before() {
    let api = FakeApi::default();
    let store = api.store("tandem-knowledge");
    assert!(store.read().await.unwrap().is_none());
    let adapter = AdapterState::default();
    // A head written in the format every earlier adapter wrote reads back as it was.
    let old = to_config_map("tandem-knowledge", None, b"engine", &adapter).unwrap();
    let version = api
        .create(old)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stored = store.read().await.unwrap().unwrap();
    assert_eq!(
        (stored.engine.as_slice(), stored.version.as_str()),
        (&b"engine"[..], version.as_str())
    );
    let next = store
        .write(Some(&version), b"engine 2", &adapter)
        .await
        .unwrap();
    let head = api.objects.lock().unwrap()["tandem-knowledge"].clone();
    assert_eq!(head.data.unwrap()["format"], FORMAT);
    assert_eq!(api.names(), HEADS);
    assert_eq!(store.read().await.unwrap().unwrap().version, next);
}

#[tokio::test]
async fn a_large_knowledge_base_round_trips_through_shards_and_a_write_creates_only_what_changed() {
    let api = FakeApi::default();
    let writer = api.store("tandem-knowledge");
    let adapter = AdapterState::default();
    let first = snapshot_of(0..60_000);
    let v1 = writer.write(None, &first, &adapter).await.unwrap();
    let (shards, listed) = shards_and_listed(&api);
    println!("{} bytes in {} shards", first.len(), shards.len());
    assert!(shards.len() > 3);
    assert_eq!(shards, listed);
    for name in &shards {
        let shard = api.objects.lock().unwrap()[name].clone();
        assert_eq!(shard.immutable, Some(true));
        let labels = shard.metadata.labels.unwrap();
        assert_eq!(labels[KNOWLEDGE_OF_LABEL], "tandem-knowledge");
        assert_eq!(labels[PART_OF_LABEL], "tandem");
    }

    let reader = api.store("tandem-knowledge");
    let stored = reader.read().await.unwrap().unwrap();
    assert!(stored.engine == first, "the snapshot read back differs");
    assert_eq!(stored.version, v1);

    // The next version: a few records changed near the end. The unchanged chunks are reused,
    // the replaced ones collected.
    let mut second = first.clone();
    let at = second.len() - 1000;
    second.splice(at..at, b"\"new\":{},".iter().copied());
    let writes = api.writes.load(Ordering::Acquire);
    let v2 = writer.write(Some(&v1), &second, &adapter).await.unwrap();
    let cost = api.writes.load(Ordering::Acquire) - writes;
    let (shards, listed) = shards_and_listed(&api);
    assert_eq!(shards, listed, "an unlisted shard was left behind");
    // A shard created, one deleted, the head and its last good copy replaced.
    assert!(
        cost <= 4,
        "{cost} creates, replaces and deletes for a change in one chunk"
    );
    // A reader that follows (knowing v1) gets v2, and writes on top of it.
    let stored = reader.read().await.unwrap().unwrap();
    assert!(stored.engine == second && stored.version == v2);
    let v3 = reader.write(Some(&v2), &first, &adapter).await.unwrap();
    let (shards, listed) = shards_and_listed(&api);
    assert_eq!(shards, listed);
    // The first writer, still at v2, is refused; once it read v3 its write goes through, and
    // a small knowledge base leaves no shard behind.
    let stale = writer
        .write(Some(&v2), b"small", &adapter)
        .await
        .unwrap_err();
    assert!(matches!(stale, StoreError::Conflict(_)), "{stale:?}");
    let stored = writer.read().await.unwrap().unwrap();
    assert_eq!(stored.version, v3);
    writer.write(Some(&v3), b"small", &adapter).await.unwrap();
    assert_eq!(api.names(), HEADS);
}

#[tokio::test]
async fn of_two_sharded_writers_one_wins_and_the_loser_leaves_no_shard_behind() {
    let api = FakeApi::default();
    let adapter = AdapterState::default();
    let base = snapshot_of(0..40_000);
    let v1 = api
        .store("tandem-knowledge")
        .write(None, &base, &adapter)
        .await
        .unwrap();
    let (a, b) = (api.store("tandem-knowledge"), api.store("tandem-knowledge"));
    a.read().await.unwrap();
    b.read().await.unwrap();
    let ours = snapshot_of(0..45_000);
    let theirs = snapshot_of(5_000..50_000);
    let won = b.write(Some(&v1), &theirs, &adapter).await.unwrap();
    let lost = a.write(Some(&v1), &ours, &adapter).await.unwrap_err();
    println!("the second writer: {lost}");
    assert!(matches!(lost, StoreError::Conflict(_)), "{lost:?}");
    let (shards, listed) = shards_and_listed(&api);
    assert_eq!(shards, listed, "an unlisted shard was left behind");
    let stored = a.read().await.unwrap().unwrap();
    assert!(stored.engine == theirs && stored.version == won);
}

#[tokio::test]
async fn a_reader_whose_shards_were_collected_reads_the_head_again() {
    let api = FakeApi::default();
    let adapter = AdapterState::default();
    let writer = api.store("tandem-knowledge");
    let v1 = writer
        .write(None, &snapshot_of(0..30_000), &adapter)
        .await
        .unwrap();
    // The reader gets the head of v1; before it fetches the shards a writer replaces the head
    // and collects them. The store reads the head again and returns v2.
    let head = api.objects.lock().unwrap()["tandem-knowledge"].clone();
    let Head::Sharded(old) = read_head(head).unwrap() else {
        panic!("not sharded")
    };
    let newer = snapshot_of(30_000..60_000);
    writer.write(Some(&v1), &newer, &adapter).await.unwrap();
    let fetched: BTreeMap<String, ConfigMap> = api
        .objects
        .lock()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(matches!(
        old.assemble(&fetched),
        Err(AssembleError::Missing(_))
    ));
    let stored = api.store("tandem-knowledge").read().await.unwrap().unwrap();
    assert!(stored.engine == newer);
}

#[tokio::test]
async fn a_shard_name_taken_by_an_unlisted_object_is_not_reused() {
    let api = FakeApi::default();
    let adapter = AdapterState::default();
    let data = snapshot_of(0..30_000);
    // Shards a crashed writer left: same content, same names, no head lists them.
    let Encoded::Sharded(orphan) = encode("tandem-knowledge", None, &data, &adapter).unwrap()
    else {
        panic!("not sharded")
    };
    for shard in orphan.shards() {
        api.create(shard).await.unwrap();
    }
    let orphans: BTreeSet<String> = orphan.names().iter().cloned().collect();
    let store = api.store("tandem-knowledge");
    store.write(None, &data, &adapter).await.unwrap();
    let (_, listed) = shards_and_listed(&api);
    assert!(
        listed.iter().all(|name| !orphans.contains(name)),
        "{listed:?}"
    );
    assert!(store.read().await.unwrap().unwrap().engine == data);
    // Young orphans are left alone (a writer may be about to list them); they are collected
    // once older than the grace period.
    assert!(orphans.iter().all(|name| api.names().contains(name)));
}

/// What the store reads after `corrupt` changed the head's data.
async fn read_after(api: &FakeApi, corrupt: impl FnOnce(&mut BTreeMap<String, String>)) -> String {
    {
        let mut objects = api.objects.lock().unwrap();
        let head = objects.get_mut("tandem-knowledge").unwrap();
        corrupt(head.data.as_mut().unwrap());
        let revision = api.revision.fetch_add(1, Ordering::AcqRel) + 1;
        head.metadata.resource_version = Some(revision.to_string());
    }
    api.store("tandem-knowledge")
        .read()
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn a_corrupted_head_is_refused_unallocated_and_its_last_good_copy_read_then_replaced() {
    let api = FakeApi::default();
    let adapter = AdapterState::default();
    let store = api.store("tandem-knowledge");
    let data = snapshot_of(0..30_000);
    let v1 = store.write(None, &data, &adapter).await.unwrap();
    let (shards, _) = shards_and_listed(&api);
    // As many chunks of the least size as the head lists: fewer bytes than they hold.
    let short = ((shards.len() - 1) * MIN_CHUNK).to_string();
    for (corrupt, expected) in [
        (
            "18446744073709551615",
            "more than a knowledge base may take",
        ),
        ("garbage", "data[engine-bytes]"),
        ("5", "more than 5 bytes take"),
        (&*short, "its shards hold more than"),
        (&*(data.len() + 1).to_string(), "the head says"),
    ] {
        let error = read_after(&api, |d| {
            d.insert("engine-bytes".into(), corrupt.to_owned());
        })
        .await;
        println!("engine-bytes {corrupt}: {error}");
        assert!(error.contains(expected), "{error}");
    }
    let error = read_after(&api, |d| {
        d.insert("engine-sha256".into(), "0".repeat(64));
        d.insert("engine-bytes".into(), data.len().to_string());
    })
    .await;
    assert!(error.contains("SHA-256"), "{error}");
    let error = read_after(&api, |d| {
        d.insert("shards".into(), "x\n".repeat(MAX_SHARDS + 1));
    })
    .await;
    assert!(error.contains("shards"), "{error}");

    // The last good copy is whole, at the corrupted head's version.
    let reader = api.store("tandem-knowledge");
    let good = reader.read_last_good().await.unwrap().unwrap();
    let head_version = api.objects.lock().unwrap()["tandem-knowledge"]
        .metadata
        .resource_version
        .clone()
        .unwrap();
    assert!(good.engine == data);
    assert_eq!(good.version, head_version);
    assert_ne!(good.version, v1);
    reader.report_fallback("the head is damaged").await;
    let events = api.events.lock().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("tandem-knowledge", FALLBACK_REASON)
    );
    assert!(events[0].2.contains("the head is damaged"), "{events:?}");
    // The next write replaces the head, reusing the copy's shards.
    let grown = snapshot_of(0..30_001);
    reader
        .write(Some(&good.version), &grown, &adapter)
        .await
        .unwrap();
    assert!(
        api.store("tandem-knowledge")
            .read()
            .await
            .unwrap()
            .unwrap()
            .engine
            == grown
    );
    let (after, listed) = shards_and_listed(&api);
    assert_eq!(after, listed);
    assert!(after.iter().filter(|name| !shards.contains(name)).count() <= 2);
}

#[test]
fn past_the_capacity_a_write_is_refused() {
    let big = vec![b'x'; CAPACITY + 1];
    let error = encode("tandem-knowledge", None, &big, &AdapterState::default()).unwrap_err();
    assert!(matches!(error, StoreError::TooLarge { .. }), "{error:?}");
}
