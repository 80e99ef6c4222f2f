//! The framework plugin's state and decisions, in safe Rust: what the C functions of the crate
//! root call under their handle's lock.
//!
//! kube-scheduler runs one scheduling cycle at a time (PreFilter, Filter, Score, Reserve for
//! one pod), while its informers deliver node and pod events from other goroutines. The
//! plugin therefore keeps its own copy of what the extender's watchers keep — GPU nodes and
//! the pods holding their GPUs — and brings the engine's view up to date lazily, at the next
//! PreFilter after something that matters changed. Every decision is the extender's
//! ([`tandem_kube_common::decide`]): the same OOM guard, sharing cap, reasons and scores.
//!
//! What it does is counted in the adapters' metric families ([`Metrics`]), which the Go side
//! re-exports in kube-scheduler's own `/metrics`: decisions and their latency per verb
//! ([`PREFILTER`], [`RESERVE`]), engine calls and their failures, refused declarations, the
//! view's size and rebuilds, and the knowledge base's size and writes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use serde::{Deserialize, Serialize};
use tandem_adapter_core::gpu_models::GpuCosts;
use tandem_adapter_core::metrics::{Metrics, Verb};
use tandem_adapter_core::store::{AdapterState, StoreError, stored_size};
use tandem_adapter_core::{EMBEDDED_ENGINE, EngineFailure, EngineState, JobKeys, Placement};
use tandem_api::{ModelCap, Objective, Policy, Profile};
use tandem_host::{HostConfig, Runtime};
use tandem_kube_common::cluster::{ClusterView, GpuPod, gpu_model, gpu_pod, placement_annotations};
use tandem_kube_common::decide::{self, Verdict};
use tandem_kube_common::lean::LeanPod;
use tandem_kube_common::store::{AssembleError, Encoded, Head, encode, read_head};

/// Why a call into the plugin failed. Every message is meant for a person reading the
/// scheduler's log or a pod's events.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin arguments (`pluginConfig` args) are malformed; the message names the field.
    #[error("invalid Tandem plugin args: {0}")]
    Config(String),
    /// The engine component could not be loaded or started.
    #[error("cannot start the engine: {0}")]
    Start(#[source] tandem_host::Error),
    /// The id secret could not be read or is unusable (the message names the file).
    #[error("idSecretFile: {0}")]
    Secret(String),
    /// An object from the Go side could not be read.
    #[error("cannot read the {what} passed by the scheduler: {why}")]
    Input {
        /// Which object.
        what: &'static str,
        /// What was wrong with it, with the path of the field.
        why: String,
    },
    /// The engine failed (a trap, a deadline, a refusal).
    #[error(transparent)]
    Engine(#[from] EngineFailure),
    /// The knowledge base could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reserve was called for a pod that PreFilter did not see last.
    #[error("Reserve for pod {0} without its PreFilter")]
    NotPrepared(String),
}

/// The plugin's arguments, as written under `pluginConfig[].args` of the profile (the scheduler
/// hands them over as JSON). Unknown fields are refused, so a misspelt one is named.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// What placements optimize: `balanced`, `min-slowdown` or `max-packing`.
    #[serde(default)]
    pub objective: Objective,
    /// Most pods sharing one GPU.
    #[serde(default = "default_max_jobs")]
    pub max_jobs_per_gpu: u32,
    /// Caps for particular GPU models (`{"gpuModel": "K80", "maxJobs": 1}`).
    #[serde(default)]
    pub model_caps: Vec<ModelCapArg>,
    /// File with the per-cluster secret that keys job ids (hex, at least 16 bytes).
    pub id_secret_file: PathBuf,
    /// Extended resource Tandem manages.
    #[serde(default = "default_resource")]
    pub resource: String,
    /// Engine component to load instead of the one built into the scheduler.
    #[serde(default)]
    pub engine: Option<PathBuf>,
    /// How many of the nodes Tandem ranks first PreFilter offers the framework, whose Filter
    /// and Score plugins then run on those alone (the extender's `--filter-passes best`, with
    /// room for the filters Tandem does not judge); `0` offers every node. Pods that constrain
    /// their node (selectors, affinity, spread, volumes, host ports) are always offered every
    /// node, and so is a pod that found no node among its candidates before.
    #[serde(default = "default_candidate_nodes")]
    pub candidate_nodes: u32,
    /// Directory where the compiled engine is kept between starts (see the extender's
    /// `--compiled-cache`); the default is the user's cache directory, `""` compiles at every
    /// start.
    #[serde(default = "HostConfig::default_compiled_cache")]
    pub compiled_cache: Option<PathBuf>,
    /// Longest one engine call may run, in milliseconds, before the sandbox interrupts it.
    #[serde(default = "default_deadline_ms")]
    pub engine_deadline_ms: u64,
    /// Namespace of the knowledge-base ConfigMap and of the scheduler's leader Lease.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Name of the ConfigMap holding the knowledge base (the extender's format).
    #[serde(default = "default_configmap")]
    pub knowledge_config_map: String,
    /// Price of one GPU-hour per model (`{"V100": 2.48}`), for pods that declare
    /// `tandem.dev/priority: cost`.
    #[serde(default)]
    pub gpu_prices: BTreeMap<String, f32>,
    /// Board power in watts per model (`{"T4": 70}`), for `tandem.dev/priority: energy`.
    #[serde(default)]
    pub gpu_powers: BTreeMap<String, f32>,
}

