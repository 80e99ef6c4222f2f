//! The engine component behind a lock, shaped for the extender's calls.
//!
//! One [`tandem_host::Recommender`] serves every request: its calls take `&mut` (one wasm
//! store), so they are serialized by a mutex. Calls are short (milliseconds), so they run on
//! the request's own task rather than a blocking pool.
//!
//! Two things keep the calls small:
//!
//! - **GPUs in the same state are judged once.** Two GPUs of one model and memory with the
//!   same residents get the same fit and score, so each distinct state goes to the engine once
//!   and the answer is copied to the others. On a real cluster most GPUs of a node pool are
//!   empty, so a request over thousands of GPUs becomes a call over tens.
//! - **Job ids are unique per call**, as the contract requires, even when several pods run the
//!   same job (replicas, or a rerun queued while the last run still holds a GPU): a repeated
//!   id is sent under an alias with the job's profile attached, so the engine still knows its
//!   memory and behaviour.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use tandem_api::{
    Assignment, Fit, Gpu, GpuSpec, Job, KnowledgeSummary, Outcome, Prediction, Profile,
};
use tandem_host::{Recommender, Runtime};

/// An engine call failed.
#[derive(Debug, thiserror::Error)]
#[error("engine {call} failed: {source}")]
pub struct EngineFailure {
    /// The call.
    pub call: &'static str,
    /// What the host said.
    #[source]
    pub source: tandem_host::Error,
}

/// The shared engine.
pub struct Engine {
    runtime: Runtime,
    recommender: Mutex<Recommender>,
    /// Profiles observed per keyed id, kept beside the engine so a job sent under an alias
    /// (see the module docs) still carries its profile.
    profiles: Mutex<HashMap<String, Profile>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Wraps a recommender made by `runtime`, with the profiles the adapter kept for it.
    pub fn new(
        runtime: Runtime,
        recommender: Recommender,
        profiles: HashMap<String, Profile>,
    ) -> Self {
        Self {
            runtime,
            recommender: Mutex::new(recommender),
            profiles: Mutex::new(profiles),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recommender> {
        // A panic while holding the lock cannot leave the recommender half-changed (the host
        // rebuilds it from its snapshot on any failure), so a poisoned lock is still usable.
        self.recommender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn profiles(&self) -> std::sync::MutexGuard<'_, HashMap<String, Profile>> {
        self.profiles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Judges `job` on each of `gpus` (in order).
    pub fn filter(&self, job: &Job, gpus: &[&Gpu]) -> Result<Vec<Fit>, EngineFailure> {
        let (distinct, index) = self.distinct(job, gpus);
        let fits = self
            .lock()
            .filter(job, &distinct)
            .map_err(failed("filter"))?;
        Ok(gpus
            .iter()
            .zip(&index)
            .map(|(gpu, &i)| Fit {
                gpu: gpu.id.clone(),
                fits: fits[i].fits,
                reason: fits[i].reason.clone(),
            })
            .collect())
    }

    /// Scores `job` on each of `gpus` (in order), 0..=100.
    pub fn score(&self, job: &Job, gpus: &[&Gpu]) -> Result<Vec<u8>, EngineFailure> {
        let (distinct, index) = self.distinct(job, gpus);
        let scores = self.lock().score(job, &distinct).map_err(failed("score"))?;
        Ok(index.iter().map(|&i| scores[i].score).collect())
    }

    /// The distinct GPU states among `gpus`, with unique job ids, and for each GPU the index of
    /// its state.
    fn distinct(&self, job: &Job, gpus: &[&Gpu]) -> (Vec<Gpu>, Vec<usize>) {
        let profiles = self.profiles();
        let mut states: HashMap<(&str, u32, Vec<&str>), usize> = HashMap::new();
        let mut distinct: Vec<Gpu> = Vec::new();
        let mut index = Vec::with_capacity(gpus.len());
        let mut used: HashSet<String> = HashSet::from([job.id.clone()]);
        for gpu in gpus {
            let mut residents: Vec<&str> = gpu.residents.iter().map(|r| r.id.as_str()).collect();
            residents.sort_unstable();
            let key = (gpu.spec.model.as_str(), gpu.spec.memory_mib, residents);
            let next = distinct.len();
            let slot = *states.entry(key).or_insert(next);
            if slot == next {
                let mut copy = (*gpu).clone();
                for resident in &mut copy.residents {
                    if !used.insert(resident.id.clone()) {
                        let mut n = 1;
                        let alias = loop {
                            let alias = format!("{}~{n}", resident.id);
                            if used.insert(alias.clone()) {
                                break alias;
                            }
                            n += 1;
                        };
                        resident.profile = resident
                            .profile
                            .take()
                            .or_else(|| profiles.get(&resident.id).cloned());
                        resident.id = alias;
                    }
                }
                distinct.push(copy);
            }
            index.push(slot);
        }
        (distinct, index)
    }

    /// Files a profile under a keyed id.
    pub fn observe_profile(
        &self,
        job: &str,
        profile: &Profile,
    ) -> Result<Assignment, EngineFailure> {
        let assignment = self
            .lock()
            .observe_profile(job, profile)
            .map_err(failed("observe-profile"))?;
        self.profiles().insert(job.to_owned(), profile.clone());
        Ok(assignment)
    }

    /// Learns from one finished co-location.
    pub fn observe_outcome(&self, outcome: &Outcome) -> Result<(), EngineFailure> {
        self.lock()
            .observe_outcome(outcome)
            .map_err(failed("observe-outcome"))
    }

    /// Predicts what happens to `group` on a GPU of `spec`.
    pub fn predict(&self, group: &[Job], spec: &GpuSpec) -> Result<Prediction, EngineFailure> {
        self.lock().predict(group, spec).map_err(failed("predict"))
    }

    /// What the knowledge base holds.
    pub fn describe(&self) -> Result<KnowledgeSummary, EngineFailure> {
        self.lock().describe().map_err(failed("describe"))
    }

    /// The engine's state and the adapter's profiles, for the knowledge store.
    pub fn snapshot(&self) -> (Vec<u8>, HashMap<String, Profile>) {
        let state = self.lock().snapshot().to_vec();
        (state, self.profiles().clone())
    }

    /// Replaces the engine's state with a stored one (another replica wrote it).
    pub fn replace(
        &self,
        state: &[u8],
        profiles: HashMap<String, Profile>,
    ) -> Result<(), EngineFailure> {
        let fresh = self.runtime.load(state).map_err(failed("load"))?;
        *self.lock() = fresh;
        *self.profiles() = profiles;
        Ok(())
    }

    /// How many times the host rebuilt the instance after a trap.
    pub fn rebuilds(&self) -> u64 {
        self.lock().rebuilds()
    }
}

/// The error of engine call `call`, for `map_err`.
fn failed(call: &'static str) -> impl FnOnce(tandem_host::Error) -> EngineFailure {
    move |source| EngineFailure { call, source }
}
