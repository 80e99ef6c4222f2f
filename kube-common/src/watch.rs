//! Watchers: nodes and pods from the API server into the adapter's view.
//!
//! Two kube-rs reflectors keep every Node and Pod in memory. A node event, or a pod event that
//! changes where a pod holds GPUs, marks the view stale (it is rebuilt on the next request,
//! not on every event, and only what changed is sent to the engine; the echo of Tandem's own
//! bind changes nothing, since the engine was told at once), a pod seen finishing is handed to
//! [`App::pod_finished`] to learn from, and a GPU pod bound without Tandem's GPU record is
//! counted ([`App::check_recorded`]). Finished pods of the initial list (and of every relist)
//! are learned from in one batch afterwards ([`App::catch_up`]), so a start among thousands of
//! completed pods costs one knowledge-base write, not one per pod. Watch errors are retried
//! with kube-rs' default backoff; the adapter reports ready once both initial lists are in.

use std::sync::Arc;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt as _, watcher};

use tandem_adapter_core::Shutdown;

use crate::app::App;
use crate::lean::LeanPod;

/// Stores the watchers fill, and their writers.
pub struct Stores {
    /// Nodes.
    pub nodes: (Store<Node>, Writer<Node>),
    /// Pods.
    pub pods: (Store<Pod>, Writer<Pod>),
}

impl Stores {
    /// Empty stores.
    pub fn new() -> Self {
        Self {
            nodes: reflector::store(),
            pods: reflector::store(),
        }
    }
}

impl Default for Stores {
    fn default() -> Self {
        Self::new()
    }
}

/// Starts both watchers and the readiness wait; they stop at `shutdown`.
pub fn spawn(
    app: Arc<App>,
    client: kube::Client,
    nodes: (Store<Node>, Writer<Node>),
    pods: (Store<Pod>, Writer<Pod>),
    shutdown: Shutdown,
) {
    let (node_store, node_writer) = nodes;
    let (pod_store, pod_writer) = pods;

    let node_app = Arc::clone(&app);
    let node_events = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff();
    spawn_until(shutdown.clone(), async move {
        futures::pin_mut!(node_events);
        while let Some(event) = node_events.next().await {
            match event {
                Ok(_) => node_app.touch(),
                Err(error) => tracing::warn!(%error, "node watch failed; retrying"),
            }
        }
    });

    let pod_app = Arc::clone(&app);
    // Pods are decoded lean (`crate::lean`): the watch carries every pod of the cluster.
    let pod_events = reflector::reflector(
        pod_writer,
        watcher(Api::<LeanPod>::all(client), watcher::Config::default()).map_ok(full_pods),
    )
    .default_backoff();
    spawn_until(shutdown.clone(), async move {
        futures::pin_mut!(pod_events);
        while let Some(event) = pod_events.next().await {
            match event {
                Ok(watcher::Event::Apply(pod)) => {
                    pod_app.pod_changed(&pod, false);
                    pod_app.check_recorded(&pod);
                    pod_app.note_declared(&pod).await;
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    if matches!(phase, Some("Succeeded" | "Failed")) {
                        pod_app.pod_finished(&pod).await;
                    }
                }
                Ok(watcher::Event::InitApply(pod)) => {
                    pod_app.pod_changed(&pod, false);
                    pod_app.note_declared(&pod).await;
                    pod_app.touch();
                    // Pods bound while the adapter was down are accounted for when it starts.
                    pod_app.check_recorded(&pod);
                    // Finished pods of a (re)list are learned from in one batch once it is in
                    // (`App::catch_up`), not one write each.
                    pod_app.catch_up_soon();
                }
                Ok(watcher::Event::Delete(pod)) => pod_app.pod_changed(&pod, true),
                Ok(_) => pod_app.touch(),
                Err(error) => tracing::warn!(%error, "pod watch failed; retrying"),
            }
        }
    });

    spawn_until(shutdown, async move {
        let synced = node_store.wait_until_ready().await.is_ok()
            && pod_store.wait_until_ready().await.is_ok();
        if synced {
            app.touch();
            app.set_ready();
            app.catch_up_soon();
            tracing::info!(
                nodes = node_store.state().len(),
                pods = pod_store.state().len(),
                "watchers synced; ready"
            );
        }
    });
}

/// The watcher's event of a lean pod, as the event of the [`Pod`] it holds.
fn full_pods(event: watcher::Event<LeanPod>) -> watcher::Event<Pod> {
    use watcher::Event;
    match event {
        Event::Apply(pod) => Event::Apply(pod.0),
        Event::Delete(pod) => Event::Delete(pod.0),
        Event::Init => Event::Init,
        Event::InitApply(pod) => Event::InitApply(pod.0),
        Event::InitDone => Event::InitDone,
    }
}

/// Runs `work` until it ends or `shutdown` fires.
pub fn spawn_until(mut shutdown: Shutdown, work: impl Future<Output = ()> + Send + 'static) {
    tokio::spawn(async move {
        tokio::select! {
            () = work => {}
            () = shutdown.wait() => {}
        }
    });
}
