//! The intake through the adapter core, with the real engine and a store that keeps one
//! ConfigMap's size rule (the sharded ConfigMap store's limit is 64 times larger; one
//! ConfigMap's is reached in seconds): a batch is learned whole or not at all, a write that fails leaves no
//! trace (so a retry counts once), and a knowledge base that no longer fits its store forgets
//! its stalest jobs and goes on acknowledging — also after a restart; and a
//! peak the memory model under-predicted protects its job before the refit is stored.
//!
//! Who may post: a node's profiler only profiles of its own node's jobs, never outcomes; each
//! caller at most its minute's worth of items. What is stored always loads: an observation
//! whose knowledge base would not load back is refused, and a damaged knowledge-base file is
//! replaced by its last good copy at the next start.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tandem_adapter_core::intake::{AuthError, Caller, HeaderMap, IntakeAuth};
use tandem_adapter_core::serve::serve_listener;
use tandem_adapter_core::store::{AdapterState, FileStore, KnowledgeStore, StoreError, Stored};
use tandem_adapter_core::{Core, CoreConfig, JobKeys, Limits, Shutdown, resume_or_bootstrap};
use tandem_api::Policy;
use tandem_kube_adapter::Extender;
use tandem_kube_common::app::{App, ClusterFile, Source};
use tandem_kube_common::decide::FilterPasses;
use tandem_kube_common::store::{CONFIG_MAP_CAPACITY as CAPACITY, to_config_map};

const TOKEN: &str = "intake-token-for-the-test";

/// A knowledge base kept in memory under the size rule of one ConfigMap ([`to_config_map`],
/// what the ConfigMap store writes while a knowledge base needs no shards), whose next write can be made to fail, or a given write held.
#[derive(Default)]
struct MemoryStore {
    stored: Mutex<Option<Stored>>,
    fail_next: AtomicBool,
    writes: AtomicUsize,
    /// The write (counting from 1) held until `release`; 0 for none.
    hold_write: AtomicUsize,
    /// Notified when the held write begins waiting.
    held: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

impl KnowledgeStore for MemoryStore {
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        let stored = self.stored.lock().unwrap().clone();
        Box::pin(std::future::ready(Ok(stored)))
    }

    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let hold =
            self.hold_write.load(Ordering::Acquire) == self.writes.load(Ordering::Acquire) + 1;
        let write = move || {
            if self.fail_next.swap(false, Ordering::AcqRel) {
                return Err(StoreError::Backend("the API server is unreachable".into()));
            }
            to_config_map("tandem-knowledge", version, engine, adapter)?;
            let mut stored = self.stored.lock().unwrap();
            if stored.as_ref().map(|s| s.version.as_str()) != version {
                return Err(StoreError::Conflict("ConfigMap tandem-knowledge".into()));
            }
            let next = (self.writes.fetch_add(1, Ordering::AcqRel) + 1).to_string();
            *stored = Some(Stored {
                engine: engine.to_vec(),
                adapter: adapter.clone(),
                version: next.clone(),
            });
            Ok(next)
        };
        Box::pin(async move {
            if hold {
                self.held.notify_one();
                self.release.notified().await;
            }
            write()
        })
    }

    fn capacity(&self) -> Option<usize> {
        Some(CAPACITY)
    }
}

/// A shared handle on a [`MemoryStore`], so the test keeps it across adapter restarts.
#[derive(Clone, Default)]
struct Shared(Arc<MemoryStore>);

impl KnowledgeStore for Shared {
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        self.0.load()
    }

    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        self.0.save(version, engine, adapter)
    }

    fn capacity(&self) -> Option<usize> {
        self.0.capacity()
    }
}

/// An adapter on the core (the kube front-end over a fixed cluster) serving on loopback.
struct Adapter {
    core: Arc<Core>,
    base: String,
    stop: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// How a test's adapter is set up beyond its store.
#[derive(Default)]
struct Setup {
    /// The pods of the fixed cluster (nodes are not needed: the intake asks where pods run).
    pods: Vec<Value>,
    /// Node profilers' tokens, `<node>-token` for each node named.
    profiler_nodes: Vec<&'static str>,
    /// [`Limits::intake_items_per_minute`]: 0 (no bound) unless a test sets one, since the
    /// tests that fill a store post thousands of profiles in seconds.
    items_per_minute: u32,
}

/// Node profilers presenting `<node>-token`, each the caller of its node.
struct NodeTokens(Vec<&'static str>);

impl IntakeAuth for NodeTokens {
    fn authenticate<'a>(
        &'a self,
        headers: &'a HeaderMap,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let answer = self
            .0
            .iter()
            .find(|node| token == format!("{node}-token"))
            .map(|node| Caller::node(node))
            .ok_or_else(|| AuthError::Unauthenticated("no such profiler".into()));
        Box::pin(std::future::ready(answer))
    }
}

impl Adapter {
    /// Starts from what `store` holds (or the bundled seed), as the adapters' `start` does.
    async fn start(store: &Shared) -> Adapter {
        Self::start_on(Box::new(store.clone()), Setup::default()).await
    }

