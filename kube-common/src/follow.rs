//! The knowledge base's writer and its followers, for every Kubernetes front-end: the replica
//! that holds the Lease writes; the others load what it stores. The writer also learns from the
//! pods that finished while it did not write (or before it started), when it becomes the
//! writer and every minute after.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tandem_adapter_core::{Core, Shutdown};

use crate::leader;

/// How often a follower checks whether the writer stored new knowledge, and the writer whether
/// it should look through finished pods.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(2);

/// How often the writer looks through finished pods even unasked: a run whose learning failed
/// (the write was refused) is tried again.
pub const CATCH_UP_EVERY: Duration = Duration::from_secs(60);

/// How a front-end learns from the pods that finished while it was not looking.
pub trait CatchUp: Send + Sync + 'static {
    /// Asks for a catch-up at the next chance: this replica just became the writer.
    fn ask(&self);

    /// Whether a catch-up should run now: asked for since the last one (the request is
    /// cleared), or `overdue` ([`CATCH_UP_EVERY`] passed), and the front-end ready for it.
    fn due(&self, overdue: bool) -> bool;

    /// Learns, as one batch, from the finished pods not counted yet. `Break` when the
    /// front-end is gone and there is nothing left to follow.
    fn run(&self) -> impl Future<Output = ControlFlow<()>> + Send;
}

/// Who this replica is in the election.
#[derive(Debug, Clone)]
pub struct Election {
    /// The Leases of the front-end's namespace.
    pub leases: Api<Lease>,
    /// The Lease's name.
    pub lease: String,
    /// This replica's identity in it.
    pub identity: String,
}

/// This replica's identity in the Lease, by one rule for every Kubernetes front-end: `given`
/// (an option), else `$POD_NAME` (the chart sets it from the pod's name, stable across
/// restarts of one pod), else the host name, else `program`. An empty value counts as none.
pub fn replica_identity(given: Option<&str>, program: &str) -> String {
    let named = |name: Option<String>| name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    named(given.map(str::to_owned))
        .or_else(|| named(std::env::var("POD_NAME").ok()))
        .or_else(|| named(std::fs::read_to_string("/proc/sys/kernel/hostname").ok()))
        .unwrap_or_else(|| program.to_owned())
}

/// Runs the election on the current tokio runtime: on becoming the writer, the knowledge base
/// is reloaded (what the previous writer stored last) and a catch-up asked for, so the pods it
/// had not counted are learned. Ends with `shutdown`, releasing the Lease.
pub fn elect<C: CatchUp>(
    election: Election,
    core: Arc<Core>,
    catch_up: Arc<C>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    let leadership = Arc::clone(&core.leadership);
    tokio::spawn(async move {
        let Election {
            leases,
            lease,
            identity,
        } = election;
        leader::run(leases, lease, identity, leadership, shutdown, || {
            let (core, catch_up) = (Arc::clone(&core), Arc::clone(&catch_up));
            async move {
                if let Err(error) = core.reload().await {
                    tracing::error!(error = %tandem_telemetry::report(&error), "cannot reload the knowledge base on becoming the writer");
                }
                // Followers leave finished pods alone: the new writer learns from those the
                // previous one had not counted.
                catch_up.ask();
            }
        })
        .await;
    })
}

/// Runs the follower on the current tokio runtime until `shutdown`: every [`FOLLOW_EVERY`], a
/// replica that does not write loads what the writer stored, if it changed; the writer runs
/// `catch_up` when it is due.
pub fn spawn_follower<C: CatchUp>(core: Arc<Core>, catch_up: Arc<C>, mut shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut last_catch_up = Instant::now();
        loop {
            tokio::select! {
                () = tokio::time::sleep(FOLLOW_EVERY) => {}
                () = shutdown.wait() => return,
            }
            if !core.leadership.is_leader() {
                match core.reload().await {
                    Ok(true) => tracing::info!("loaded the knowledge base the writer stored"),
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(error = %tandem_telemetry::report(&error), "cannot follow the knowledge base")
                    }
                }
            } else if catch_up.due(last_catch_up.elapsed() >= CATCH_UP_EVERY) {
                if catch_up.run().await.is_break() {
                    return;
                }
                last_catch_up = Instant::now();
            }
        }
    });
}
