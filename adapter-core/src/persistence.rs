//! The core's persistence: observations applied to the engine and stored before they are
//! acknowledged, all or nothing, and the knowledge base reloaded when another replica (or an
//! operator) changed it. Every write goes through one method, `Core::write`, after the
//! knowledge base to be written was loaded back into a fresh engine (`Core::load_back`): what
//! the engine cannot load is never stored. Every read goes through [`load_usable`], which
//! loads the last good knowledge base when the newest cannot be used.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tandem_host::Recommender;

use crate::engine::{self, CallError, EngineFailure, EngineState};
use crate::learning::{self, Lessons};
use crate::store::{self, AdapterState, KnowledgeStore, StoreError, Stored};
use crate::{Core, ObserveError};

/// Jobs forgotten so that a knowledge base fits its store ([`fit`]).
#[derive(Debug, Clone, Copy)]
struct Evicted {
    /// How many.
    jobs: usize,
    /// Bytes the knowledge base takes after.
    bytes: usize,
    /// The store's capacity.
    limit: usize,
}

/// Most rounds of forgetting [`fit`] makes before it gives up (the write then reports the
/// knowledge base too large).
const FIT_ROUNDS: usize = 8;

/// `engine` (`recommender`'s snapshot) as it fits a store of `capacity` beside `adapter`:
/// unchanged when it fits; else the jobs observed least recently forgotten
/// (`forget-stalest`), as many as the excess takes at the snapshot's bytes per job, until it
/// takes at most 99% of the capacity (so that the next observations fit without forgetting
/// again). Returns the snapshot to store, and what was forgotten.
fn fit(
    recommender: &mut Recommender,
    mut engine: Vec<u8>,
    adapter: &AdapterState,
    capacity: Option<usize>,
) -> Result<(Vec<u8>, Option<Evicted>), EngineFailure> {
    let Some(limit) = capacity else {
        return Ok((engine, None));
    };
    let mut size = store::stored_size(&engine, adapter);
    if size <= limit {
        return Ok((engine, None));
    }
    let target = limit / 100 * 99;
    let mut jobs = 0;
    for _ in 0..FIT_ROUNDS {
        if size <= target {
            break;
        }
        let known = recommender
            .describe()
            .map_err(engine::failed("describe"))?
            .profiles
            .max(1) as usize;
        let per_job = (engine.len() / known).max(1);
        let count = (size - target).div_ceil(per_job).clamp(1, known);
        let forgotten = recommender
            .forget_stalest(u32::try_from(count).unwrap_or(u32::MAX))
            .map_err(engine::failed("forget-stalest"))?;
        if forgotten.is_empty() {
            break;
        }
        jobs += forgotten.len();
        engine = recommender
            .snapshot()
            .map_err(engine::failed("save"))?
            .to_vec();
        size = store::stored_size(&engine, adapter);
    }
    Ok((
        engine,
        Some(Evicted {
            jobs,
            bytes: size,
            limit,
        }),
    ))
}

/// What [`load_usable`] found in a store.
#[expect(
    clippy::large_enum_variant,
    reason = "one per read of the store, matched at once: boxing would only add an allocation"
)]
pub(crate) enum Found<T> {
    /// Nothing is stored yet.
    Nothing,
    /// What is stored is the version the caller holds: nothing was loaded.
    Unchanged,
    /// A knowledge base, loaded.
    Loaded {
        /// What was read (after a fall-back, the last good knowledge base, at the newest's
        /// version).
        stored: Stored,
        /// What loading it made.
        loaded: T,
        /// Why the newest could not be used, when the last good one was loaded instead.
        fell_back: Option<String>,
    },
}