    /// Starts from what `store` holds (the newest knowledge base, or its last good copy), as
    /// the adapters' `start` does, set up as `setup` says.
    async fn start_on(store: Box<dyn KnowledgeStore>, setup: Setup) -> Adapter {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = super::engine_runtime();
        let (engine, stored) =
            resume_or_bootstrap(runtime, Some(store.as_ref()), &Policy::default())
                .await
                .unwrap();
        let mut core = CoreConfig::new(engine, keys())
            .intake_token(Some(TOKEN.into()))
            .store(store)
            .resumed(stored)
            .limits(Limits {
                observation_wait: Duration::from_secs(60),
                request_timeout: Duration::from_secs(120),
                intake_items_per_minute: setup.items_per_minute,
                ..Limits::default()
            })
            .queue(64)
            .start()
            .unwrap();
        if !setup.profiler_nodes.is_empty() {
            core = core.with_intake_auth(Arc::new(NodeTokens(setup.profiler_nodes)));
        }
        let core = Arc::new(core);
        let cluster = ClusterFile {
            pods: setup
                .pods
                .into_iter()
                .map(|pod| serde_json::from_value(pod).unwrap())
                .collect(),
            ..ClusterFile::default()
        };
        let app = Arc::new(App::new(
            Arc::clone(&core),
            "nvidia.com/gpu".into(),
            Duration::from_secs(2),
            Source::Fixed(cluster),
        ));
        let locator = Arc::clone(&app);
        core.locate_jobs_with(Arc::new(move |job: &str, node: &str| {
            locator.runs_on(job, node)
        }));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, shutdown) = Shutdown::new();
        let extender = Arc::new(Extender::new(app, FilterPasses::default()));
        let router = tandem_adapter_core::http::router(Arc::clone(&core), extender);
        let server = tokio::spawn(serve_listener(router, listener, shutdown));
        Adapter {
            core,
            base,
            stop,
            server,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, String) {
        let (status, _, text) = self.post_as(TOKEN, path, body).await;
        (status, text)
    }

    /// Posts `body` with bearer token `token`: the status, the `Retry-After` header and the
    /// body.
    async fn post_as(
        &self,
        token: &str,
        path: &str,
        body: &Value,
    ) -> (u16, Option<String>, String) {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (
            response.status().as_u16(),
            retry_after,
            response.text().await.unwrap(),
        )
    }

