//! The agent's bookkeeping: one profiling window per running job, closed and reduced when it
//! is long enough or when the job is gone.
//!
//! A job (one pod, one Slurm job) is profiled once per run: from its first tick until its
//! window spans [`Settings::window`], or until it has not been seen for [`Settings::grace`]
//! (it ended first: the profile is what was seen). While it keeps running after its profile
//! is posted it is not profiled again; once gone for `grace`, it is forgotten.

use std::collections::HashMap;
use std::time::Duration;

use crate::attribute::{Attributor, Identity, Owner};
use crate::sample::Snapshot;
use crate::window::{Reduced, Window, job_ticks};

/// How windows are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long a profiling window lasts.
    pub window: Duration,
    /// How long a job may go unseen before it counts as ended.
    pub grace: Duration,
}

/// A job's window, closed and reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The run it describes.
    pub owner: Owner,
    /// The job's identity (keyed before it leaves the node).
    pub identity: Identity,
    /// The profile and how it was measured.
    pub reduced: Reduced,
    /// Whether the window ran its full length (`false`: the job ended first).
    pub complete: bool,
}

#[derive(Debug)]
struct Open {
    identity: Identity,
    window: Window,
    last_seen_ms: u64,
}

/// Windows of the jobs running on the node.
#[derive(Debug)]
pub struct Agent {
    attributor: Attributor,
    settings: Settings,
    open: HashMap<Owner, Open>,
    /// Jobs already profiled, by when they were last seen.
    done: HashMap<Owner, u64>,
}

impl Agent {
    /// An agent attributing with `attributor`.
    pub fn new(attributor: Attributor, settings: Settings) -> Self {
        Self {
            attributor,
            settings,
            open: HashMap::new(),
            done: HashMap::new(),
        }
    }

    /// Adds a snapshot; returns the windows it closed.
    pub async fn observe(&mut self, snapshot: &Snapshot) -> Vec<Finished> {
        let owners: HashMap<u32, Owner> = snapshot
            .gpus
            .iter()
            .flat_map(|gpu| &gpu.processes)
            .filter_map(|p| self.attributor.owner(p).map(|owner| (p.pid, owner)))
            .collect();
        for (owner, tick) in job_ticks(snapshot, &owners) {
            if let Some(seen) = self.done.get_mut(&owner) {
                *seen = tick.t_ms;
                continue;
            }
            if !self.open.contains_key(&owner) {
                match self.attributor.identity(&owner).await {
                    Ok(Some(identity)) => {
                        self.open.insert(
                            owner.clone(),
                            Open {
                                identity,
                                window: Window::default(),
                                last_seen_ms: tick.t_ms,
                            },
                        );
                    }
                    // Not a job Tandem can name (yet): ignored this tick.
                    Ok(None) => continue,
                    Err(error) => {
                        tracing::warn!(error = %crate::chain(&error), "cannot attribute a GPU process");
                        continue;
                    }
                }
            }
            let open = self.open.get_mut(&owner).expect("inserted above");
            open.window.add(&tick);
            open.last_seen_ms = tick.t_ms;
        }
        let now = snapshot.t_ms;
        let window = duration_ms(self.settings.window);
        let grace = duration_ms(self.settings.grace);
        let closing: Vec<(Owner, bool)> = self
            .open
            .iter()
            .filter_map(|(owner, open)| {
                if open.window.span_ms() >= window {
                    Some((owner.clone(), true))
                } else if now.saturating_sub(open.last_seen_ms) > grace {
                    Some((owner.clone(), false))
                } else {
                    None
                }
            })
            .collect();
        self.done
            .retain(|_, last_seen| now.saturating_sub(*last_seen) <= grace);
        closing
            .into_iter()
            .filter_map(|(owner, complete)| self.close(owner, complete))
            .collect()
    }

    /// Closes every open window (the source ended, or the agent stops).
    pub fn finish_all(&mut self) -> Vec<Finished> {
        let owners: Vec<Owner> = self.open.keys().cloned().collect();
        let mut finished: Vec<Finished> = owners
            .into_iter()
            .filter_map(|owner| {
                let complete =
                    self.open[&owner].window.span_ms() >= duration_ms(self.settings.window);
                self.close(owner, complete)
            })
            .collect();
        finished.sort_by(|a, b| a.owner.cmp(&b.owner));
        finished
    }

    /// Jobs whose window is open.
    pub fn open_windows(&self) -> usize {
        self.open.len()
    }

