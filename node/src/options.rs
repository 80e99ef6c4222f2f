//! Command-line options of `tandem-node`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::verdict::{Fallback, MemoryLimit};

/// Tandem's node component: makes every container of a pod Tandem placed on GPU k of this node
/// see exactly GPU k.
///
/// An NRI plugin of the container runtime (containerd ≥ 1.7, CRI-O ≥ 1.26): for each container
/// the runtime is about to create, it reads the pod's `tandem.dev/gpu` annotation, checks the
/// scheduler's signature over it (`tandem.dev/placement-signature`, with the keys of
/// --placement-keys) and that it names as many GPUs as the pod requests, then sets
/// NVIDIA_VISIBLE_DEVICES to those GPUs' UUIDs and gives the container their device nodes
/// (/dev/nvidiaN, N the minor number), replacing whatever NVIDIA's device plugin chose; with
/// `tandem.dev/gpu-memory-mib` it passes the memory guard's reservation on as the limit of
/// --memory-limit. A placement that does not hold is refused: the container is not created
/// and the reason shows in the pod's events. GPU containers of pods Tandem did not place
/// follow --without-annotation and --other-node; containers that request no GPU get
/// NVIDIA_VISIBLE_DEVICES=void (see --all-gpus-namespace). Pod specs come from a watch of this
/// node's pods (RBAC: get, list and watch on pods). Serves /metrics, /healthz and /readyz
/// (registered with the runtime) on --listen.
///
/// `tandem-node --list-gpus` prints the node's GPUs (index, UUID, device node) and exits. Set
/// RUST_LOG (for example `RUST_LOG=tandem_node=debug`) for more detail. Exit codes: 0 done,
/// 1 error, 2 usage, 3 NVML not available.
#[derive(Debug, Clone, Parser)]
#[command(name = "tandem-node", version)]
pub struct Options {
    /// Print the node's GPUs and exit.
    #[arg(long)]
    pub list_gpus: bool,

    /// Output of --list-gpus: `nvidia-smi -L`'s lines, or JSON (the format of --gpus).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// This node's name in Kubernetes, as Tandem's annotation names it.
    #[arg(long, env = "NODE_NAME")]
    pub node: Option<String>,

    /// The runtime's NRI socket.
    #[arg(long, value_name = "PATH", default_value = "/var/run/nri/nri.sock")]
    pub nri_socket: PathBuf,

    /// The plugin's name towards the runtime (what containerd's default validator's
    /// `required_plugins` and the `required-plugins.noderesource.dev` annotation name).
    #[arg(long, default_value = "tandem-node")]
    pub plugin_name: String,

    /// The plugin's index: plugins are called in ascending order, and a later plugin's change
    /// to the GPU variables would win, so keep it after other plugins that set them.
    #[arg(long, default_value = "90")]
    pub plugin_index: String,

    /// Read the GPUs from this file (JSON, see --list-gpus --format json) instead of NVML.
    #[arg(long, value_name = "FILE")]
    pub gpus: Option<PathBuf>,

    /// The GPU resource whose containers are judged.
    #[arg(long, default_value = "nvidia.com/gpu")]
    pub resource: String,

    /// GPU containers of pods Tandem did not place (bound by a fallback binder while Tandem
    /// was down, or by another scheduler).
    #[arg(long, value_enum, default_value_t = Fallback::Leave)]
    pub without_annotation: Fallback,

    /// GPU containers of pods Tandem placed on another node.
    #[arg(long, value_enum, default_value_t = Fallback::Refuse)]
    pub other_node: Fallback,

    /// The public keys Tandem's schedulers sign placements with: a PEM file of `PUBLIC KEY`
    /// blocks or certificates (several during a rotation), read again whenever it changes (a
    /// mounted ConfigMap is updated in place).
    #[arg(long, value_name = "FILE")]
    pub placement_keys: Option<PathBuf>,

    /// GPU containers whose placement's signature is missing or does not verify: `refuse`
    /// them, or `leave` them as pods placed without Tandem (--without-annotation decides).
    #[arg(long, value_enum, default_value_t = Fallback::Refuse)]
    pub unsigned: Fallback,

    /// Honour placements without checking their signatures, when there are no
    /// --placement-keys: anyone who can create or annotate a pod then chooses its GPUs. For
    /// tests only; warned about at start and at every placement.
    #[arg(long, conflicts_with = "placement_keys")]
    pub insecure_unsigned_placements: bool,

    /// A namespace whose pods keep the NVIDIA_VISIBLE_DEVICES they set without requesting a
    /// GPU (monitoring that must see every GPU: Tandem's profiler, NVIDIA's device plugin,
    /// DCGM exporter); repeat for several. Tenants must not be able to create pods there.
    /// Containers of every other namespace that request no GPU get NVIDIA_VISIBLE_DEVICES=void.
    #[arg(long = "all-gpus-namespace", value_name = "NAMESPACE")]
    pub all_gpus_namespaces: Vec<String>,

    /// How the memory guard's reservation is enforced: `mps` where the node runs NVIDIA MPS,
    /// `hami-core` where it runs HAMi-core; `report` counts it without enforcing.
    #[arg(long, value_enum, default_value_t = MemoryLimit::Report)]
    pub memory_limit: MemoryLimit,

    /// Where /metrics, /healthz and /readyz are served (plain HTTP: nothing secret there).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8899")]
    pub listen: SocketAddr,

    /// Kubeconfig to use; without it, the in-cluster service account or $KUBECONFIG.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// Output format of `--list-gpus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per GPU.
    Table,
    /// JSON.
    Json,
}
