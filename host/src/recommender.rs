//! One engine instance behind a typed API, with trap recovery.

use std::sync::Arc;

use tandem_api::{
    Assignment, Choice, ClusterChange, ClusterSummary, Estimate, Fit, Gpu, GpuScore, GpuSpec,
    GpuTable, Job, KnowledgeSummary, ModelSummary, Outcome, Policy, Prediction, Profile,
    Recommendation,
};
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use crate::bindings::Plugin;
use crate::bindings::tandem::engine::types as wit;
use crate::limits::StoreState;
use crate::sandbox::{Shared, classify, to_wit};
use crate::{Error, Result};

/// A recommender living in its own sandboxed instance (the WIT `recommender` resource).
///
/// Every call runs under the runtime's deadline and memory cap. The host keeps a snapshot of
/// the engine's state and a journal of the changes acknowledged since (observations, policy);
/// when a call traps, the instance is thrown away and rebuilt from the snapshot and the journal
/// before the error is returned, so no acknowledged observation is ever lost and the next call
/// is served normally. The journal is folded into a fresh snapshot every [`JOURNAL_LIMIT`]
/// changes and whenever [`snapshot`](Self::snapshot) is asked for: saving the whole knowledge
/// base after every observation cost more than the observations themselves.
///
/// The cluster view (WIT 0.4.0 on) is not in the snapshot: the host keeps a mirror of it, applied
/// with the same rules as the engine's ([`GpuTable`]) after each acknowledged
/// `update-cluster`, and describes it again to a rebuilt instance.
pub struct Recommender {
    shared: Arc<Shared>,
    store: Store<StoreState>,
    plugin: Plugin,
    handle: ResourceAny,
    /// The engine's state as of the last save.
    snapshot: Vec<u8>,
    /// Changes acknowledged since `snapshot`, in order.
    journal: Vec<Change>,
    /// The snapshot before `snapshot` and the changes that led from it to `snapshot`: a
    /// rebuild falls back to them when `snapshot` itself cannot be loaded, so one bad save
    /// does not leave the recommender broken for good.
    previous: Option<(Vec<u8>, Vec<Change>)>,
    /// The cluster view after the last acknowledged `update-cluster`.
    view: GpuTable,
    /// Set when a rebuild failed: the next call tries again before anything else.
    broken: bool,
    rebuilds: u64,
}

impl std::fmt::Debug for Recommender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recommender")
            .field("snapshot_bytes", &self.snapshot.len())
            .field("journal", &self.journal.len())
            .field("rebuilds", &self.rebuilds)
            .finish_non_exhaustive()
    }
}

/// What an engine call returns before classification: a trap, or the engine's own answer.
type Raw<T> = wasmtime::Result<Result<T, wit::Error>>;

/// Changes to the engine's state the journal holds before they are folded into a snapshot. A
/// rebuild replays at most this many; a long run saves once per this many observations.
pub const JOURNAL_LIMIT: usize = 64;

/// One acknowledged change to the engine's state, in the contract's types, to replay.
#[derive(Clone)]
enum Change {
    Policy(wit::Policy),
    Profile(String, wit::Profile),
    Outcome(wit::Outcome),
    Memory {
        job: String,
        declared: wit::ModelSummary,
        gpu: wit::GpuSpec,
        peak_mem_mib: u32,
    },
    Speed {
        job: String,
        gpu_model: String,
        work_per_s: f64,
    },
    /// `forget-stalest`: which jobs it forgets is a function of the state, so replaying the
    /// count forgets the same ones.
    Forget(u32),
}