/// A per-model sharing cap in the plugin's arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelCapArg {
    /// The GPU model's short name (for example `K80`).
    pub gpu_model: String,
    /// Most pods sharing one GPU of it.
    pub max_jobs: u32,
}

fn default_max_jobs() -> u32 {
    Policy::DEFAULT_MAX_JOBS_PER_GPU
}
fn default_resource() -> String {
    "nvidia.com/gpu".to_owned()
}
fn default_deadline_ms() -> u64 {
    500
}
fn default_namespace() -> String {
    "kube-system".to_owned()
}
fn default_candidate_nodes() -> u32 {
    16
}
fn default_configmap() -> String {
    "tandem-knowledge".to_owned()
}

impl Config {
    /// Parses the arguments, naming the field at fault.
    pub fn parse(json: &[u8]) -> Result<Self, Error> {
        let json = if json.iter().all(u8::is_ascii_whitespace) {
            b"{}".as_slice()
        } else {
            json
        };
        let mut de = serde_json::Deserializer::from_slice(json);
        let config: Self = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                Error::Config(inner.to_string())
            } else {
                Error::Config(format!("{path}: {inner}"))
            }
        })?;
        if config.max_jobs_per_gpu == 0 {
            return Err(Error::Config("maxJobsPerGpu: must be at least 1".into()));
        }
        if let Some(at) = config.model_caps.iter().position(|c| c.max_jobs == 0) {
            return Err(Error::Config(format!(
                "modelCaps[{at}].maxJobs: must be at least 1"
            )));
        }
        if config.engine_deadline_ms == 0 {
            return Err(Error::Config("engineDeadlineMs: must be at least 1".into()));
        }
        for (field, map) in [
            ("gpuPrices", &config.gpu_prices),
            ("gpuPowers", &config.gpu_powers),
        ] {
            if let Some((model, value)) = map.iter().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
                return Err(Error::Config(format!(
                    "{field}.{model}: must be a positive number, got {value}"
                )));
            }
        }
        Ok(config)
    }

    /// The prices and powers of GPU models, keyed by the engine's model names.
    pub fn costs(&self) -> GpuCosts {
        let named = |map: &BTreeMap<String, f32>| -> Vec<(String, f32)> {
            map.iter()
                .map(|(model, &value)| (gpu_model(model).0, value))
                .collect()
        };
        GpuCosts::new(&named(&self.gpu_prices), &named(&self.gpu_powers))
    }

    /// The engine's policy.
    pub fn policy(&self) -> Policy {
        Policy {
            objective: self.objective,
            max_jobs_per_gpu: self.max_jobs_per_gpu,
            exploration: 0.0,
            model_caps: self
                .model_caps
                .iter()
                .map(|c| ModelCap {
                    gpu_model: c.gpu_model.clone(),
                    max_jobs: c.max_jobs,
                })
                .collect(),
        }
    }
}

/// What the Go side needs of the arguments once Rust has validated them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Namespace of the knowledge-base ConfigMap.
    pub namespace: String,
    /// Name of the knowledge-base ConfigMap.
    pub knowledge_config_map: String,
    /// How many of the best-ranked nodes PreFilter offers (`0`: every node).
    pub candidate_nodes: u32,
}

