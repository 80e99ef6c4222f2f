//! The core's persistence: observations applied to the engine and stored before they are
//! acknowledged, all or nothing, and the knowledge base reloaded when another replica (or an
//! operator) changed it. Every write goes through one method, `Core::write`.

use std::sync::atomic::Ordering;

use tandem_host::Recommender;

use crate::engine::{self, CallError, EngineFailure, EngineState};
use crate::learning::{self, Lessons};
use crate::store::{self, AdapterState, StoreError};
use crate::{Core, ObserveError};

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
                        tracing::error!(%error, "could not undo a failed batch of observations");
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
                let engine = match state.recommender().snapshot() {
                    Ok(engine) => engine.to_vec(),
                    Err(error) => {
                        undo(state, &before, ledger);
                        return Err(engine::failed("save")(error));
                    }
                };
                let adapter = AdapterState {
                    ledger: state.ledger.clone(),
                    lessons: state.lessons.clone(),
                    key_fingerprint: Some(fingerprint),
                };
                Ok((answer, changed, Some((engine, adapter, before, ledger))))
            })
            .await?;
        let (answer, changed, write) = applied.inspect_err(|_| {
            self.metrics.engine_errors.inc();
        })?;
        if changed {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        let Some((engine, adapter, before, ledger)) = write else {
            return Ok(answer);
        };
        match self.write(&mut version, &engine, &adapter).await {
            Ok(()) => Ok(answer),
            Err(error) => {
                // Undo the batch.
                let conflict = matches!(error, StoreError::Conflict(_));
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
                Err(error.into())
            }
        }
    }

    /// Loads the stored knowledge base if it changed since it was last read or written.
    /// Returns whether it changed.
    pub async fn reload(&self) -> Result<bool, ObserveError> {
        let mut version = self.version.lock().await;
        self.reload_locked(&mut version, false).await
    }

    /// Loads the stored knowledge base if it changed since `version` (or whatever, `force`).
    async fn reload_locked(
        &self,
        version: &mut Option<String>,
        force: bool,
    ) -> Result<bool, ObserveError> {
        let Some(store) = &self.store else {
            return Ok(false);
        };
        let Some(stored) = store.load().await? else {
            return Ok(false);
        };
        if !force && version.as_deref() == Some(stored.version.as_str()) {
            return Ok(false);
        }
        stored
            .adapter
            .check_key(&store.name(), &self.keys.fingerprint())?;
        let size = store::stored_size(&stored.engine, &stored.adapter);
        self.metrics.stored(size);
        // Loading retrains the memory model when the knowledge base holds reported peaks:
        // done off the engine thread, which only swaps the instance in.
        let fresh = self.build_off_thread(stored.engine, |_| Ok(())).await?.1;
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
        let started = std::time::Instant::now();
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
        let ((answer, lessons, bytes), fresh) = self
            .build_off_thread(snapshot, move |fresh| {
                let mut lessons = lessons;
                let answer = apply(fresh, &mut lessons)?;
                let bytes = fresh.snapshot().map_err(engine::failed("save"))?.to_vec();
                Ok((answer, lessons, bytes))
            })
            .await
            .inspect_err(|_| {
                self.metrics.engine_errors.inc();
            })?;
        if self.store.is_some() {
            let adapter = AdapterState {
                ledger: ledger.clone(),
                lessons: lessons.clone(),
                key_fingerprint: Some(self.keys.fingerprint()),
            };
            // Not written: the retrained instance is dropped.
            if let Err(error) = self.write(&mut version, &bytes, &adapter).await {
                if matches!(error, StoreError::Conflict(_))
                    && let Err(reload) = self.reload_locked(&mut version, true).await
                {
                    tracing::error!(%reload, "cannot reload the knowledge base after a conflict");
                }
                return Err(error.into());
            }
        }
        let swapped = self
            .engine
            .call("adopt", self.limits.observation_wait, move |state| {
                let adopted = state.adopt(fresh).or_else(|error| {
                    // The store holds the new state: the engine must too, even at the cost of
                    // loading it here.
                    tracing::warn!(%error, "could not swap the retrained instance in; loading it");
                    state.replace(&bytes)
                });
                state.ledger = ledger;
                state.lessons = lessons;
                adopted
            })
            .await;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        swapped??;
        Ok(answer)
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
                tracing::warn!(%error, bytes = size, "the knowledge base was not written");
                Err(error)
            }
        }
    }
}