impl Change {
    /// The WIT call that makes this change.
    fn call(&self) -> &'static str {
        match self {
            Self::Policy(_) => "set-policy",
            Self::Profile(..) => "observe-profile",
            Self::Outcome(_) => "observe-outcome",
            Self::Memory { .. } => "observe-memory",
            Self::Speed { .. } => "observe-speed",
            Self::Forget(_) => "forget-stalest",
        }
    }

    /// Makes the change on `handle`; a profile's assignment is not needed again.
    fn apply(
        &self,
        store: &mut Store<StoreState>,
        plugin: &Plugin,
        handle: ResourceAny,
    ) -> Raw<()> {
        let engine = plugin.tandem_engine_engine().recommender();
        match self {
            Self::Policy(policy) => engine.call_set_policy(store, handle, policy),
            Self::Profile(job, profile) => engine
                .call_observe_profile(store, handle, job, profile)
                .map(|answer| answer.map(drop)),
            Self::Outcome(outcome) => engine.call_observe_outcome(store, handle, outcome),
            Self::Memory {
                job,
                declared,
                gpu,
                peak_mem_mib,
            } => engine.call_observe_memory(store, handle, job, *declared, gpu, *peak_mem_mib),
            Self::Speed {
                job,
                gpu_model,
                work_per_s,
            } => engine.call_observe_speed(store, handle, job, gpu_model, *work_per_s),
            Self::Forget(count) => engine
                .call_forget_stalest(store, handle, *count)
                .map(|_| Ok(())),
        }
    }
}