/// PreFilter's answer for one pod: everything Filter and Score need, so that they do not
/// cross into Rust once per node, in a compact binary form the Go side reads without
/// reflection ([`Prepared::encode`]; a JSON map of 500 nodes cost the scheduler more to decode
/// than Rust took to decide).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Whether Tandem manages the pod (it requests the managed GPU resource); when not, the
    /// rest is empty and the plugin stays out of the pod's way.
    pub managed: bool,
    /// The node table the verdicts follow: its generation (it changes whenever a node comes or
    /// goes) and its names, in order.
    pub generation: u64,
    /// The node table's names, sorted.
    pub names: Arc<[String]>,
    /// The verdict on each node of the table, in its order.
    pub verdicts: Vec<Verdict>,
}

/// The version of [`Prepared::encode`]'s layout (its first byte).
pub const PREPARED_FORMAT: u8 = 3;

/// Kinds of a node's verdict in [`Prepared::encode`].
const FITS: u8 = 0;
const FAILS: u8 = 1;
const UNRESOLVABLE: u8 = 2;

impl Prepared {
    /// The answer for a pod Tandem does not manage.
    fn unmanaged() -> Self {
        Self::default()
    }

    /// The verdicts as the Go side reads them (little-endian throughout):
    ///
    /// ```text
    /// u8 PREPARED_FORMAT, u8 managed (0: nothing follows)
    /// u64 generation of the node table (1 or more)
    /// u8 1 when the table follows, 0 when the caller holds this generation (`known_generation`)
    /// [u32 N, then N × (u32 length, UTF-8 name)]: the table's names, when it follows
    /// u32 V, then V × (u8 kind: 0 fits, 1 fails, 2 unresolvable; u8 score 0..=100;
    ///     u16 reason: index into the reasons, for kinds 1 and 2)
    /// u32 R, then R × (u32 length, UTF-8 reason): each distinct reason once
    /// ```
    pub fn encode(&self, known_generation: u64) -> Vec<u8> {
        let mut out = vec![PREPARED_FORMAT, u8::from(self.managed)];
        if !self.managed {
            return out;
        }
        out.extend_from_slice(&self.generation.to_le_bytes());
        let put_text = |out: &mut Vec<u8>, text: &str| {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        };
        if known_generation == self.generation {
            out.push(0);
        } else {
            out.push(1);
            out.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
            for name in self.names.iter() {
                put_text(&mut out, name);
            }
        }
        out.extend_from_slice(&(self.verdicts.len() as u32).to_le_bytes());
        let mut reasons: Vec<&str> = Vec::new();
        for verdict in &self.verdicts {
            let (kind, score, reason) = match verdict {
                Verdict::Fits(score) => (FITS, (*score).min(100) as u8, None),
                Verdict::Fails(why) => (FAILS, 0, Some(why.as_ref())),
                Verdict::Unresolvable(why) => (UNRESOLVABLE, 0, Some(why.as_str())),
            };
            // Most failing nodes share one reason (passed over); a linear search over the
            // distinct ones is cheaper than hashing every reason.
            let index = reason.map_or(0, |why| {
                reasons.iter().position(|r| *r == why).unwrap_or_else(|| {
                    reasons.push(why);
                    reasons.len() - 1
                })
            });
            out.push(kind);
            out.push(score);
            out.extend_from_slice(&(index.min(usize::from(u16::MAX)) as u16).to_le_bytes());
        }
        out.extend_from_slice(&(reasons.len() as u32).to_le_bytes());
        for why in reasons {
            put_text(&mut out, why);
        }
        out
    }
}

/// Reserve's answer: the annotations the plugin's Bind puts on the pod's Binding, as the
/// extender writes them ([`placement_annotations`]: the GPUs chosen, and the memory the guard
/// reserved on a shared GPU).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reserved {
    /// Annotation keys and values.
    pub annotations: BTreeMap<String, String>,
}

/// A GPU choice made in Reserve, until a pod event shows the pod bound there.
#[derive(Debug, Clone)]
struct Assumed {
    pod: GpuPod,
}

/// The plugin's verb PreFilter, as its metrics name it.
pub const PREFILTER: &str = "prefilter";
/// The plugin's verb Reserve, as its metrics name it.
pub const RESERVE: &str = "reserve";

