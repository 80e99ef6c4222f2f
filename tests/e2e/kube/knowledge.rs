//! The knowledge base past one ConfigMap, against a real kube-apiserver and etcd: a
//! 100,000-job knowledge base is written in shards and read back byte for byte (with what the
//! save, the load and the load's memory cost printed), and of two writers of a sharded
//! knowledge base one wins while the other gets a conflict and leaves no shard behind; and a
//! head corrupted in the cluster (an absurd length, garbage) makes the adapter load its last
//! good copy at restart, say so (a metric, an Event on the head) and serve.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::EMBEDDED_ENGINE;
use tandem_adapter_core::store::{AdapterState, StoreError};
use tandem_api::Policy;
use tandem_host::{HostConfig, Runtime};
use tandem_kube_common::store::{
    ConfigMapStore, FALLBACK_REASON, Head, last_good_name, read_head, shard_selector,
};

use crate::cluster::{Cluster, ensure_namespace};

const NAMESPACE: &str = "tandem-system";
const HEAD: &str = "tandem-knowledge";

/// Job profiles in the large knowledge base.
const JOBS: usize = 100_000;

/// The engine's snapshot of a knowledge base of `jobs` recurring jobs besides the seed.
///
/// Observed one at a time through the engine, a profile costs a call whose host keeps a saved
/// copy of the whole knowledge base up to date, so 100,000 of them take hours; the profiles
/// are added to a bootstrapped snapshot instead, and the engine loads it and saves it again
/// (so what is stored is the engine's own serialization, checked by its loader).
fn knowledge_of(runtime: &Runtime, jobs: usize) -> Result<Vec<u8>> {
    let mut seed = runtime.bootstrap(&Policy::default(), 1)?;
    let mut state: Value = serde_json::from_slice(seed.snapshot()?)?;
    let profiles = state["knowledge"]["profiles"]
        .as_object_mut()
        .context("the snapshot has no knowledge.profiles")?;
    for n in 0..jobs {
        let model = ["V100", "A100", "T4"][n % 3];
        profiles.insert(
            format!("{n:032x}"),
            json!({
                "gpu_util_pct": 5.0 + (n * 37 % 90) as f64,
                "mem_access_pct": 2.0 + (n * 13 % 50) as f64,
                "mem_used_mib": 600 + (n * 733 % 9_000),
                "gpu_model": model,
            }),
        );
    }
    let mut engine = runtime.load(&serde_json::to_vec(&state)?)?;
    Ok(engine.snapshot()?.to_vec())
}

/// This process's resident memory and its peak since the last [`reset_peak`], in bytes.
fn memory() -> Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/self/status"))?;
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .context("no value")?
            .parse()?;
        Ok(kib * 1024)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak resident memory (`VmHWM`) to the current one.
fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", "5").context("cannot reset VmHWM")
}

