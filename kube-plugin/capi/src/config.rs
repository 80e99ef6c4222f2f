//! The plugin's arguments (`pluginConfig[].args` of its profile), checked once at start, and
//! the scheduler's own connection to the API server, which the Go side hands over.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tandem_adapter_core::gpu_models::GpuCosts;
use tandem_api::{ModelCap, Objective, Policy};
use tandem_host::HostConfig;
use tandem_kube_common::cluster::gpu_model;
use tandem_kube_common::intake::ServiceAccount;
use tandem_kube_common::placement::{KeyError, Placements};

use crate::Error;

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
    /// Address the intake listens on (for example `0.0.0.0:8888`): node profilers post
    /// profiles and outcomes there (`/v1/profiles`, `/v1/outcomes`), as they do to the
    /// extender. Without it there is no intake.
    #[serde(default)]
    pub intake_address: Option<SocketAddr>,
    /// File with the bearer token the intake requires (required with `intakeAddress`).
    #[serde(default)]
    pub intake_token_file: Option<PathBuf>,
    /// Service accounts node profilers run as (`["tandem-system/tandem-profiler"]`): a
    /// profiler presenting its pod's projected token of such an account (audience
    /// `profilerTokenAudience`) may post profiles of the pods on its own node, and nothing
    /// else. The scheduler then reviews tokens (`create` on `tokenreviews`).
    #[serde(default)]
    pub profiler_service_accounts: Vec<String>,
    /// Audience of the profilers' projected service-account tokens.
    #[serde(default = "default_audience")]
    pub profiler_token_audience: String,
    /// Most items (profiles, outcomes) one intake caller may post per minute (0: no bound).
    #[serde(default = "default_items_per_minute")]
    pub intake_items_per_minute: u32,
    /// Certificate (PEM) the intake serves HTTPS with; plain HTTP without it.
    #[serde(default)]
    pub intake_tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `intakeTlsCertFile`.
    #[serde(default)]
    pub intake_tls_key_file: Option<PathBuf>,
    /// File with the Ed25519 private key (PEM, PKCS#8 `PRIVATE KEY`) Reserve signs every
    /// placement with (`tandem.dev/placement-signature`, over the pod's UID and its placement):
    /// tandem-node honours only placements that verify with its public key, and the plugin's
    /// view counts a pod on the GPUs its placement names only when it verifies. Required
    /// unless `unsignedPlacements`.
    #[serde(default)]
    pub placement_key_file: Option<PathBuf>,
    /// Write placements unsigned and trust every placement annotation (anyone who may write a
    /// pod could then claim GPUs for it): only where nodes do not check signatures.
    #[serde(default)]
    pub unsigned_placements: bool,
    /// Name of the Lease electing the replica that writes the knowledge base: the extender's
    /// by default, so a cluster running both keeps one writer.
    #[serde(default = "default_lease")]
    pub lease: String,
    /// This replica's identity in the Lease; the `POD_NAME` environment variable, or the host
    /// name, by default.
    #[serde(default)]
    pub identity: Option<String>,
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
fn default_audience() -> String {
    tandem_kube_common::intake::DEFAULT_AUDIENCE.to_owned()
}
fn default_items_per_minute() -> u32 {
    tandem_adapter_core::intake::DEFAULT_ITEMS_PER_MINUTE
}
fn default_lease() -> String {
    "tandem-kube-adapter".to_owned()
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
        if config.intake_address.is_some()
            && config.intake_token_file.is_none()
            && config.profiler_service_accounts.is_empty()
        {
            return Err(Error::Config(
                "intakeAddress: needs intakeTokenFile or profilerServiceAccounts (the intake is \
                 never open)"
                    .into(),
            ));
        }
        match (&config.intake_tls_cert_file, &config.intake_tls_key_file) {
            (Some(_), None) => {
                return Err(Error::Config(
                    "intakeTlsCertFile: needs intakeTlsKeyFile".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::Config(
                    "intakeTlsKeyFile: needs intakeTlsCertFile".into(),
                ));
            }
            _ => {}
        }
        config.profiler_accounts()?;
        if config.profiler_token_audience.is_empty() {
            return Err(Error::Config(
                "profilerTokenAudience: must not be empty".into(),
            ));
        }
        if config.lease.is_empty() {
            return Err(Error::Config("lease: must not be empty".into()));
        }
        if config.placement_key_file.is_some() && config.unsigned_placements {
            return Err(Error::Config(
                "unsignedPlacements: true contradicts placementKeyFile (give one of them)".into(),
            ));
        }
        Ok(config)
    }

    /// How Reserve signs placements and which the view trusts: `placementKeyFile` read, or
    /// `unsignedPlacements` (with a warning); neither is an error saying how to give one.
    pub fn placements(&self) -> Result<Placements, Error> {
        Placements::configured(
            self.placement_key_file.as_deref(),
            self.unsigned_placements,
            "placementKeyFile",
            "unsignedPlacements: true",
        )
        .map_err(|error| match error {
            KeyError::Missing { .. } => Error::Config(error.to_string()),
            _ => Error::Config(format!("placementKeyFile: {error}")),
        })
    }

    /// The profiler service accounts, parsed (`profilerServiceAccounts[i]` names a bad one).
    pub fn profiler_accounts(&self) -> Result<Vec<ServiceAccount>, Error> {
        self.profiler_service_accounts
            .iter()
            .enumerate()
            .map(|(i, account)| {
                account
                    .parse()
                    .map_err(|e| Error::Config(format!("profilerServiceAccounts[{i}]: {e}")))
            })
            .collect()
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

    /// What the Go side needs of it.
    pub fn settings(&self) -> Settings {
        Settings {
            candidate_nodes: self.candidate_nodes,
        }
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
    /// How many of the best-ranked nodes PreFilter offers (`0`: every node).
    pub candidate_nodes: u32,
}

/// The scheduler's connection to the API server (client-go's `rest.Config`), as the Go side
/// hands it over: the plugin keeps the knowledge base and its Lease with the scheduler's own
/// identity. Byte fields are base64, as Go's JSON writes `[]byte`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Connection {
    /// The API server's URL.
    pub host: String,
    /// CA bundle (PEM, base64) that signs the API server's certificate.
    #[serde(default)]
    pub ca_data: Option<String>,
    /// Client certificate (PEM, base64).
    #[serde(default)]
    pub cert_data: Option<String>,
    /// Client key (PEM, base64).
    #[serde(default)]
    pub key_data: Option<String>,
    /// Bearer token.
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// File the bearer token is read from (and re-read: service-account tokens rotate).
    #[serde(default)]
    pub bearer_token_file: Option<String>,
    /// Skip verifying the API server's certificate.
    #[serde(default)]
    pub insecure: bool,
}

impl Connection {
    /// Parses the connection (JSON); empty means none (no knowledge base is kept: tests).
    pub fn parse(json: &[u8]) -> Result<Option<Self>, Error> {
        if json.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(json)
            .map(Some)
            .map_err(|e| Error::Connect {
                what: "the scheduler's connection cannot be read".into(),
                source: e.into(),
            })
    }

    /// A kube client over it.
    pub async fn client(self) -> Result<kube::Client, Error> {
        use kube::config::{
            AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
            NamedContext,
        };
        const NAME: &str = "scheduler";
        let kubeconfig = Kubeconfig {
            clusters: vec![NamedCluster {
                name: NAME.into(),
                cluster: Some(Cluster {
                    server: Some(self.host.clone()),
                    certificate_authority_data: self.ca_data,
                    insecure_skip_tls_verify: Some(self.insecure),
                    ..Cluster::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![NamedAuthInfo {
                name: NAME.into(),
                auth_info: Some(AuthInfo {
                    token: self.bearer_token.map(Into::into),
                    token_file: self.bearer_token_file,
                    client_certificate_data: self.cert_data,
                    client_key_data: self.key_data.map(Into::into),
                    ..AuthInfo::default()
                }),
                other: Default::default(),
            }],
            contexts: vec![NamedContext {
                name: NAME.into(),
                context: Some(Context {
                    cluster: NAME.into(),
                    user: Some(NAME.into()),
                    ..Context::default()
                }),
                other: Default::default(),
            }],
            current_context: Some(NAME.into()),
            ..Kubeconfig::default()
        };
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Connect {
                    what: self.host.clone(),
                    source: e.into(),
                })?;
        kube::Client::try_from(config).map_err(|e| Error::Connect {
            what: self.host.clone(),
            source: e.into(),
        })
    }
}