/// The plugin's state: the engine and what it knows of the cluster.
pub struct Plugin {
    engine: EngineState,
    /// What the plugin did, in the adapters' metric families.
    metrics: Arc<Metrics>,
    keys: JobKeys,
    config: Config,
    policy: Policy,
    /// Nodes by name.
    nodes: HashMap<String, Node>,
    /// The nodes' names, sorted: the table PreFilter's verdicts follow, rebuilt when a node
    /// comes or goes (not per pod).
    names: Arc<[String]>,
    /// Bumped whenever `names` changes.
    generation: u64,
    /// Whether `names` is behind `nodes`.
    names_stale: bool,
    /// Pods requesting managed GPUs, by UID.
    pods: HashMap<String, GpuPod>,
    /// The `resourceVersion` of every pod seen (managed or not), by UID: PreFilter judges a
    /// pod whose version it saw from what it kept, without reading the pod again.
    versions: FxHashMap<String, String>,
    /// Reserve's choices not yet confirmed by a pod event, by pod UID.
    assumed: HashMap<String, Assumed>,
    /// The view the engine was last told; rebuilt when `dirty`.
    view: ClusterView,
    dirty: bool,
    /// Whether Reserve or Unreserve changed residents since the view was built. The engine
    /// holds them already, and only multi-GPU pods read residents from the view (idle GPUs),
    /// so the view is rebuilt for those only: rebuilding it after every placement would cost
    /// every pod a pass over the whole cluster.
    residents_moved: bool,
    /// The pod of the running scheduling cycle, as PreFilter saw it.
    cycle: Option<GpuPod>,
    /// What the stored knowledge base holds beside the engine (the extender's ledger), kept
    /// as read so a write from here does not lose it.
    adapter: AdapterState,
    /// The `resourceVersion` of the knowledge base the engine holds.
    version: Option<String>,
    /// The shards the head at `version` lists, by name, with their `uid` where known (those
    /// this plugin created are not: the Go side does not hand their `uid` back).
    shards: BTreeMap<String, String>,
    /// The shards the head of the last [`Plugin::snapshot`] lists (what `shards` becomes once
    /// it is written).
    writing: BTreeMap<String, String>,
    /// The stored size of the last [`Plugin::snapshot`], recorded once it is written.
    writing_bytes: usize,
}

/// What [`Plugin::restore`] reads: the head ConfigMap alone, or with the shards it lists.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Knowledge {
    /// The head and the shard ConfigMaps fetched for it.
    WithShards {
        head: ConfigMap,
        /// `null` as well as missing: Go writes a nil slice as `null`.
        #[serde(default)]
        shards: Option<Vec<ConfigMap>>,
    },
    /// The head alone (a knowledge base held whole in it).
    Head(ConfigMap),
}

/// What [`Plugin::restore`] answers.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Restored {
    /// Whether the engine's knowledge changed.
    Changed(bool),
    /// The head lists shards that were not passed (or are gone): fetch these and call again
    /// with the head and them (or read the head again, if one is not found).
    Fetch {
        /// The shard ConfigMaps to fetch.
        shards: Vec<String>,
    },
}

/// The ConfigMaps to write for [`Plugin::snapshot`], in order: create `shards` (each must not
/// exist yet), then create or replace `head` (its `resourceVersion` is the precondition), then
/// delete `collect` with their `uid` as precondition. If the head is refused, delete the
/// shards created for it.
#[derive(Debug, Serialize)]
pub struct Write {
    /// Shard ConfigMaps to create first.
    pub shards: Vec<ConfigMap>,
    /// The head ConfigMap to create or replace once the shards exist.
    pub head: ConfigMap,
    /// Shards the head no longer lists, to delete once it is written.
    pub collect: Vec<Collect>,
}

/// A shard to delete, if it is still the object of that `uid`.
#[derive(Debug, Serialize)]
pub struct Collect {
    /// The ConfigMap's name.
    pub name: String,
    /// Its `uid`: the delete's precondition.
    pub uid: String,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .finish_non_exhaustive()
    }
}

fn input<T: serde::de::DeserializeOwned>(what: &'static str, json: &[u8]) -> Result<T, Error> {
    // The fast path first: tracking the path costs every object (pods are read twice a
    // cycle), and is only needed to name the field of an object that does not parse.
    serde_json::from_slice(json).or_else(|_| {
        let mut de = serde_json::Deserializer::from_slice(json);
        serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Input {
            what,
            why: e.to_string(),
        })
    })
}

/// The result label of a call that failed with `error`: `rejected` for what the scheduler
/// sent or asked, `error` for the engine or the store.
fn failure_result(error: &Error) -> &'static str {
    match error {
        Error::Config(_) | Error::Secret(_) | Error::Input { .. } | Error::NotPrepared(_) => {
            "rejected"
        }
        Error::Start(_) | Error::Engine(_) | Error::Store(_) => "error",
    }
}

