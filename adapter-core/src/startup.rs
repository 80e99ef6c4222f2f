//! Starting an adapter: the options every adapter takes ([`CoreArgs`]) and the engine it
//! starts with ([`resume_or_bootstrap`]), so that a front-end's start-up holds only what its
//! scheduler needs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use tandem_api::{ModelCap, Objective, Policy};
use tandem_host::{HostConfig, Runtime};

use crate::persistence::{self, Found};
use crate::store::{AdapterState, KnowledgeStore};
use crate::{EMBEDDED_ENGINE, EngineState, JobKeys};

/// Seed of a new knowledge base (exploration draws from it; the engine has no entropy). Every
/// adapter, and the framework plugin, bootstraps with it, so a knowledge base started by one
/// is the one any other would have started.
pub const SEED: u64 = 0x7a4d_656d;

/// Options every adapter takes, flattened into its own (`#[command(flatten)]`): the keys of
/// job ids, the intake's token, what placements optimize, and the engine component. Their
/// flags and environment variables are the same in every adapter; the deadlines, whose
/// defaults follow each scheduler's own time limits, are the adapter's.
#[derive(Debug, Clone, clap::Args)]
pub struct CoreArgs {
    /// File with the per-cluster secret that keys job ids (hex, at least 16 bytes), as
    /// `tandem kb init` writes one. Node profilers key ids with the same secret.
    #[arg(long, env = "TANDEM_ID_SECRET_FILE", value_name = "FILE")]
    pub id_secret_file: PathBuf,

    /// File with the operator's bearer token for /v1/profiles, /v1/outcomes, /v1/predict,
    /// /v1/estimate and /v1/knowledge; without it (and without node profilers authenticated
    /// otherwise) those are off.
    #[arg(long, env = "TANDEM_INTAKE_TOKEN_FILE", value_name = "FILE")]
    pub intake_token_file: Option<PathBuf>,

    /// Most items (profiles and outcomes) one intake caller — each node's profiler, the
    /// operator's token — may post per minute; a request past it gets 429 with Retry-After.
    /// 0 for no bound.
    #[arg(long, env = "TANDEM_INTAKE_ITEMS_PER_MINUTE",
          default_value_t = crate::intake::DEFAULT_ITEMS_PER_MINUTE)]
    pub intake_items_per_minute: u32,

    /// What placements optimize, unless a job asks otherwise where its scheduler lets it:
    /// balanced, min-slowdown or max-packing.
    #[arg(long, default_value = "balanced")]
    pub objective: Objective,

    /// Most jobs sharing one GPU.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_jobs_per_gpu: u32,

    /// Engine component to load instead of the one built into this binary.
    #[arg(long, env = "TANDEM_ENGINE", value_name = "FILE")]
    pub engine: Option<PathBuf>,

    /// Directory where the compiled engine is kept between starts (wasmtime's cache, keyed by
    /// the component's hash): a restart loads it in milliseconds instead of compiling it for
    /// seconds. An empty value compiles at every start. Its files are loaded as machine code:
    /// it must be writable only by the user this runs as.
    #[arg(long, env = "TANDEM_COMPILED_CACHE", value_name = "DIR",
          default_value_os_t = HostConfig::default_compiled_cache().unwrap_or_default())]
    pub compiled_cache: PathBuf,
}

impl CoreArgs {
    /// The keys of job ids, from `--id-secret-file`.
    pub fn keys(&self) -> anyhow::Result<JobKeys> {
        Ok(JobKeys::from_file(&self.id_secret_file)?)
    }

    /// The intake's token, from `--intake-token-file`, if one is given.
    pub fn intake_token(&self) -> anyhow::Result<Option<String>> {
        read_token(self.intake_token_file.as_deref(), "intake token")
    }

    /// The engine's policy, with the adapter's per-model caps.
    pub fn policy(&self, model_caps: Vec<ModelCap>) -> Policy {
        Policy {
            objective: self.objective,
            max_jobs_per_gpu: self.max_jobs_per_gpu,
            exploration: 0.0,
            model_caps,
        }
    }

    /// The engine component (embedded, or `--engine`) under the sandbox's limits, each call
    /// interrupted after `call_deadline`.
    pub fn runtime(&self, call_deadline: Duration) -> anyhow::Result<Runtime> {
        load_engine(self.engine.as_deref(), call_deadline, &self.compiled_cache)
            .context("cannot load the engine component")
    }
}

/// The engine component — `engine` if given, else the embedded one — under the sandbox's
/// limits, each call interrupted after `call_deadline`, its compiled code cached in
/// `compiled_cache` (an empty path compiles at every start): how every front-end loads it.
pub fn load_engine(
    engine: Option<&Path>,
    call_deadline: Duration,
    compiled_cache: &Path,
) -> Result<Runtime, tandem_host::Error> {
    let config = HostConfig {
        call_deadline,
        compiled_cache: (!compiled_cache.as_os_str().is_empty())
            .then(|| compiled_cache.to_path_buf()),
        ..HostConfig::default()
    };
    match engine {
        Some(path) => Runtime::from_file(path, config),
        None => Runtime::from_bytes(EMBEDDED_ENGINE, config),
    }
}

