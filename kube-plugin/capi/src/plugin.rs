//! The framework plugin's state and decisions, in safe Rust: what the C functions of the crate
//! root call under their handle's lock.
//!
//! kube-scheduler runs one scheduling cycle at a time (PreFilter, Filter, Score, Reserve for
//! one pod), while its informers deliver node and pod events from other goroutines. Those
//! events are pushed to the Kubernetes front-end every adapter shares ([`App`], over a
//! [`tandem_kube_common::app::Pushed`] cluster), which keeps what the extender's watchers keep
//! and brings the engine's view up to date lazily, at the next decision after something that
//! matters changed. Every decision is the extender's ([`tandem_kube_common::decide`]): the same
//! OOM guard, sharing cap, reasons and scores, on the same core: its engine, knowledge base,
//! intake and metrics ([`crate::served`]). What is the plugin's own is what its C ABI needs:
//! the node table its verdicts follow, and the pod of the running cycle.
//!
//! What it does is counted in the adapters' metric families ([`Metrics`]), which the core
//! serves at `/metrics` on the intake's address: decisions and their latency per verb
//! ([`PREFILTER`], [`RESERVE`]), engine calls and their failures, refused declarations, the
//! view's size and rebuilds, and the knowledge base's size and writes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use tandem_adapter_core::metrics::{Answered, Metrics, Verb};
use tandem_adapter_core::{Core, EngineFailure, EngineState, Placement};
use tandem_kube_common::app::{App, Pushed, Source};
use tandem_kube_common::cluster::{ClusterView, GpuPod};
use tandem_kube_common::decide;
use tandem_kube_common::lean::LeanPod;
use tandem_kube_common::placement::Placements;

use crate::Error;
use crate::config::Config;
use crate::prepared::{Prepared, Reservation, Reserved};

/// The nodes' names, sorted: the table PreFilter's verdicts follow, in order (the Go side keeps
/// it by its generation), rebuilt when a node comes or goes, not per pod.
#[derive(Debug)]
struct NodeTable {
    table: Arc<[String]>,
    /// Bumped whenever `table` changes; the first table is generation 1, so a caller holding
    /// none says 0.
    generation: u64,
    /// Whether `table` is behind the nodes.
    stale: bool,
}

impl Default for NodeTable {
    fn default() -> Self {
        Self {
            table: Arc::from(Vec::new()),
            generation: 0,
            stale: true,
        }
    }
}

/// The plugin's verb PreFilter, as its metrics name it.
pub const PREFILTER: &str = "prefilter";
/// The plugin's verb Reserve, as its metrics name it.
pub const RESERVE: &str = "reserve";

/// The plugin's state: the front-end it decides with, and what its C ABI needs beside it.
#[derive(Debug)]
pub struct Plugin {
    /// The cluster pushed from kube-scheduler's informers, over the core.
    app: Arc<App>,
    /// The table PreFilter's verdicts follow, which the Go side keeps by generation.
    names: NodeTable,
    /// The pod of the running scheduling cycle, as PreFilter saw it: Reserve names the pod
    /// by UID only.
    cycle: Option<GpuPod>,
}

pub(crate) fn input<T: serde::de::DeserializeOwned>(
    what: &'static str,
    json: &[u8],
) -> Result<T, Error> {
    // The fast path first: tracking the path costs every object (pods are read twice a
    // cycle), and is only needed to name the field of an object that does not parse.
    serde_json::from_slice(json).or_else(|_| {
        let mut de = serde_json::Deserializer::from_slice(json);
        serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Input {
            what,
            why: e.to_string(),
        })
    })
}

/// The result label of a call that failed with `error`: `rejected` for what the scheduler
/// sent or asked, `error` for the engine.
fn failure_result(error: &Error) -> Answered {
    match error {
        Error::Input { .. } | Error::NotPrepared(_) => Answered::Rejected,
        _ => Answered::Error,
    }
}

