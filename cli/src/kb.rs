//! The knowledge-base file and the `tandem kb` commands.
//!
//! A knowledge-base file is JSON: `{"format": "tandem-kb/1", "ids": "hmac-sha256/128",
//! "profiled": [<keyed ids observed with a profile>], "engine": <the engine's own snapshot>}`.
//! `profiled` lets `kb observe` catch an outcome naming a job that was never profiled — usually
//! a typo — without reading the engine's private snapshot; `--workloads` accepts such ids on
//! purpose, for jobs known only by their outcomes. It is always written atomically (temporary file,
//! fsync, rename, fsync of the directory), only after every observation of a command was
//! accepted, and only once what is about to be written was read back and loaded into a fresh
//! engine, so a bad input file, an observation the engine took but cannot load back, or a crash
//! never loses what was learned before. Commands that
//! change it hold an exclusive lock on `<kb>.lock` from reading it to writing it back, so two
//! `tandem kb observe` running at once never lose one another's observations.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tandem_api::{KnowledgeSummary, Policy};
use tandem_host::{Recommender, Runtime};

use crate::keys::{self, IdKeys};
use crate::observations;
use crate::queue::InputError;

const FORMAT: &str = "tandem-kb/1";
const ID_SCHEME: &str = tandem_wire::identity::SCHEME;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KbFile {
    format: String,
    ids: String,
    #[serde(default)]
    profiled: BTreeSet<String>,
    engine: serde_json::Value,
}

/// A knowledge base opened from a file, with the keys of its ids. It holds the file's lock
/// ([`lock`]) until dropped, so a concurrent `kb observe` waits for this one's write instead of
/// reading what this one is about to replace.
pub struct OpenKb {
    /// The engine holding it.
    pub recommender: Recommender,
    /// How ids are keyed for it.
    pub keys: IdKeys,
    /// Keyed ids observed with a profile.
    profiled: BTreeSet<String>,
    path: PathBuf,
    /// The engine, to load back what is about to be written.
    runtime: Runtime,
    _lock: std::fs::File,
}