    fn close(&mut self, owner: Owner, complete: bool) -> Option<Finished> {
        let open = self.open.remove(&owner)?;
        self.done.insert(owner.clone(), open.last_seen_ms);
        let reduced = open.window.reduce()?;
        Some(Finished {
            owner,
            identity: open.identity,
            reduced,
            complete,
        })
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;

    use super::*;
    use crate::attribute::PodDirectory;
    use crate::sample::{DeviceUtilization, GpuInfo, GpuSample, ProcessSample};
    use crate::window::Basis;

    const UID: &str = "0f3c2a1e-7b4d-4c59-9a0e-5d2b8f6e1a37";

    fn process(pid: u32, cgroup: &str) -> ProcessSample {
        ProcessSample {
            pid,
            used_memory_mib: 1_000 + pid,
            sm_util: None,
            mem_util: None,
            cgroup: Some(cgroup.to_owned()),
        }
    }

    fn tick(t_ms: u64, sm: f32, processes: Vec<ProcessSample>) -> Snapshot {
        Snapshot {
            t_ms,
            gpus: vec![GpuSample {
                gpu: GpuInfo {
                    index: 0,
                    model: "Tesla T4".to_owned(),
                    memory_total_mib: 15_360,
                },
                device: DeviceUtilization {
                    sm_util: sm,
                    mem_util: sm / 2.0,
                },
                processes,
            }],
        }
    }

    fn agent() -> Agent {
        let pods = PodDirectory::Fixed(HashMap::from([(
            UID.to_owned(),
            Identity {
                namespace: "team-a".to_owned(),
                job: "resnet".to_owned(),
            },
        )]));
        Agent::new(
            Attributor::new(PathBuf::from("/nonexistent"), pods),
            Settings {
                window: Duration::from_secs(3),
                grace: Duration::from_secs(2),
            },
        )
    }

    fn pod_cgroup(uid: &str) -> String {
        format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-ab.scope",
            uid.replace('-', "_")
        )
    }

    #[tokio::test]
    async fn a_window_closes_once_long_enough_and_the_job_is_not_profiled_again() {
        let mut agent = agent();
        let pod = pod_cgroup(UID);
        let system = "0::/system.slice/nvidia-persistenced.service";
        let mut closed = Vec::new();
        for t in 0..6 {
            let processes = vec![process(10, &pod), process(99, system)];
            let processes = if t == 1 {
                processes
            } else {
                processes[..1].to_vec()
            };
            closed.extend(
                agent
                    .observe(&tick(t * 1_000, 10.0 * t as f32, processes))
                    .await,
            );
        }
        assert_eq!(closed.len(), 1, "{closed:?}");
        let finished = &closed[0];
        assert!(finished.complete);
        assert_eq!(finished.identity.to_string(), "team-a/resnet");
        // t = 0, 2, 3 alone (t = 1 shared with a system process); the window ends at 3 s.
        assert_eq!(finished.reduced.basis, Basis::Alone);
        assert_eq!(finished.reduced.profile.gpu_util_pct, 30.0);
        assert_eq!(finished.reduced.profile.gpu_model, "T4");
        assert_eq!(finished.reduced.ticks, 4);
        assert!(agent.finish_all().is_empty());
    }

    #[tokio::test]
    async fn a_job_that_ends_early_is_profiled_from_what_was_seen() {
        let mut agent = agent();
        let slurm = "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0";
        assert!(
            agent
                .observe(&tick(0, 50.0, vec![process(5, slurm)]))
                .await
                .is_empty()
        );
        assert!(
            agent
                .observe(&tick(1_000, 60.0, vec![process(5, slurm)]))
                .await
                .is_empty()
        );
        assert!(agent.observe(&tick(2_000, 0.0, vec![])).await.is_empty());
        let closed = agent.observe(&tick(3_500, 0.0, vec![])).await;
        assert_eq!(closed.len(), 1);
        assert!(!closed[0].complete);
        assert_eq!(closed[0].identity.to_string(), "slurm/77");
        assert_eq!(closed[0].reduced.profile.gpu_util_pct, 60.0);
    }

    #[tokio::test]
    async fn unknown_pods_and_processes_of_no_job_are_ignored() {
        let mut agent = agent();
        let stranger = pod_cgroup("11111111-2222-3333-4444-555555555555");
        let processes = vec![
            process(1, &stranger),
            process(2, "0::/user.slice/user-1000.slice/session-2.scope"),
        ];
        assert!(agent.observe(&tick(0, 50.0, processes)).await.is_empty());
        assert_eq!(agent.open_windows(), 0);
        assert!(agent.finish_all().is_empty());
    }
}
