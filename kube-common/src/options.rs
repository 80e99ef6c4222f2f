//! Command-line options every Kubernetes front-end shares.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tandem_adapter_core::gpu_models::{GpuCosts, parse_model_number};
use tandem_adapter_core::{CoreArgs, parse_duration};
use tandem_api::ModelCap;

use crate::intake::ServiceAccount;

/// What every Kubernetes front-end takes: where it listens and how callers authenticate, the
/// cluster it watches and where it keeps the knowledge base, the engine's options and limits.
/// A front-end's own options flatten these (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Address to listen on.
    #[arg(long, env = "TANDEM_LISTEN", default_value = "0.0.0.0:8888")]
    pub listen: SocketAddr,

    /// Serve HTTPS with this certificate (PEM; kube-scheduler's `enableHTTPS`). Needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// Private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificates (PEM) of the scheduler's client certificate: with it, `filter`,
    /// `prioritize` and `bind` answer only a caller presenting a certificate it signed (mutual
    /// TLS; kube-scheduler's extender `tlsConfig.certFile`/`keyFile`), others get 401. The
    /// certificate, its key and this CA are reloaded when their files change. Needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,

    /// File with a token that admits a caller of `filter`, `prioritize` and `bind` as
    /// `Authorization: Bearer <token>` (or as the password of HTTP Basic authentication, e.g. a
    /// scheduler URL `https://tandem:<token>@host:8888/`); alone or beside --client-ca. Without
    /// either, the verbs are open to anyone who reaches the port.
    #[arg(long, env = "TANDEM_SCHEDULER_TOKEN_FILE", value_name = "FILE")]
    pub scheduler_token_file: Option<PathBuf>,

    /// Kubeconfig to use; without it, the in-cluster service account or $KUBECONFIG.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Serve a fixed cluster from this JSON file (`{"nodes": [...], "pods": [...]}`) instead of
    /// watching the API server: dry runs and benchmarks. Nothing is stored, `bind` is refused
    /// and --kubeconfig is ignored.
    #[arg(long, value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,

    /// Namespace of the knowledge-base ConfigMap and the Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "tandem-system")]
    pub namespace: String,

    /// Name of the ConfigMap holding the knowledge base.
    #[arg(long, default_value = "tandem-knowledge")]
    pub knowledge_configmap: String,

    /// Name of the Lease electing the replica that writes the knowledge base.
    #[arg(long, default_value = "tandem-kube-adapter")]
    pub lease: String,

    /// This replica's identity in the Lease (keep it stable across restarts of one pod);
    /// default: `$POD_NAME`, else the host name.
    #[arg(long)]
    pub identity: Option<String>,

    /// Ed25519 private key (PEM, PKCS#8 `PRIVATE KEY`, as `openssl genpkey -algorithm ed25519`
    /// and Helm's `genPrivateKey "ed25519"` write it) every placement is signed with
    /// (`tandem.dev/placement-signature`, over the pod's UID, the node, the GPUs and the memory
    /// reserved). tandem-node honours only placements that verify with its public key, and
    /// this adapter's view counts a pod on the GPUs its placement names only when it verifies:
    /// a forged or changed one is counted as a pod bound without Tandem. Required unless
    /// --unsigned-placements.
    #[arg(long, env = "TANDEM_PLACEMENT_KEY", value_name = "FILE")]
    pub placement_key: Option<PathBuf>,

    /// Write placements unsigned and trust every placement annotation, as before signatures:
    /// anyone who may create or update a pod can then claim GPUs for it. Only where nodes do
    /// not check signatures (tandem-node --unsigned leave) and pod writers are trusted.
    #[arg(long, conflicts_with = "placement_key")]
    pub unsigned_placements: bool,

    /// Options every Tandem adapter takes.
    #[command(flatten)]
    pub core: CoreArgs,

    /// Service account node profilers run as, as NAMESPACE/NAME; repeat for several. A
    /// profiler presenting its pod's projected token of such an account (audience
    /// --profiler-token-audience) may post to /v1/profiles the profiles of the pods on its own
    /// node (the node the token is bound to), and nothing else. The adapter reviews the tokens
    /// with the API server: it needs `create` on `tokenreviews` (authentication.k8s.io).
    #[arg(long = "profiler-service-account", value_name = "NAMESPACE/NAME")]
    pub profiler_service_accounts: Vec<ServiceAccount>,

    /// Audience of the profilers' projected service-account tokens.
    #[arg(long, default_value = crate::intake::DEFAULT_AUDIENCE)]
    pub profiler_token_audience: String,

    /// Extended resource Tandem manages.
    #[arg(long, default_value = "nvidia.com/gpu")]
    pub resource: String,

    /// Most pods sharing one GPU of a given model, overriding --max-jobs-per-gpu there, as
    /// `MODEL=N` (for example `K80=1`; MODEL is the short name read from the
    /// nvidia.com/gpu.product label, such as K80 for Tesla-K80); repeat for several models.
    #[arg(long = "model-cap", value_name = "MODEL=N", value_parser = parse_model_cap)]
    pub model_caps: Vec<ModelCap>,

    /// Price of one GPU-hour of a model, as `MODEL=PRICE` (for example `V100=2.48`), for pods
    /// that declare `tandem.dev/priority: cost`; repeat for several models. The cost priority
    /// takes effect where every GPU model of the cluster has a price.
    #[arg(long = "gpu-price", value_name = "MODEL=PRICE", value_parser = parse_model_number)]
    pub gpu_prices: Vec<(String, f32)>,

    /// Board power of a model in watts, as `MODEL=WATTS` (for example `T4=70`), for pods that
    /// declare `tandem.dev/priority: energy`; repeat for several models. The energy priority
    /// takes effect where every GPU model of the cluster has a power.
    #[arg(long = "gpu-power", value_name = "MODEL=WATTS", value_parser = parse_model_number)]
    pub gpu_powers: Vec<(String, f32)>,

    /// Largest request body accepted, in bytes (a 5,000-node request in full is ~20 MB).
    #[arg(long, default_value_t = 64 << 20)]
    pub max_body_bytes: usize,

    /// Most bytes of request bodies in flight at once, all requests together; a request whose
    /// body would pass it gets 429 before it is read (bounds memory under a flood of bodies).
    #[arg(long, default_value_t = 96 << 20)]
    pub max_inflight_body_bytes: usize,

    /// Longest a request may take before it is answered 503, e.g. `2s`, `500ms`.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Longest `filter`, `prioritize` or `bind` waits for a busy engine before failing open (one
    /// that finds it idle runs at once when --engine-deadline is the shorter, each engine call
    /// then bounded by it); keep it well under the scheduler's `httpTimeout`.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub decision_timeout: Duration,

    /// Longest one engine call may run before the sandbox interrupts it (the engine is then
    /// rebuilt from its last snapshot); keep it under --decision-timeout.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub engine_deadline: Duration,

    /// kube-scheduler's `httpTimeout` for this extender (see the scheduler configuration): a
    /// bind that cannot finish before it is abandoned, since the scheduler will have bound the
    /// pod itself (`ignorable`), and binds answered later are counted (`tandem_binds_late_total`).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub scheduler_timeout: Duration,
}