/// Where the lock of the knowledge base at `kb` is: a file beside it (`<kb>.lock`), since the
/// knowledge base itself is replaced by every write and a lock on it would go with the old
/// file.
pub fn lock_path(kb: &Path) -> PathBuf {
    let mut name = kb.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the exclusive lock of the knowledge base at `kb`, waiting for whoever holds it (an
/// advisory `flock`: every `tandem kb` that writes takes it; it goes when the process does).
fn lock(kb: &Path) -> anyhow::Result<std::fs::File> {
    let path = lock_path(kb);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock {}", path.display()))?;
    file.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(file)
}

/// The secret for the knowledge base at `kb`: `--secret-file` if given, else its sidecar.
fn secret_for(kb: &Path, secret_file: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    let path = secret_file.map_or_else(|| keys::sidecar(kb), Path::to_path_buf);
    if !path.exists() {
        return Err(InputError::usage(format!(
            "no id secret at {} (created by `tandem kb init`; or pass --secret-file)",
            path.display()
        ))
        .into());
    }
    keys::read_secret(&path)
}

/// Creates a knowledge base file (and its secret, unless `--secret-file` names one).
pub fn init(
    runtime: &Runtime,
    kb: &Path,
    secret_file: Option<&Path>,
    policy: &Policy,
    seed: u64,
    empty: bool,
    force: bool,
) -> anyhow::Result<KnowledgeSummary> {
    if kb.exists() && !force {
        return Err(InputError::usage(format!(
            "{} already exists; pass --force to replace it (what it learned would be lost)",
            kb.display()
        ))
        .into());
    }
    if secret_file.is_none() {
        let sidecar = keys::sidecar(kb);
        if !sidecar.exists() {
            keys::write_secret(&sidecar, &keys::generate_secret()?)?;
        }
    }
    let mut recommender = if empty {
        runtime.create(policy, seed)?
    } else {
        runtime.bootstrap(policy, seed)?
    };
    let summary = recommender.describe()?;
    let _lock = lock(kb)?;
    write(runtime, kb, recommender.snapshot()?, &BTreeSet::new())?;
    Ok(summary)
}

/// Opens the knowledge base at `kb` in a new instance, to change it: holds its lock until the
/// returned value is dropped.
pub fn open(runtime: &Runtime, kb: &Path, secret_file: Option<&Path>) -> anyhow::Result<OpenKb> {
    if !kb.exists() {
        // Named as a missing file, not as a lock beside it.
        read(runtime, kb)?;
    }
    let lock = lock(kb)?;
    let (recommender, profiled) = read(runtime, kb)?;
    let keys = IdKeys::new(secret_for(kb, secret_file)?);
    Ok(OpenKb {
        recommender,
        keys,
        profiled,
        path: kb.to_owned(),
        runtime: runtime.clone(),
        _lock: lock,
    })
}

/// Opens the knowledge base at `kb` for reading only: no secret needed, nothing keyed.
pub fn open_unkeyed(runtime: &Runtime, kb: &Path) -> anyhow::Result<Recommender> {
    Ok(read(runtime, kb)?.0)
}

fn read(runtime: &Runtime, kb: &Path) -> anyhow::Result<(Recommender, BTreeSet<String>)> {
    let text = std::fs::read_to_string(kb)
        .map_err(|e| InputError::in_file(kb, "", format!("cannot read the knowledge base: {e}")))?;
    let contents = KbContents::parse(kb, &text)?;
    let recommender = runtime.load(&contents.engine).with_context(|| {
        format!(
            "{}: the engine cannot load this knowledge base",
            kb.display()
        )
    })?;
    Ok((recommender, contents.profiled))
}

/// What a knowledge-base file holds, read and checked (its format and id scheme) but not yet
/// loaded into an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbContents {
    /// The engine's snapshot, as the engine loads it.
    pub engine: Vec<u8>,
    /// Keyed ids observed with a profile.
    pub profiled: BTreeSet<String>,
}

impl KbContents {
    /// Parses the text of a knowledge-base file without touching the file system; `kb` names
    /// the file in messages.
    pub fn parse(kb: &Path, text: &str) -> Result<Self, InputError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let file: KbFile = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|e| InputError::in_file(kb, e.path().to_string(), e.inner().to_string()))?;
        if file.format != FORMAT || file.ids != ID_SCHEME {
            return Err(InputError::in_file(
                kb,
                "format",
                format!(
                    "is `{}` with ids `{}`; this tandem reads `{FORMAT}` with `{ID_SCHEME}`",
                    file.format, file.ids
                ),
            ));
        }
        let engine = serde_json::to_vec(&file.engine)
            .map_err(|e| InputError::in_file(kb, "engine", e.to_string()))?;
        Ok(Self {
            engine,
            profiled: file.profiled,
        })
    }

    /// The text of the file that holds these contents, as `tandem kb` writes it; fails when
    /// the engine's snapshot is not JSON.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(&KbFile {
            format: FORMAT.into(),
            ids: ID_SCHEME.into(),
            profiled: self.profiled.clone(),
            engine: serde_json::from_slice(&self.engine)?,
        })
    }
}

impl OpenKb {
    /// Writes the knowledge base back, atomically, once what is written loads back.
    pub fn save(&mut self) -> anyhow::Result<()> {
        write(
            &self.runtime,
            &self.path,
            self.recommender.snapshot()?,
            &self.profiled,
        )
    }
}

/// What `kb observe` did.
#[derive(Debug, Default, Serialize)]
pub struct Observed {
    /// Profiles filed, with the cluster each went to.
    pub profiles: Vec<ObservedProfile>,
    /// Outcomes learned.
    pub outcomes: usize,
}

/// One filed profile.
#[derive(Debug, Serialize)]
pub struct ObservedProfile {
    /// The caller's id.
    pub job: String,
    /// Cluster it was filed in.
    pub cluster: u32,
    /// Uncertainty of that assignment (0..=1).
    pub uncertainty: f32,
}

