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
    fn the_command_line_is_consistent() {
        use clap::CommandFactory as _;
        Options::command().debug_assert();
    }
}
