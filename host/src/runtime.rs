//! Loading and validating a component, and the wasmtime engine shared by its instances.

use std::path::Path;
use std::sync::Arc;
use std::thread;

use tandem_api::{Policy, Series, Synthesis};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, EngineWeak};

use crate::bindings::{Plugin, PluginPre};
use crate::config::HostConfig;
use crate::limits::StoreState;
use crate::recommender::Recommender;
use crate::sandbox::{EPOCH_TICK, Shared, classify, to_wit};
use crate::{Error, Result};

/// The WIT versions of `tandem:engine` this host loads.
pub const SUPPORTED_WIT_VERSIONS: &[&str] = &[tandem_api::WIT_VERSION];

/// One compiled and validated engine component, ready to create recommenders.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
    wit_version: String,
    /// Whether the compiled component came from the compiled-component cache.
    from_cache: bool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("wit_version", &self.wit_version)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Reads, validates and compiles the component at `path`.
    pub fn from_file(path: &Path, config: HostConfig) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_bytes(&bytes, config)
    }

    /// Validates and compiles a component given as bytes.
    ///
    /// Rejects, with an error saying which, bytes that are not wasm, a core module, a
    /// component that does not export `tandem:engine/engine`, one that exports another
    /// version of it, and one that imports anything but the engine's `log`.
    pub fn from_bytes(bytes: &[u8], config: HostConfig) -> Result<Self> {
        check_header(bytes)?;
        let mut wasm_config = Config::new();
        wasm_config.epoch_interruption(true);
        wasm_config.max_wasm_stack(config.max_wasm_stack_bytes);
        let cache = match &config.compiled_cache {
            Some(directory) => use_compiled_cache(&mut wasm_config, directory)?,
            None => None,
        };
        let engine = Engine::new(&wasm_config).map_err(|e| Error::wasmtime("configure", e))?;
        let started = std::time::Instant::now();
        let component =
            Component::new(&engine, bytes).map_err(|e| Error::wasmtime("compile", e))?;
        let from_cache = cache.as_ref().is_some_and(|cache| cache_hits(cache) > 0);
        tracing::debug!(
            elapsed = ?started.elapsed(),
            from_cache,
            "engine component ready"
        );
        let wit_version = check_world(&engine, &component)?;

        let mut linker = Linker::<StoreState>::new(&engine);
        Plugin::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |state| state)
            .map_err(|e| Error::wasmtime("link", e))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(|e| Error::wasmtime("type-check", e))?;
        spawn_epoch_ticker(engine.weak());
        Ok(Self {
            shared: Arc::new(Shared {
                engine,
                pre,
                config,
            }),
            wit_version,
            from_cache,
        })
    }

    /// Whether the compiled component was loaded from [`HostConfig::compiled_cache`] rather
    /// than compiled by this start.
    pub fn compiled_from_cache(&self) -> bool {
        self.from_cache
    }

    /// The `tandem:engine` version the component implements (for example `0.2.0`).
    pub fn wit_version(&self) -> &str {
        &self.wit_version
    }

    /// The limits calls run under.
    pub fn config(&self) -> &HostConfig {
        &self.shared.config
    }

    /// The same compiled component, its calls under `call_deadline` instead: for work that
    /// runs off a scheduler's path and may take longer than a decision (retraining a model on
    /// a thread of its own). Nothing is compiled again; recommenders of either runtime can be
    /// moved to the other ([`Runtime::adopt`]).
    pub fn with_call_deadline(&self, call_deadline: std::time::Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                engine: self.shared.engine.clone(),
                pre: self.shared.pre.clone(),
                config: HostConfig {
                    call_deadline,
                    ..self.shared.config.clone()
                },
            }),
            wit_version: self.wit_version.clone(),
            from_cache: self.from_cache,
        }
    }

    /// Runs `recommender`'s later calls under this runtime's limits (its deadline; the memory
    /// cap stays the one it was instantiated with). The recommender must come from the same
    /// compiled component ([`Runtime::with_call_deadline`]): a recommender trained off a
    /// scheduler's path under a long deadline then serves decisions under the short one.
    /// Fails with [`crate::Error::Engine`] for a recommender of another component.
    pub fn adopt(&self, recommender: &mut Recommender) -> Result<()> {
        recommender.share(&self.shared)
    }

    /// A recommender with an empty knowledge base, in its own instance.
    pub fn create(&self, policy: &Policy, seed: u64) -> Result<Recommender> {
        Recommender::create(Arc::clone(&self.shared), policy, seed)
    }

    /// A recommender whose knowledge base starts from the profiles bundled with the engine.
    pub fn bootstrap(&self, policy: &Policy, seed: u64) -> Result<Recommender> {
        Recommender::bootstrap(Arc::clone(&self.shared), policy, seed)
    }

    /// A recommender restored from a snapshot taken with [`Recommender::snapshot`].
    pub fn load(&self, state: &[u8]) -> Result<Recommender> {
        Recommender::load(Arc::clone(&self.shared), state)
    }

    /// The engine implementation's own version, asked of a fresh instance.
    pub fn engine_version(&self) -> Result<String> {
        let (mut store, plugin) = self.shared.instantiate()?;
        plugin
            .tandem_engine_engine()
            .call_engine_version(&mut store)
            .map_err(|e| Error::wasmtime("call engine-version on", e))
    }

    /// Enlarges measured workload profiles by interpolation across batch sizes (the WIT
    /// `synthesize`), in a fresh instance under the same deadline and memory cap as every
    /// call. The engine keeps nothing: the instance is dropped with the answer, so a trap
    /// needs no rebuild. `bounds` has one entry per feature (`Some((low, high))` clamps it).
    pub fn synthesize(
        &self,
        ground_truth: &[Series],
        points_per_gap: u32,
        bounds: &[Option<(f64, f64)>],
    ) -> Result<Synthesis> {
        let ground_truth = to_wit(ground_truth);
        let (mut store, plugin) = self.shared.instantiate()?;
        let answer = plugin.tandem_engine_engine().call_synthesize(
            &mut store,
            &ground_truth,
            points_per_gap,
            bounds,
        );
        match answer {
            Ok(Ok(synthesis)) => Ok(synthesis.into()),
            Ok(Err(e)) => Err(Error::Engine(e.into())),
            Err(trap) => Err(classify("synthesize", trap, &self.shared, store.data())),
        }
    }
}