impl Plugin {
    /// Starts the plugin from its arguments (JSON): reads the id secret, loads the engine
    /// component (the embedded one, or `engine`) and starts a fresh knowledge base from the
    /// bundled seed profiles; [`Plugin::restore`] replaces it with the stored one.
    pub fn new(args: &[u8]) -> Result<(Self, Settings), Error> {
        let config = Config::parse(args)?;
        // The secret's error is a chain (anyhow): render all of it.
        let keys = JobKeys::from_file(&config.id_secret_file)
            .map_err(|e| Error::Secret(format!("{e:#}")))?;
        let host = HostConfig {
            call_deadline: Duration::from_millis(config.engine_deadline_ms),
            compiled_cache: config
                .compiled_cache
                .clone()
                .filter(|dir| !dir.as_os_str().is_empty()),
            ..HostConfig::default()
        };
        let runtime = match &config.engine {
            Some(path) => Runtime::from_file(path, host),
            None => Runtime::from_bytes(EMBEDDED_ENGINE, host),
        }
        .map_err(Error::Start)?;
        let policy = config.policy();
        let mut recommender = runtime
            .bootstrap(&policy, tandem_adapter_core::SEED)
            .map_err(Error::Start)?;
        recommender.set_policy(&policy).map_err(Error::Start)?;
        let metrics = Arc::new(Metrics::default());
        // The plugin never lets a pod through without Tandem (an engine failure is an error
        // status, and the scheduler tries the pod again): its fail-opens stay at zero, and are
        // exported so that a dashboard over every adapter finds them.
        for verb in [PREFILTER, RESERVE] {
            metrics
                .fail_opens
                .get_or_create(&Verb {
                    verb: verb.to_owned(),
                })
                .inc_by(0);
        }
        let settings = Settings {
            namespace: config.namespace.clone(),
            knowledge_config_map: config.knowledge_config_map.clone(),
            candidate_nodes: config.candidate_nodes,
        };
        Ok((
            Self {
                engine: EngineState::new(runtime, recommender),
                metrics,
                keys,
                config,
                policy,
                nodes: HashMap::new(),
                names: Arc::from(Vec::new()),
                // The first table is generation 1: a caller holding none says 0.
                generation: 0,
                names_stale: true,
                pods: HashMap::new(),
                versions: FxHashMap::default(),
                assumed: HashMap::new(),
                view: ClusterView::default(),
                dirty: true,
                residents_moved: false,
                cycle: None,
                adapter: AdapterState::default(),
                version: None,
                shards: BTreeMap::new(),
                writing: BTreeMap::new(),
                writing_bytes: 0,
            },
            settings,
        ))
    }

    /// The plugin's metrics, shared: a scrape reads them without waiting for the plugin.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs `work`, the engine's part of `call`, timing it and counting its failure.
    fn engine_call<T>(
        &mut self,
        call: &'static str,
        work: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let result = work(self);
        self.metrics
            .observe_engine_call(call, started.elapsed().as_secs_f64());
        if let Err(Error::Engine(_)) = &result {
            self.metrics.engine_errors.inc();
        }
        result
    }

    /// Counts an answer of `verb` begun at `started`: `ok`, or the failure's result label.
    fn decided<T>(&self, verb: &str, started: Instant, result: &Result<T, Error>) {
        let label = match result {
            Ok(_) => "ok",
            Err(error) => failure_result(error),
        };
        self.metrics
            .record(verb, label, started.elapsed().as_secs_f64());
    }

    /// A node was added or changed (the Node object as JSON).
    pub fn set_node(&mut self, json: &[u8]) -> Result<(), Error> {
        let node: Node = input("Node", json)?;
        let name = node.metadata.name.clone().unwrap_or_default();
        // Only what the view reads of a node matters: status updates (heartbeats) do not.
        let same = self.nodes.get(&name).is_some_and(|old| {
            old.metadata.labels == node.metadata.labels
                && old.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
                    == node.status.as_ref().map(|s| (&s.allocatable, &s.capacity))
        });
        if !same {
            if self.nodes.insert(name, node).is_none() {
                self.names_stale = true;
            }
            self.dirty = true;
        }
        Ok(())
    }

