//! Attribution: which job each GPU process belongs to, and that job's identity.
//!
//! A process's cgroup names its owner — a Kubernetes pod by UID or a Slurm job by id
//! ([`cgroup`]); the owner's identity — what the adapters key — comes from the API server for
//! pods ([`kube`]: the pod's namespace and `tandem.dev/job` label) and from the job id for
//! Slurm ([`slurm`]). Processes of no job (system services, login sessions, containers outside
//! Kubernetes) are ignored.

pub mod cgroup;
mod identity;
pub mod kube;
pub mod slurm;

use std::collections::HashMap;
use std::path::PathBuf;

pub use cgroup::Owner;
pub use identity::{AttributeError, Identity};

use crate::sample::ProcessSample;

/// Where pod identities come from.
pub enum PodDirectory {
    /// The API server, listing this node's pods.
    Kube(Box<kube::KubePods>),
    /// A fixed map from pod UID (tests).
    Fixed(HashMap<String, Identity>),
    /// Nowhere (a Slurm node, or no `--node`): pod processes stay unattributed.
    Off,
}

impl std::fmt::Debug for PodDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kube(pods) => write!(f, "Kube({})", pods.node()),
            Self::Fixed(map) => write!(f, "Fixed({} pods)", map.len()),
            Self::Off => f.write_str("Off"),
        }
    }
}

/// Attributes processes to owners and owners to identities.
#[derive(Debug)]
pub struct Attributor {
    proc_root: PathBuf,
    pods: PodDirectory,
    warned_no_pods: bool,
}

impl Attributor {
    /// Reads cgroups under `proc_root` (the host's `/proc`) and pod identities from `pods`.
    pub fn new(proc_root: PathBuf, pods: PodDirectory) -> Self {
        Self {
            proc_root,
            pods,
            warned_no_pods: false,
        }
    }

    /// The owner of a GPU process: from the cgroup a replay recorded, else from
    /// `<proc>/<pid>/cgroup`. `None` for processes of no job, and for ones that exited.
    pub fn owner(&self, process: &ProcessSample) -> Option<Owner> {
        match &process.cgroup {
            Some(recorded) => cgroup::owner(recorded),
            None => {
                let path = self.proc_root.join(process.pid.to_string()).join("cgroup");
                std::fs::read_to_string(path)
                    .ok()
                    .and_then(|text| cgroup::owner(&text))
            }
        }
    }

    /// The identity of a job's owner; `None` when it cannot be known (a pod the API server
    /// does not list, pods with no directory to ask).
    pub async fn identity(&mut self, owner: &Owner) -> Result<Option<Identity>, AttributeError> {
        match owner {
            Owner::Slurm { job_id } => Ok(Some(slurm::identity(*job_id))),
            Owner::Pod { uid } => match &mut self.pods {
                PodDirectory::Kube(pods) => pods.identity(uid).await,
                PodDirectory::Fixed(map) => Ok(map.get(uid).cloned()),
                PodDirectory::Off => {
                    if !self.warned_no_pods {
                        self.warned_no_pods = true;
                        tracing::warn!(
                            "GPU processes of Kubernetes pods are running, but no --node was given: pods cannot be looked up, their processes are ignored"
                        );
                    }
                    Ok(None)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use tandem_wire::JobKeys;

    use super::*;

    #[test]
    fn identities_are_keyed_as_the_adapters_key_them() {
        let keys = JobKeys::new(vec![9; 32]).unwrap();
        let pod = Identity {
            namespace: "team-a".to_owned(),
            job: "resnet".to_owned(),
        };
        let keyed = pod.key(&keys);
        // The kube adapter keys a pod of job `resnet` in `team-a` with `key("team-a", "resnet")`.
        assert_eq!(keyed, keys.key("team-a", "resnet"));
        assert!(tandem_wire::identity::is_keyed(&keyed));
        assert!(!keyed.contains("resnet"));
        // Another secret, another id: unlinkable without the cluster's secret.
        assert_ne!(pod.key(&JobKeys::new(vec![8; 32]).unwrap()), keyed);
        let slurm = slurm::identity(4242);
        assert_eq!(slurm.to_string(), "slurm/4242");
        assert_eq!(slurm.key(&keys), keys.key("slurm", "4242"));
        assert_ne!(slurm.key(&keys), keyed);
    }
}
