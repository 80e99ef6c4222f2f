//! Reducing a job's profiling window to its profile (PriRecT/JRS's job profiler):
//! the window's **maximum SM utilization**, **maximum memory-access utilization** and
//! **maximum device memory used**, and the GPU model it ran on.
//!
//! # Alone where possible
//!
//! NVML's device utilization is the whole GPU's: it describes a job only in ticks where the
//! job's processes were the only compute processes on the GPU ("alone"). So:
//!
//! - **memory used** is per process and exact whoever else runs: the maximum over every tick;
//! - **SM and memory-access utilization** are the maxima over the ticks the job ran alone
//!   ([`Basis::Alone`]);
//! - a job that never ran alone is measured from the driver's per-process utilization where the
//!   driver reports it ([`Basis::PerProcess`]: the job's own figures, though taken while it
//!   shared, so they include the slowdown sharing causes);
//! - failing that, from the device's figures while it shared ([`Basis::Contended`]): an upper
//!   bound that includes its co-runners' work.
//!
//! The profile is posted in every case (the adapter's contract has no field for the basis);
//! the basis is logged with the keyed id, shown by `--once`, and `--require-alone` holds back
//! profiles not measured alone.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use tandem_api::Profile;
use tandem_wire::gpu_models::gpu_model;

use crate::attribute::Owner;
use crate::sample::{DeviceUtilization, Snapshot};

/// What one job did on one GPU in one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTick {
    /// When.
    pub t_ms: u64,
    /// The GPU's model, as the engine names models.
    pub gpu_model: String,
    /// Whether the job's processes were the only compute processes on the GPU.
    pub alone: bool,
    /// The GPU's device-wide utilization.
    pub device: DeviceUtilization,
    /// The job's SM utilization from the driver's per-process figures (summed over its
    /// processes), when every one of its processes has one.
    pub sm_util: Option<f32>,
    /// The job's memory-access utilization from the per-process figures, likewise.
    pub mem_util: Option<f32>,
    /// Device memory the job's processes hold on this GPU, in MiB.
    pub used_memory_mib: u32,
}

/// The engine's name for the model NVML reports: spaces become dashes (as GPU feature
/// discovery writes the product label the kube adapter reads) and the short model is found in
/// it, exactly as the adapter does for node labels.
pub fn engine_model(nvml_name: &str) -> String {
    gpu_model(&nvml_name.trim().replace(' ', "-")).0
}

/// Splits a snapshot into per-job ticks, given each process's owner (`owners[pid]`; processes
/// absent from it belong to no job).
pub fn job_ticks(snapshot: &Snapshot, owners: &HashMap<u32, Owner>) -> Vec<(Owner, JobTick)> {
    let mut out = Vec::new();
    for gpu in &snapshot.gpus {
        let mut jobs: Vec<&Owner> = gpu
            .processes
            .iter()
            .filter_map(|p| owners.get(&p.pid))
            .collect();
        jobs.sort();
        jobs.dedup();
        for owner in jobs {
            let mine: Vec<_> = gpu
                .processes
                .iter()
                .filter(|p| owners.get(&p.pid) == Some(owner))
                .collect();
            let sum = |f: fn(&crate::sample::ProcessSample) -> Option<f32>| {
                mine.iter()
                    .map(|p| f(p))
                    .sum::<Option<f32>>()
                    .map(|total| total.min(100.0))
            };
            out.push((
                owner.clone(),
                JobTick {
                    t_ms: snapshot.t_ms,
                    gpu_model: engine_model(&gpu.gpu.model),
                    alone: mine.len() == gpu.processes.len(),
                    device: gpu.device,
                    sm_util: sum(|p| p.sm_util),
                    mem_util: sum(|p| p.mem_util),
                    used_memory_mib: mine.iter().map(|p| p.used_memory_mib).sum(),
                },
            ));
        }
    }
    out
}

/// What the SM and memory-access figures of a profile were measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Ticks where the job ran alone on its GPU: the device's figures are the job's.
    Alone,
    /// It never ran alone; the driver's per-process figures while it shared.
    PerProcess,
    /// It never ran alone and the driver gives no per-process figures: the device's figures
    /// while it shared, an upper bound that includes its co-runners.
    Contended,
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Alone => "alone",
            Self::PerProcess => "per-process",
            Self::Contended => "contended",
        })
    }
}

