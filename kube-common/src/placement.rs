//! Tandem's placements on pods, signed by the front-end that writes them and trusted by the view
//! only when the signature holds.
//!
//! A placement is a pod's annotations ([`GPU_ANNOTATION`], [`MEMORY_ANNOTATION`]), which anyone
//! who may create or update the pod could write too. Every scheduler path therefore signs what
//! it writes with the cluster's placement key ([`SIGNATURE_ANNOTATION`], over the pod's UID, the
//! node, the GPUs and the reservation: [`tandem_wire`]), `tandem-node` honours only signed
//! placements, and the cluster view counts a pod on the GPUs its placement names only when
//! the signature verifies with the same key: a forged or changed placement makes the pod one
//! bound without Tandem's record, counted on the emptiest GPUs of its node for the GPUs it
//! requested (not on every GPU it names).
//!
//! Verifying costs one Ed25519 check (tens of µs); the view reads every pod at each rebuild,
//! so each pod's verdict is kept, keyed by its UID and the annotations it was given for. A
//! placement this front-end signed is kept as trusted when it is written: the pod coming back
//! with exactly those annotations is its own signature, and is not checked again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use thiserror::Error;

pub use tandem_wire::placement::ANNOTATIONS;
pub use tandem_wire::{
    GPU_ANNOTATION, MEMORY_ANNOTATION, Placement, PlacementError, SIGNATURE_ANNOTATION, Signer,
    Verifier,
};

/// Most pods whose verdict is kept; past it the verdicts are dropped and checked again as pods
/// come (a bound on memory when pods come and go for a long time).
const KEPT_VERDICTS: usize = 1 << 17;

/// How a front-end signs the placements it writes and which placements its view trusts.
pub struct Placements {
    /// The signing key and the verifier of its public key; `None`: placements are written
    /// unsigned and every well-formed placement is trusted (`--unsigned-placements`).
    keys: Option<(Signer, Verifier)>,
    /// Each pod's verdict, by UID, with the annotations it was reached for.
    verdicts: Mutex<FxHashMap<String, Verdict>>,
    /// Signatures checked so far (each an Ed25519 verification).
    verified: AtomicU64,
}

/// A pod's placement annotations as they were checked, and what was found.
#[derive(Debug, Clone)]
struct Verdict {
    seen: [Option<String>; 3],
    read: Read,
}

/// What a pod's annotations say about where Tandem placed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The pod carries no [`GPU_ANNOTATION`]: Tandem did not place it.
    Unplaced,
    /// Tandem's placement: these GPUs (`<node>/<index>`), all on the pod's node.
    Placed(Vec<String>),
    /// Placement annotations Tandem does not vouch for (unsigned, signed for another pod or
    /// placement, malformed, or naming another node than the pod's): why, for a person.
    Untrusted(String),
}

/// Why the placement key cannot be used.
#[derive(Debug, Error)]
pub enum KeyError {
    /// Neither a key nor the explicit choice of unsigned placements was given.
    #[error(
        "no placement key: give the Ed25519 private key placements are signed with \
         ({flag} FILE, a PKCS#8 `PRIVATE KEY` PEM), or choose {unsigned} to write placements \
         any pod owner can forge"
    )]
    Missing {
        /// How the front-end's configuration names the key.
        flag: &'static str,
        /// How it names the choice of unsigned placements.
        unsigned: &'static str,
    },
    /// The key file cannot be read.
    #[error("cannot read the placement key {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no Ed25519 private key.
    #[error("the placement key {path} is not an Ed25519 private key: {source}")]
    Key {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: tandem_wire::KeyError,
    },
}

impl std::fmt::Debug for Placements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placements")
            .field("key_id", &self.key_id())
            .finish_non_exhaustive()
    }
}

impl Default for Placements {
    /// Unsigned placements, every one trusted (tests and fixed clusters that never bind).
    fn default() -> Self {
        Self::unsigned()
    }
}

impl Placements {
    /// Placements signed with `signer`, and trusted only when its public key verifies them.
    pub fn signed(signer: Signer) -> Self {
        // The public key is the signer's own: it always reads back.
        let verifier = Verifier::from_pem(signer.public_key_pem().as_bytes())
            .expect("an Ed25519 signer's public key is a valid PUBLIC KEY");
        Self {
            keys: Some((signer, verifier)),
            verdicts: Mutex::default(),
            verified: AtomicU64::new(0),
        }
    }

