//! Slurm jobs' identities.
//!
//! A Slurm job is known by its id, the `job_<id>` of its cgroup: the identity keyed is
//! `slurm/<id>` (namespace `slurm`, job the id), the one the Slurm adapter keys when it asks
//! the engine about that job. Nothing else about the job (name, user, account, script) is
//! read.

use super::identity::Identity;

/// Namespace of every Slurm job's identity.
pub const NAMESPACE: &str = "slurm";

/// The identity of Slurm job `job_id`.
pub fn identity(job_id: u64) -> Identity {
    Identity {
        namespace: NAMESPACE.to_owned(),
        job: job_id.to_string(),
    }
}