/// Reads `store` and loads what it holds with `load`: the newest knowledge base, or, when it
/// cannot be used (its backend finds it malformed, it was keyed with another secret than
/// `fingerprint`'s, or `load` fails in the engine), the last good one
/// ([`KnowledgeStore::load_last_good`]), reported by the store
/// ([`KnowledgeStore::report_fallback`]). Nothing is loaded when the version read is
/// `current`. A backend that cannot be reached, or an engine that does not answer, is an error
/// without a fall-back; so is a newest that cannot be used when no last good one loads (its
/// error is returned).
pub(crate) async fn load_usable<T, Fut>(
    store: &dyn KnowledgeStore,
    fingerprint: Option<&str>,
    current: Option<&str>,
    mut load: impl FnMut(Vec<u8>) -> Fut,
) -> Result<Found<T>, ObserveError>
where
    Fut: Future<Output = Result<T, ObserveError>>,
{
    let name = store.name();
    let keyed = |stored: &Stored| match fingerprint {
        Some(fingerprint) => stored.adapter.check_key(&name, fingerprint),
        None => Ok(()),
    };
    let unusable: ObserveError = match store.load().await {
        Ok(None) => return Ok(Found::Nothing),
        Ok(Some(stored)) => {
            if current == Some(stored.version.as_str()) {
                return Ok(Found::Unchanged);
            }
            match keyed(&stored) {
                Err(mismatch) => mismatch.into(),
                Ok(()) => match load(stored.engine.clone()).await {
                    Ok(loaded) => {
                        return Ok(Found::Loaded {
                            stored,
                            loaded,
                            fell_back: None,
                        });
                    }
                    Err(refused @ ObserveError::Engine(_)) => refused,
                    Err(other) => return Err(other),
                },
            }
        }
        Err(malformed @ StoreError::Malformed { .. }) => malformed.into(),
        Err(other) => return Err(other.into()),
    };
    let good = match store.load_last_good().await {
        Ok(Some(good)) => good,
        Ok(None) => return Err(unusable),
        Err(error) => {
            tracing::error!(store = %name, error = %tandem_telemetry::report(&error), newest = %tandem_telemetry::report(&unusable), "neither the newest knowledge base nor the last good one can be read");
            return Err(unusable);
        }
    };
    if current == Some(good.version.as_str()) {
        return Ok(Found::Unchanged);
    }
    if let Err(mismatch) = keyed(&good) {
        tracing::error!(store = %name, %mismatch, newest = %tandem_telemetry::report(&unusable), "the last good knowledge base cannot be used either");
        return Err(unusable);
    }
    match load(good.engine.clone()).await {
        Ok(loaded) => {
            let why = tandem_telemetry::report(&unusable);
            store.report_fallback(&why).await;
            Ok(Found::Loaded {
                stored: good,
                loaded,
                fell_back: Some(why),
            })
        }
        Err(error) => {
            tracing::error!(store = %name, error = %tandem_telemetry::report(&error), newest = %tandem_telemetry::report(&unusable), "the last good knowledge base cannot be loaded either");
            Err(unusable)
        }
    }
}

impl Core {
    /// Applies observations on the engine thread and stores the result before returning: what
    /// this returns `Ok` for is acknowledged and survives a crash. Only the leader observes.
    ///
    /// All or nothing: when `apply` fails part-way, or the write of its result does, the engine
    /// and the ledger are put back to what is stored, so a refused batch leaves no trace and a
    /// retry counts once.
    pub async fn observe<T: Send + 'static>(
        &self,
        apply: impl FnOnce(&mut EngineState) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, ObserveError> {
        self.observe_changes(move |state| apply(state).map(|answer| (answer, true)))
            .await
    }