impl Plugin {
    /// The plugin over `core`, configured by `config`, signing its placements as `placements`
    /// says and trusting only those it vouches for; learning from finished pods runs on
    /// `tasks`.
    pub fn new(
        config: &Config,
        core: Arc<Core>,
        tasks: &tokio::runtime::Handle,
        placements: Arc<Placements>,
    ) -> Self {
        let source = Source::Pushed(Pushed::new(Arc::clone(&core), tasks));
        // kube-scheduler binds, with its own timeout: the front-end's is unused.
        let app = App::new(core, config.resource.clone(), Duration::ZERO, source)
            .with_costs(config.costs())
            .with_placements(placements);
        let app = Arc::new(app);
        // The plugin never lets a pod through without Tandem (an engine failure is an error
        // status, and the scheduler tries the pod again): its fail-opens stay at zero, and are
        // exported so that a dashboard over every adapter finds them.
        for verb in [PREFILTER, RESERVE] {
            app.core
                .metrics
                .fail_opens
                .get_or_create(&Verb {
                    verb: verb.to_owned(),
                })
                .inc_by(0);
        }
        Self {
            app,
            names: NodeTable::default(),
            cycle: None,
        }
    }

    /// The front-end the plugin decides with.
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    fn metrics(&self) -> &Metrics {
        &self.app.core.metrics
    }