    /// Placements written unsigned, every well-formed one trusted: a cluster whose nodes do
    /// not check signatures, where anyone who may write a pod's annotations can forge one.
    pub fn unsigned() -> Self {
        Self {
            keys: None,
            verdicts: Mutex::default(),
            verified: AtomicU64::new(0),
        }
    }

    /// The placements a front-end's configuration asks for: signed with the private key in
    /// `key_file`, or unsigned when `unsigned` says so (with a warning); neither is an error
    /// naming `flag` and `unsigned_flag`, how the configuration spells the two.
    pub fn configured(
        key_file: Option<&Path>,
        unsigned: bool,
        flag: &'static str,
        unsigned_flag: &'static str,
    ) -> Result<Self, KeyError> {
        let Some(path) = key_file else {
            if unsigned {
                tracing::warn!(
                    "placements are written unsigned ({unsigned_flag}): anyone who may create or \
                     update a pod can forge where Tandem placed it"
                );
                return Ok(Self::unsigned());
            }
            return Err(KeyError::Missing {
                flag,
                unsigned: unsigned_flag,
            });
        };
        let shown = path.display().to_string();
        let pem = std::fs::read(path).map_err(|source| KeyError::Read {
            path: shown.clone(),
            source,
        })?;
        let signer = Signer::from_pem(&pem).map_err(|source| KeyError::Key {
            path: shown,
            source,
        })?;
        tracing::info!(key_id = signer.key_id(), "placements are signed");
        Ok(Self::signed(signer))
    }

    /// Whether placements are signed.
    pub fn is_signed(&self) -> bool {
        self.keys.is_some()
    }

    /// The id of the signing key, if any (what signatures name).
    pub fn key_id(&self) -> Option<&str> {
        self.keys.as_ref().map(|(signer, _)| signer.key_id())
    }

    /// The annotations that record the placement of the pod with UID `pod_uid` on `gpus`
    /// (the engine's `<node>/<index>`), with the memory the guard reserved on a shared GPU:
    /// signed, unless placements are unsigned. `Err` when the engine's GPUs are no placement
    /// (none, several nodes, one twice), which the front-end refuses to write.
    ///
    /// The pod's verdict is kept as these annotations: when the pod comes back carrying them,
    /// it reads as placed without its signature being checked again.
    pub fn annotations(
        &self,
        pod_uid: &str,
        gpus: &[String],
        reserved_mib: Option<u32>,
    ) -> Result<BTreeMap<String, String>, PlacementError> {
        let placement = Placement::decided(gpus, reserved_mib)?;
        let placed = Read::Placed(placement.gpus().iter().map(ToString::to_string).collect());
        let annotations = match &self.keys {
            Some((signer, _)) => signer.signed(pod_uid, placement).annotations(),
            None => placement.annotations(),
        };
        if !pod_uid.is_empty() {
            let seen = ANNOTATIONS.map(|key| annotations.get(key).cloned());
            self.keep(pod_uid, seen, placed);
        }
        Ok(annotations)
    }

    /// How many signatures this front-end has checked (each one Ed25519 verification): its own
    /// placements are not among them.
    pub fn verifications(&self) -> u64 {
        self.verified.load(Ordering::Relaxed)
    }

