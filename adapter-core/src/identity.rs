//! Keying pod identities before they reach the engine.
//!
//! The engine must never learn what a job is called (docs/RELIABILITY.md, "Privacy"). A pod's job identity is
//! `<namespace>/<job>`, where `<job>` is the pod's [`JOB_LABEL`] (so every run of a recurring
//! job shares what was learned about it) or, without the label, the pod's name. The engine sees
//! only `HMAC-SHA256(secret, identity)`, truncated to 128 bits and written as 32 hex digits:
//! the same scheme as `tandem kb`, so a node profiler that holds the cluster's secret posts
//! profiles under the ids the adapter will ask about, and nobody without the secret can link
//! an id back to a name.

use std::path::Path;

use anyhow::Context as _;
pub use tandem_host::keys::is_keyed;
use tandem_host::keys::{keyed_id, parse_secret};

/// Label naming the job a pod runs, shared by all runs of it.
pub const JOB_LABEL: &str = "tandem.dev/job";

/// Keys job identities with one per-cluster secret.
#[derive(Clone)]
pub struct JobKeys {
    secret: Vec<u8>,
}

impl std::fmt::Debug for JobKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("JobKeys").finish_non_exhaustive()
    }
}

impl JobKeys {
    /// Keys with `secret` (at least 16 bytes).
    pub fn new(secret: Vec<u8>) -> anyhow::Result<Self> {
        anyhow::ensure!(
            secret.len() >= tandem_host::keys::MIN_SECRET_BYTES,
            "the id secret must be at least {} bytes",
            tandem_host::keys::MIN_SECRET_BYTES
        );
        Ok(Self { secret })
    }

    /// Reads a secret written as hex (whitespace around it ignored), as `tandem kb init` writes
    /// one and as a Kubernetes Secret mounted as a file holds it.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the id secret {}", path.display()))?;
        let secret = parse_secret(&text)
            .with_context(|| format!("{}: cannot use the id secret", path.display()))?;
        Self::new(secret)
    }

    /// The keyed id of the job `job` in `namespace`.
    pub fn key(&self, namespace: &str, job: &str) -> String {
        keyed_id(&self.secret, &format!("{namespace}/{job}"))
    }

    /// The keyed id of one run (a pod's UID, a Slurm job's token), as the outcome ledger
    /// stores it: persisted state never holds a raw UID. A `:` cannot occur in a namespace, so
    /// these ids never collide with [`JobKeys::key`]'s.
    pub fn key_run(&self, run: &str) -> String {
        keyed_id(&self.secret, &format!("run:{run}"))
    }

    /// A fingerprint of the secret, stored beside the knowledge base: an adapter started with
    /// another secret (a wrong or rotated one) would key every job differently and silently
    /// learn into an orphaned knowledge base, so it refuses to start instead. It reveals
    /// nothing of the secret (an HMAC of a fixed text, 64 bits).
    pub fn fingerprint(&self) -> String {
        let mut id = keyed_id(&self.secret, "tandem-key-fingerprint");
        id.truncate(16);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_per_secret_unlinkable_and_well_formed() {
        let a = JobKeys::new(vec![1; 32]).unwrap();
        let b = JobKeys::new(vec![2; 32]).unwrap();
        let keyed = a.key("team-a", "resnet-finetune");
        assert!(is_keyed(&keyed), "{keyed}");
        assert!(!keyed.contains("resnet"));
        assert_eq!(a.key("team-a", "resnet-finetune"), keyed);
        assert_ne!(b.key("team-a", "resnet-finetune"), keyed);
        assert_ne!(a.key("team-b", "resnet-finetune"), keyed);
    }

    #[test]
    fn run_ids_and_fingerprints_are_keyed_too() {
        let a = JobKeys::new(vec![1; 32]).unwrap();
        let b = JobKeys::new(vec![2; 32]).unwrap();
        let uid = "5f0c1d2e-0000-4000-8000-000000000001";
        assert!(is_keyed(&a.key_run(uid)));
        assert!(!a.key_run(uid).contains("5f0c"));
        assert_ne!(a.key_run(uid), b.key_run(uid));
        assert_eq!(a.fingerprint(), a.fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
    }

    #[test]
    fn only_keyed_ids_pass() {
        assert!(!is_keyed("team-a/resnet"));
        assert!(!is_keyed(&"A".repeat(32)));
        assert!(!is_keyed(&"a".repeat(31)));
        assert!(JobKeys::new(vec![1; 8]).is_err());
    }
}
