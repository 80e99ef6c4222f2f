//! Which job a process belongs to, from its `/proc/<pid>/cgroup`.
//!
//! Each line is `<hierarchy>:<controllers>:<path>`: cgroup v2 has one line (`0::/...`), v1 one
//! per controller. Paths are searched for the shapes that the container runtimes and Slurm
//! create, whichever driver made them:
//!
//! | owner | driver | path (abridged) |
//! |---|---|---|
//! | Kubernetes pod | systemd | `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid, '-' written '_'>.slice/cri-containerd-<id>.scope` (guaranteed pods have no QoS level: `kubepods-pod<uid>.slice`) |
//! | Kubernetes pod | cgroupfs | `/kubepods/burstable/pod<uid>/<container id>` (guaranteed: `/kubepods/pod<uid>/...`) |
//! | Slurm job | cgroup/v2 | `/system.slice/slurmstepd.scope/job_<id>/step_<n>/...` |
//! | Slurm job | cgroup/v1 | `/slurm/uid_<uid>/job_<id>/step_<n>/...` (`/slurm_<node>/...` with several slurmd) |
//!
//! A prefix before these (a node that is itself a container, `kubelet.slice/kubelet-kubepods...`)
//! does not matter. Anything else — system services, login sessions, containers outside
//! Kubernetes — is no job's, and its processes are ignored.

use std::fmt;

/// The job a process belongs to, as its cgroup names it: one run of a job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A Kubernetes pod, by UID.
    Pod {
        /// The pod's UID, with dashes (`0f3c2a1e-...`).
        uid: String,
    },
    /// A Slurm job, by job id.
    Slurm {
        /// The job id.
        job_id: u64,
    },
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod { uid } => write!(f, "pod {uid}"),
            Self::Slurm { job_id } => write!(f, "slurm job {job_id}"),
        }
    }
}

/// The owner named by the contents of a `/proc/<pid>/cgroup`, if it is a job's.
pub fn owner(cgroup: &str) -> Option<Owner> {
    cgroup
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .find_map(owner_of_path)
}

/// The owner named by one cgroup path.
fn owner_of_path(path: &str) -> Option<Owner> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    pod_of(&segments).or_else(|| slurm_job_of(&segments))
}

fn pod_of(segments: &[&str]) -> Option<Owner> {
    let under_kubepods = segments.iter().position(|s| s.contains("kubepods"))?;
    segments[under_kubepods..].iter().find_map(|segment| {
        // systemd: `...kubepods-<qos>-pod<uid_with_underscores>.slice`.
        if let Some(unit) = segment.strip_suffix(".slice")
            && unit.contains("kubepods")
            && let Some((_, uid)) = unit.rsplit_once("-pod")
        {
            return pod_uid(&uid.replace('_', "-"));
        }
        // cgroupfs: `pod<uid>`.
        segment.strip_prefix("pod").and_then(pod_uid)
    })
}

/// A pod UID: 36 characters with dashes, or (static pods' config hashes) 32 hex digits.
fn pod_uid(text: &str) -> Option<Owner> {
    let hex_or_dash = text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let dashes = text.bytes().filter(|&b| b == b'-').count();
    let shaped = match text.len() {
        36 => dashes == 4,
        32 => dashes == 0,
        _ => false,
    };
    (hex_or_dash && shaped).then(|| Owner::Pod {
        uid: text.to_ascii_lowercase(),
    })
}

