//! Where samples come from: one trait, [`Source`], and two sources — NVML on a real node
//! ([`nvml::NvmlSource`]) and recorded samples for tests and demos ([`replay::ReplaySource`]).
//!
//! A [`Snapshot`] is what one sampling tick saw: every GPU with its device-wide utilization
//! and the compute processes on it. Nothing about a process beyond its pid, its device memory,
//! its utilization where the driver reports it, and (in a replay) its cgroup is ever read:
//! no process names, command lines or users.

pub mod nvml;
pub mod replay;

use serde::{Deserialize, Serialize};

/// What one sampling tick saw on the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When, in milliseconds on the source's clock (monotonic for NVML, recorded for a replay).
    pub t_ms: u64,
    /// Every GPU sampled.
    pub gpus: Vec<GpuSample>,
}

/// One GPU in one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// The GPU: index, model, memory.
    pub gpu: GpuInfo,
    /// Device-wide utilization.
    pub device: DeviceUtilization,
    /// Compute processes on the GPU.
    pub processes: Vec<ProcessSample>,
}

/// A GPU as NVML describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuInfo {
    /// NVML's device index on the node.
    pub index: u32,
    /// The product name NVML reports (for example `Tesla V100-SXM2-16GB`).
    pub model: String,
    /// Device memory, in MiB.
    pub memory_total_mib: u32,
}

/// Device-wide utilization over NVML's last sample period, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceUtilization {
    /// Share of time one or more kernels ran on the SMs.
    pub sm_util: f32,
    /// Share of time device memory was read or written.
    pub mem_util: f32,
}

/// One compute process on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSample {
    /// Process id in the host's PID namespace.
    pub pid: u32,
    /// Device memory the process holds, in MiB.
    pub used_memory_mib: u32,
    /// The process's SM utilization in percent, where the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_util: Option<f32>,
    /// The process's memory-access utilization in percent, where the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_util: Option<f32>,
    /// The process's `/proc/<pid>/cgroup` as recorded (replays only); live sources leave it
    /// out and attribution reads `/proc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

/// Why a source could not give a sample.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The NVIDIA management library could not be loaded or initialized: no driver on this
    /// node, or a driver that is not running.
    #[error("NVML not available (no NVIDIA driver on this node)")]
    NvmlUnavailable(#[source] ::nvml_wrapper::error::NvmlError),
    /// An NVML call failed on a working driver.
    #[error("NVML call {call} failed")]
    Nvml {
        /// The call, for example `utilization_rates`.
        call: &'static str,
        /// NVML's error.
        #[source]
        source: ::nvml_wrapper::error::NvmlError,
    },
    /// The replay file could not be read.
    #[error("cannot read the replay file {path}")]
    ReplayRead {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of the replay file is not a sample.
    #[error("{path}:{line}: not a replay sample at `{field}`")]
    ReplayLine {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line number.
        line: usize,
        /// Path of the offending field (`.` for the whole line).
        field: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Samples of the replay file go back in time.
    #[error("{path}:{line}: t_ms {t_ms} is earlier than the line before ({previous})")]
    ReplayOrder {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line number.
        line: usize,
        /// This line's time.
        t_ms: u64,
        /// The previous line's time.
        previous: u64,
    },
}

/// A source of samples.
pub trait Source {
    /// The next tick's snapshot, or `None` when the source has no more (a replay's end; NVML
    /// never ends).
    fn sample(&mut self) -> Result<Option<Snapshot>, SampleError>;

    /// Whether the source reads live hardware, so the agent paces ticks with the clock; a
    /// replay is read as fast as it goes, its recorded times standing in for the clock.
    fn is_live(&self) -> bool;
}
