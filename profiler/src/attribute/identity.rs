//! A job's identity as the adapters key it, and why attribution failed: what the attribution
//! sources ([`super::kube`], [`super::slurm`]) and the attributor share.

use tandem_wire::JobKeys;

/// What identifies a job to the adapters: `<namespace>/<job>`, keyed before it leaves the node
/// ([`Identity::key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The pod's namespace; `slurm` for Slurm jobs.
    pub namespace: String,
    /// The pod's `tandem.dev/job` label (its name without one); the Slurm job id.
    pub job: String,
}

impl Identity {
    /// The keyed id the adapters know this job by: the same function the adapters call on the
    /// same `<namespace>/<job>`, so a profile posted under it is the one they find.
    pub fn key(&self, keys: &JobKeys) -> String {
        keys.key(&self.namespace, &self.job)
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.job)
    }
}

/// Why attribution failed.
#[derive(Debug, thiserror::Error)]
pub enum AttributeError {
    /// The pods of this node could not be listed.
    #[error("cannot list the pods of node {node}")]
    ListPods {
        /// The node.
        node: String,
        /// The API server's or the client's error.
        #[source]
        source: ::kube::Error,
    },
}
