//! What a container's pod requests of the GPU resource, from its spec in the API server.
//!
//! NRI hands the node component the pod's annotations but not its resource requests, and what
//! a device plugin leaves in a container (an environment variable, device nodes, CDI devices)
//! depends on its mode — and is absent where no device plugin runs. The spec is the authority.
//!
//! The runtime waits for the plugin only so long (NRI's request timeout, 2 s by default), and a
//! plugin that does not answer in time is dropped and the container created without it. So
//! the specs of the pods bound to this node are kept ahead of time, fed by a watch of the API
//! server (a field selector on `spec.nodeName`; [`PodSpecs::watch`]): a pod is normally known
//! before the kubelet creates its first container. Only a pod the watch has not brought yet
//! costs a GET, bounded by the caller's budget ([`PodSpecs::lookup`]).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use parking_lot::Mutex;

/// How many pods fetched by a GET are remembered (the containers of one pod are created in a
/// row; the watch brings the pod soon after anyway).
const FETCHED: usize = 64;

/// What one pod requests of the GPU resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequests {
    /// The pod's GPUs as Tandem's schedulers count them: the sum over its (app) containers of
    /// the larger of request and limit.
    pub gpus: u32,
    /// The names of its containers (init containers included) that request any.
    pub containers: BTreeSet<String>,
}

impl PodRequests {
    /// What `pod` requests of `resource`.
    pub fn of(pod: &Pod, resource: &str) -> Self {
        Self {
            gpus: requested_gpus(pod, resource),
            containers: gpu_containers(pod, resource),
        }
    }

    /// Whether container `name` requests any.
    pub fn container(&self, name: &str) -> bool {
        self.containers.contains(name)
    }
}

/// Why a pod's spec could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The API server answered with an error.
    #[error("the API server did not return the pod")]
    Api(#[source] kube::Error),
    /// It did not answer within the budget.
    #[error("the API server did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The pod of that name has another UID (it was replaced).
    #[error("the pod was replaced (its UID differs)")]
    Replaced,
    /// No API server to ask, and the pod is not among those given.
    #[error("the pod is unknown and there is no API server to ask")]
    NoApi,
}

/// Where a lookup's answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The watch had brought the pod.
    Watch,
    /// A GET, the watch not having brought it yet.
    Get,
}

/// The pods bound to this node, by UID, and the way to fetch one the watch has not brought.
pub struct PodSpecs {
    client: Option<kube::Client>,
    resource: String,
    /// What the watch brought, by pod UID.
    watched: Mutex<HashMap<String, Arc<PodRequests>>>,
    /// What GETs brought, by pod UID, oldest first.
    fetched: Mutex<VecDeque<(String, Arc<PodRequests>)>>,
}

impl std::fmt::Debug for PodSpecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodSpecs")
            .field("resource", &self.resource)
            .field("api", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

impl PodSpecs {
    /// Pods looked up through `client`; `resource` is the GPU resource (`nvidia.com/gpu`).
    /// Nothing is known until [`PodSpecs::watch`] runs.
    pub fn new(client: kube::Client, resource: String) -> Self {
        Self {
            client: Some(client),
            ..Self::without_api(resource)
        }
    }

    /// Only the pods [`PodSpecs::insert`] gives (for tests, and a runtime played by one).
    pub fn without_api(resource: String) -> Self {
        Self {
            client: None,
            resource,
            watched: Mutex::new(HashMap::new()),
            fetched: Mutex::new(VecDeque::new()),
        }
    }

    /// The GPU resource.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// How many pods the watch holds.
    pub fn watched(&self) -> usize {
        self.watched.lock().len()
    }

    /// Remembers `pod` (as the watch does).
    pub fn insert(&self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            let requests = Arc::new(PodRequests::of(pod, &self.resource));
            self.watched.lock().insert(uid.clone(), requests);
        }
    }

    /// Keeps the pods bound to `node` from the API server, until the process ends; watch
    /// errors are retried with kube-rs' default backoff.
    pub async fn watch(self: Arc<Self>, node: String) {
        let Some(client) = self.client.clone() else {
            return;
        };
        let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        let events = watcher(Api::<Pod>::all(client), config).default_backoff();
        futures::pin_mut!(events);
        // The UIDs of a (re)list under way: at its end, pods it did not list are gone.
        let mut listing: Option<HashSet<String>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(pod)) => {
                    if let (Some(listing), Some(uid)) = (&mut listing, &pod.metadata.uid) {
                        listing.insert(uid.clone());
                    }
                    self.insert(&pod);
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listing.take() {
                        self.watched.lock().retain(|uid, _| listed.contains(uid));
                    }
                    tracing::debug!(pods = self.watched(), "the pods of this node are listed");
                }
                Ok(watcher::Event::Apply(pod)) => self.insert(&pod),
                Ok(watcher::Event::Delete(pod)) => {
                    if let Some(uid) = &pod.metadata.uid {
                        self.watched.lock().remove(uid);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the watch of this node's pods failed; retrying")
                }
            }
        }
    }

    /// What the pod `namespace/name` with UID `uid` requests: from the watch, else from one
    /// GET that may take at most `budget`.
    pub async fn lookup(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        budget: Duration,
    ) -> Result<(Arc<PodRequests>, Source), LookupError> {
        if let Some(known) = self.watched.lock().get(uid) {
            return Ok((Arc::clone(known), Source::Watch));
        }
        if let Some((_, known)) = self.fetched.lock().iter().find(|(known, _)| known == uid) {
            return Ok((Arc::clone(known), Source::Get));
        }
        let client = self.client.clone().ok_or(LookupError::NoApi)?;
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        let pod = tokio::time::timeout(budget, pods.get(name))
            .await
            .map_err(|_| LookupError::Timeout(budget))?
            .map_err(LookupError::Api)?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(LookupError::Replaced);
        }
        let requests = Arc::new(PodRequests::of(&pod, &self.resource));
        let mut fetched = self.fetched.lock();
        if fetched.len() == FETCHED {
            fetched.pop_front();
        }
        fetched.push_back((uid.to_owned(), Arc::clone(&requests)));
        Ok((requests, Source::Get))
    }
}