/// Running maxima of SM and memory-access utilization.
#[derive(Debug, Clone, Copy, Default)]
struct Maxima {
    ticks: usize,
    sm: f32,
    access: f32,
}

impl Maxima {
    fn add(&mut self, sm: f32, access: f32) {
        self.ticks += 1;
        self.sm = self.sm.max(sm);
        self.access = self.access.max(access);
    }
}

/// A job's profiling window, filled tick by tick.
#[derive(Debug, Clone, Default)]
pub struct Window {
    first_ms: Option<u64>,
    last_ms: u64,
    ticks: usize,
    alone: Maxima,
    per_process: Maxima,
    contended: Maxima,
    used_memory_mib: u32,
    models: HashMap<String, usize>,
}

/// A window reduced to a profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reduced {
    /// The profile.
    pub profile: Profile,
    /// What its utilization figures were measured from.
    pub basis: Basis,
    /// Ticks in the window (one per GPU the job used per sample).
    pub ticks: usize,
    /// Of those, ticks where it ran alone.
    pub alone_ticks: usize,
    /// Time from the first tick to the last, in ms.
    pub span_ms: u64,
}

impl Window {
    /// Adds one tick of the job.
    pub fn add(&mut self, tick: &JobTick) {
        self.first_ms.get_or_insert(tick.t_ms);
        self.last_ms = self.last_ms.max(tick.t_ms);
        self.ticks += 1;
        self.used_memory_mib = self.used_memory_mib.max(tick.used_memory_mib);
        *self.models.entry(tick.gpu_model.clone()).or_default() += 1;
        if tick.alone {
            self.alone.add(tick.device.sm_util, tick.device.mem_util);
        } else {
            if let Some(sm) = tick.sm_util {
                // Where the driver has no per-process memory-access figure, the device's is
                // the bound.
                self.per_process
                    .add(sm, tick.mem_util.unwrap_or(tick.device.mem_util));
            }
            self.contended
                .add(tick.device.sm_util, tick.device.mem_util);
        }
    }

    /// Time from the first tick to the last, in ms.
    pub fn span_ms(&self) -> u64 {
        self.first_ms.map_or(0, |first| self.last_ms - first)
    }

    /// Ticks so far.
    pub fn ticks(&self) -> usize {
        self.ticks
    }