impl Options {
    /// How placements are signed and trusted: `--placement-key`, or `--unsigned-placements`
    /// (with a warning); neither is an error that says how to give one.
    pub fn placements(&self) -> Result<crate::placement::Placements, crate::placement::KeyError> {
        crate::placement::Placements::configured(
            self.placement_key.as_deref(),
            self.unsigned_placements,
            "--placement-key",
            "--unsigned-placements",
        )
    }

    /// The prices and powers of GPU models given.
    pub fn costs(&self) -> GpuCosts {
        GpuCosts::new(&self.gpu_prices, &self.gpu_powers)
    }
}

fn parse_model_cap(text: &str) -> Result<ModelCap, String> {
    let (model, cap) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("`{text}` is not MODEL=N"))?;
    let max_jobs: u32 = cap
        .trim()
        .parse()
        .map_err(|_| format!("`{cap}` in `{text}` is not a whole number"))?;
    if model.trim().is_empty() || max_jobs == 0 {
        return Err(format!(
            "`{text}`: the model must be named and N at least 1"
        ));
    }
    Ok(ModelCap {
        gpu_model: model.trim().to_owned(),
        max_jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_caps_parse_and_bad_ones_are_named() {
        let cap = parse_model_cap("Tesla K80=1").unwrap();
        assert_eq!((cap.gpu_model.as_str(), cap.max_jobs), ("Tesla K80", 1));
        assert!(parse_model_cap("K80").unwrap_err().contains("MODEL=N"));
        assert!(parse_model_cap("K80=x").unwrap_err().contains("`x`"));
        assert!(parse_model_cap("K80=0").unwrap_err().contains("at least 1"));
        assert!(parse_model_cap("=2").is_err());
    }

    #[test]
    fn the_options_are_consistent_once_flattened() {
        use clap::CommandFactory as _;
        #[derive(clap::Parser)]
        struct Frontend {
            #[command(flatten)]
            options: Options,
        }
        Frontend::command().debug_assert();
    }
}
