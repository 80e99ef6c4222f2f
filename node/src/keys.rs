//! The schedulers' public keys a node verifies placements with (`--placement-keys`), read
//! again whenever the file changes.
//!
//! The file is PEM: `PUBLIC KEY` blocks or `CERTIFICATE`s, several during a rotation
//! ([`tandem_wire::Verifier::from_pem`]). In a cluster it is a ConfigMap mounted as a volume,
//! which the kubelet updates in place (a new directory swapped in behind a symlink) when the
//! keys rotate: so before each verification the file's identity (device, inode, size, times,
//! through the symlinks) is compared with the one read, and a changed file is read again. A
//! file that no longer reads as keys leaves the keys read before in force, and says so.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use tandem_wire::{KeyError, Verifier};

/// Why the keys cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The file cannot be read.
    #[error("cannot read the placement keys {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no usable key.
    #[error("the placement keys {} are not Ed25519 public keys or certificates", path.display())]
    Keys {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
}

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        // `metadata` follows symlinks: a ConfigMap's swapped directory changes the target.
        let metadata = std::fs::metadata(path)?;
        Ok(Self {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        })
    }
}

/// What [`PlacementKeys::current`] found.
#[derive(Debug)]
pub struct Current {
    /// The keys to verify with.
    pub verifier: Arc<Verifier>,
    /// `Some` when the file had changed: the ids of the keys now trusted, or why the new
    /// file was not taken (the keys before stay in force).
    pub reloaded: Option<Result<Vec<String>, KeysError>>,
}

/// The keys of `--placement-keys`.
#[derive(Debug)]
pub struct PlacementKeys {
    path: PathBuf,
    loaded: Mutex<(Stamp, Arc<Verifier>)>,
}

impl PlacementKeys {
    /// Reads the keys of `path`.
    pub fn load(path: &Path) -> Result<Self, KeysError> {
        let (stamp, verifier) = read(path)?;
        Ok(Self {
            path: path.to_owned(),
            loaded: Mutex::new((stamp, Arc::new(verifier))),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The keys in force: those of the file as it is now, read again if it changed since.
    pub fn current(&self) -> Current {
        let mut loaded = self.loaded.lock();
        let now = Stamp::of(&self.path);
        if now.as_ref().ok() == Some(&loaded.0) {
            return Current {
                verifier: Arc::clone(&loaded.1),
                reloaded: None,
            };
        }
        let reloaded = match read(&self.path) {
            Ok((stamp, verifier)) => {
                let ids = verifier.key_ids().map(str::to_owned).collect();
                *loaded = (stamp, Arc::new(verifier));
                Ok(ids)
            }
            Err(error) => {
                // Not read again until the file changes once more.
                if let Ok(stamp) = now {
                    loaded.0 = stamp;
                }
                Err(error)
            }
        };
        Current {
            verifier: Arc::clone(&loaded.1),
            reloaded: Some(reloaded),
        }
    }
}

fn read(path: &Path) -> Result<(Stamp, Verifier), KeysError> {
    let failed = |source| KeysError::Read {
        path: path.to_owned(),
        source,
    };
    // The stamp before the read: a change while reading is seen at the next check.
    let stamp = Stamp::of(path).map_err(failed)?;
    let pem = std::fs::read(path).map_err(failed)?;
    let verifier = Verifier::from_pem(&pem).map_err(|source| KeysError::Keys {
        path: path.to_owned(),
        source,
    })?;
    Ok((stamp, verifier))
}

#[cfg(test)]
mod tests {
    use tandem_wire::{Placement, Signer};

    use super::*;

    fn placement(signer: &Signer) -> Placement {
        signer.signed(
            "uid",
            Placement::decided(&["node-a/1".into()], Some(100)).unwrap(),
        )
    }

    #[test]
    fn a_rotated_configmap_is_read_again_and_a_broken_one_keeps_the_keys_before() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (Signer::generate().unwrap().0, Signer::generate().unwrap().0);
        // As the kubelet mounts a ConfigMap: the file is a symlink through `..data`, which is
        // swapped to a new directory on an update.
        let write_version = |name: &str, pem: &str| {
            let version = dir.path().join(name);
            std::fs::create_dir(&version).unwrap();
            std::fs::write(version.join("placement.pub"), pem).unwrap();
            let swap = dir.path().join("..data_tmp");
            std::os::unix::fs::symlink(name, &swap).unwrap();
            std::fs::rename(&swap, dir.path().join("..data")).unwrap();
        };
        write_version("v1", &old.public_key_pem());
        let path = dir.path().join("placement.pub");
        std::os::unix::fs::symlink("..data/placement.pub", &path).unwrap();

        let keys = PlacementKeys::load(&path).unwrap();
        let current = keys.current();
        assert!(current.reloaded.is_none());
        assert!(current.verifier.verify("uid", &placement(&old)).is_ok());
        assert!(current.verifier.verify("uid", &placement(&new)).is_err());

        // A rotation: both keys for a while.
        write_version(
            "v2",
            &format!("{}{}", old.public_key_pem(), new.public_key_pem()),
        );
        let current = keys.current();
        let ids = current.reloaded.unwrap().unwrap();
        assert_eq!(ids, [old.key_id(), new.key_id()]);
        assert!(current.verifier.verify("uid", &placement(&new)).is_ok());
        assert!(keys.current().reloaded.is_none());

        // Then the new key alone.
        write_version("v3", &new.public_key_pem());
        let current = keys.current();
        assert_eq!(current.reloaded.unwrap().unwrap(), [new.key_id()]);
        assert!(current.verifier.verify("uid", &placement(&old)).is_err());

        // A file that holds no key leaves the keys before in force, once reported.
        write_version("v4", "not a key\n");
        let current = keys.current();
        let error = current.reloaded.unwrap().unwrap_err();
        assert!(
            crate::report(&error).contains("no PUBLIC KEY or CERTIFICATE"),
            "{}",
            crate::report(&error)
        );
        assert!(current.verifier.verify("uid", &placement(&new)).is_ok());
        assert!(keys.current().reloaded.is_none());
    }

    #[test]
    fn a_missing_or_keyless_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.pem");
        let error = PlacementKeys::load(&missing).unwrap_err();
        assert!(error.to_string().contains("absent.pem"), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let error = PlacementKeys::load(&empty).unwrap_err();
        assert!(matches!(error, KeysError::Keys { .. }), "{error}");
    }
}
