//! Whether a container asks for the GPU resource, from its pod's spec in the API server.
//!
//! NRI hands the node component the pod's annotations but not its resource requests, and what
//! a device plugin leaves in a container (an environment variable, device nodes, CDI devices)
//! depends on its mode — and is absent where no device plugin runs. The spec is the authority:
//! read once per pod (by UID) and remembered for its other containers.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;

use crate::enforce::GpuRequest;

/// How long a spec lookup may take before the container is judged without it.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// How many pods' answers are remembered (containers of one pod are created in a row).
const REMEMBERED: usize = 256;

/// Reads pod specs from the API server.
pub struct PodSpecs {
    client: kube::Client,
    resource: String,
    /// Per pod UID, the names of its containers that request the resource.
    remembered: Mutex<VecDeque<(String, BTreeSet<String>)>>,
}

impl std::fmt::Debug for PodSpecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodSpecs")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// Why a pod's spec could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The API server answered with an error.
    #[error("the API server did not return the pod")]
    Api(#[source] kube::Error),
    /// It did not answer in time.
    #[error("the API server did not answer within {0:?}")]
    Timeout(Duration),
    /// The pod of that name has another UID (it was replaced).
    #[error("the pod was replaced (its UID differs)")]
    Replaced,
}

impl PodSpecs {
    /// Looks pods up through `client`; `resource` is the GPU resource (`nvidia.com/gpu`).
    pub fn new(client: kube::Client, resource: String) -> Self {
        Self {
            client,
            resource,
            remembered: Mutex::new(VecDeque::new()),
        }
    }

    /// Whether container `container` of the pod `namespace/name` with UID `uid` requests the
    /// resource.
    pub async fn request(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        container: &str,
    ) -> Result<GpuRequest, LookupError> {
        if let Some(answer) = self.remembered(uid, container) {
            return Ok(answer);
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pod = tokio::time::timeout(LOOKUP_TIMEOUT, pods.get(name))
            .await
            .map_err(|_| LookupError::Timeout(LOOKUP_TIMEOUT))?
            .map_err(LookupError::Api)?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(LookupError::Replaced);
        }
        let requesting = gpu_containers(&pod, &self.resource);
        let answer = request_of(&requesting, container);
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if remembered.len() == REMEMBERED {
            remembered.pop_front();
        }
        remembered.push_back((uid.to_owned(), requesting));
        Ok(answer)
    }

    fn remembered(&self, uid: &str, container: &str) -> Option<GpuRequest> {
        let remembered = self
            .remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        remembered
            .iter()
            .find(|(known, _)| known == uid)
            .map(|(_, requesting)| request_of(requesting, container))
    }
}

fn request_of(requesting: &BTreeSet<String>, container: &str) -> GpuRequest {
    if requesting.contains(container) {
        GpuRequest::Yes
    } else {
        GpuRequest::No
    }
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

    #[test]
    fn the_containers_that_ask_for_the_resource_are_named() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "fetch", "image": "x"}],
                "containers": [
                    {"name": "train", "image": "x",
                     "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},
                    {"name": "sidecar", "image": "x", "resources": {"limits": {"cpu": "1"}}},
                    {"name": "zero", "image": "x",
                     "resources": {"requests": {"nvidia.com/gpu": "0"}}}
                ]
            }
        }))
        .unwrap();
        let names = gpu_containers(&pod, "nvidia.com/gpu");
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["train"]);
        assert!(gpu_containers(&pod, "amd.com/gpu").is_empty());
        let set = gpu_containers(&pod, "nvidia.com/gpu");
        assert_eq!(request_of(&set, "train"), GpuRequest::Yes);
        assert_eq!(request_of(&set, "sidecar"), GpuRequest::No);
    }
}