    /// Where Tandem placed `pod`, as its annotations say and the key vouches for.
    pub fn read(&self, pod: &Pod) -> Read {
        let annotations = pod.metadata.annotations.as_ref();
        let get = |key: &str| annotations.and_then(|a| a.get(key));
        if get(GPU_ANNOTATION).is_none() {
            return Read::Unplaced;
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let cached = (!uid.is_empty())
            .then(|| {
                self.verdicts
                    .lock()
                    .get(uid)
                    .filter(|verdict| {
                        verdict
                            .seen
                            .iter()
                            .zip(ANNOTATIONS)
                            .all(|(seen, key)| seen.as_ref() == get(key))
                    })
                    .map(|verdict| verdict.read.clone())
            })
            .flatten();
        let read = match cached {
            Some(read) => read,
            None => {
                let read = self.check(uid, |key| get(key).map(String::as_str));
                if !uid.is_empty() {
                    self.keep(uid, ANNOTATIONS.map(|key| get(key).cloned()), read.clone());
                }
                read
            }
        };
        // The node is the pod's, checked on every read: a pod is bound after Volcano writes
        // its placement, and its node is not part of what the verdict was kept for.
        match (read, node) {
            (Read::Placed(gpus), Some(node))
                if gpus
                    .first()
                    .is_some_and(|gpu| gpu.rsplit_once('/').map(|(n, _)| n) != Some(node)) =>
            {
                Read::Untrusted(format!(
                    "{GPU_ANNOTATION} names GPUs of another node than the pod's"
                ))
            }
            (read, _) => read,
        }
    }

    /// The verdict on the annotations `annotation` looks up, for the pod with UID `uid`.
    fn check<'a>(&self, uid: &str, annotation: impl Fn(&str) -> Option<&'a str>) -> Read {
        let placement = match Placement::read(annotation) {
            Ok(Some(placement)) => placement,
            Ok(None) => return Read::Unplaced,
            Err(error) => return Read::Untrusted(error.to_string()),
        };
        if let Some((_, verifier)) = &self.keys {
            self.verified.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = verifier.verify(uid, &placement) {
                return Read::Untrusted(error.to_string());
            }
        }
        Read::Placed(placement.gpus().iter().map(ToString::to_string).collect())
    }

