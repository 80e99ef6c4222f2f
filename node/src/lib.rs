//! `tandem-node`: the GPU Tandem chooses is the GPU the container gets.
//!
//! Tandem's scheduler paths (the extender's bind, the framework plugin's bind, the Volcano
//! extender's allocate) write their decision on the pod — `tandem.dev/gpu: <node>/<index>`,
//! the memory guard's reservation `tandem.dev/gpu-memory-mib` and their signature over both
//! and the pod's UID, `tandem.dev/placement-signature` ([`tandem_wire`]) — before the kubelet
//! sees it. Kubernetes itself only counts GPUs: with NVIDIA's device plugin sharing a
//! GPU by time-slicing, the kubelet hands a container whichever replica it picks. This
//! component closes the gap on the node, as an NRI plugin of the container runtime ([`nri`]):
//!
//! 1. **inventory** ([`inventory`]): the node's GPUs from NVML (index → UUID and device
//!    minor), or from a file where there are none;
//! 2. **judge** ([`verdict`]): for each container about to be created, from its pod's
//!    annotations, the placement's signature ([`keys`]: the schedulers' public keys) and what
//!    the pod requests ([`pods`]: its spec, kept by a watch of this node's pods), the verdict —
//!    Tandem's GPUs, the device plugin's choice left as it is, no GPU for a container that
//!    asks for none, or a refusal the kubelet reports in the pod's events;
//! 3. **adjust** ([`enforcer`]): `NVIDIA_VISIBLE_DEVICES` = the GPU's UUID, its device node in
//!    place of the device plugin's, and the reservation as the memory limit of the node's
//!    sharing mode (MPS, HAMi-core) or reported;
//! 4. **observe** ([`metrics`]): every verdict counted by case and action, served with the
//!    health endpoints ([`serve`]).
//!
//! Why a separate binary and not a mode of `tandem-profiler`: the two need different
//! privileges (the runtime's NRI socket is root on the node; the profiler reads `/proc` and
//! NVML), fail differently (enforcement must be up whenever containers start; a profiler can
//! restart at leisure), and Slurm nodes run the profiler but need no NRI plugin.

pub mod enforcer;
pub mod inventory;
pub mod keys;
pub mod metrics;
pub mod nri;
mod options;
pub mod pods;
pub mod serve;
pub mod verdict;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;

pub use options::{Format, Options};

use crate::enforcer::Enforcer;
use crate::inventory::{Inventory, InventoryError};
use crate::keys::{KeysError, PlacementKeys};
use crate::metrics::Metrics;
use crate::nri::Registration;
use crate::pods::PodSpecs;
use crate::verdict::Policy;