/// The shard ConfigMaps in the namespace, and the ones the head lists.
async fn shards_and_listed(api: &Api<ConfigMap>) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let shards = api
        .list_metadata(&ListParams::default().labels(&shard_selector(HEAD)))
        .await?
        .items
        .into_iter()
        .filter_map(|item| item.metadata.name)
        .collect();
    let listed = match read_head(api.get(HEAD).await?)? {
        Head::Inline(_) => BTreeSet::new(),
        Head::Sharded(head) => head
            .distinct_shards()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    Ok((shards, listed))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

#[tokio::test]
async fn a_knowledge_base_of_100_000_jobs_round_trips_through_shards() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start_control_plane().await?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())?;

    let started = Instant::now();
    let engine = knowledge_of(&runtime, JOBS)?;
    println!(
        "a knowledge base of {JOBS} jobs: {} bytes of engine snapshot ({:.1} MiB), built in {:.1?}",
        engine.len(),
        mib(engine.len() as u64),
        started.elapsed()
    );
    let adapter = AdapterState::default();

    let writer = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD);
    let started = Instant::now();
    let v1 = writer.write(None, &engine, &adapter).await?;
    let save = started.elapsed();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let (shards, listed) = shards_and_listed(&api).await?;
    ensure!(
        shards == listed,
        "shards {shards:?}, the head lists {listed:?}"
    );
    println!("save: {} shards and the head in {save:.1?}", shards.len());

    // A fresh store, as a restarted replica: read the head and its shards, then load them.
    let reader = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD);
    let (before, _) = memory()?;
    reset_peak()?;
    let started = Instant::now();
    let stored = reader.read().await?.context("nothing stored")?;
    let read = started.elapsed();
    let (_, read_peak) = memory()?;
    ensure!(stored.version == v1);
    ensure!(
        stored.engine == engine,
        "the snapshot read back differs from the one written"
    );
    let started = Instant::now();
    let mut loaded = runtime.load(&stored.engine)?;
    let load = started.elapsed();
    let (_, load_peak) = memory()?;
    let summary = loaded.describe()?;
    // Resident memory grows by what the allocator could not serve from memory freed before
    // (building the knowledge base freed more than a read takes), so the process's peak is
    // printed too.
    println!(
        "load: read from the cluster in {read:.1?} (resident peak +{:.0} MiB), into the engine \
         in {load:.1?} (resident peak +{:.0} MiB, read included); the test process's resident \
         peak: {:.0} MiB",
        mib(read_peak.saturating_sub(before)),
        mib(load_peak.saturating_sub(before)),
        mib(load_peak),
    );
    ensure!(
        loaded.snapshot()? == engine.as_slice(),
        "the engine's snapshot after loading differs"
    );
    println!("the engine knows {summary:?}");

    // One more job: a write creates only the shards that changed and collects the replaced.
    let mut grown: Value = serde_json::from_slice(&engine)?;
    grown["knowledge"]["profiles"]
        .as_object_mut()
        .context("no profiles")?
        .insert(
            format!("{:032x}", JOBS),
            json!({ "gpu_util_pct": 50.0, "mem_access_pct": 10.0, "mem_used_mib": 4000,
                    "gpu_model": "V100" }),
        );
    let grown = runtime
        .load(&serde_json::to_vec(&grown)?)?
        .snapshot()?
        .to_vec();
    let started = Instant::now();
    let v2 = reader.write(Some(&v1), &grown, &adapter).await?;
    let second_save = started.elapsed();
    let (after, listed) = shards_and_listed(&api).await?;
    ensure!(
        after == listed,
        "an unlisted shard was left behind: {after:?} vs {listed:?}"
    );
    println!(
        "one more job: saved in {second_save:.1?}, {} of {} shards new",
        after.difference(&shards).count(),
        after.len()
    );
    let stored = writer.read().await?.context("nothing stored")?;
    ensure!(stored.version == v2 && stored.engine == grown);
    Ok(())
}

#[tokio::test]
async fn of_two_writers_of_a_sharded_knowledge_base_one_wins_and_no_shard_is_left_behind()
-> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start_control_plane().await?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())?;
    let adapter = AdapterState::default();
    let base = knowledge_of(&runtime, 20_000)?;
    let v1 = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD)
        .write(None, &base, &adapter)
        .await?;
    let a = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD);
    let b = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD);
    a.read().await?;
    b.read().await?;
    let ours = knowledge_of(&runtime, 25_000)?;
    let theirs = knowledge_of(&runtime, 30_000)?;
    let won = b.write(Some(&v1), &theirs, &adapter).await?;
    let lost = a.write(Some(&v1), &ours, &adapter).await;
    println!("the second writer: {lost:?}");
    ensure!(
        matches!(lost, Err(StoreError::Conflict(_))),
        "the second writer was not refused: {lost:?}"
    );
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let (shards, listed) = shards_and_listed(&api).await?;
    ensure!(
        shards == listed,
        "shards {shards:?}, the head lists {listed:?}"
    );
    let stored = a.read().await?.context("nothing stored")?;
    ensure!(stored.version == won && stored.engine == theirs);
    Ok(())
}

#[tokio::test]
async fn a_corrupted_head_makes_the_adapter_load_its_last_good_copy_at_restart() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start_control_plane().await?;
    let result = corrupted_head(&cluster).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!(
            "--- adapter ---\n{}",
            crate::cluster::tail(&cluster.dir().join("adapter.log"), 60)
        );
    }
    result
}