    /// Runs `work`, the engine's part of `call`, against `view` on the engine (where the
    /// intake's observations run too), counting its failure.
    fn on_engine<T: Send + 'static>(
        &self,
        call: &'static str,
        view: (Arc<ClusterView>, u64),
        work: impl FnOnce(&mut EngineState, &ClusterView) -> Result<T, EngineFailure> + Send + 'static,
    ) -> Result<T, Error> {
        let (view, epoch) = view;
        let result =
            (self.app.core).decide_blocking(call, self.app.synced_first(view, epoch, work));
        if result.is_err() {
            self.metrics().engine_errors.inc();
        }
        Ok(result?)
    }

    /// Counts an answer of `verb` begun at `started`: `ok`, or the failure's result label.
    fn decided<T>(&self, verb: &str, started: Instant, result: &Result<T, Error>) {
        let label = match result {
            Ok(_) => Answered::Ok,
            Err(error) => failure_result(error),
        };
        self.metrics()
            .record(verb, label, started.elapsed().as_secs_f64());
    }

    /// A node was added or changed (the Node object as JSON).
    pub fn set_node(&mut self, json: &[u8]) -> Result<(), Error> {
        let node: Node = input("Node", json)?;
        if self.app.push_node(node) {
            self.names.stale = true;
        }
        Ok(())
    }

    /// Node `name` is gone.
    pub fn delete_node(&mut self, name: &str) {
        if self.app.drop_node(name) {
            self.names.stale = true;
        }
    }

    /// A pod was added or changed (the Pod object as JSON): see [`App::push_pod`].
    pub fn set_pod(&mut self, json: &[u8]) -> Result<(), Error> {
        let pod = input::<LeanPod>("Pod", json)?.0;
        self.app.push_pod(&pod);
        Ok(())
    }

    /// The pod with UID `uid` is gone.
    pub fn delete_pod(&mut self, uid: &str) {
        self.app.drop_pod(uid);
    }

    /// The node table PreFilter's verdicts follow, brought up to date.
    fn names(&mut self) -> Arc<[String]> {
        if self.names.stale {
            self.names.table = Arc::from(self.app.node_names());
            self.names.generation += 1;
            self.names.stale = false;
        }
        Arc::clone(&self.names.table)
    }

    /// PreFilter: judges the pod (JSON) on every node Tandem knows, with one engine call for
    /// the scores (and one more for the reasons when no node fits).
    pub fn prefilter(&mut self, json: &[u8]) -> Result<Prepared, Error> {
        let started = Instant::now();
        let pod = match input::<LeanPod>("Pod", json) {
            Ok(pod) => pod.0,
            Err(error) => {
                let failed = Err(error);
                self.decided(PREFILTER, started, &failed);
                return failed;
            }
        };
        let pod = self.app.gpu_pod(&pod);
        self.judge(pod, started)
    }

    /// PreFilter for the pod with UID `uid` at `resource_version`, from what its events told
    /// (the scheduler's pods come from the same informer): `None` when the plugin has not
    /// seen that version (its event is still on the way), and [`Plugin::prefilter`] must be
    /// given the pod.
    pub fn prefilter_known(
        &mut self,
        uid: &str,
        resource_version: &str,
    ) -> Result<Option<Prepared>, Error> {
        let started = Instant::now();
        // Not an answer when unseen: the call with the pod that follows is the one counted.
        match self.app.pushed_pod(uid, resource_version) {
            Some(pod) => self.judge(pod, started).map(Some),
            None => Ok(None),
        }
    }

    /// PreFilter's verdicts for `pod` (`None`: a pod Tandem does not manage, which is no
    /// decision of Tandem's and is not counted), asked at `started`.
    fn judge(&mut self, pod: Option<GpuPod>, started: Instant) -> Result<Prepared, Error> {
        self.cycle = None;
        let Some(pod) = pod else {
            return Ok(Prepared::unmanaged());
        };
        let view = self.app.view_for(&pod);
        let names = self.names();
        let (judged, table) = (pod.clone(), Arc::clone(&names));
        let answer = self.on_engine(PREFILTER, view, move |state, view| {
            let scores = if judged.gpus == 1 {
                decide::candidate_scores(state, &judged, &table)?
            } else {
                Vec::new()
            };
            let verdicts = decide::judge(state, view, &judged, &table, &scores)?;
            Ok((verdicts, decide::refusal(state, &judged)))
        });
        let prepared = answer.map(|(verdicts, refusal)| {
            // Counted once per scheduling attempt, as the extender counts once per filter.
            if let Some(refusal) = refusal {
                self.metrics().refused(&refusal);
            }
            Prepared {
                managed: true,
                generation: self.names.generation,
                names,
                verdicts,
            }
        });
        self.decided(PREFILTER, started, &prepared);
        if prepared.is_ok() {
            self.cycle = Some(pod);
        }
        prepared
    }

    /// Reserve: chooses the pod's GPUs on `node` and records them in the engine at once, so
    /// the next pod's decision sees them, or rejects the node.
    pub fn reserve(&mut self, uid: &str, node: &str) -> Result<Reservation, Error> {
        let started = Instant::now();
        let reserved = self.choose(uid, node);
        let label = match &reserved {
            Ok(Reservation::Reserved(_)) => Answered::Ok,
            Ok(Reservation::Rejected(_)) => Answered::Rejected,
            Err(error) => failure_result(error),
        };
        self.metrics()
            .record(RESERVE, label, started.elapsed().as_secs_f64());
        reserved
    }

    /// Reserve's choice, uncounted.
    fn choose(&mut self, uid: &str, node: &str) -> Result<Reservation, Error> {
        let pod = match self.cycle.take() {
            Some(pod) if pod.uid == uid => pod,
            _ => return Err(Error::NotPrepared(uid.to_owned())),
        };
        let (placed, on, assumed) = (
            pod.clone(),
            node.to_owned(),
            Arc::clone(self.app.assumptions()),
        );
        let chosen = self.on_engine(RESERVE, self.app.view(), move |state, _| {
            let placement = state.place(&decide::job_of(&placed), &on, placed.gpus)?;
            // Recorded in the step that makes it, so no view synced after it leaves it out.
            if let Placement::Placed { gpus, .. } = &placement {
                assumed.record(&placed, &on, gpus);
            }
            Ok(placement)
        })?;
        match chosen {
            Placement::Refused(reason) => Ok(Reservation::Rejected(format!("Tandem: {reason}"))),
            Placement::Placed { gpus, reserved_mib } => {
                // Signed over the pod's UID; Bind writes them on the Binding, whose UID
                // precondition pins the pod.
                match self.app.placements().annotations(uid, &gpus, reserved_mib) {
                    Ok(annotations) => {
                        // The engine holds the choice already: the pod's echo changes nothing.
                        self.app.expect_bound(uid, node, &gpus);
                        Ok(Reservation::Reserved(Reserved { annotations }))
                    }
                    Err(error) => {
                        self.release(pod, gpus)?;
                        Ok(Reservation::Rejected(format!(
                            "Tandem: the engine's GPUs are no placement: {error}"
                        )))
                    }
                }
            }
        }
    }

    /// Unreserve: undoes Reserve's choice for the pod (binding failed or was abandoned).
    pub fn unreserve(&mut self, uid: &str) -> Result<(), Error> {
        if let Some(assumed) = self.app.assumptions().get(uid) {
            self.release(assumed.pod.clone(), assumed.pod.assigned)?;
        }
        Ok(())
    }

    /// Gives `pod`'s `gpus` back in the engine and forgets its placement.
    fn release(&self, pod: GpuPod, gpus: Vec<String>) -> Result<(), Error> {
        self.app.forget(&pod.uid);
        let job = pod.job;
        let undone = self.on_engine("unreserve", self.app.view(), move |state, _| {
            state.unplace(&job, &gpus)
        });
        if undone.is_err() {
            // The engine may still count the GPUs: the next decision tells it the view again.
            self.app.touch();
        }
        undone
    }
}