    /// Node `name` is gone.
    pub fn delete_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.names_stale = true;
            self.dirty = true;
        }
    }

    /// A pod was added or changed (the Pod object as JSON). The view is stale only when the
    /// pod started or stopped holding GPUs, or moved; the echo of Tandem's own choice (the
    /// pod bound where Reserve put it) changes nothing.
    pub fn set_pod(&mut self, json: &[u8]) -> Result<(), Error> {
        let pod = input::<LeanPod>("Pod", json)?.0;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let Some(now) = gpu_pod(&pod, &self.keys, &self.config.resource) else {
            self.delete_pod(&uid);
            self.saw(uid, &pod);
            return Ok(());
        };
        self.saw(uid.clone(), &pod);
        let holds = |p: &GpuPod| p.active && p.node.is_some();
        let place = |p: &GpuPod| (p.node.clone(), p.assigned.clone());
        if holds(&now) {
            if let Some(assumed) = self.assumed.remove(&uid) {
                if place(&assumed.pod) != place(&now) {
                    self.dirty = true;
                }
            } else if self
                .pods
                .get(&uid)
                .is_none_or(|old| !holds(old) || place(old) != place(&now))
            {
                self.dirty = true;
            }
        } else if self.pods.get(&uid).is_some_and(holds) || self.assumed.remove(&uid).is_some() {
            self.dirty = true;
        }
        self.pods.insert(uid, now);
        Ok(())
    }

    /// Remembers which version of pod `uid` the plugin holds.
    fn saw(&mut self, uid: String, pod: &Pod) {
        match &pod.metadata.resource_version {
            Some(version) => {
                self.versions.insert(uid, version.clone());
            }
            None => {
                self.versions.remove(&uid);
            }
        }
    }

    /// The pod with UID `uid` is gone.
    pub fn delete_pod(&mut self, uid: &str) {
        self.versions.remove(uid);
        let held = self
            .pods
            .remove(uid)
            .is_some_and(|p| p.active && p.node.is_some());
        if held || self.assumed.remove(uid).is_some() {
            self.dirty = true;
        }
    }

    /// Brings the view and the engine's copy of it up to date, if something changed.
    fn sync(&mut self) -> Result<(), Error> {
        if !self.dirty {
            return Ok(());
        }
        let pods = self
            .pods
            .values()
            .filter(|p| !self.assumed.contains_key(&p.uid))
            .chain(self.assumed.values().map(|a| &a.pod))
            .cloned();
        let view = ClusterView::build(self.nodes.values(), pods, &self.config.resource)
            .with_costs(&self.config.costs());
        let summary = self.engine.sync(view.gpus().cloned())?;
        self.metrics.observe_view(&summary);
        self.view = view;
        self.dirty = false;
        self.residents_moved = false;
        Ok(())
    }

    /// The node table PreFilter's verdicts follow, brought up to date.
    fn names(&mut self) -> Arc<[String]> {
        if self.names_stale {
            let mut names: Vec<String> = self.nodes.keys().cloned().collect();
            names.sort_unstable();
            self.names = Arc::from(names);
            self.generation += 1;
            self.names_stale = false;
        }
        Arc::clone(&self.names)
    }

    /// PreFilter: judges the pod (JSON) on every node Tandem knows, with one engine call for
    /// the scores (and one more for the reasons when no node fits).
    pub fn prefilter(&mut self, json: &[u8]) -> Result<Prepared, Error> {
        let started = Instant::now();
        let pod = match input::<LeanPod>("Pod", json) {
            Ok(pod) => pod.0,
            Err(error) => {
                let failed = Err(error);
                self.decided(PREFILTER, started, &failed);
                return failed;
            }
        };
        let pod = gpu_pod(&pod, &self.keys, &self.config.resource);
        self.judge(pod, started)
    }

    /// PreFilter for the pod with UID `uid` at `resource_version`, from what its events told
    /// (the scheduler's pods come from the same informer): `None` when the plugin has not
    /// seen that version (its event is still on the way), and [`Plugin::prefilter`] must be
    /// given the pod.
    pub fn prefilter_known(
        &mut self,
        uid: &str,
        resource_version: &str,
    ) -> Result<Option<Prepared>, Error> {
        if self.versions.get(uid).map(String::as_str) != Some(resource_version) {
            // Not an answer: the call with the pod that follows is the one counted.
            return Ok(None);
        }
        let started = Instant::now();
        let pod = self.pods.get(uid).cloned();
        self.judge(pod, started).map(Some)
    }

    /// PreFilter's verdicts for `pod` (`None`: a pod Tandem does not manage, which is no
    /// decision of Tandem's and is not counted), asked at `started`.
    fn judge(&mut self, pod: Option<GpuPod>, started: Instant) -> Result<Prepared, Error> {
        self.cycle = None;
        let Some(pod) = pod else {
            return Ok(Prepared::unmanaged());
        };
        if pod.gpus > 1 && self.residents_moved {
            self.dirty = true;
        }
        let judged = self.engine_call(PREFILTER, |plugin| {
            plugin.sync()?;
            let names = plugin.names();
            let scores = if pod.gpus == 1 {
                decide::candidate_scores(&mut plugin.engine, &pod, &names)?
            } else {
                Vec::new()
            };
            let verdicts = decide::judge(&mut plugin.engine, &plugin.view, &pod, &names, &scores)?;
            let refusal = decide::refusal(&plugin.engine, &pod);
            Ok((names, verdicts, refusal))
        });
        let prepared = judged.map(|(names, verdicts, refusal)| {
            // Counted once per scheduling attempt, as the extender counts once per filter.
            if let Some(refusal) = refusal {
                self.metrics.refused(&refusal);
            }
            Prepared {
                managed: true,
                generation: self.generation,
                names,
                verdicts,
            }
        });
        self.decided(PREFILTER, started, &prepared);
        if prepared.is_ok() {
            self.cycle = Some(pod);
        }
        prepared
    }

    /// Reserve: chooses the pod's GPUs on `node` and records them in the engine at once, so
    /// the next pod's decision sees them. `Ok(Err(reason))` when the node cannot take it after
    /// all, which is counted as `rejected`.
    pub fn reserve(&mut self, uid: &str, node: &str) -> Result<Result<Reserved, String>, Error> {
        let started = Instant::now();
        let reserved = self.choose(uid, node);
        let label = match &reserved {
            Ok(Ok(_)) => "ok",
            Ok(Err(_)) => "rejected",
            Err(error) => failure_result(error),
        };
        self.metrics
            .record(RESERVE, label, started.elapsed().as_secs_f64());
        reserved
    }

    /// Reserve's choice, uncounted.
    fn choose(&mut self, uid: &str, node: &str) -> Result<Result<Reserved, String>, Error> {
        let pod = match self.cycle.take() {
            Some(pod) if pod.uid == uid => pod,
            _ => return Err(Error::NotPrepared(uid.to_owned())),
        };
        let job = decide::job_of(&pod);
        let chosen = self.engine_call(RESERVE, |plugin| {
            plugin.sync()?;
            plugin
                .engine
                .place(&job, node, pod.gpus)
                .map_err(Error::from)
        })?;
        match chosen {
            Placement::Refused(reason) => Ok(Err(format!("Tandem: {reason}"))),
            Placement::Placed { gpus, reserved_mib } => {
                let annotations = placement_annotations(&gpus, reserved_mib);
                let assumed = GpuPod {
                    node: Some(node.to_owned()),
                    assigned: gpus,
                    active: true,
                    ..pod
                };
                self.assumed
                    .insert(uid.to_owned(), Assumed { pod: assumed });
                // The engine holds the choice already; the view catches up when a multi-GPU
                // pod needs it.
                self.residents_moved = true;
                Ok(Ok(Reserved { annotations }))
            }
        }
    }

    /// Unreserve: undoes Reserve's choice for the pod (binding failed or was abandoned).
    pub fn unreserve(&mut self, uid: &str) -> Result<(), Error> {
        if let Some(assumed) = self.assumed.remove(uid) {
            self.engine_call("unreserve", |plugin| {
                Ok(plugin
                    .engine
                    .unplace(&assumed.pod.job, &assumed.pod.assigned)?)
            })?;
            self.residents_moved = true;
        }
        Ok(())
    }

    /// Records a job's profile (the intake's observation), keyed like the pods' ids: `job` is
    /// the pod's `tandem.dev/job` label, or its name.
    pub fn observe_profile(
        &mut self,
        namespace: &str,
        job: &str,
        profile_json: &[u8],
    ) -> Result<(), Error> {
        let profile: Profile = input("Profile", profile_json)?;
        let id = self.keys.key(namespace, job);
        self.engine_call("observe-profile", |plugin| {
            plugin
                .engine
                .recommender()
                .observe_profile(&id, &profile)
                .map_err(tandem_adapter_core::engine::failed("observe-profile"))?;
            Ok(())
        })
    }

    /// Loads the knowledge base from its head ConfigMap (JSON, as read from the API server),
    /// or from `{"head": …, "shards": […]}` when the head lists shards, unless the engine
    /// already holds that version. Answers whether it changed, or which shards to fetch.
    pub fn restore(&mut self, knowledge_json: &[u8]) -> Result<Restored, Error> {
        let (head, shards) = match input("ConfigMap", knowledge_json)? {
            Knowledge::WithShards { head, shards } => (head, shards.unwrap_or_default()),
            Knowledge::Head(head) => (head, Vec::new()),
        };
        let version = head.metadata.resource_version.clone();
        if version.is_some() && self.version == version {
            return Ok(Restored::Changed(false));
        }
        let (stored, uids) = match read_head(head)? {
            Head::Inline(stored) => (stored, BTreeMap::new()),
            Head::Sharded(head) => {
                let shards: BTreeMap<String, ConfigMap> = shards
                    .into_iter()
                    .filter_map(|map| Some((map.metadata.name.clone()?, map)))
                    .collect();
                let uids = shards
                    .iter()
                    .map(|(name, map)| (name.clone(), map.metadata.uid.clone().unwrap_or_default()))
                    .collect();
                let wanted: Vec<String> = head
                    .distinct_shards()
                    .into_iter()
                    .filter(|name| !shards.contains_key(*name))
                    .map(str::to_owned)
                    .collect();
                if !wanted.is_empty() {
                    return Ok(Restored::Fetch { shards: wanted });
                }
                match head.assemble(&shards) {
                    Ok(stored) => (stored, uids),
                    Err(AssembleError::Missing(name)) => {
                        return Ok(Restored::Fetch { shards: vec![name] });
                    }
                    Err(AssembleError::Store(error)) => return Err(error.into()),
                }
            }
        };
        self.engine_call("restore", |plugin| {
            plugin.engine.replace(&stored.engine)?;
            plugin
                .engine
                .recommender()
                .set_policy(&plugin.policy)
                .map_err(tandem_adapter_core::engine::failed("set-policy"))?;
            Ok(())
        })?;
        self.metrics
            .stored(stored_size(&stored.engine, &stored.adapter));
        self.adapter = stored.adapter;
        self.version = Some(stored.version);
        self.shards = uids;
        Ok(Restored::Changed(true))
    }

    /// The ConfigMaps (JSON, a [`Write`]) holding what the engine knows: to create when no
    /// knowledge base was read, else to replace the version read or last written (optimistic
    /// concurrency). Shards the head read last lists are reused, not written again.
    pub fn snapshot(&mut self) -> Result<Vec<u8>, Error> {
        let engine = self.engine_call("snapshot", |plugin| {
            Ok(plugin
                .engine
                .recommender()
                .snapshot()
                .map_err(tandem_adapter_core::engine::failed("save"))?
                .to_vec())
        })?;
        self.writing_bytes = stored_size(&engine, &self.adapter);
        let (head, shards, listed) = match encode(
            &self.config.knowledge_config_map,
            self.version.as_deref(),
            &engine,
            &self.adapter,
        )? {
            Encoded::Inline(head) => (*head, Vec::new(), BTreeMap::new()),
            Encoded::Sharded(sharded) => {
                let listed: BTreeMap<String, ()> = sharded
                    .names()
                    .iter()
                    .map(|name| (name.clone(), ()))
                    .collect();
                let shards = sharded
                    .shards()
                    .into_iter()
                    .filter(|shard| {
                        shard
                            .metadata
                            .name
                            .as_ref()
                            .is_none_or(|name| !self.shards.contains_key(name))
                    })
                    .collect();
                (sharded.head(), shards, listed)
            }
        };
        let collect = self
            .shards
            .iter()
            .filter(|(name, uid)| !listed.contains_key(*name) && !uid.is_empty())
            .map(|(name, uid)| Collect {
                name: name.clone(),
                uid: uid.clone(),
            })
            .collect();
        self.writing = listed
            .into_keys()
            .map(|name| {
                let uid = self.shards.get(&name).cloned().unwrap_or_default();
                (name, uid)
            })
            .collect();
        serde_json::to_vec(&Write {
            shards,
            head,
            collect,
        })
        .map_err(|e| Error::Store(StoreError::Backend(Box::new(e))))
    }

    /// Records the `resourceVersion` the API server gave the ConfigMap [`Plugin::snapshot`]
    /// produced, once written.
    pub fn stored(&mut self, version: &str) {
        self.version = Some(version.to_owned());
        self.shards = std::mem::take(&mut self.writing);
        self.metrics.store_writes.inc();
        self.metrics.stored(self.writing_bytes);
    }
}