impl Recommender {
    pub(crate) fn create(shared: Arc<Shared>, policy: &Policy, seed: u64) -> Result<Self> {
        let policy = wit::Policy::from(policy.clone());
        Self::start(shared, "create", |store, plugin| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_create(store, &policy, seed)
        })
    }

    pub(crate) fn bootstrap(shared: Arc<Shared>, policy: &Policy, seed: u64) -> Result<Self> {
        let policy = wit::Policy::from(policy.clone());
        Self::start(shared, "bootstrap", |store, plugin| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_bootstrap(store, &policy, seed)
        })
    }

    pub(crate) fn load(shared: Arc<Shared>, state: &[u8]) -> Result<Self> {
        Self::start(shared, "load", |store, plugin| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_load(store, state)
        })
    }

    /// Instantiates and obtains the resource with `make`, then takes the first snapshot.
    fn start(
        shared: Arc<Shared>,
        call: &'static str,
        make: impl FnOnce(&mut Store<StoreState>, &Plugin) -> Raw<ResourceAny>,
    ) -> Result<Self> {
        let (mut store, plugin) = shared.instantiate()?;
        let handle = match make(&mut store, &plugin) {
            Ok(Ok(handle)) => handle,
            Ok(Err(e)) => return Err(Error::Engine(e.into())),
            Err(trap) => return Err(classify(call, trap, &shared, store.data())),
        };
        let mut recommender = Self {
            shared,
            store,
            plugin,
            handle,
            snapshot: Vec::new(),
            journal: Vec::new(),
            previous: None,
            view: GpuTable::default(),
            broken: false,
            rebuilds: 0,
        };
        recommender.snapshot = recommender.save()?;
        Ok(recommender)
    }

    /// Replaces the policy; the knowledge base stays.
    pub fn set_policy(&mut self, policy: &Policy) -> Result<()> {
        self.change(Change::Policy(wit::Policy::from(policy.clone())))
    }

    /// Records the profile of `job` and files it in the knowledge base.
    pub fn observe_profile(&mut self, job: &str, profile: &Profile) -> Result<Assignment> {
        let profile = wit::Profile::from(profile.clone());
        let assignment = self.call("observe-profile", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_observe_profile(store, handle, job, &profile)
        })?;
        self.acknowledge(Change::Profile(job.to_owned(), profile));
        Ok(assignment.into())
    }

    /// Learns interference from a finished co-location. On error nothing is learned.
    pub fn observe_outcome(&mut self, outcome: &Outcome) -> Result<()> {
        self.change(Change::Outcome(wit::Outcome::from(outcome.clone())))
    }

    /// Learns a measured peak of a declared job on a GPU of kind `gpu`; the engine's memory
    /// model retrains on it. On error nothing is learned.
    pub fn observe_memory(
        &mut self,
        job: &str,
        declared: &ModelSummary,
        gpu: &GpuSpec,
        peak_mem_mib: u32,
    ) -> Result<()> {
        self.change(Change::Memory {
            job: job.to_owned(),
            declared: wit::ModelSummary::from(declared.clone()),
            gpu: wit::GpuSpec::from(gpu.clone()),
            peak_mem_mib,
        })
    }

    /// Learns that `job`'s workload does `work_per_s` units of work per second alone on a GPU
    /// of model `gpu_model`.
    pub fn observe_speed(&mut self, job: &str, gpu_model: &str, work_per_s: f64) -> Result<()> {
        self.change(Change::Speed {
            job: job.to_owned(),
            gpu_model: gpu_model.to_owned(),
            work_per_s,
        })
    }

    /// Forgets the `count` jobs the engine observed least recently (fewer when it knows
    /// fewer), with what is only about them (their profiles, speeds, and the measurements of
    /// each pair they were in), and returns their ids, least recently observed first. An
    /// observation that names a job (`observe_profile`, `observe_outcome`, `observe_speed`)
    /// makes it the most recent; ties go to the smaller id. What it forgets is a function of
    /// the engine's state and `count`, so a host whose store is full can make room and replay
    /// the call after a rebuild.
    pub fn forget_stalest(&mut self, count: u32) -> Result<Vec<String>> {
        let forgotten = self.call("forget-stalest", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_forget_stalest(store, handle, count)
                .map(Ok)
        })?;
        self.acknowledge(Change::Forget(count));
        Ok(forgotten)
    }

    /// What `job` would need and do alone on each GPU model of `gpus`.
    pub fn estimate(&mut self, job: &Job, gpus: &[GpuSpec]) -> Result<Vec<Estimate>> {
        let job = wit::Job::from(job.clone());
        let gpus = to_wit(gpus);
        let estimates = self.call("estimate", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_estimate(store, handle, &job, &gpus)
        })?;
        Ok(estimates.into_iter().map(Into::into).collect())
    }

    /// Groups queued jobs and places each group on one GPU.
    pub fn recommend(&mut self, queue: &[Job], gpus: &[Gpu]) -> Result<Recommendation> {
        let queue = to_wit(queue);
        let gpus = to_wit(gpus);
        let answer = self.call("recommend", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_recommend(store, handle, &queue, &gpus)
        })?;
        Ok(answer.into())
    }

    /// Applies changes to the cluster view the engine keeps, in order, all or nothing.
    pub fn update_cluster(&mut self, changes: &[ClusterChange]) -> Result<ClusterSummary> {
        let wit_changes = to_wit(changes);
        let summary = self.call("update-cluster", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_update_cluster(store, handle, &wit_changes)
        })?;
        // The engine accepted them, so the same rules accept them here.
        self.view.apply(changes).map_err(Error::Engine)?;
        Ok(summary.into())
    }

    /// The cluster view as the engine holds it (the host's mirror of it).
    pub fn cluster(&self) -> &GpuTable {
        &self.view
    }

    /// Scores `job` on every GPU of the view, by handle, 0..=100 (0 where it does not fit).
    pub fn score_all(&mut self, job: &Job) -> Result<Vec<u8>> {
        let job = wit::Job::from(job.clone());
        self.call("score-all", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_score_all(store, handle, &job)
        })
    }

    /// Why `job` may not be placed on each of `gpus` (handles of the view); empty where it fits.
    pub fn explain(&mut self, job: &Job, gpus: &[u32]) -> Result<Vec<String>> {
        let job = wit::Job::from(job.clone());
        self.call("explain", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_explain(store, handle, &job, gpus)
        })
    }

    /// The GPU of `node` that `job` should run on (best score, lowest handle), or why none fits.
    pub fn choose_gpu(&mut self, job: &Job, node: &str) -> Result<Choice> {
        let job = wit::Job::from(job.clone());
        let choice = self.call("choose-gpu", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_choose_gpu(store, handle, &job, node)
        })?;
        Ok(choice.into())
    }

    /// Judges, for each GPU, whether `job` may be placed on it now.
    pub fn filter(&mut self, job: &Job, gpus: &[Gpu]) -> Result<Vec<Fit>> {
        let job = wit::Job::from(job.clone());
        let gpus = to_wit(gpus);
        let fits = self.call("filter", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_filter(store, handle, &job, &gpus)
        })?;
        Ok(fits.into_iter().map(Into::into).collect())
    }

    /// Scores each GPU for `job`, 0..=100.
    pub fn score(&mut self, job: &Job, gpus: &[Gpu]) -> Result<Vec<GpuScore>> {
        let job = wit::Job::from(job.clone());
        let gpus = to_wit(gpus);
        let scores = self.call("score", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_score(store, handle, &job, &gpus)
        })?;
        Ok(scores.into_iter().map(Into::into).collect())
    }

    /// Predicts what running `group` together on one GPU of kind `gpu` would do.
    pub fn predict(&mut self, group: &[Job], gpu: &GpuSpec) -> Result<Prediction> {
        let group = to_wit(group);
        let gpu = wit::GpuSpec::from(gpu.clone());
        let prediction = self.call("predict", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_predict(store, handle, &group, &gpu)
        })?;
        Ok(prediction.into())
    }

    /// What the knowledge base holds: clusters, measured interference, counts.
    pub fn describe(&mut self) -> Result<KnowledgeSummary> {
        let summary = self.call("describe", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_describe(store, handle)
                .map(Ok)
        })?;
        Ok(summary.into())
    }

    /// The engine's state as of the last acknowledged change, as `save` produced it; feed it
    /// to [`Runtime::load`](crate::Runtime::load) to resume. Saves first when changes were
    /// acknowledged since the last save.
    pub fn snapshot(&mut self) -> Result<&[u8]> {
        if !self.journal.is_empty() {
            self.refresh_snapshot()?;
        }
        Ok(&self.snapshot)
    }

    /// Runs this recommender's later calls under `shared`'s limits (what `Runtime::adopt`
    /// does): an error for shared state of another compiled component.
    pub(crate) fn share(&mut self, shared: &Arc<Shared>) -> Result<()> {
        if !wasmtime::Engine::same(&self.shared.engine, &shared.engine) {
            return Err(Error::Engine(tandem_api::EngineError::InvalidInput(
                "the runtime is not the one this recommender's component was compiled by".into(),
            )));
        }
        self.shared = Arc::clone(shared);
        Ok(())
    }

    /// How many times the instance was rebuilt after a fault.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// Makes `change` and journals it once the engine accepted it.
    fn change(&mut self, change: Change) -> Result<()> {
        self.call(change.call(), |store, plugin, handle| {
            change.apply(store, plugin, handle)
        })?;
        self.acknowledge(change);
        Ok(())
    }

    /// Journals an accepted change, folding the journal into a snapshot when it is full.
    ///
    /// A fold that fails does not fail the change: the engine holds it and the journal keeps
    /// it for a rebuild, so reporting an error would only make a caller apply it twice. The
    /// journal then grows past its limit until a save succeeds (the next change tries again).
    fn acknowledge(&mut self, change: Change) {
        self.journal.push(change);
        if self.journal.len() >= JOURNAL_LIMIT
            && let Err(error) = self.refresh_snapshot()
        {
            tracing::warn!(
                %error,
                journal = self.journal.len(),
                "could not fold the journal into a snapshot; keeping it and trying again at the next change"
            );
        }
    }

    /// Saves the engine's state and empties the journal it now contains, keeping the snapshot
    /// before as the fallback of a rebuild.
    fn refresh_snapshot(&mut self) -> Result<()> {
        let saved = self.save()?;
        let older = std::mem::replace(&mut self.snapshot, saved);
        let folded = std::mem::take(&mut self.journal);
        self.previous = Some((older, folded));
        Ok(())
    }

    /// The engine's state as `save` gives it.
    fn save(&mut self) -> Result<Vec<u8>> {
        self.call("save", |store, plugin, handle| {
            plugin
                .tandem_engine_engine()
                .recommender()
                .call_save(store, handle)
                .map(Ok)
        })
    }

    /// Runs one engine call under the limits; on a trap, rebuilds the instance from the last
    /// snapshot and returns the classified error.
    fn call<T>(
        &mut self,
        call: &'static str,
        invoke: impl FnOnce(&mut Store<StoreState>, &Plugin, ResourceAny) -> Raw<T>,
    ) -> Result<T> {
        if self.broken {
            self.rebuild(call)?;
        }
        self.store.data_mut().reset();
        self.store.set_epoch_deadline(self.shared.deadline_ticks());
        match invoke(&mut self.store, &self.plugin, self.handle) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(Error::Engine(e.into())),
            Err(trap) => {
                let error = classify(call, trap, &self.shared, self.store.data());
                tracing::warn!(call, %error, "engine call failed; rebuilding the instance from its last snapshot");
                self.broken = true;
                self.rebuild(call)?;
                Err(error)
            }
        }
    }

    /// Replaces the store and instance with fresh ones holding the last snapshot, the changes
    /// journaled since and the cluster view.
    fn rebuild(&mut self, call: &'static str) -> Result<()> {
        let restored = restore(&self.shared, &self.snapshot, &[&self.journal], &self.view)
            .or_else(|error| {
                // The last save may be what cannot be loaded: the one before it, with the
                // changes since, gives the same state.
                let Some((older, folded)) = &self.previous else {
                    return Err(error);
                };
                let restored =
                    restore(&self.shared, older, &[folded, &self.journal], &self.view)
                        .map_err(|_| error)?;
                tracing::warn!(
                    call,
                    "the last snapshot could not be loaded; rebuilt from the one before it and the changes since"
                );
                Ok(restored)
            });
        let (store, plugin, handle) = restored.map_err(|source| Error::Restore {
            call,
            source: Box::new(source),
        })?;
        self.store = store;
        self.plugin = plugin;
        self.handle = handle;
        self.broken = false;
        self.rebuilds += 1;
        Ok(())
    }
}