    /// The profile of the window so far; `None` before the first tick.
    pub fn reduce(&self) -> Option<Reduced> {
        if self.ticks == 0 {
            return None;
        }
        let (basis, maxima) = if self.alone.ticks > 0 {
            (Basis::Alone, self.alone)
        } else if self.per_process.ticks > 0 {
            (Basis::PerProcess, self.per_process)
        } else {
            (Basis::Contended, self.contended)
        };
        // The model it ran on most (a job on several GPUs of one node sees one model).
        let gpu_model = self
            .models
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(model, _)| model.clone())
            .unwrap_or_default();
        Some(Reduced {
            profile: Profile {
                gpu_util_pct: maxima.sm.clamp(0.0, 100.0),
                mem_access_pct: maxima.access.clamp(0.0, 100.0),
                mem_used_mib: self.used_memory_mib,
                gpu_model,
            },
            basis,
            ticks: self.ticks,
            alone_ticks: self.alone.ticks,
            span_ms: self.span_ms(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{GpuInfo, GpuSample, ProcessSample};

    fn process(pid: u32, mib: u32, sm: Option<f32>) -> ProcessSample {
        ProcessSample {
            pid,
            used_memory_mib: mib,
            sm_util: sm,
            mem_util: sm.map(|s| s / 2.0),
            cgroup: None,
        }
    }

    fn snapshot(t_ms: u64, sm: f32, access: f32, processes: Vec<ProcessSample>) -> Snapshot {
        Snapshot {
            t_ms,
            gpus: vec![GpuSample {
                gpu: GpuInfo {
                    index: 0,
                    model: "Tesla V100-SXM2-16GB".to_owned(),
                    memory_total_mib: 16_384,
                },
                device: DeviceUtilization {
                    sm_util: sm,
                    mem_util: access,
                },
                processes,
            }],
        }
    }

    fn job(id: u64) -> Owner {
        Owner::Slurm { job_id: id }
    }

    /// pids 1 and 2 belong to job 1, pid 3 to job 2, pid 4 to no job.
    fn owners() -> HashMap<u32, Owner> {
        HashMap::from([(1, job(1)), (2, job(1)), (3, job(2))])
    }

    fn window_of(owner: &Owner, snapshots: &[Snapshot]) -> Window {
        let mut window = Window::default();
        for s in snapshots {
            for (o, tick) in job_ticks(s, &owners()) {
                if &o == owner {
                    window.add(&tick);
                }
            }
        }
        window
    }

    #[test]
    fn alone_ticks_give_the_maxima_and_memory_counts_every_tick() {
        let snapshots = [
            snapshot(
                0,
                40.0,
                10.0,
                vec![process(1, 1_000, None), process(2, 500, None)],
            ),
            snapshot(
                1_000,
                55.0,
                20.0,
                vec![process(1, 1_200, None), process(2, 600, None)],
            ),
            // Shared with job 2: higher device figures that are not job 1's alone, but its
            // memory (per process) still counts.
            snapshot(
                2_000,
                95.0,
                70.0,
                vec![process(1, 2_500, None), process(3, 4_000, None)],
            ),
            snapshot(3_000, 30.0, 12.0, vec![process(1, 900, None)]),
        ];
        let reduced = window_of(&job(1), &snapshots).reduce().unwrap();
        assert_eq!(reduced.basis, Basis::Alone);
        assert_eq!(reduced.profile.gpu_util_pct, 55.0);
        assert_eq!(reduced.profile.mem_access_pct, 20.0);
        assert_eq!(reduced.profile.mem_used_mib, 2_500);
        assert_eq!(reduced.profile.gpu_model, "V100");
        assert_eq!(
            (reduced.ticks, reduced.alone_ticks, reduced.span_ms),
            (4, 3, 3_000)
        );
    }

    #[test]
    fn a_process_of_no_job_on_the_gpu_means_not_alone() {
        let snapshots = [snapshot(
            0,
            80.0,
            40.0,
            vec![process(3, 100, None), process(4, 100, None)],
        )];
        let reduced = window_of(&job(2), &snapshots).reduce().unwrap();
        assert_eq!(reduced.basis, Basis::Contended);
        assert_eq!(reduced.alone_ticks, 0);
    }

    #[test]
    fn never_alone_uses_per_process_figures_where_the_driver_gives_them() {
        let snapshots = [
            snapshot(
                0,
                90.0,
                60.0,
                vec![
                    process(1, 1_000, Some(30.0)),
                    process(2, 1_000, Some(15.0)),
                    process(3, 2_000, Some(40.0)),
                ],
            ),
            snapshot(
                1_000,
                95.0,
                65.0,
                vec![
                    process(1, 1_000, Some(20.0)),
                    process(2, 1_000, Some(10.0)),
                    process(3, 2_000, Some(60.0)),
                ],
            ),
        ];
        let reduced = window_of(&job(1), &snapshots).reduce().unwrap();
        assert_eq!(reduced.basis, Basis::PerProcess);
        // Its two processes summed: 30 + 15.
        assert_eq!(reduced.profile.gpu_util_pct, 45.0);
        assert_eq!(reduced.profile.mem_access_pct, 22.5);
        assert_eq!(reduced.profile.mem_used_mib, 2_000);
    }

    #[test]
    fn never_alone_without_per_process_figures_is_the_contended_upper_bound() {
        let snapshots = [
            snapshot(
                0,
                90.0,
                60.0,
                vec![process(1, 1_000, None), process(3, 2_000, None)],
            ),
            snapshot(
                1_000,
                70.0,
                65.0,
                vec![process(1, 1_500, None), process(3, 2_000, None)],
            ),
        ];
        let reduced = window_of(&job(1), &snapshots).reduce().unwrap();
        assert_eq!(reduced.basis, Basis::Contended);
        assert_eq!(reduced.profile.gpu_util_pct, 90.0);
        assert_eq!(reduced.profile.mem_access_pct, 65.0);
        assert_eq!(reduced.profile.mem_used_mib, 1_500);
    }

    #[test]
    fn an_empty_window_has_no_profile_and_models_are_named_as_the_adapter_names_them() {
        assert!(Window::default().reduce().is_none());
        assert_eq!(engine_model("Tesla V100-SXM2-16GB"), "V100");
        assert_eq!(engine_model("NVIDIA A100-SXM4-80GB"), "A100");
        assert_eq!(engine_model("NVIDIA A10"), "A10");
        // Unknown products keep the label's spelling (dashes for spaces).
        assert_eq!(engine_model("NVIDIA RTX 6000 Ada"), "NVIDIA-RTX-6000-Ada");
    }
}