async fn corrupted_head(cluster: &Cluster) -> Result<()> {
    use crate::extender::{knowledge, post, profile, start_with, wait_ready};
    let client = crate::extender::prepare(cluster).await?;
    let keys = tandem_adapter_core::JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())?;
    // A sharded knowledge base, keyed with the adapter's secret.
    let engine = knowledge_of(&runtime, 20_000)?;
    let adapter_state = AdapterState {
        key_fingerprint: Some(keys.fingerprint()),
        ..AdapterState::default()
    };
    ConfigMapStore::new(client.clone(), NAMESPACE, HEAD)
        .write(None, &engine, &adapter_state)
        .await?;
    let http = reqwest::Client::new();
    let log = cluster.dir().join("adapter.log");
    // Filing a profile into a knowledge base of 20,000 jobs takes longer than a decision may
    // on a debug build and shared cores: the test is of the store, not of speed.
    let slow = [
        "--engine-deadline",
        "10s",
        "--decision-timeout",
        "20s",
        "--request-timeout",
        "60s",
    ];
    let start = || -> Result<crate::extender::Adapter> {
        start_with(
            cluster,
            crate::cluster::free_port()?,
            &log,
            "e2e-adapter",
            &slow,
        )
    };
    let mut adapter = start()?;
    wait_ready(&http, &mut adapter).await?;
    // One write through the adapter, which copies the head it writes.
    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        json!({ "profiles": [{ "job": keys.key("e2e", "late"), "profile": profile(40.0, 10.0, 3_000) }] }),
    )
    .await?;
    let mut known = knowledge(&http, &adapter.url).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    ensure!(
        api.get_opt(&last_good_name(HEAD)).await?.is_some(),
        "no last good copy was written"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NAMESPACE);
    for (attempt, corruption) in ["18446744073709551615", "garbage"].into_iter().enumerate() {
        adapter
            .process
            .terminate(std::time::Duration::from_secs(10));
        let mut head = api.get(HEAD).await?;
        head.data
            .as_mut()
            .context("the head has no data")?
            .insert("engine-bytes".to_owned(), corruption.to_owned());
        api.replace(HEAD, &PostParams::default(), &head).await?;
        let started = Instant::now();
        adapter = start()?;
        wait_ready(&http, &mut adapter).await.with_context(|| {
            format!("the adapter did not start over engine-bytes {corruption:?}")
        })?;
        let fallbacks =
            crate::extender::metric(&http, &adapter, "tandem_knowledge_fallbacks_total").await?;
        let now = knowledge(&http, &adapter.url).await?;
        let warned: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(FALLBACK_REASON)
                    && e.involved_object.name.as_deref() == Some(HEAD)
            })
            .filter_map(|e| e.message)
            .collect();
        println!(
            "engine-bytes {corruption:?}: ready in {:.1?}, tandem_knowledge_fallbacks_total {fallbacks}, \
             {} profiles known (before: {}); Events: {:?}",
            started.elapsed(),
            now["profiles"],
            known["profiles"],
            warned
        );
        ensure!(fallbacks == 1.0, "no fall-back counted");
        ensure!(
            now["profiles"] == known["profiles"],
            "not the last good knowledge base"
        );
        ensure!(
            warned.len() == attempt + 1 && warned.iter().all(|m| m.contains("engine-bytes")),
            "the fall-back Events: {warned:?}"
        );
        // It serves, and its next write replaces the corrupted head.
        post(
            &http,
            &format!("{}/v1/profiles", adapter.url),
            json!({ "profiles": [{ "job": keys.key("e2e", &format!("after-{attempt}")),
                                   "profile": profile(40.0, 10.0, 3_000) }] }),
        )
        .await?;
        known = knowledge(&http, &adapter.url).await?;
        ensure!(
            matches!(read_head(api.get(HEAD).await?)?, Head::Sharded(_)),
            "the head was not replaced"
        );
        let stored = ConfigMapStore::new(client.clone(), NAMESPACE, HEAD)
            .read()
            .await?
            .context("nothing stored")?;
        ensure!(
            stored.engine.len() > engine.len(),
            "the head holds less than before"
        );
    }
    Ok(())
}