    /// [`Core::observe`] for work that may change nothing: `apply` answers whether it changed
    /// the engine or the ledger, and nothing is written when it did not.
    pub async fn observe_changes<T: Send + 'static>(
        &self,
        apply: impl FnOnce(&mut EngineState) -> Result<(T, bool), EngineFailure> + Send + 'static,
    ) -> Result<T, ObserveError> {
        if !self.leadership.is_leader() {
            return Err(ObserveError::NotLeader(self.leadership.holder()));
        }
        let mut version = self.version.lock().await;
        let store = self.store.is_some();
        let capacity = self.store.as_ref().and_then(|s| s.capacity());
        let fingerprint = self.keys.fingerprint();
        let applied = self
            .engine
            .call("observe", self.limits.observation_wait, move |state| {
                // What the store holds: the state to return to if anything below fails.
                let before = state
                    .recommender()
                    .snapshot()
                    .map_err(engine::failed("save"))?
                    .to_vec();
                let ledger = (state.ledger.clone(), state.lessons.clone());
                let undo = |state: &mut EngineState, before: &[u8], ledger| {
                    if let Err(error) = state.restore(before, ledger) {
                        tracing::error!(error = %tandem_telemetry::report(&error), "could not undo a failed batch of observations");
                    }
                };
                let (answer, changed) = match apply(state) {
                    Ok(done) => done,
                    Err(error) => {
                        undo(state, &before, ledger);
                        return Err(error);
                    }
                };
                if !changed || !store {
                    return Ok((answer, changed, None));
                }
                let adapter = AdapterState {
                    ledger: state.ledger.clone(),
                    lessons: state.lessons.clone(),
                    key_fingerprint: Some(fingerprint),
                };
                // Past the store's capacity the stalest jobs make room, in this same batch:
                // undone with it if its write fails.
                let fitted = state
                    .recommender()
                    .snapshot()
                    .map_err(engine::failed("save"))
                    .map(<[u8]>::to_vec)
                    .and_then(|engine| fit(state.recommender(), engine, &adapter, capacity));
                let (engine, evicted) = match fitted {
                    Ok(fitted) => fitted,
                    Err(error) => {
                        undo(state, &before, ledger);
                        return Err(error);
                    }
                };
                Ok((
                    answer,
                    changed,
                    Some((engine, adapter, evicted, before, ledger)),
                ))
            })
            .await?;
        let (answer, changed, write) = applied.inspect_err(|_| {
            self.metrics.engine_errors.inc();
        })?;
        if changed {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        let Some((engine, adapter, evicted, before, ledger)) = write else {
            return Ok(answer);
        };
        let stored = match self.load_back(engine).await {
            Ok(engine) => self
                .write(&mut version, &engine, &adapter)
                .await
                .map_err(ObserveError::from),
            Err(error) => Err(error),
        };
        match stored {
            Ok(()) => {
                self.evicted(evicted);
                Ok(answer)
            }
            Err(error) => {
                // Undo the batch.
                let conflict = matches!(error, ObserveError::Store(StoreError::Conflict(_)));
                let undone = !conflict
                    && self
                        .engine
                        .call("undo", self.limits.observation_wait, move |state| {
                            state.restore(&before, ledger)
                        })
                        .await
                        .is_ok_and(|undone| undone.is_ok());
                self.epoch.fetch_add(1, Ordering::AcqRel);
                if !undone {
                    // Someone else wrote, or the undo failed: take what is stored, so the
                    // engine matches the store again.
                    if let Err(reload) = self.reload_locked(&mut version, true).await {
                        tracing::error!(%reload, "cannot reload the knowledge base after a failed write");
                    }
                }
                Err(error)
            }
        }
    }

    /// Loads `engine`, a snapshot about to be stored, into a fresh instance on a blocking
    /// thread (under [`crate::TRAINING_DEADLINE`]; decisions go on meanwhile), and gives it
    /// back if the engine loads it: a knowledge base the engine cannot load back is never
    /// stored ([`ObserveError::Unloadable`]), so no write can keep the next start, reload or
    /// fail-over from loading what is stored.
    async fn load_back(&self, engine: Vec<u8>) -> Result<Vec<u8>, ObserveError> {
        let runtime = self.trainer.clone();
        let started = Instant::now();
        let (engine, loaded) = tokio::task::spawn_blocking(move || {
            let loaded = runtime.load(&engine).map(drop);
            (engine, loaded)
        })
        .await
        .map_err(|_| ObserveError::Call(CallError::Stopped))?;
        self.metrics
            .loadback_seconds
            .observe(started.elapsed().as_secs_f64());
        match loaded {
            Ok(()) => Ok(engine),
            Err(error) => {
                self.metrics.loadback_refusals.inc();
                tracing::error!(error = %tandem_telemetry::report(&error), bytes = engine.len(), "the knowledge base these observations make does not load back; not stored");
                Err(ObserveError::Unloadable(tandem_telemetry::report(&error)))
            }
        }
    }

    /// Loads the stored knowledge base if it changed since it was last read or written.
    /// Returns whether it changed.
    pub async fn reload(&self) -> Result<bool, ObserveError> {
        let mut version = self.version.lock().await;
        self.reload_locked(&mut version, false).await
    }

    /// Loads the stored knowledge base if it changed since `version` (or whatever, `force`):
    /// the newest, or the last good one when the newest cannot be used ([`load_usable`]).
    async fn reload_locked(
        &self,
        version: &mut Option<String>,
        force: bool,
    ) -> Result<bool, ObserveError> {
        let Some(store) = &self.store else {
            return Ok(false);
        };
        let fingerprint = self.keys.fingerprint();
        let current = if force { None } else { version.as_deref() };
        // Loading retrains the memory model when the knowledge base holds reported peaks:
        // done off the engine thread, which only swaps the instance in.
        let found = load_usable(
            store.as_ref(),
            Some(&fingerprint),
            current,
            |engine| async move { Ok(self.build_off_thread(engine, |_| Ok(())).await?.1) },
        )
        .await?;
        let Found::Loaded {
            stored,
            loaded: fresh,
            fell_back,
        } = found
        else {
            return Ok(false);
        };
        if fell_back.is_some() {
            self.metrics.knowledge_fallbacks.inc();
        }
        let size = store::stored_size(&stored.engine, &stored.adapter);
        self.metrics.stored(size);
        let (ledger, lessons) = (stored.adapter.ledger, stored.adapter.lessons);
        self.engine
            .call("reload", self.limits.observation_wait, move |state| {
                state.adopt(fresh)?;
                state.ledger = ledger;
                state.lessons = lessons;
                Ok::<_, EngineFailure>(())
            })
            .await??;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *version = Some(stored.version);
        Ok(true)
    }

    /// Builds an instance from `snapshot` on a blocking thread under [`crate::TRAINING_DEADLINE`],
    /// applies `apply` to it and warms its models up ([`learning::warm_up`]).
    async fn build_off_thread<T: Send + 'static>(
        &self,
        snapshot: Vec<u8>,
        apply: impl FnOnce(&mut Recommender) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<(T, Recommender), ObserveError> {
        let runtime = self.trainer.clone();
        let started = Instant::now();
        let built = tokio::task::spawn_blocking(move || {
            let mut fresh = runtime.load(&snapshot).map_err(engine::failed("load"))?;
            let answer = apply(&mut fresh)?;
            learning::warm_up(&mut fresh).map_err(engine::failed("warm-up"))?;
            Ok::<_, EngineFailure>((answer, fresh))
        })
        .await
        .map_err(|_| ObserveError::Call(CallError::Stopped))??;
        self.metrics
            .retrain_seconds
            .observe(started.elapsed().as_secs_f64());
        Ok(built)
    }

    /// Applies observations that retrain the engine's models (peaks: `observe-memory`) without
    /// holding up decisions: a fresh instance is built from what is stored on a thread of its
    /// own ([`crate::TRAINING_DEADLINE`]), `apply` runs there (with the core's state beside the
    /// engine's, to record what it learned), the result is stored, and only then does the
    /// engine thread swap the instance in for the one that kept deciding meanwhile. Writes are
    /// serialized with every other observation, so nothing is learned in between that the
    /// fresh instance would miss. Leader only; acknowledged when stored, as [`Core::observe`].
    /// All or nothing: on any failure the deciding instance and the store are as they were.
    pub async fn observe_off_thread<T: Send + 'static>(
        &self,
        apply: impl FnOnce(&mut Recommender, &mut Lessons) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, ObserveError> {
        if !self.leadership.is_leader() {
            return Err(ObserveError::NotLeader(self.leadership.holder()));
        }
        let mut version = self.version.lock().await;
        let (snapshot, ledger, lessons) = self
            .engine
            .call("fork", self.limits.observation_wait, |state| {
                let snapshot = state
                    .recommender()
                    .snapshot()
                    .map_err(engine::failed("save"))?
                    .to_vec();
                Ok::<_, EngineFailure>((snapshot, state.ledger.clone(), state.lessons.clone()))
            })
            .await??;
        let capacity = self.store.as_ref().and_then(|s| s.capacity());
        let fingerprint = self.keys.fingerprint();
        let state_ledger = ledger.clone();
        let ((answer, lessons, bytes, evicted), fresh) = self
            .build_off_thread(snapshot, move |fresh| {
                let mut lessons = lessons;
                let answer = apply(fresh, &mut lessons)?;
                let bytes = fresh.snapshot().map_err(engine::failed("save"))?.to_vec();
                let adapter = AdapterState {
                    ledger: state_ledger,
                    lessons: lessons.clone(),
                    key_fingerprint: Some(fingerprint),
                };
                let (bytes, evicted) = fit(fresh, bytes, &adapter, capacity)?;
                Ok((answer, lessons, bytes, evicted))
            })
            .await
            .inspect_err(|_| {
                self.metrics.engine_errors.inc();
            })?;
        let bytes = if self.store.is_some() {
            let adapter = AdapterState {
                ledger: ledger.clone(),
                lessons: lessons.clone(),
                key_fingerprint: Some(self.keys.fingerprint()),
            };
            // Not written: the retrained instance is dropped.
            let bytes = self.load_back(bytes).await?;
            if let Err(error) = self.write(&mut version, &bytes, &adapter).await {
                if matches!(error, StoreError::Conflict(_))
                    && let Err(reload) = self.reload_locked(&mut version, true).await
                {
                    tracing::error!(%reload, "cannot reload the knowledge base after a conflict");
                }
                return Err(error.into());
            }
            bytes
        } else {
            bytes
        };
        let swapped = self
            .engine
            .call("adopt", self.limits.observation_wait, move |state| {
                let adopted = state.adopt(fresh).or_else(|error| {
                    // The store holds the new state: the engine must too, even at the cost of
                    // loading it here.
                    tracing::warn!(error = %tandem_telemetry::report(&error), "could not swap the retrained instance in; loading it");
                    state.replace(&bytes)
                });
                state.ledger = ledger;
                state.lessons = lessons;
                adopted
            })
            .await;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        swapped??;
        self.evicted(evicted);
        Ok(answer)
    }

    /// Counts and logs the jobs forgotten so that a stored knowledge base fits its store.
    fn evicted(&self, evicted: Option<Evicted>) {
        let Some(evicted) = evicted else {
            return;
        };
        self.metrics.knowledge_evictions.inc_by(evicted.jobs as u64);
        tracing::warn!(
            jobs = evicted.jobs,
            bytes = evicted.bytes,
            limit = evicted.limit,
            "the knowledge base reached its store's capacity: forgot the jobs observed least recently"
        );
    }

    /// Writes the engine's snapshot `engine` and the core's state `adapter` over the stored
    /// `version`, which becomes the version written; counted in the metrics either way. A
    /// failure undoes nothing: the caller puts the engine back to what is stored. Without a
    /// store there is nothing to write.
    async fn write(
        &self,
        version: &mut Option<String>,
        engine: &[u8],
        adapter: &AdapterState,
    ) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let size = store::stored_size(engine, adapter);
        match store.save(version.as_deref(), engine, adapter).await {
            Ok(written) => {
                *version = Some(written);
                self.metrics.store_writes.inc();
                self.metrics.stored(size);
                Ok(())
            }
            Err(error) => {
                self.metrics.store_errors.inc();
                tracing::warn!(error = %tandem_telemetry::report(&error), bytes = size, "the knowledge base was not written");
                Err(error)
            }
        }
    }
}