    async fn knowledge(&self) -> Value {
        reqwest::Client::new()
            .get(format!("{}/v1/knowledge", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The value of the metric line starting with `name `.
    async fn metric(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }
}

/// The keys every test adapter keys ids with.
fn keys() -> JobKeys {
    JobKeys::new(vec![7; 32]).unwrap()
}

/// A keyed-looking id (32 lower-case hex digits), distinct per `n`.
fn id(n: usize) -> String {
    format!("{n:032x}")
}

fn profile(n: usize) -> Value {
    json!({ "job": id(n), "profile": {
        "gpu_util_pct": 5.0 + (n * 37 % 90) as f64,
        "mem_access_pct": 2.0 + (n * 13 % 50) as f64,
        "mem_used_mib": 600 + (n * 733 % 9_000),
        "gpu_model": "V100",
    }})
}

fn outcome(a: usize, b: usize) -> Value {
    json!({ "gpu_model": "V100", "jobs": [id(a), id(b)], "solo_s": [100.0, 90.0],
            "colocated_s": [120.0, 130.0] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_learned_whole_or_not_at_all_and_a_retry_counts_once() {
    let store = Shared::default();
    let adapter = Adapter::start(&store).await;
    let (status, text) = adapter
        .post(
            "/v1/profiles",
            &json!({ "profiles": [profile(1), profile(2)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let before = adapter.knowledge().await;

    // [valid, invalid]: the engine takes the first and refuses the second; nothing is learned.
    let mut invalid = profile(4);
    invalid["profile"]["gpu_util_pct"] = json!(150.0);
    let (status, text) = adapter
        .post(
            "/v1/profiles",
            &json!({ "profiles": [profile(3), invalid] }),
        )
        .await;
    println!("[valid, invalid] profiles -> {status} {text}");
    assert_eq!(status, 400, "{text}");
    assert_eq!(adapter.knowledge().await, before);
    let (status, text) = adapter
        .post(
            "/v1/outcomes",
            &json!({ "outcomes": [outcome(1, 2), { "gpu_model": "V100", "jobs": [id(1), id(2)],
                "solo_s": [100.0], "colocated_s": [120.0, 130.0] }] }),
        )
        .await;
    println!("[valid, invalid] outcomes -> {status} {text}");
    assert_eq!(status, 400, "{text}");
    assert_eq!(adapter.knowledge().await, before);

    // The write of two valid outcomes fails: not acknowledged, not learned. The retry is.
    store.0.fail_next.store(true, Ordering::Release);
    let batch = json!({ "outcomes": [outcome(1, 2), outcome(2, 1)] });
    let (status, text) = adapter.post("/v1/outcomes", &batch).await;
    println!("outcomes whose write failed -> {status} {text}");
    assert_eq!(status, 503, "{text}");
    assert_eq!(adapter.knowledge().await, before);
    let (status, text) = adapter.post("/v1/outcomes", &batch).await;
    assert_eq!(status, 200, "{text}");
    let after = adapter.knowledge().await;
    println!(
        "outcomes learned: {} before, {} after the failed write and its retry",
        before["outcomes"], after["outcomes"]
    );
    assert_eq!(
        after["outcomes"].as_u64().unwrap(),
        before["outcomes"].as_u64().unwrap() + 2
    );
    // What the store holds is what the engine knows.
    adapter.stop().await;
    let restarted = Adapter::start(&store).await;
    assert_eq!(restarted.knowledge().await, after);
    restarted.stop().await;
}

/// Whether the engine behind `adapter` holds the profile of `job` (its memory is observed).
async fn profiled(adapter: &Adapter, job: &str) -> bool {
    let (status, text) = adapter
        .post(
            "/v1/estimate",
            &json!({ "job": job, "gpus": [{ "model": "V100", "memory_mib": 16_384 }] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()[0]["memory_source"] == "observed"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_knowledge_base_forgets_its_stalest_jobs_and_goes_on_acknowledging() {
    const BATCH: usize = 500;
    let store = Shared::default();
    let adapter = Adapter::start(&store).await;
    assert_eq!(
        adapter.metric("tandem_store_limit_bytes").await,
        CAPACITY as f64
    );
    let evictions = "tandem_knowledge_evictions_total";
    assert_eq!(adapter.metric(evictions).await, 0.0);
    // Batches of new jobs past what one ConfigMap holds: each is acknowledged, the jobs
    // observed least recently making room once a write would exceed it.
    let mut next = 0;
    while adapter.metric(evictions).await == 0.0 {
        let batch: Vec<Value> = (next..next + BATCH).map(profile).collect();
        let (status, text) = adapter
            .post("/v1/profiles", &json!({ "profiles": batch }))
            .await;
        assert_eq!(status, 200, "after {next} profiles: {text}");
        next += BATCH;
        assert!(next < 200_000, "the store never filled");
    }
    let evicted = adapter.metric(evictions).await as usize;
    let full = adapter.knowledge().await;
    let bytes = adapter.metric("tandem_store_bytes").await;
    println!(
        "{next} profiles posted into one ConfigMap: the last batch of {BATCH} acknowledged, the \
         {evicted} jobs observed least recently forgotten; {} profiles known, {bytes} bytes of \
         {CAPACITY}",
        full["profiles"]
    );
    assert!(bytes <= CAPACITY as f64 && bytes > 0.9 * CAPACITY as f64);
    assert_eq!(full["profiles"].as_u64().unwrap(), (next - evicted) as u64);
    // The stalest went, the newest stayed.
    assert!(!profiled(&adapter, &id(0)).await, "the first job was kept");
    assert!(
        profiled(&adapter, &id(next - 1)).await,
        "the last job was forgotten"
    );
    adapter.stop().await;
    let restarted = Adapter::start(&store).await;
    assert_eq!(restarted.knowledge().await, full, "after a restart");

    // What fits is acknowledged with no more forgetting: one more job, and an outcome between
    // recent ones, with exactly two writes.
    let written = store.0.writes.load(Ordering::Acquire);
    let (status, text) = restarted
        .post("/v1/profiles", &json!({ "profiles": [profile(next)] }))
        .await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = restarted
        .post(
            "/v1/outcomes",
            &json!({ "outcomes": [outcome(next - 1, next - 2)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let later = restarted.knowledge().await;
    assert_eq!(
        later["profiles"].as_u64().unwrap(),
        full["profiles"].as_u64().unwrap() + 1
    );
    assert_eq!(
        later["outcomes"].as_u64().unwrap(),
        full["outcomes"].as_u64().unwrap() + 1
    );
    assert_eq!(store.0.writes.load(Ordering::Acquire), written + 2);
    assert_eq!(
        restarted.metric(evictions).await,
        0.0,
        "a restart counts anew"
    );
    let loadback = restarted
        .metric("tandem_knowledge_loadback_seconds_sum")
        .await;
    println!("two load-backs of a full ConfigMap's knowledge base took {loadback:.3} s in all");
    restarted.stop().await;
}

/// VGG-19 at batch 64 (`tandem declare` of the torchvision model): the bundled memory model
/// predicts about 10 GiB on a T4.
fn vgg19_b64() -> Value {
    json!({ "params_mib": 527.79, "activations_mib": 7636.48, "input_mib": 36.75,
            "batch_size": 64, "gflops": 1254.0, "conv_layers": 16, "linear_layers": 3,
            "activation_layers": 18, "other_layers": 6 })
}

/// What the engine expects of `job` (with the model it declared) alone on a T4.
async fn on_t4(adapter: &Adapter, job: &str) -> Value {
    let (status, text) = adapter
        .post(
            "/v1/estimate",
            &json!({ "job": job, "declared": vgg19_b64(),
                     "gpus": [{ "model": "T4", "memory_mib": 15_360 }] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str::<Value>(&text).unwrap()[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_measured_peak_protects_its_job_while_the_memory_model_is_refit() {
    const MEASURED: u64 = 15_000;
    let store = Shared::default();
    let adapter = Adapter::start(&store).await;
    // The front-end saw the job's declaration (a pod's annotation, a SPANK option).
    let (job, other) = (id(1), id(2));
    adapter
        .core
        .remember_declared(&job, &serde_json::from_value(vgg19_b64()).unwrap());
    let before = on_t4(&adapter, &job).await;
    assert_eq!(before["memory_source"], "declared", "{before}");
    assert!(
        before["reserved_mib"].as_u64().unwrap() < MEASURED,
        "{before}"
    );

    // The profiler reports the job's peak; the refit's write (the second: the profile is
    // stored first) is held, so what the engine decides meanwhile can be looked at.
    let writes = store.0.writes.load(Ordering::Acquire);
    store.0.hold_write.store(writes + 2, Ordering::Release);
    let post = {
        let (base, body) = (
            adapter.base.clone(),
            json!({ "profiles": [{ "job": job, "profile": { "gpu_util_pct": 70.0,
                "mem_access_pct": 40.0, "mem_used_mib": MEASURED, "gpu_model": "T4" } }] }),
        );
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/v1/profiles"))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    tokio::time::timeout(Duration::from_secs(60), store.0.held.notified())
        .await
        .expect("the refit never reached the store");
    let meanwhile = on_t4(&adapter, &job).await;
    let other_meanwhile = on_t4(&adapter, &other).await;
    println!(
        "T4, VGG-19 b64: before the report {} MiB reserved ({}); while the refit is held, the \
         reported job {} MiB ({}), another job of the model {} MiB ({})",
        before["reserved_mib"],
        before["memory_source"],
        meanwhile["reserved_mib"],
        meanwhile["memory_source"],
        other_meanwhile["reserved_mib"],
        other_meanwhile["memory_source"],
    );
    // The job is judged by what it was measured to use, not by the prediction.
    assert_eq!(meanwhile["memory_source"], "observed", "{meanwhile}");
    assert_eq!(
        meanwhile["peak_mem_mib"].as_u64(),
        Some(MEASURED),
        "{meanwhile}"
    );
    assert!(
        meanwhile["reserved_mib"].as_u64().unwrap() >= MEASURED,
        "{meanwhile}"
    );

    store.0.release.notify_one();
    let (status, text) = post.await.unwrap();
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["peaks_learned"], 1, "{answer}");
    // Once refit, the prediction for other jobs of the model moves toward the measurement.
    let other_after = on_t4(&adapter, &other).await;
    println!(
        "after the refit, another job of the model: {} MiB predicted, {} MiB reserved (before {} / {})",
        other_after["peak_mem_mib"],
        other_after["reserved_mib"],
        other_meanwhile["peak_mem_mib"],
        other_meanwhile["reserved_mib"]
    );
    assert!(
        other_after["peak_mem_mib"].as_u64() > other_meanwhile["peak_mem_mib"].as_u64(),
        "{other_after}"
    );
    adapter.stop().await;
}

/// A pod of job `job` (in `default`) bound to `node`.
fn pod_on(name: &str, job: &str, node: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}"),
                      "labels": { "tandem.dev/job": job } },
        "spec": { "nodeName": node, "containers": [{ "name": "main",
                  "resources": { "limits": { "nvidia.com/gpu": "1" } } }] },
    })
}

fn profile_of(job: &str) -> Value {
    json!({ "job": job, "profile": { "gpu_util_pct": 40.0, "mem_access_pct": 10.0,
            "mem_used_mib": 3_000, "gpu_model": "V100" } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_profiler_posts_profiles_of_its_own_nodes_jobs_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("kb"));
    let adapter = Adapter::start_on(
        Box::new(store),
        Setup {
            pods: vec![
                pod_on("a-0", "train-a", "node-a"),
                pod_on("b-0", "train-b", "node-b"),
            ],
            profiler_nodes: vec!["node-a", "node-b"],
            ..Setup::default()
        },
    )
    .await;
    let (ours, theirs) = (
        keys().key("default", "train-a"),
        keys().key("default", "train-b"),
    );
    let before = adapter.knowledge().await;
    // Node a's profiler lies about node b's job, alone or beside its own: refused whole.
    for batch in [
        vec![profile_of(&theirs)],
        vec![profile_of(&ours), profile_of(&theirs)],
    ] {
        let (status, _, text) = adapter
            .post_as(
                "node-a-token",
                "/v1/profiles",
                &json!({ "profiles": batch }),
            )
            .await;
        println!("node a posts a profile of node b's job -> {status} {text}");
        assert_eq!(status, 403, "{text}");
        assert!(
            text.contains(&format!("job {theirs} has no pod on node node-a")),
            "{text}"
        );
    }
    assert_eq!(adapter.knowledge().await, before, "nothing was learned");
    // Outcomes, and the operator's questions, are not a profiler's to post.
    let outcome = json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [ours, theirs],
        "solo_s": [100.0, 90.0], "colocated_s": [120.0, 130.0] }] });
    let (status, _, text) = adapter
        .post_as("node-a-token", "/v1/outcomes", &outcome)
        .await;
    println!("node a posts an outcome -> {status} {text}");
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("may post only /v1/profiles"), "{text}");
    // Its own job's profile is learned; a token nobody issued is not a caller.
    let (status, _, text) = adapter
        .post_as(
            "node-a-token",
            "/v1/profiles",
            &json!({ "profiles": [profile_of(&ours)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = adapter
        .post_as(
            "node-c-token",
            "/v1/profiles",
            &json!({ "profiles": [profile_of(&ours)] }),
        )
        .await;
    assert_eq!(status, 401, "{text}");
    let after = adapter.knowledge().await;
    assert_eq!(
        after["profiles"].as_u64().unwrap(),
        before["profiles"].as_u64().unwrap() + 1
    );
    let refused = adapter
        .metric(r#"tandem_unauthorized_total{verb="profiles"}"#)
        .await;
    assert_eq!(refused, 3.0, "two lies and a stranger");
    // The operator's token still posts anything.
    let (status, text) = adapter.post("/v1/outcomes", &outcome).await;
    assert_eq!(status, 200, "{text}");
    adapter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_minutes_worth_of_items_is_told_when_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = Adapter::start_on(
        Box::new(FileStore::new(dir.path().join("kb"))),
        Setup {
            pods: (0..6)
                .map(|n| pod_on(&format!("p-{n}"), &format!("job-{n}"), "node-a"))
                .collect(),
            profiler_nodes: vec!["node-a"],
            items_per_minute: 4,
        },
    )
    .await;
    let job = |n: usize| profile_of(&keys().key("default", &format!("job-{n}")));
    let (status, _, text) = adapter
        .post_as(
            "node-a-token",
            "/v1/profiles",
            &json!({ "profiles": [job(0), job(1), job(2)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let (status, retry_after, text) = adapter
        .post_as(
            "node-a-token",
            "/v1/profiles",
            &json!({ "profiles": [job(3), job(4)] }),
        )
        .await;
    println!("past the bound -> {status} (Retry-After: {retry_after:?}) {text}");
    assert_eq!(status, 429, "{text}");
    assert!(
        text.contains("node/node-a may add at most 4 items per minute"),
        "{text}"
    );
    // One item is missing, at one every 15 s (less what refilled while the first was learned).
    let wait: u64 = retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=15).contains(&wait), "Retry-After: {wait}");
    // Another caller has its own allowance; a batch past the bound never fits.
    let (status, text) = adapter
        .post("/v1/profiles", &json!({ "profiles": [job(3), job(4)] }))
        .await;
    assert_eq!(status, 200, "{text}");
    let (status, _, text) = adapter
        .post_as(
            "node-a-token",
            "/v1/profiles",
            &json!({ "profiles": (0..5).map(job).collect::<Vec<_>>() }),
        )
        .await;
    assert_eq!(status, 413, "{text}");
    assert_eq!(
        adapter
            .metric(r#"tandem_intake_rate_limited_total{verb="profiles"}"#)
            .await,
        1.0
    );
    adapter.stop().await;
}

/// An outcome whose times no run can show: alone 1e-300 s, beside its partner 1e300 s.
fn poison() -> Value {
    json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [id(1), id(2)],
        "solo_s": [1e-300, 1e-300], "colocated_s": [1e300, 1e300] }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poison_outcome_is_refused_and_what_is_stored_loads_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kb");
    let adapter = Adapter::start_on(Box::new(FileStore::new(&path)), Setup::default()).await;
    let (status, text) = adapter
        .post(
            "/v1/profiles",
            &json!({ "profiles": [profile(1), profile(2)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let before = adapter.knowledge().await;
    let (status, text) = adapter.post("/v1/outcomes", &poison()).await;
    println!("the poison outcome -> {status} {text}");
    assert!(status == 400 || status == 422, "{status} {text}");
    assert_eq!(adapter.knowledge().await, before);
    adapter.stop().await;
    // What is stored loads: the newest, no fall-back.
    let restarted = Adapter::start_on(Box::new(FileStore::new(&path)), Setup::default()).await;
    assert_eq!(restarted.knowledge().await, before);
    assert_eq!(
        restarted.metric("tandem_knowledge_fallbacks_total").await,
        0.0
    );
    restarted.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_knowledge_file_is_replaced_by_its_last_good_copy_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kb");
    let adapter = Adapter::start_on(Box::new(FileStore::new(&path)), Setup::default()).await;
    let (status, text) = adapter
        .post(
            "/v1/profiles",
            &json!({ "profiles": [profile(1), profile(2)] }),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let learned = adapter.knowledge().await;
    assert_eq!(
        adapter.metric("tandem_knowledge_fallbacks_total").await,
        0.0
    );
    adapter.stop().await;
    // Garbage in the snapshot: the file reads, the engine refuses it.
    let bytes = std::fs::read(&path).unwrap();
    let header_end = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0;
    let mut damaged = bytes[..=header_end].to_vec();
    damaged.extend(std::iter::repeat_n(b'#', bytes.len() - header_end - 1));
    std::fs::write(&path, damaged).unwrap();

    let restarted = Adapter::start_on(Box::new(FileStore::new(&path)), Setup::default()).await;
    assert_eq!(restarted.knowledge().await, learned, "the last good copy");
    assert_eq!(
        restarted.metric("tandem_knowledge_fallbacks_total").await,
        1.0
    );
    // The next observation replaces the damaged file; a start after it needs no fall-back.
    let (status, text) = restarted
        .post("/v1/profiles", &json!({ "profiles": [profile(3)] }))
        .await;
    assert_eq!(status, 200, "{text}");
    let later = restarted.knowledge().await;
    restarted.stop().await;
    let again = Adapter::start_on(Box::new(FileStore::new(&path)), Setup::default()).await;
    assert_eq!(again.knowledge().await, later);
    assert_eq!(again.metric("tandem_knowledge_fallbacks_total").await, 0.0);
    again.stop().await;
}