    /// Keeps `read` as the verdict on the pod of UID `uid` while it carries `seen`.
    fn keep(&self, uid: &str, seen: [Option<String>; 3], read: Read) {
        let mut verdicts = self.verdicts.lock();
        if verdicts.len() >= KEPT_VERDICTS {
            verdicts.clear();
        }
        verdicts.insert(uid.to_owned(), Verdict { seen, read });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod requesting one GPU, named `name`, bound to `node` (built here rather than with
    /// the cluster's test helpers, which read placements through this module).
    fn pod(name: &str, node: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}") },
            "spec": { "nodeName": node, "containers": [{ "name": "main",
                "resources": { "limits": { "nvidia.com/gpu": "1" } } }] },
        }))
        .unwrap()
    }

    fn placed(placements: &Placements, uid: &str, gpus: &[&str], node: &str) -> Pod {
        let gpus: Vec<String> = gpus.iter().map(|g| (*g).to_owned()).collect();
        let mut pod = pod("p", node);
        pod.metadata.uid = Some(uid.to_owned());
        pod.metadata.annotations = Some(placements.annotations(uid, &gpus, Some(4096)).unwrap());
        pod
    }

    #[test]
    fn a_signed_placement_is_trusted_and_a_changed_one_is_not() {
        let (signer, _) = Signer::generate().unwrap();
        let placements = Placements::signed(signer);
        let mut pod = placed(&placements, "uid-1", &["n/1"], "n");
        assert!(
            pod.metadata.annotations.as_ref().unwrap()[SIGNATURE_ANNOTATION]
                .starts_with(&format!("ed25519:{}:", placements.key_id().unwrap()))
        );
        assert_eq!(placements.read(&pod), Read::Placed(vec!["n/1".into()]));

        // The owner names every GPU of the node: the kept verdict is not reused.
        pod.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(GPU_ANNOTATION.into(), "n/0,n/1,n/2,n/3".into());
        let Read::Untrusted(why) = placements.read(&pod) else {
            panic!("a changed placement was trusted");
        };
        assert!(why.contains("does not match the pod"), "{why}");

        // The signature of another pod's placement, copied.
        let other = placed(&placements, "uid-2", &["n/1"], "n");
        let mut copied = other.clone();
        copied.metadata.uid = Some("uid-3".into());
        assert!(matches!(placements.read(&copied), Read::Untrusted(_)));

        // The pod bound to another node than the placement's.
        let mut moved = other;
        moved.spec.as_mut().unwrap().node_name = Some("m".into());
        let Read::Untrusted(why) = placements.read(&moved) else {
            panic!("a placement on another node was trusted");
        };
        assert!(why.contains("another node"), "{why}");
    }

    #[test]
    fn a_placement_signed_here_reads_without_a_check_and_one_signed_elsewhere_is_checked_once() {
        let (signer, private) = Signer::generate().unwrap();
        let placements = Placements::signed(signer);
        let pod = placed(&placements, "uid-1", &["n/1"], "n");
        assert_eq!(placements.read(&pod), Read::Placed(vec!["n/1".into()]));
        assert_eq!(placements.verifications(), 0);

        // The same key in another replica (or after a restart): checked on the first read,
        // the verdict kept for the next.
        let replica = Placements::signed(Signer::from_pem(private.as_bytes()).unwrap());
        for _ in 0..3 {
            assert_eq!(replica.read(&pod), Read::Placed(vec!["n/1".into()]));
        }
        assert_eq!(replica.verifications(), 1);

        // What the pod carries is not what was signed here: checked, and refused.
        let mut changed = pod;
        changed
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(MEMORY_ANNOTATION.into(), "1".into());
        assert!(matches!(placements.read(&changed), Read::Untrusted(_)));
        assert_eq!(placements.verifications(), 1);
    }

    #[test]
    fn unsigned_and_foreign_placements_are_untrusted_where_placements_are_signed() {
        let (signer, _) = Signer::generate().unwrap();
        let (stranger, _) = Signer::generate().unwrap();
        let placements = Placements::signed(signer);
        let unsigned = placed(&Placements::unsigned(), "uid-1", &["n/0", "n/1"], "n");
        assert_eq!(
            placements.read(&unsigned),
            Read::Untrusted("the placement is not signed".into())
        );
        let foreign = placed(&Placements::signed(stranger), "uid-1", &["n/0"], "n");
        let Read::Untrusted(why) = placements.read(&foreign) else {
            panic!("a placement of another key was trusted");
        };
        assert!(why.contains("does not trust"), "{why}");

        // Without a key, any well-formed placement is trusted; a malformed one is not.
        let open = Placements::unsigned();
        assert_eq!(
            open.read(&unsigned),
            Read::Placed(vec!["n/0".into(), "n/1".into()])
        );
        let mut malformed = unsigned;
        malformed
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(GPU_ANNOTATION.into(), "n/0,n/0".into());
        assert!(matches!(open.read(&malformed), Read::Untrusted(_)));
        assert_eq!(open.read(&pod("q", "n")), Read::Unplaced);
    }

    #[test]
    fn the_configuration_needs_a_key_or_the_choice_of_unsigned_placements() {
        let missing = Placements::configured(None, false, "--placement-key", "--unsigned")
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("--placement-key FILE") && missing.contains("--unsigned"),
            "{missing}"
        );
        assert!(
            !Placements::configured(None, true, "--placement-key", "--unsigned")
                .unwrap()
                .is_signed()
        );
        let dir = std::env::temp_dir().join(format!("tandem-placement-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (signer, private) = Signer::generate().unwrap();
        let key = dir.join("key.pem");
        std::fs::write(&key, private).unwrap();
        let configured = Placements::configured(Some(&key), false, "-k", "-u").unwrap();
        assert_eq!(configured.key_id(), Some(signer.key_id()));
        std::fs::write(&key, signer.public_key_pem()).unwrap();
        let wrong = Placements::configured(Some(&key), false, "-k", "-u")
            .unwrap_err()
            .to_string();
        assert!(
            wrong.contains("key.pem") && wrong.contains("PRIVATE KEY"),
            "{wrong}"
        );
        let absent = Placements::configured(Some(&dir.join("none")), false, "-k", "-u")
            .unwrap_err()
            .to_string();
        assert!(absent.contains("cannot read the placement key"), "{absent}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn engine_gpus_that_are_no_placement_are_refused() {
        let placements = Placements::unsigned();
        assert!(placements.annotations("u", &[], None).is_err());
        assert!(
            placements
                .annotations("u", &["a/0".into(), "b/0".into()], None)
                .is_err()
        );
        let one = placements
            .annotations("u", &["a/0".into()], Some(10))
            .unwrap();
        assert_eq!(one[MEMORY_ANNOTATION], "10");
        assert!(!one.contains_key(SIGNATURE_ANNOTATION));
    }
}