/// Keeps compiled components in `directory` (wasmtime's cache: content-addressed files, zstd
/// compressed, pruned by size in the background). A directory that cannot be used is logged
/// and the component compiled as if none had been given: the cache saves time, it is never a
/// reason not to start.
#[cfg(feature = "compiled-cache")]
fn use_compiled_cache(wasm_config: &mut Config, directory: &Path) -> Result<Option<CompiledCache>> {
    let directory = std::path::absolute(directory).unwrap_or_else(|_| directory.to_owned());
    let mut cache = wasmtime::CacheConfig::new();
    cache.with_directory(&directory);
    match wasmtime::Cache::new(cache) {
        Ok(cache) => {
            wasm_config.cache(Some(cache.clone()));
            Ok(Some(cache))
        }
        Err(error) => {
            tracing::warn!(
                directory = %directory.display(),
                error = %error,
                "cannot use the compiled-component cache; compiling the engine at every start"
            );
            Ok(None)
        }
    }
}

/// Without the `compiled-cache` feature a cache directory is a configuration this build
/// cannot honour: said at start rather than silently slow.
#[cfg(not(feature = "compiled-cache"))]
fn use_compiled_cache(_: &mut Config, directory: &Path) -> Result<Option<CompiledCache>> {
    Err(Error::NoCompiledCache {
        directory: directory.to_owned(),
    })
}

/// wasmtime's cache, where the build has it; a type with no values where it does not.
#[cfg(feature = "compiled-cache")]
type CompiledCache = wasmtime::Cache;
#[cfg(not(feature = "compiled-cache"))]
type CompiledCache = std::convert::Infallible;

/// How many components `cache` served, since it was made.
#[cfg(feature = "compiled-cache")]
fn cache_hits(cache: &CompiledCache) -> usize {
    cache.cache_hits()
}
#[cfg(not(feature = "compiled-cache"))]
fn cache_hits(cache: &CompiledCache) -> usize {
    match *cache {}
}

/// Tells core modules and non-wasm files from components before compiling anything.
fn check_header(bytes: &[u8]) -> Result<()> {
    const MAGIC: &[u8] = b"\0asm";
    // The 4 bytes after the magic: version 1 for core modules, layer 1 for components.
    const CORE: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
    if !bytes.starts_with(MAGIC) || bytes.len() < 8 {
        return Err(Error::NotWasm);
    }
    if bytes[4..8] == CORE {
        return Err(Error::CoreModule);
    }
    Ok(())
}

/// Checks what the component exports and imports; returns its `tandem:engine` version.
fn check_world(engine: &Engine, component: &Component) -> Result<String> {
    let ty = component.component_type();
    let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
    let found = exports
        .iter()
        .find_map(|name| name.strip_prefix("tandem:engine/engine@"))
        .ok_or_else(|| Error::NotAnEngine {
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        })?;
    if !SUPPORTED_WIT_VERSIONS.contains(&found) {
        return Err(Error::UnsupportedVersion {
            found: found.to_owned(),
            supported: SUPPORTED_WIT_VERSIONS.join(", "),
        });
    }
    let types = format!("tandem:engine/types@{found}");
    if let Some((name, _)) = ty
        .imports(engine)
        .find(|(name, _)| *name != "log" && *name != types)
    {
        return Err(Error::ForbiddenImport {
            name: name.to_owned(),
        });
    }
    Ok(found.to_owned())
}

/// Advances the engine's epoch every tick until the engine is dropped. Holding only a weak
/// handle lets the runtime be dropped (and the thread end) whenever its users are done.
fn spawn_epoch_ticker(engine: EngineWeak) {
    let spawned = thread::Builder::new()
        .name("tandem-epoch".into())
        .spawn(move || {
            while let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
                drop(engine);
                thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(e) = spawned {
        // Without a ticker no deadline can fire; say so loudly rather than fail to load.
        tracing::error!("cannot start the epoch thread, call deadlines are off: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_tell_core_modules_and_junk_from_components() {
        assert!(matches!(check_header(b"hello world"), Err(Error::NotWasm)));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(Error::CoreModule)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
