//! Sampling the node's GPUs through NVML.
//!
//! `nvml-wrapper` loads `libnvidia-ml.so.1` at run time, so the profiler builds and starts on
//! machines without the NVIDIA driver; there [`NvmlSource::open`] fails with
//! [`SampleError::NvmlUnavailable`] and the binary says so and exits, never panics.
//!
//! Per GPU and tick: `utilization_rates` (SM and memory-access share of NVML's last sample
//! period), `running_compute_processes` (device memory per process), and
//! `process_utilization_stats` since the previous tick (SM and memory-access utilization per
//! process, on drivers and GPUs that report it — Maxwell or newer; where they do not, the
//! per-process figures are left out and only samples where a job ran alone describe it).

use std::collections::HashMap;
use std::time::Instant;

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use super::{DeviceUtilization, GpuInfo, GpuSample, ProcessSample, SampleError, Snapshot, Source};

const MIB: u64 = 1 << 20;

/// The node's GPUs, read through NVML.
pub struct NvmlSource {
    nvml: Nvml,
    started: Instant,
    /// Per device index, the driver's timestamp of the newest per-process sample seen.
    last_seen: HashMap<u32, u64>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource").finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Loads and initializes NVML.
    pub fn open() -> Result<Self, SampleError> {
        let nvml = Nvml::init().map_err(unavailable_or_failed)?;
        Ok(Self {
            nvml,
            started: Instant::now(),
            last_seen: HashMap::new(),
        })
    }

    fn gpu(&mut self, index: u32) -> Result<GpuSample, SampleError> {
        let device = self
            .nvml
            .device_by_index(index)
            .map_err(call("device_by_index"))?;
        let model = device.name().map_err(call("name"))?;
        let memory = device.memory_info().map_err(call("memory_info"))?;
        let rates = device
            .utilization_rates()
            .map_err(call("utilization_rates"))?;
        let last_seen = self.last_seen.get(&index).copied();
        let per_process = match device.process_utilization_stats(last_seen) {
            Ok(samples) => samples,
            // Older GPUs and some drivers do not report it; NotFound means no new sample.
            Err(NvmlError::NotSupported | NvmlError::NotFound) => Vec::new(),
            Err(source) => {
                return Err(SampleError::Nvml {
                    call: "process_utilization_stats",
                    source,
                });
            }
        };
        if let Some(newest) = per_process.iter().map(|s| s.timestamp).max() {
            self.last_seen.insert(index, newest);
        }
        // The newest sample per process since the last tick.
        let mut utilization: HashMap<u32, (u64, u32, u32)> = HashMap::new();
        for s in &per_process {
            let entry = utilization.entry(s.pid).or_insert((0, 0, 0));
            if s.timestamp >= entry.0 {
                *entry = (s.timestamp, s.sm_util, s.mem_util);
            }
        }
        let processes = device
            .running_compute_processes()
            .map_err(call("running_compute_processes"))?
            .into_iter()
            .map(|p| {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => bytes.div_ceil(MIB),
                    UsedGpuMemory::Unavailable => 0,
                };
                let util = utilization.get(&p.pid);
                ProcessSample {
                    pid: p.pid,
                    used_memory_mib: u32::try_from(used).unwrap_or(u32::MAX),
                    // A process with no sample in the period was idle, where the driver reports
                    // per-process figures at all.
                    sm_util: (!per_process.is_empty() || util.is_some())
                        .then(|| util.map_or(0.0, |u| u.1 as f32)),
                    mem_util: (!per_process.is_empty() || util.is_some())
                        .then(|| util.map_or(0.0, |u| u.2 as f32)),
                    cgroup: None,
                }
            })
            .collect();
        Ok(GpuSample {
            gpu: GpuInfo {
                index,
                model,
                memory_total_mib: u32::try_from(memory.total / MIB).unwrap_or(u32::MAX),
            },
            device: DeviceUtilization {
                sm_util: rates.gpu as f32,
                mem_util: rates.memory as f32,
            },
            processes,
        })
    }
}

impl Source for NvmlSource {
    fn sample(&mut self) -> Result<Option<Snapshot>, SampleError> {
        let count = self.nvml.device_count().map_err(call("device_count"))?;
        let gpus = (0..count)
            .map(|index| self.gpu(index))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Snapshot {
            t_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            gpus,
        }))
    }

    fn is_live(&self) -> bool {
        true
    }
}

fn call(call: &'static str) -> impl Fn(NvmlError) -> SampleError {
    move |source| SampleError::Nvml { call, source }
}

/// Loading or initializing NVML failed: without the library or a running driver that is "not
/// available", anything else a failed call.
fn unavailable_or_failed(error: NvmlError) -> SampleError {
    match error {
        NvmlError::LibloadingError(_)
        | NvmlError::LibraryNotFound
        | NvmlError::DriverNotLoaded
        | NvmlError::FunctionNotFound => SampleError::NvmlUnavailable(error),
        source => SampleError::Nvml {
            call: "init",
            source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without the driver (every development and CI machine), opening NVML gives
    /// the clear message with the loader's reason beneath it; on a GPU node it opens and sees
    /// the GPUs.
    #[test]
    fn without_the_driver_nvml_is_reported_unavailable() {
        match NvmlSource::open() {
            Err(error @ SampleError::NvmlUnavailable(_)) => {
                assert_eq!(
                    error.to_string(),
                    "NVML not available (no NVIDIA driver on this node)"
                );
                let cause = std::error::Error::source(&error)
                    .expect("the loader's reason")
                    .to_string();
                assert!(cause.contains("libnvidia-ml.so"), "{cause}");
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(mut source) => {
                let snapshot = source.sample().unwrap().unwrap();
                assert!(!snapshot.gpus.is_empty());
            }
        }
    }
}
