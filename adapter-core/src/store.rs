//! Where the knowledge base is kept: the trait every backend implements, and what is stored.
//!
//! A stored knowledge base is the engine's snapshot plus what the core keeps beside it
//! ([`AdapterState`]: the outcome ledger), under an opaque *version* the backend assigns. Every
//! write names the version it replaces, so a writer that missed someone else's write gets
//! [`StoreError::Conflict`] instead of silently overwriting it. Kubernetes adapters keep it in
//! a ConfigMap written with `resourceVersion` preconditions (`tandem-kube-common`'s
//! `ConfigMapStore`); a single-controller scheduler such as Slurm keeps it in a file
//! ([`FileStore`]).
//!
//! Beside the newest, every backend keeps the *last good* knowledge base: a second copy of
//! each one written, made after it (everything the core writes was loaded back into a fresh
//! engine first, so it is good when written). When the newest cannot be used — unreadable, a
//! length or a checksum that does not add up, refused by the engine — the core loads the last
//! good one instead ([`KnowledgeStore::load_last_good`]), says so
//! ([`KnowledgeStore::report_fallback`], `tandem_knowledge_fallbacks_total`), and its next
//! write replaces the newest.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::outcomes::Ledger;

/// What the core stores beside the engine's snapshot.
///
/// Knowledge bases written before the cluster view (WIT 0.4.0) also carry the last profile of
/// each keyed id (`profiles`); the engine knows them from its snapshot, so they are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdapterState {
    /// Solo history and processed runs, for outcome estimation.
    pub ledger: Ledger,
    /// What was learned per GPU model (absent from knowledge bases written before it was).
    #[serde(default)]
    pub lessons: crate::learning::Lessons,
    /// Fingerprint of the secret the ids in this knowledge base were keyed with
    /// ([`crate::JobKeys::fingerprint`]); absent from knowledge bases written before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_fingerprint: Option<String>,
}

impl AdapterState {
    /// Checks that this state was keyed with the secret of `fingerprint` (a state that names
    /// no fingerprint is taken as keyed with it: it predates fingerprints).
    pub fn check_key(&self, name: &str, fingerprint: &str) -> Result<(), StoreError> {
        match &self.key_fingerprint {
            Some(stored) if stored != fingerprint => Err(StoreError::KeyMismatch {
                name: name.to_owned(),
                stored: stored.clone(),
                ours: fingerprint.to_owned(),
            }),
            _ => Ok(()),
        }
    }
}

/// A stored knowledge base and the version it was read at.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The engine's snapshot.
    pub engine: Vec<u8>,
    /// The core's state.
    pub adapter: AdapterState,
    /// The backend's version of what was read.
    pub version: String,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Someone else wrote since our last read.
    #[error("the knowledge base {0} changed since it was last read (another writer?)")]
    Conflict(String),
    /// The stored object is not a knowledge base this adapter can read.
    #[error("{name} is not a Tandem knowledge base: {why}")]
    Malformed {
        /// What was read.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The knowledge base was keyed with another secret than this adapter's.
    #[error(
        "{name} was keyed with another id secret (fingerprint {stored}; this adapter's secret has \
         {ours}): every job would get a new id and what was learned would be orphaned. Start with \
         the secret it was written with, or move it aside to start a new knowledge base"
    )]
    KeyMismatch {
        /// What was read.
        name: String,
        /// The fingerprint stored with it.
        stored: String,
        /// The fingerprint of this adapter's secret.
        ours: String,
    },
    /// The state does not fit the backend.
    #[error("the knowledge base is {size} bytes, more than {backend} holds ({limit} bytes)")]
    TooLarge {
        /// Bytes to write.
        size: usize,
        /// The backend.
        backend: &'static str,
        /// Most it holds.
        limit: usize,
    },
    /// The backend failed.
    #[error("{0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A place to keep the knowledge base.