/// A fresh store and instance holding `snapshot`, the changes of `journals` in order, and
/// the cluster view.
fn restore(
    shared: &Shared,
    snapshot: &[u8],
    journals: &[&[Change]],
    view: &GpuTable,
) -> Result<(Store<StoreState>, Plugin, ResourceAny)> {
    let (mut store, plugin) = shared.instantiate()?;
    let engine = plugin.tandem_engine_engine().recommender();
    let handle = match engine.call_load(&mut store, snapshot) {
        Ok(Ok(handle)) => handle,
        Ok(Err(e)) => return Err(Error::Engine(e.into())),
        Err(trap) => return Err(classify("load", trap, shared, store.data())),
    };
    for change in journals.iter().copied().flatten() {
        store.data_mut().reset();
        store.set_epoch_deadline(shared.deadline_ticks());
        match change.apply(&mut store, &plugin, handle) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Engine(e.into())),
            Err(trap) => return Err(classify(change.call(), trap, shared, store.data())),
        }
    }
    if !view.is_empty() {
        let replay = to_wit(&view.replay());
        store.set_epoch_deadline(shared.deadline_ticks());
        match engine.call_update_cluster(&mut store, handle, &replay) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Error::Engine(e.into())),
            Err(trap) => return Err(classify("update-cluster", trap, shared, store.data())),
        }
    }
    Ok((store, plugin, handle))
}
