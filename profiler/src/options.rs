//! Command-line options of `tandem-profiler`.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Tandem's node profiler: samples this node's GPUs with NVML, attributes GPU processes to
/// Kubernetes pods and Slurm jobs, reduces each job's first window to its profile (maximum SM
/// utilization, maximum memory-access utilization, maximum memory used, GPU model) and posts it
/// under the job's keyed id to the adapter's intake. Nothing else leaves the node.
///
/// `tandem-profiler --once` prints what it sees instead. Set RUST_LOG (for example
/// `RUST_LOG=tandem_profiler=debug`) for more detail. Exit codes: 0 done, 1 error, 2 usage,
/// 3 NVML not available.
#[derive(Debug, Clone, Parser)]
#[command(name = "tandem-profiler", version)]
pub struct Options {
    /// Print the node's GPUs, GPU processes, their jobs and current features, then exit.
    #[arg(long)]
    pub once: bool,

    /// Output of --once.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Read recorded samples from this file (JSON Lines, see the crate docs) instead of NVML;
    /// the agent stops at its end.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// The adapter to post profiles to (its intake: `<URL>/v1/profiles`).
    #[arg(long, env = "TANDEM_ADAPTER_URL", value_name = "URL")]
    pub adapter: Option<String>,

    /// CA certificate(s) (PEM) of the adapter's HTTPS certificate, when a cluster's own CA
    /// signed it (as deploy/helm/tandem/templates/extender.yaml's does).
    #[arg(long, env = "TANDEM_ADAPTER_CA_FILE", value_name = "PEM")]
    pub adapter_ca: Option<PathBuf>,

    /// File with the intake's bearer token (`--intake-auth token`).
    #[arg(long, env = "TANDEM_INTAKE_TOKEN_FILE", value_name = "FILE")]
    pub intake_token_file: Option<PathBuf>,

    /// How the profiler proves itself to the intake: `token` (--intake-token-file) or `munge`
    /// (a fresh MUNGE credential for every post, as root on a Slurm node: the Slurm service
    /// run with `--auth munge` admits it for the jobs of this node).
    #[arg(long, value_enum, env = "TANDEM_INTAKE_AUTH", default_value_t = IntakeAuth::Token)]
    pub intake_auth: IntakeAuth,

    /// munge's `munge` (`--intake-auth munge`).
    #[arg(long, value_name = "PATH", default_value = "munge")]
    pub munge: PathBuf,

    /// munged's socket, if not munge's default (`--intake-auth munge`).
    #[arg(long, value_name = "PATH")]
    pub munge_socket: Option<PathBuf>,

    /// File with the per-cluster secret that keys job ids (hex), the adapter's.
    #[arg(long, env = "TANDEM_ID_SECRET_FILE", value_name = "FILE")]
    pub id_secret_file: Option<PathBuf>,

    /// This node's name in Kubernetes: pods are looked up among the pods bound to it. Without
    /// it (a Slurm node), processes of pods are ignored.
    #[arg(long, env = "NODE_NAME")]
    pub node: Option<String>,

    /// Kubeconfig to use; without it, the in-cluster service account or $KUBECONFIG.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The host's /proc (in a container: the host's, mounted read-only, with hostPID).
    #[arg(
        long = "proc",
        env = "TANDEM_PROC",
        value_name = "DIR",
        default_value = "/proc"
    )]
    pub proc_root: PathBuf,

    /// Time between two samples of the GPUs, in milliseconds.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(50..))]
    pub interval_ms: u64,

    /// Length of a job's profiling window, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub window_seconds: u64,

    /// How long a job may go unseen before it counts as ended, in seconds.
    #[arg(long, default_value_t = 10)]
    pub grace_seconds: u64,

    /// Post only profiles measured while the job ran alone on its GPU; others are logged and
    /// held back.
    #[arg(long)]
    pub require_alone: bool,

    /// Attempts to deliver each batch of profiles (with exponential back-off).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub attempts: u32,
}

/// How the profiler proves itself to the intake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IntakeAuth {
    /// A bearer token from --intake-token-file.
    Token,
    /// A MUNGE credential (Slurm nodes).
    Munge,
}

/// How `--once` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables for people.
    Table,
    /// One JSON document.
    Json,
}