pub trait KnowledgeStore: Send + Sync + 'static {
    /// Reads the knowledge base; `None` if none was stored yet.
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>>;

    /// Writes the knowledge base: creates it when `version` is `None`, else replaces the one at
    /// that version. Returns the new version.
    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>>;

    /// The last good knowledge base (see the module documentation), for when the newest cannot
    /// be used; `None` when the backend keeps none, or none was written yet. Its version is the
    /// newest's, so the next write replaces the newest.
    fn load_last_good(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Says, where an operator looks, that the newest knowledge base could not be used (`why`)
    /// and the last good one was loaded instead: an error in the log, and whatever the backend
    /// adds (a Kubernetes Event on the knowledge ConfigMap).
    fn report_fallback<'a>(&'a self, why: &'a str) -> BoxFuture<'a, ()> {
        tracing::error!(
            store = %self.name(),
            why,
            "the newest knowledge base cannot be used; loaded the last good one"
        );
        Box::pin(std::future::ready(()))
    }

    /// The most bytes a knowledge base may take here (engine snapshot and core state), if the
    /// backend has a limit; exported as `tandem_store_limit_bytes`.
    fn capacity(&self) -> Option<usize> {
        None
    }

    /// What it is called in messages (a file's path, a ConfigMap's name).
    fn name(&self) -> String {
        "the knowledge base".to_owned()
    }
}

/// The bytes a knowledge base takes in a store: the engine's snapshot and the core's state as
/// JSON (what every backend writes, give or take a header).
pub fn stored_size(engine: &[u8], adapter: &AdapterState) -> usize {
    engine.len() + serde_json::to_vec(adapter).map_or(0, |json| json.len())
}

/// The knowledge base in one file on the controller host, for schedulers with a single
/// controller (Slurm).
///
/// The file is a format line, a JSON header (version, engine size, the core's state) and the
/// engine's snapshot as raw bytes. Every write goes to a temporary file beside it, is
/// fsynced, renamed over the old file and the directory fsynced, so a crash at any point leaves
/// either the old knowledge base or the new one, never a mix; an observation is acknowledged
/// only after that. The version is a generation number kept in the file: a write names the
/// generation it replaces, so a second writer on the same file gets [`StoreError::Conflict`].
/// A file whose header cannot be read has a version of its own (`damaged-…`, from its
/// content), so the core can replace it after loading the last good copy.
///
/// The last good copy is `<file>.last-good`, written the same way after each write of the
/// file. A file larger than [`MAX_FILE_BYTES`] is refused before it is read.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: std::path::PathBuf,
}

/// First line of a knowledge-base file.
pub const FILE_FORMAT: &str = "tandem-kb-file/1";

/// Largest knowledge-base file read: 1 GiB (a knowledge base of about nine million jobs).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

#[derive(Serialize, Deserialize)]
struct FileHeader {
    version: u64,
    engine_bytes: usize,
    adapter: AdapterState,
}