/// Feeds profiles, then outcomes, to the knowledge base; writes it only if all were accepted.
/// An outcome may name only jobs profiled before (in this knowledge base or this call), unless
/// `workloads` is set: then an unprofiled id is a workload the engine knows by outcomes alone.
pub fn observe(
    kb: &mut OpenKb,
    profiles: Option<&Path>,
    outcomes: Option<&Path>,
    workloads: bool,
) -> anyhow::Result<Observed> {
    // Read and check both files before the engine sees anything.
    let profiles = profiles.map(observations::read_profiles).transpose()?;
    let outcomes = outcomes.map(|path| observations::read_outcomes(path).map(|o| (path, o)));
    let outcomes = outcomes.transpose()?;
    let mut observed = Observed::default();
    for entry in profiles.into_iter().flatten() {
        let keyed = kb.keys.key(&entry.id);
        kb.profiled.insert(keyed.clone());
        let assignment = kb
            .recommender
            .observe_profile(&keyed, &entry.profile)
            .with_context(|| format!("profile of job `{}` rejected", entry.id))?;
        observed.profiles.push(ObservedProfile {
            job: entry.id,
            cluster: assignment.cluster,
            uncertainty: assignment.uncertainty,
        });
    }
    if let Some((path, outcomes)) = outcomes {
        for (i, mut outcome) in outcomes.into_iter().enumerate() {
            let names = outcome.jobs.join(", ");
            outcome.jobs = outcome.jobs.iter().map(|id| kb.keys.key(id)).collect();
            if !workloads
                && let Some(unknown) = outcome.jobs.iter().find(|id| !kb.profiled.contains(*id))
            {
                return Err(InputError::in_file(
                    path,
                    format!("[{i}].jobs"),
                    format!(
                        "names job `{}`, whose profile was never observed in this knowledge base \
                         (observe it with --profiles, or pass --workloads to learn jobs without \
                         telemetry from their outcomes alone); nothing was saved",
                        kb.keys.original(unknown)
                    ),
                )
                .into());
            }
            kb.recommender.observe_outcome(&outcome).map_err(|e| {
                anyhow::Error::new(e).context(format!(
                    "{}: [{i}] (jobs {names}) rejected; nothing was saved",
                    path.display()
                ))
            })?;
            observed.outcomes += 1;
        }
    }
    kb.save()?;
    Ok(observed)
}

/// Writes `engine` state as a knowledge-base file, atomically, after loading what the file will
/// hold into a fresh engine of `runtime`: a knowledge base `tandem kb` could not read back is
/// refused (bad input: the observations made it), and the file keeps what it held.
fn write(
    runtime: &Runtime,
    path: &Path,
    engine: &[u8],
    profiled: &BTreeSet<String>,
) -> anyhow::Result<()> {
    let contents = KbContents {
        engine: engine.to_vec(),
        profiled: profiled.clone(),
    };
    let text = contents
        .to_json()
        .context("the engine's snapshot is not JSON")?;
    let reread = std::str::from_utf8(&text)
        .map_err(|e| InputError::in_file(path, "", e.to_string()))
        .and_then(|text| KbContents::parse(path, text))?;
    if let Err(error) = runtime.load(&reread.engine) {
        return Err(
            anyhow::Error::new(crate::error::BadInput::new(error)).context(format!(
                "{}: the knowledge base these observations make does not load back into the \
             engine; nothing was saved",
                path.display()
            )),
        );
    }
    crate::atomic::write(path, |out| {
        out.write_all(&text)
            .with_context(|| format!("cannot write {}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB: &str = r#"{"format": "tandem-kb/1", "ids": "hmac-sha256/128", "profiled": ["b", "a"], "engine": {"version": 1, "jobs": [0.1, 2]}}"#;

    #[test]
    fn contents_written_parse_back_the_same() {
        let path = Path::new("kb.json");
        let contents = KbContents::parse(path, KB).unwrap();
        assert_eq!(
            contents.profiled,
            BTreeSet::from(["a".to_owned(), "b".to_owned()])
        );
        let text = String::from_utf8(contents.to_json().unwrap()).unwrap();
        assert_eq!(KbContents::parse(path, &text).unwrap(), contents);
    }

    /// The files `cargo xtask fuzz` starts its `kb` target from are knowledge bases: a seed
    /// refused at the format check would leave the fuzzer knocking at it.
    #[test]
    fn the_kb_fuzz_seeds_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/kb");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            KbContents::parse(&path, &text).unwrap_or_else(|e| panic!("{e}"));
            seeds += 1;
        }
        assert_eq!(
            seeds, 2,
            "fuzz/seeds/kb holds an empty and a bootstrapped one"
        );
    }

    #[test]
    fn a_bad_file_is_named_with_the_field_at_fault() {
        let path = Path::new("kb.json");
        let unknown = KbContents::parse(path, &KB.replace("profiled", "profiles")).unwrap_err();
        assert!(unknown.to_string().starts_with("kb.json: "), "{unknown}");
        let other = KbContents::parse(path, &KB.replace("tandem-kb/1", "tandem-kb/9")).unwrap_err();
        assert_eq!(other.field.as_deref(), Some("format"));
        assert!(other.to_string().contains("tandem-kb/9"), "{other}");
        let not_set = KbContents::parse(
            path,
            r#"{"format": "tandem-kb/1", "ids": "hmac-sha256/128", "profiled": 3, "engine": null}"#,
        )
        .unwrap_err();
        assert_eq!(not_set.field.as_deref(), Some("profiled"));
    }
}