/// The amount of `resource` in one of a container's requests or limits, as Tandem's
/// schedulers read it: a whole number, anything else 0 (the API server admits only whole
/// numbers of an extended resource).
fn amount(
    quantities: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    resource: &str,
) -> u32 {
    quantities
        .and_then(|quantities| quantities.get(resource))
        .and_then(|quantity| quantity.0.trim().parse::<u32>().ok())
        .unwrap_or(0)
}

/// The GPUs of `resource` `pod` requests, counted as Tandem's schedulers count them (the
/// larger of request and limit, summed over its app containers; `tandem-kube-common`'s
/// `requested_gpus`), so that a placement is checked against the number it was made for.
pub fn requested_gpus(pod: &Pod, resource: &str) -> u32 {
    let Some(spec) = &pod.spec else {
        return 0;
    };
    spec.containers
        .iter()
        .map(|container| {
            let resources = container.resources.as_ref();
            amount(resources.and_then(|r| r.requests.as_ref()), resource)
                .max(amount(resources.and_then(|r| r.limits.as_ref()), resource))
        })
        .fold(0u32, u32::saturating_add)
}

/// The names of `pod`'s containers (init containers included) that request `resource`: a
/// limit or request above zero (extended resources are set as limits; requests default to
/// them).
pub fn gpu_containers(pod: &Pod, resource: &str) -> BTreeSet<String> {
    let Some(spec) = &pod.spec else {
        return BTreeSet::new();
    };
    let requests = |container: &Container| {
        container.resources.as_ref().is_some_and(|resources| {
            [&resources.limits, &resources.requests]
                .into_iter()
                .flatten()
                .filter_map(|quantities| quantities.get(resource))
                .any(|quantity| {
                    let text = quantity.0.trim();
                    !text.is_empty() && text.parse::<f64>().map_or(true, |n| n > 0.0)
                })
        })
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter(|container| requests(container))
        .map(|container| container.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_containers_that_ask_for_the_resource_are_named_and_counted() {
        let pod = pod(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {
                "initContainers": [{"name": "fetch", "image": "x"}],
                "containers": [
                    {"name": "train", "image": "x",
                     "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},
                    {"name": "eval", "image": "x",
                     "resources": {"requests": {"nvidia.com/gpu": "2"},
                                   "limits": {"nvidia.com/gpu": "1"}}},
                    {"name": "sidecar", "image": "x", "resources": {"limits": {"cpu": "1"}}},
                    {"name": "zero", "image": "x",
                     "resources": {"requests": {"nvidia.com/gpu": "0"}}}
                ]
            }
        }));
        let requests = PodRequests::of(&pod, "nvidia.com/gpu");
        assert_eq!(
            requests.containers.iter().collect::<Vec<_>>(),
            ["eval", "train"]
        );
        // 1 + max(2, 1): as the schedulers count.
        assert_eq!(requests.gpus, 3);
        assert!(requests.container("train") && !requests.container("sidecar"));
        assert_eq!(PodRequests::of(&pod, "amd.com/gpu").gpus, 0);
    }

    #[test]
    fn an_init_container_alone_adds_no_gpu_to_the_count() {
        let pod = pod(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {
                "initContainers": [{"name": "warm", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "containers": [{"name": "main", "image": "x"}]
            }
        }));
        let requests = PodRequests::of(&pod, "nvidia.com/gpu");
        assert_eq!((requests.gpus, requests.container("warm")), (0, true));
    }

    #[tokio::test]
    async fn without_an_api_server_only_given_pods_are_known() {
        let specs = PodSpecs::without_api("nvidia.com/gpu".into());
        let given = pod(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "uid": "u1"},
            "spec": {"containers": [{"name": "main", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        }));
        specs.insert(&given);
        let (known, source) = specs
            .lookup("n", "p", "u1", Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!((known.gpus, source), (1, Source::Watch));
        let unknown = specs.lookup("n", "q", "u2", Duration::from_secs(1)).await;
        assert!(matches!(unknown, Err(LookupError::NoApi)), "{unknown:?}");
    }
}
