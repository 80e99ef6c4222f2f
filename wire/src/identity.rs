//! Job identities, keyed before they reach the engine.
//!
//! The engine must never learn what a job is called. A Kubernetes pod's job identity is
//! `<namespace>/<job>`, where `<job>` is the pod's [`JOB_LABEL`] (so every run of a recurring
//! job shares what was learned about it) or, without the label, the pod's name; a Slurm job's
//! is its user and job name. The engine sees only `HMAC-SHA256(secret, identity)`, its first
//! 128 bits in lower-case hex ([`SCHEME`]): every Tandem process keys the same way, so a
//! knowledge base built by one (the CLI, an adapter) answers another that holds the same secret,
//! a node profiler posts profiles under the ids the adapter will ask about, and nobody without
//! the secret can link an id back to a name.

use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use thiserror::Error;

/// Label naming the job a pod runs, shared by all runs of it.
pub const JOB_LABEL: &str = "tandem.dev/job";

/// Name of the keying scheme, as knowledge-base files record it.
pub const SCHEME: &str = "hmac-sha256/128";

/// Hex digits of a keyed id.
const KEYED_LEN: usize = 32;

/// Fewest secret bytes accepted.
pub const MIN_SECRET_BYTES: usize = 16;

/// The keyed id of `identity` under `secret`.
pub fn keyed_id(secret: &[u8], identity: &str) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(identity.as_bytes());
    let digest = mac.finalize().into_bytes();
    digest[..KEYED_LEN / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `id` has the shape of a keyed id (32 lower-case hex digits). Processes that accept
/// ids from elsewhere refuse anything else, so a caller that forgot to key cannot leak a name.
pub fn is_keyed(id: &str) -> bool {
    id.len() == KEYED_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why a secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretError {
    /// Not an even number of hex digits.
    #[error("the id secret is not hex")]
    NotHex,
    /// Fewer than [`MIN_SECRET_BYTES`] bytes.
    #[error("an id secret must be at least {MIN_SECRET_BYTES} bytes written as hex")]
    TooShort,
}

/// Why the id secret file cannot key jobs.
#[derive(Debug, Error)]
pub enum SecretFileError {
    /// The file cannot be read.
    #[error("cannot read the id secret {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no usable secret.
    #[error("{path}: cannot use the id secret")]
    Secret {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: SecretError,
    },
}

/// Parses a secret written as hex (surrounding whitespace ignored).
pub fn parse_secret(text: &str) -> Result<Vec<u8>, SecretError> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return Err(SecretError::NotHex);
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or(SecretError::NotHex)?;
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort);
    }
    Ok(bytes)
}

/// Reads a secret file written as hex (whitespace around it ignored), as `tandem kb init`
/// writes one and as a Kubernetes Secret mounted as a file holds it.
pub fn read_secret(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| SecretFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_secret(&text).map_err(|source| SecretFileError::Secret {
        path: path.to_owned(),
        source,
    })
}

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
    /// Keys with `secret` (at least [`MIN_SECRET_BYTES`] bytes).
    pub fn new(secret: Vec<u8>) -> Result<Self, SecretError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort);
        }
        Ok(Self { secret })
    }

    /// Keys with the secret in the file at `path` ([`read_secret`]).
    pub fn from_file(path: &Path) -> Result<Self, SecretFileError> {
        Ok(Self {
            secret: read_secret(path)?,
        })
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
    fn keyed_ids_are_stable_per_secret_and_well_formed() {
        let keyed = keyed_id(&[1; 32], "alice/resnet");
        assert!(is_keyed(&keyed));
        assert_eq!(keyed_id(&[1; 32], "alice/resnet"), keyed);
        assert_ne!(keyed_id(&[2; 32], "alice/resnet"), keyed);
        assert!(!is_keyed("alice/resnet"));
        assert!(!is_keyed(&"A".repeat(32)));
        assert!(!is_keyed(&"a".repeat(31)));
    }

    #[test]
    fn secrets_must_be_long_enough_hex() {
        assert_eq!(parse_secret(&"ab".repeat(16)).unwrap(), vec![0xab; 16]);
        assert_eq!(parse_secret(" 0g "), Err(SecretError::NotHex));
        assert_eq!(parse_secret("abc"), Err(SecretError::NotHex));
        assert_eq!(parse_secret("abcd"), Err(SecretError::TooShort));
        assert_eq!(JobKeys::new(vec![1; 8]).unwrap_err(), SecretError::TooShort);
    }

    #[test]
    fn a_secret_file_is_read_or_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("tandem-wire-ids-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("id-secret");
        std::fs::write(&file, format!("{}\n", "ab".repeat(16))).unwrap();
        let keys = JobKeys::from_file(&file).unwrap();
        assert_eq!(
            keys.key("a", "b"),
            JobKeys::new(vec![0xab; 16]).unwrap().key("a", "b")
        );
        std::fs::write(&file, "abcd").unwrap();
        let short = JobKeys::from_file(&file).unwrap_err();
        assert!(short.to_string().contains("id-secret"), "{short}");
        assert!(matches!(
            short,
            SecretFileError::Secret {
                source: SecretError::TooShort,
                ..
            }
        ));
        let absent = JobKeys::from_file(&dir.join("none")).unwrap_err();
        assert!(matches!(absent, SecretFileError::Read { .. }), "{absent}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn jobs_and_runs_are_keyed_apart_and_the_secret_is_fingerprinted() {
        let a = JobKeys::new(vec![1; 32]).unwrap();
        let b = JobKeys::new(vec![2; 32]).unwrap();
        let keyed = a.key("team-a", "resnet-finetune");
        assert!(is_keyed(&keyed), "{keyed}");
        assert_eq!(a.key("team-a", "resnet-finetune"), keyed);
        assert_ne!(b.key("team-a", "resnet-finetune"), keyed);
        assert_ne!(a.key("team-b", "resnet-finetune"), keyed);
        let uid = "5f0c1d2e-0000-4000-8000-000000000001";
        assert!(is_keyed(&a.key_run(uid)));
        assert_ne!(a.key_run(uid), b.key_run(uid));
        assert_eq!(a.fingerprint(), a.fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        assert!(!format!("{a:?}").contains("01"));
    }
}