fn slurm_job_of(segments: &[&str]) -> Option<Owner> {
    // Only below a Slurm hierarchy (`slurm`, `slurm_<node>`, `slurmstepd.scope`), so a
    // `job_1` directory elsewhere is not taken for a Slurm job.
    let slurm = segments.iter().position(|s| s.starts_with("slurm"))?;
    segments[slurm + 1..].iter().find_map(|segment| {
        let id = segment.strip_prefix("job_")?;
        let job_id = id.parse().ok()?;
        Some(Owner::Slurm { job_id })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f3c2a1e-7b4d-4c59-9a0e-5d2b8f6e1a37";
    const UID_UNDERSCORED: &str = "0f3c2a1e_7b4d_4c59_9a0e_5d2b8f6e1a37";
    const CONTAINER: &str = "4b1f0c9ad2e35f6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c";

    fn pod() -> Option<Owner> {
        Some(Owner::Pod {
            uid: UID.to_owned(),
        })
    }

    #[test]
    fn cgroup_v2_systemd_driver_pods_of_every_qos_class() {
        for qos in [
            "kubepods-burstable.slice/kubepods-burstable",
            "kubepods-besteffort.slice/kubepods-besteffort",
        ] {
            let cgroup = format!(
                "0::/kubepods.slice/{qos}-pod{UID_UNDERSCORED}.slice/cri-containerd-{CONTAINER}.scope\n"
            );
            assert_eq!(owner(&cgroup), pod(), "{cgroup}");
        }
        // Guaranteed pods sit right under kubepods.slice.
        let guaranteed = format!(
            "0::/kubepods.slice/kubepods-pod{UID_UNDERSCORED}.slice/cri-containerd-{CONTAINER}.scope"
        );
        assert_eq!(owner(&guaranteed), pod());
        // A node that is itself a container (kind): kubelet's slices are prefixed.
        let nested = format!(
            "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_UNDERSCORED}.slice/cri-containerd-{CONTAINER}.scope"
        );
        assert_eq!(owner(&nested), pod());
    }

    #[test]
    fn cgroup_v2_cgroupfs_driver_pods() {
        let burstable = format!("0::/kubepods/burstable/pod{UID}/{CONTAINER}\n");
        assert_eq!(owner(&burstable), pod());
        let guaranteed = format!("0::/kubepods/pod{UID}/{CONTAINER}");
        assert_eq!(owner(&guaranteed), pod());
    }

    #[test]
    fn cgroup_v1_pods_under_both_drivers() {
        let cgroupfs = format!(
            "12:hugetlb:/kubepods/besteffort/pod{UID}/{CONTAINER}\n\
             11:memory:/kubepods/besteffort/pod{UID}/{CONTAINER}\n\
             3:devices:/kubepods/besteffort/pod{UID}/{CONTAINER}\n\
             1:name=systemd:/kubepods/besteffort/pod{UID}/{CONTAINER}\n\
             0::/\n"
        );
        assert_eq!(owner(&cgroupfs), pod());
        let systemd = format!(
            "11:cpuset:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_UNDERSCORED}.slice/docker-{CONTAINER}.scope\n\
             10:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_UNDERSCORED}.slice/docker-{CONTAINER}.scope\n\
             1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_UNDERSCORED}.slice/docker-{CONTAINER}.scope\n"
        );
        assert_eq!(owner(&systemd), pod());
        // Static pods carry their config hash as UID.
        let static_pod =
            "1:name=systemd:/kubepods/burstable/pod6e8a4a5d6c3b1f0e9d8c7b6a5f4e3d2c/abc";
        assert_eq!(
            owner(static_pod),
            Some(Owner::Pod {
                uid: "6e8a4a5d6c3b1f0e9d8c7b6a5f4e3d2c".to_owned()
            })
        );
    }

    #[test]
    fn slurm_jobs_under_cgroup_v1_and_v2() {
        let job = Some(Owner::Slurm { job_id: 4242 });
        assert_eq!(
            owner("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"),
            job
        );
        assert_eq!(
            owner("0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0"),
            job
        );
        let v1 = "12:memory:/slurm/uid_1000/job_4242/step_0/task_1\n\
                  5:devices:/slurm/uid_1000/job_4242/step_0\n\
                  4:cpuset:/slurm/uid_1000/job_4242/step_0\n\
                  1:name=systemd:/system.slice/slurmd.service\n";
        assert_eq!(owner(v1), job);
        // Several slurmd on one host (multiple-slurmd builds) name the hierarchy per node.
        assert_eq!(
            owner("7:devices:/slurm_node07/uid_1000/job_4242/step_0"),
            job
        );
    }

    #[test]
    fn processes_of_no_job_have_no_owner() {
        for cgroup in [
            "0::/",
            "0::/init.scope",
            "0::/user.slice/user-1000.slice/session-3.scope",
            "0::/system.slice/nvidia-persistenced.service",
            "0::/system.slice/slurmd.service",
            // A container outside Kubernetes.
            "0::/system.slice/docker-4b1f0c9ad2e3.scope",
            // A job_ directory that is not Slurm's.
            "0::/user.slice/user-1000.slice/job_12/step_0",
            // Kubernetes' own slices, with no pod below.
            "0::/kubepods.slice/kubepods-burstable.slice",
            "0::/kubepods/besteffort",
            // Malformed: a pod segment with no UID, and an unparsable Slurm job.
            "0::/kubepods/burstable/podnotauid/abc",
            "0::/system.slice/slurmstepd.scope/job_x/step_0",
            "",
            "garbage",
        ] {
            assert_eq!(owner(cgroup), None, "{cgroup}");
        }
    }
}