/// Reads a token file, trimmed (`what` names it in errors), if one is given; an empty one is
/// an error, so a file written wrong never opens what it should guard.
pub fn read_token(path: Option<&Path>, what: &str) -> anyhow::Result<Option<String>> {
    path.map(|path| {
        let token = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the {what} {}", path.display()))?;
        let token = token.trim().to_owned();
        anyhow::ensure!(!token.is_empty(), "{}: the {what} is empty", path.display());
        Ok(token)
    })
    .transpose()
}

/// What an adapter resumed from ([`crate::CoreConfig::resumed`]): the version and the core's
/// state read from its store.
#[derive(Debug, Clone)]
pub struct Resumed {
    /// The stored version the engine matches (after a fall-back, the newest's: the next write
    /// replaces it).
    pub version: String,
    /// The core's state stored beside the engine.
    pub adapter: AdapterState,
    /// Why the newest knowledge base could not be used, when the last good one was loaded
    /// instead (counted in `tandem_knowledge_fallbacks_total`).
    pub fell_back: Option<String>,
}

/// The engine an adapter starts with, under `policy` (kept across reloads,
/// [`EngineState::keep_policy`]): the knowledge base `store` holds — the newest, or the last
/// good one when the newest cannot be read or loaded — or, when it holds none (or there is no
/// store), a fresh one from the bundled seed profiles. Returns it with what it was resumed
/// from ([`crate::CoreConfig::resumed`]). A knowledge base keyed with another secret is
/// refused when the core starts; [`resume_or_bootstrap_keyed`] falls back from it instead.
pub async fn resume_or_bootstrap(
    runtime: Runtime,
    store: Option<&dyn KnowledgeStore>,
    policy: &Policy,
) -> anyhow::Result<(EngineState, Option<Resumed>)> {
    resume(runtime, store, policy, None).await
}

/// [`resume_or_bootstrap`] for an adapter keying ids with `keys`: a newest knowledge base
/// keyed with another secret (its stored fingerprint changed, by a mistake or by someone who
/// may write the store) is passed over for the last good one keyed with this one; without one,
/// start-up fails naming both fingerprints.
pub async fn resume_or_bootstrap_keyed(
    runtime: Runtime,
    store: Option<&dyn KnowledgeStore>,
    policy: &Policy,
    keys: &JobKeys,
) -> anyhow::Result<(EngineState, Option<Resumed>)> {
    resume(runtime, store, policy, Some(&keys.fingerprint())).await
}

async fn resume(
    runtime: Runtime,
    store: Option<&dyn KnowledgeStore>,
    policy: &Policy,
    fingerprint: Option<&str>,
) -> anyhow::Result<(EngineState, Option<Resumed>)> {
    let found = match store {
        Some(store) => {
            // Under the training deadline: a knowledge base holding reported peaks refits
            // the memory model as it loads.
            let load = |engine: Vec<u8>| {
                std::future::ready(
                    crate::engine::load_for_decisions(&runtime, &engine).map_err(|source| {
                        crate::EngineFailure {
                            call: "load",
                            source,
                        }
                        .into()
                    }),
                )
            };
            persistence::load_usable(store, fingerprint, None, load)
                .await
                .with_context(|| {
                    format!("cannot resume from the knowledge base in {}", store.name())
                })?
        }
        None => Found::Nothing,
    };
    let (recommender, resumed) = match found {
        Found::Loaded {
            stored,
            loaded,
            fell_back,
        } => {
            tracing::info!(
                store = %store.map(|s| s.name()).unwrap_or_default(),
                version = %stored.version,
                last_good = fell_back.is_some(),
                "resuming from the stored knowledge base"
            );
            (
                loaded,
                Some(Resumed {
                    version: stored.version,
                    adapter: stored.adapter,
                    fell_back,
                }),
            )
        }
        Found::Nothing | Found::Unchanged => {
            if store.is_some() {
                tracing::info!("no stored knowledge base; starting from the bundled seed profiles");
            }
            (runtime.bootstrap(policy, SEED)?, None)
        }
    };
    let mut engine = EngineState::new(runtime, recommender);
    engine.keep_policy(policy)?;
    Ok((engine, resumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_trimmed_and_an_empty_one_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  s3cret\n").unwrap();
        assert_eq!(
            read_token(Some(&path), "intake token").unwrap().as_deref(),
            Some("s3cret")
        );
        std::fs::write(&path, "\n").unwrap();
        let error = read_token(Some(&path), "intake token").unwrap_err();
        assert!(
            error.to_string().contains("the intake token is empty"),
            "{error}"
        );
        let missing = dir.path().join("missing");
        let error = read_token(Some(&missing), "scheduler token").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("cannot read the scheduler token"),
            "{error}"
        );
        assert!(read_token(None, "intake token").unwrap().is_none());
    }
}
