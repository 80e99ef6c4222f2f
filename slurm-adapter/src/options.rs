//! Command-line options of `tandem-slurm-adapter`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use tandem_adapter_core::{CoreArgs, parse_duration};

/// Tandem's service for Slurm: decides which GPU jobs share a GPU, and where.
///
/// Run it on the controller host. slurmctld's job_submit.lua (slurm-adapter/lua) asks it where a
/// job submitted with `--tandem` should run; the SPANK plugin (libtandem_slurm.so) asks it which
/// GPU of the node the job gets and reports the job's run time when it ends. GPU nodes are read
/// from `scontrol show node -o` (their `Gres=gpu[:TYPE]:N`); the knowledge base is kept in one
/// file, written atomically. Set RUST_LOG (for example `RUST_LOG=tandem_slurm_adapter=debug`)
/// for more detail.
#[derive(Debug, Clone, Parser)]
#[command(name = "tandem-slurm-adapter", version)]
pub struct Options {
    /// Address to listen on (the hook and the SPANK plugin connect here).
    #[arg(long, env = "TANDEM_LISTEN", default_value = "127.0.0.1:8889")]
    pub listen: SocketAddr,

    /// The knowledge base: read at start if it exists, rewritten atomically (temporary file,
    /// fsync, rename) after every observation.
    #[arg(long, env = "TANDEM_KNOWLEDGE", value_name = "FILE")]
    pub knowledge: PathBuf,

    /// Options every Tandem adapter takes.
    #[command(flatten)]
    pub core: CoreArgs,

    /// The scontrol to read nodes with.
    #[arg(long, default_value = "scontrol")]
    pub scontrol: PathBuf,

    /// How often the GPU nodes are read again from scontrol, e.g. `30s`.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub node_refresh: Duration,

    /// Memory of a GPU type Tandem does not know by name (the TYPE of `Gres=gpu:TYPE:N`), as
    /// `TYPE=MiB`; repeat for several types. Known types (v100, a100, k80, ...) need none.
    #[arg(long = "gpu-memory", value_name = "TYPE=MiB", value_parser = parse_type_memory)]
    pub gpu_memory: Vec<(String, u32)>,

    /// Memory of an untyped GPU (`Gres=gpu:N`) or of a type neither known nor given with
    /// --gpu-memory, in MiB.
    #[arg(long, default_value_t = 16_384)]
    pub default_gpu_memory_mib: u32,

    /// Give each job on a shared GPU this share of its threads under MPS
    /// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = this / jobs on the GPU); leave it out where MPS is
    /// not configured.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub mps_percentage: Option<u32>,

    /// How long a placement made at submission is kept for a job that has not started (held,
    /// queued behind others) before its GPU is given back, e.g. `10m`.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub pending_ttl: Duration,

    /// Longest a placement waits for a busy engine before the hook is told to leave the job
    /// unchanged (one that finds it idle runs at once when --engine-deadline is the shorter,
    /// each engine call then bounded by it); keep it well under the hook's own time limit.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub decision_timeout: Duration,

    /// Longest one engine call may run before the sandbox interrupts it (the engine is then
    /// rebuilt from its last snapshot); keep it under --decision-timeout.
    #[arg(long, default_value = "150ms", value_parser = parse_duration)]
    pub engine_deadline: Duration,

    /// Directory that `--tandem-model=file:PATH` reads from (a model summary as JSON, or an
    /// ONNX file with `--tandem-batch-size`); PATH is relative to it. Without it, file
    /// references are refused at submission. Only regular files inside it are read: a
    /// symbolic link out of it, a FIFO or a device is refused.
    #[arg(long, value_name = "DIR")]
    pub model_dir: Option<PathBuf>,

    /// Largest model file read from --model-dir, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::models::DEFAULT_LIMIT)]
    pub model_file_limit: u64,

    /// How job_submit.lua and the SPANK plugin prove they are Slurm: `munge` (a MUNGE
    /// credential bound to each request, decoded by the local munged) or `client-certificate`
    /// (mutual TLS: --tls-cert, --tls-key and --client-ca). Required unless
    /// --insecure-open-verbs.
    #[arg(long, value_enum, required_unless_present = "insecure_open_verbs")]
    pub auth: Option<Auth>,

    /// Serve the Slurm verbs to anyone who reaches the port, unauthenticated: any user could
    /// then take other users' placements and end their jobs in Tandem's view. For a test bed
    /// only; logged as a warning at start.
    #[arg(long, conflicts_with = "auth")]
    pub insecure_open_verbs: bool,

    /// munged's socket (munge's default, /run/munge/munge.socket.2, without it).
    #[arg(long, value_name = "PATH")]
    pub munge_socket: Option<PathBuf>,

    /// munge's `unmunge`, which decodes the callers' credentials.
    #[arg(long, value_name = "PATH", default_value = "unmunge")]
    pub unmunge: PathBuf,

    /// munge's `munge`, with which the service checks at start that munged answers.
    #[arg(long, value_name = "PATH", default_value = "munge")]
    pub munge: PathBuf,

    /// SlurmUser's uid (slurm.conf's SlurmUser, as whom slurmctld runs job_submit.lua), if it
    /// is not root; repeat for several. Root is always Slurm.
    #[arg(long = "slurm-uid", value_name = "UID")]
    pub slurm_uids: Vec<u32>,

    /// Serve HTTPS with this certificate (PEM; with --tls-key), read again when it changes.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificates (PEM) whose client certificates prove a caller is Slurm
    /// (`--auth client-certificate`).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}

/// How callers of the Slurm verbs prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Auth {
    /// A MUNGE credential bound to each request.
    Munge,
    /// A TLS client certificate signed by --client-ca.
    ClientCertificate,
}

fn parse_type_memory(text: &str) -> Result<(String, u32), String> {
    let (kind, memory) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("`{text}` is not TYPE=MiB"))?;
    let mib: u32 = memory
        .trim()
        .parse()
        .map_err(|_| format!("`{memory}` in `{text}` is not a whole number of MiB"))?;
    if kind.trim().is_empty() || mib == 0 {
        return Err(format!("`{text}`: the type must be named and MiB above 0"));
    }
    Ok((kind.trim().to_ascii_lowercase(), mib))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_parse_and_bad_ones_are_named() {
        assert_eq!(
            parse_type_memory("RTX8000=49152"),
            Ok(("rtx8000".into(), 49_152))
        );
        assert!(parse_type_memory("x").unwrap_err().contains("TYPE=MiB"));
        assert!(parse_type_memory("x=big").unwrap_err().contains("`big`"));
    }

    #[test]
    fn the_service_does_not_start_without_a_way_to_tell_who_calls() {
        let base = [
            "tandem-slurm-adapter",
            "--knowledge",
            "k",
            "--id-secret-file",
            "s",
        ];
        let error = Options::try_parse_from(base).unwrap_err().to_string();
        assert!(error.contains("--auth"), "{error}");
        let open = Options::try_parse_from(base.into_iter().chain(["--insecure-open-verbs"]));
        assert!(open.unwrap().auth.is_none());
        let munge = Options::try_parse_from(base.into_iter().chain(["--auth", "munge"])).unwrap();
        assert_eq!(munge.auth, Some(Auth::Munge));
        let both = base
            .into_iter()
            .chain(["--auth", "munge", "--insecure-open-verbs"]);
        assert!(Options::try_parse_from(both).is_err());
        let error = Options::try_parse_from(base.into_iter().chain(["--client-ca", "ca.pem"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("--tls-cert"), "{error}");
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory as _;
        Options::command().debug_assert();
    }
}
