//! `tandem-profiler --once`: what the profiler sees on this node right now — devices, GPU
//! processes, the jobs they belong to and the features of the current sample — as tables or
//! JSON. Printed locally, so it names jobs as well as their keyed ids (with `--id-secret-file`).

use std::collections::HashMap;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use tandem_wire::JobKeys;

use crate::attribute::{Attributor, Owner};
use crate::sample::Snapshot;
use crate::window::{Basis, Window, engine_model, job_ticks};

/// What the node looks like in one sample.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// The GPUs.
    pub devices: Vec<DeviceRow>,
    /// Their compute processes.
    pub processes: Vec<ProcessRow>,
    /// The jobs those belong to, with the features of this sample.
    pub jobs: Vec<JobRow>,
}

/// One GPU.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceRow {
    /// NVML index.
    pub index: u32,
    /// NVML's product name.
    pub name: String,
    /// The engine's model name.
    pub model: String,
    /// Memory, MiB.
    pub memory_total_mib: u32,
    /// SM utilization, %.
    pub sm_util: f32,
    /// Memory-access utilization, %.
    pub mem_util: f32,
}

/// One compute process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessRow {
    /// Process id.
    pub pid: u32,
    /// GPU index.
    pub gpu: u32,
    /// Device memory, MiB.
    pub used_memory_mib: u32,
    /// Its SM utilization where the driver reports it.
    pub sm_util: Option<f32>,
    /// Its owner (`pod <uid>`, `slurm job <id>`), if a job's.
    pub owner: Option<String>,
}

/// One job.
#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    /// Its owner.
    pub owner: String,
    /// `<namespace>/<job>`, when known.
    pub job: Option<String>,
    /// Its keyed id, with a secret.
    pub keyed_id: Option<String>,
    /// GPU model.
    pub gpu_model: String,
    /// Max SM utilization in this sample, %.
    pub gpu_util_pct: f32,
    /// Max memory-access utilization, %.
    pub mem_access_pct: f32,
    /// Memory used, MiB.
    pub mem_used_mib: u32,
    /// What the utilization was measured from.
    pub basis: Basis,
}

/// Attributes one snapshot.
pub async fn view(
    snapshot: &Snapshot,
    attributor: &mut Attributor,
    keys: Option<&JobKeys>,
) -> NodeView {
    let owners: HashMap<u32, Owner> = snapshot
        .gpus
        .iter()
        .flat_map(|gpu| &gpu.processes)
        .filter_map(|p| attributor.owner(p).map(|owner| (p.pid, owner)))
        .collect();
    let devices = snapshot
        .gpus
        .iter()
        .map(|g| DeviceRow {
            index: g.gpu.index,
            name: g.gpu.model.clone(),
            model: engine_model(&g.gpu.model),
            memory_total_mib: g.gpu.memory_total_mib,
            sm_util: g.device.sm_util,
            mem_util: g.device.mem_util,
        })
        .collect();
    let processes = snapshot
        .gpus
        .iter()
        .flat_map(|g| {
            let owners = &owners;
            g.processes.iter().map(move |p| ProcessRow {
                pid: p.pid,
                gpu: g.gpu.index,
                used_memory_mib: p.used_memory_mib,
                sm_util: p.sm_util,
                owner: owners.get(&p.pid).map(ToString::to_string),
            })
        })
        .collect();
    let mut windows: Vec<(Owner, Window)> = Vec::new();
    for (owner, tick) in job_ticks(snapshot, &owners) {
        match windows.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, window)) => window.add(&tick),
            None => {
                let mut window = Window::default();
                window.add(&tick);
                windows.push((owner, window));
            }
        }
    }
    let mut jobs = Vec::new();
    for (owner, window) in windows {
        let Some(reduced) = window.reduce() else {
            continue;
        };
        let identity = match attributor.identity(&owner).await {
            Ok(identity) => identity,
            Err(error) => {
                tracing::warn!(error = %crate::chain(&error), "cannot look the job up");
                None
            }
        };
        jobs.push(JobRow {
            owner: owner.to_string(),
            keyed_id: identity.as_ref().and_then(|i| keys.map(|k| i.key(k))),
            job: identity.map(|i| i.to_string()),
            gpu_model: reduced.profile.gpu_model,
            gpu_util_pct: reduced.profile.gpu_util_pct,
            mem_access_pct: reduced.profile.mem_access_pct,
            mem_used_mib: reduced.profile.mem_used_mib,
            basis: reduced.basis,
        });
    }
    NodeView {
        devices,
        processes,
        jobs,
    }
}

/// The view as three tables.
pub fn tables(view: &NodeView) -> String {
    let mut devices = table(&["GPU", "name", "model", "memory MiB", "SM %", "mem access %"]);
    for d in &view.devices {
        devices.add_row(vec![
            d.index.to_string(),
            d.name.clone(),
            d.model.clone(),
            d.memory_total_mib.to_string(),
            format!("{:.0}", d.sm_util),
            format!("{:.0}", d.mem_util),
        ]);
    }
    let mut processes = table(&["pid", "GPU", "memory MiB", "SM %", "job"]);
    for p in &view.processes {
        processes.add_row(vec![
            p.pid.to_string(),
            p.gpu.to_string(),
            p.used_memory_mib.to_string(),
            p.sm_util.map_or("-".to_owned(), |s| format!("{s:.0}")),
            p.owner
                .clone()
                .unwrap_or_else(|| "(no job: ignored)".to_owned()),
        ]);
    }
    let mut jobs = table(&[
        "owner",
        "job",
        "keyed id",
        "model",
        "SM %",
        "mem access %",
        "memory MiB",
        "measured",
    ]);
    for j in &view.jobs {
        jobs.add_row(vec![
            j.owner.clone(),
            j.job
                .clone()
                .unwrap_or_else(|| "(unknown: ignored)".to_owned()),
            j.keyed_id.clone().unwrap_or_else(|| "-".to_owned()),
            j.gpu_model.clone(),
            format!("{:.0}", j.gpu_util_pct),
            format!("{:.0}", j.mem_access_pct),
            j.mem_used_mib.to_string(),
            j.basis.to_string(),
        ]);
    }
    format!("Devices\n{devices}\n\nGPU processes\n{processes}\n\nJobs (this sample)\n{jobs}\n")
}

fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_header(header.to_vec());
    table
}