impl FileStore {
    /// The knowledge base at `path` (created by the first write).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Where the file is.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Where the last good copy is: `<file>.last-good`.
    pub fn last_good_path(&self) -> std::path::PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".last-good");
        std::path::PathBuf::from(name)
    }

    /// Reads the file; `None` if it does not exist.
    pub fn read(&self) -> Result<Option<Stored>, StoreError> {
        let Some(bytes) = read_bounded(&self.path)? else {
            return Ok(None);
        };
        parse_file(&self.path, &bytes).map(Some)
    }

    /// Reads the last good copy, with the version of the file it stands in for; `None` if there
    /// is none (or no file).
    pub fn read_last_good(&self) -> Result<Option<Stored>, StoreError> {
        let Some(current) = self.current_version()? else {
            return Ok(None);
        };
        let last_good = self.last_good_path();
        let Some(bytes) = read_bounded(&last_good)? else {
            return Ok(None);
        };
        let mut stored = parse_file(&last_good, &bytes)?;
        stored.version = current;
        Ok(Some(stored))
    }

    /// The version of the file as it is: its generation, or, when its header cannot be read,
    /// one made of its content; `None` if it does not exist.
    fn current_version(&self) -> Result<Option<String>, StoreError> {
        let Some(bytes) = read_bounded(&self.path)? else {
            return Ok(None);
        };
        Ok(Some(match parse_file(&self.path, &bytes) {
            Ok(stored) => stored.version,
            Err(_) => damaged_version(&bytes),
        }))
    }

    /// Writes the file atomically if it is still at `version` (`None`: if it does not exist),
    /// then its last good copy.
    pub fn write(
        &self,
        version: Option<&str>,
        engine: &[u8],
        adapter: &AdapterState,
    ) -> Result<String, StoreError> {
        let current = self.current_version()?;
        if current.as_deref() != version {
            return Err(StoreError::Conflict(self.path.display().to_string()));
        }
        // After a damaged file, the generation goes on from its last good copy's.
        let generation =
            |stored: Option<Stored>| stored.and_then(|s| s.version.parse::<u64>().ok());
        let replaced = match current.as_deref().map(str::parse::<u64>) {
            Some(Ok(generation)) => Some(generation),
            Some(Err(_)) => {
                let last_good = read_bounded(&self.last_good_path())?;
                generation(last_good.and_then(|b| parse_file(&self.last_good_path(), &b).ok()))
            }
            None => None,
        };
        let next = replaced.map_or(1, |v| v + 1);
        let header = serde_json::to_vec(&FileHeader {
            version: next,
            engine_bytes: engine.len(),
            adapter: adapter.clone(),
        })
        .map_err(|e| StoreError::Backend(Box::new(e)))?;
        write_atomically(&self.path, &header, engine)
            .map_err(|e| StoreError::Backend(Box::new(e)))?;
        // The file is the commit point: a last good copy that cannot be written is one write
        // behind, still good.
        if let Err(error) = write_atomically(&self.last_good_path(), &header, engine) {
            tracing::warn!(
                file = %self.last_good_path().display(),
                %error,
                "cannot write the knowledge base's last good copy"
            );
        }
        Ok(next.to_string())
    }
}