/// Why the node component stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node's GPUs cannot be known.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// An option the component needs was not given.
    #[error("{0} is required (unless --list-gpus)")]
    Missing(&'static str),
    /// The placement keys cannot be read.
    #[error(transparent)]
    Keys(#[from] KeysError),
    /// No Kubernetes client could be configured.
    #[error("cannot configure the Kubernetes client")]
    Kube(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The metrics address cannot be listened on.
    #[error("cannot listen on {address}")]
    Listen {
        /// The address of --listen.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The GPUs cannot be printed as JSON.
    #[error("cannot write the GPUs as JSON")]
    Json(#[source] serde_json::Error),
}

impl Error {
    /// The process exit code: 3 when NVML is not available, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Inventory(InventoryError::NvmlUnavailable(_)) => 3,
            _ => 1,
        }
    }
}

pub use tandem_telemetry::report;

/// Runs the node component until SIGTERM or SIGINT (or prints the GPUs, with `--list-gpus`).
pub async fn run(options: Options) -> Result<(), Error> {
    let inventory = match &options.gpus {
        Some(path) => Inventory::from_file(path)?,
        None => Inventory::from_nvml()?,
    };
    if options.list_gpus {
        match options.format {
            Format::Table => print!("{inventory}"),
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&inventory).map_err(Error::Json)?
            ),
        }
        return Ok(());
    }
    let node = options
        .node
        .clone()
        .ok_or(Error::Missing("--node (or NODE_NAME)"))?;
    let keys = match &options.placement_keys {
        Some(path) => {
            let keys = PlacementKeys::load(path)?;
            tracing::info!(
                file = %path.display(),
                keys = ?keys.current().verifier.key_ids().collect::<Vec<_>>(),
                "verifying placements' signatures"
            );
            Some(keys)
        }
        None if options.insecure_unsigned_placements => {
            tracing::warn!(
                "--insecure-unsigned-placements: placements are honoured without checking \
                 their signatures; anyone who can create or annotate a pod chooses its GPUs"
            );
            None
        }
        None => {
            return Err(Error::Missing(
                "--placement-keys (or --insecure-unsigned-placements)",
            ));
        }
    };
    let client = kube_client(options.kubeconfig.as_deref()).await?;
    let specs = Arc::new(PodSpecs::new(client, options.resource.clone()));
    tokio::spawn(Arc::clone(&specs).watch(node.clone()));
    let metrics = Arc::new(Metrics::default());
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| Error::Listen {
            address: options.listen,
            source,
        })?;
    tracing::info!(
        node = %node,
        gpus = inventory.gpus().len(),
        listen = %options.listen,
        socket = %options.nri_socket.display(),
        "starting"
    );
    let policy = Policy {
        node,
        resource: options.resource.clone(),
        without_annotation: options.without_annotation,
        other_node: options.other_node,
        unsigned: options.unsigned,
        memory: options.memory_limit,
        all_gpus_namespaces: options.all_gpus_namespaces.iter().cloned().collect(),
    };
    let enforcer = Arc::new(Enforcer::new(
        policy,
        inventory,
        keys,
        specs,
        Arc::clone(&metrics),
    ));
    tokio::spawn(serve::serve(listener, Arc::clone(&metrics)));
    let registration = Registration {
        name: options.plugin_name.clone(),
        index: options.plugin_index.clone(),
    };
    tokio::select! {
        () = sessions(&options.nri_socket, &registration, enforcer, &metrics) => {}
        () = shutdown_signal() => tracing::info!("stopping"),
    }
    Ok(())
}

/// Connects to the runtime and serves it, again whenever it hangs up (a restarted runtime),
/// retrying with back-off while it cannot be reached.
async fn sessions(
    socket: &Path,
    registration: &Registration,
    enforcer: Arc<Enforcer>,
    metrics: &Metrics,
) {
    const FIRST_RETRY: Duration = Duration::from_millis(200);
    const LAST_RETRY: Duration = Duration::from_secs(5);
    let mut retry = FIRST_RETRY;
    loop {
        match UnixStream::connect(socket).await {
            Ok(stream) => {
                metrics.sessions.inc();
                let ended = nri::serve(stream, registration, Arc::clone(&enforcer)).await;
                metrics.connected.set(0);
                match ended {
                    Ok(ended) => tracing::warn!(?ended, "the runtime ended the NRI session"),
                    Err(error) => {
                        tracing::warn!(error = %report(&error), "the NRI session failed");
                    }
                }
                retry = FIRST_RETRY;
            }
            Err(error) => {
                tracing::warn!(
                    socket = %socket.display(),
                    %error,
                    "cannot reach the runtime's NRI socket; retrying in {retry:?}"
                );
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LAST_RETRY);
    }
}

async fn kube_client(kubeconfig: Option<&Path>) -> Result<kube::Client, Error> {
    // One crypto provider for every rustls user; kube's client brings ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let boxed = |error: Box<dyn std::error::Error + Send + Sync>| Error::Kube(error);
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(|e| boxed(e.into()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| boxed(e.into()))?
        }
        None => kube::Config::infer().await.map_err(|e| boxed(e.into()))?,
    };
    kube::Client::try_from(config).map_err(|e| boxed(e.into()))
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = interrupt => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = interrupt.await;
        }
    }
}