/// A file's bytes, `None` if it does not exist; a file past [`MAX_FILE_BYTES`] is refused
/// unread.
fn read_bounded(path: &std::path::Path) -> Result<Option<Vec<u8>>, StoreError> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::Backend(Box::new(e))),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::Backend(Box::new(e)))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(StoreError::Malformed {
            name: path.display().to_string(),
            why: format!("it is larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    Ok(Some(bytes))
}

/// A knowledge-base file's contents, checked: its format line, header and snapshot length.
fn parse_file(path: &std::path::Path, bytes: &[u8]) -> Result<Stored, StoreError> {
    let malformed = |why: String| StoreError::Malformed {
        name: path.display().to_string(),
        why,
    };
    let mut lines = bytes.splitn(3, |&b| b == b'\n');
    let format = lines.next().unwrap_or_default();
    if format != FILE_FORMAT.as_bytes() {
        return Err(malformed(format!(
            "the first line is not {FILE_FORMAT:?} (wrong file?)"
        )));
    }
    let header: FileHeader = serde_json::from_slice(lines.next().unwrap_or_default())
        .map_err(|e| malformed(format!("line 2 (header): {e}")))?;
    let engine = lines.next().unwrap_or_default();
    if engine.len() != header.engine_bytes {
        return Err(malformed(format!(
            "the engine snapshot is {} bytes, the header says {} (truncated?)",
            engine.len(),
            header.engine_bytes
        )));
    }
    Ok(Stored {
        engine: engine.to_vec(),
        adapter: header.adapter,
        version: header.version.to_string(),
    })
}

/// The version of a file whose header cannot be read: its length and a hash of its bytes, so
/// a writer that read it is refused if it changed since.
fn damaged_version(bytes: &[u8]) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    format!("damaged-{}-{:016x}", bytes.len(), hasher.finish())
}

/// Writes a knowledge-base file (format line, `header`, `engine`) at `path` through a
/// temporary file beside it: fsynced, renamed over `path`, the directory fsynced.
fn write_atomically(path: &std::path::Path, header: &[u8], engine: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "knowledge".into());
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(FILE_FORMAT.as_bytes())?;
        file.write_all(b"\n")?;
        file.write_all(header)?;
        file.write_all(b"\n")?;
        file.write_all(engine)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        // The rename is durable only once the directory is.
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

impl KnowledgeStore for FileStore {
    fn load(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        // Small files on a local disk: reading them inline costs less than a blocking task.
        Box::pin(std::future::ready(self.read()))
    }

    fn save<'a>(
        &'a self,
        version: Option<&'a str>,
        engine: &'a [u8],
        adapter: &'a AdapterState,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(std::future::ready(self.write(version, engine, adapter)))
    }

    fn load_last_good(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        Box::pin(std::future::ready(self.read_last_good()))
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_store_round_trips_and_refuses_a_stale_writer() {
        let dir = temp_dir("file-store");
        let store = FileStore::new(dir.join("kb"));
        assert!(store.read().unwrap().is_none());
        let v1 = store
            .write(None, b"\x00engine\nbytes", &AdapterState::default())
            .unwrap();
        let stored = store.read().unwrap().unwrap();
        assert_eq!(stored.engine, b"\x00engine\nbytes");
        assert_eq!(stored.version, v1);
        let v2 = store
            .write(Some(&v1), b"new", &AdapterState::default())
            .unwrap();
        assert_ne!(v1, v2);
        // A writer still at v1 (or one that thinks there is no file) missed v2.
        assert!(matches!(
            store.write(Some(&v1), b"old", &AdapterState::default()),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            store.write(None, b"old", &AdapterState::default()),
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(store.read().unwrap().unwrap().engine, b"new");
        // No temporary file is left behind: the file and its last good copy.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_file_leaves_its_last_good_copy_which_the_next_write_replaces_it_from() {
        let dir = temp_dir("file-store-last-good");
        let path = dir.join("kb");
        let store = FileStore::new(&path);
        assert!(store.read_last_good().unwrap().is_none());
        let v1 = store
            .write(None, b"first", &AdapterState::default())
            .unwrap();
        let v2 = store
            .write(Some(&v1), b"second", &AdapterState::default())
            .unwrap();
        // Garbage over the file, and an absurd length in a header.
        for damage in [&b"\x00\xffgarbage"[..], b"tandem-kb-file/1\n{\"version\":9,\"engine_bytes\":18446744073709551615,\"adapter\":{\"ledger\":{}}}\nx"] {
            std::fs::write(&path, damage).unwrap();
            let error = store.read().unwrap_err().to_string();
            assert!(error.contains("is not a Tandem knowledge base"), "{error}");
            let good = store.read_last_good().unwrap().unwrap();
            assert_eq!(good.engine, b"second");
            assert!(good.version.starts_with("damaged-"), "{}", good.version);
            assert_ne!(good.version, v2);
            // A writer that still names the file's old version missed the damage.
            assert!(matches!(
                store.write(Some(&v2), b"stale", &AdapterState::default()),
                Err(StoreError::Conflict(_))
            ));
        }
        let good = store.read_last_good().unwrap().unwrap();
        let v3 = store
            .write(Some(&good.version), b"third", &AdapterState::default())
            .unwrap();
        assert_eq!(v3, "3", "the generation goes on from the last good copy's");
        assert_eq!(store.read().unwrap().unwrap().engine, b"third");
        assert_eq!(store.read_last_good().unwrap().unwrap().engine, b"third");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_truncated_or_foreign_file_is_named_not_loaded() {
        let dir = temp_dir("file-store-bad");
        let path = dir.join("kb");
        let store = FileStore::new(&path);
        store
            .write(None, b"0123456789", &AdapterState::default())
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = store.read().unwrap_err().to_string();
        assert!(error.contains("truncated"), "{error}");
        std::fs::write(&path, "hello\n").unwrap();
        let error = store.read().unwrap_err().to_string();
        assert!(error.contains(FILE_FORMAT), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
