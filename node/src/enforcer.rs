//! The NRI handler: judges each container the runtime is about to create ([`crate::enforce`])
//! and counts what it decided; at every (re)connection, checks the running containers.

use std::collections::HashMap;
use std::sync::Arc;

use crate::enforce::{self, Action, GpuRequest, Policy, Selection};
use crate::inventory::Inventory;
use crate::metrics::Metrics;
use crate::nri::{self, api};
use crate::placement::placement;
use crate::pods::PodSpecs;

/// Tandem's node component as an NRI plugin.
#[derive(Debug)]
pub struct Enforcer {
    policy: Policy,
    inventory: Inventory,
    specs: Option<PodSpecs>,
    metrics: Arc<Metrics>,
}

impl Enforcer {
    /// An enforcer of `policy` on the GPUs of `inventory`. With `specs`, a container's GPU
    /// request is read from its pod's spec; without, from what the device plugin left in it.
    pub fn new(
        policy: Policy,
        inventory: Inventory,
        specs: Option<PodSpecs>,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics
            .gpus
            .set(i64::try_from(inventory.gpus().len()).unwrap_or(i64::MAX));
        Self {
            policy,
            inventory,
            specs,
            metrics,
        }
    }

    async fn request(&self, pod: &api::PodSandbox, container: &str) -> GpuRequest {
        let Some(specs) = &self.specs else {
            return GpuRequest::Unknown;
        };
        match specs
            .request(&pod.namespace, &pod.name, &pod.uid, container)
            .await
        {
            Ok(request) => request,
            Err(error) => {
                self.metrics.pod_lookup_errors.inc();
                tracing::warn!(
                    pod_uid = %pod.uid,
                    error = %crate::report(&error),
                    "judging the container by what its device plugin left in it"
                );
                GpuRequest::Unknown
            }
        }
    }

    /// The UUIDs a container of `pod` must see, when Tandem placed the pod on GPUs of this
    /// node that exist.
    fn expected(&self, pod: &api::PodSandbox) -> Option<String> {
        let placement = placement(&pod.annotations).ok()??;
        let uuids: Option<Vec<&str>> = placement
            .gpus
            .iter()
            .map(|gpu| {
                (gpu.node == self.policy.node)
                    .then(|| self.inventory.get(gpu.index))
                    .flatten()
                    .map(|gpu| gpu.uuid.as_str())
            })
            .collect();
        uuids.map(|uuids| uuids.join(","))
    }
}

impl nri::Handler for Enforcer {
    fn configured(&self, runtime: &str, version: &str) {
        self.metrics.connected.set(1);
        tracing::info!(runtime, version, "configured by the container runtime");
    }

    fn synchronize(&self, pods: Vec<api::PodSandbox>, containers: Vec<api::Container>) {
        let pods: HashMap<&str, &api::PodSandbox> =
            pods.iter().map(|pod| (pod.id.as_str(), pod)).collect();
        let mut unenforced = 0;
        for container in containers
            .iter()
            .filter(|container| container.state == api::CONTAINER_RUNNING)
        {
            let Some(pod) = pods.get(container.pod_sandbox_id.as_str()) else {
                continue;
            };
            let Some(expected) = self.expected(pod) else {
                continue;
            };
            let seen = Selection::of(container).visible_devices;
            if seen.as_deref().is_some_and(|seen| seen != expected) {
                unenforced += 1;
                tracing::warn!(
                    pod_uid = %pod.uid,
                    container = %container.name,
                    expected = %expected,
                    seen = %seen.unwrap_or_default(),
                    "a running container does not see Tandem's GPU (created while the node \
                     component was down?)"
                );
            }
        }
        self.metrics.unenforced.set(unenforced);
        tracing::info!(
            pods = pods.len(),
            containers = containers.len(),
            unenforced,
            "synchronized with the container runtime"
        );
    }

    async fn create_container(
        &self,
        pod: api::PodSandbox,
        container: api::Container,
    ) -> Result<api::ContainerAdjustment, String> {
        let selection = Selection::of(&container);
        let request = self.request(&pod, &container.name).await;
        let Some(verdict) = enforce::judge(
            &self.policy,
            &self.inventory,
            &pod.annotations,
            &selection,
            request,
        ) else {
            return Ok(api::ContainerAdjustment::default());
        };
        self.metrics.count(verdict.case, verdict.action);
        if let Some((_, mode)) = verdict.memory {
            self.metrics.count_memory(mode);
        }
        tracing::info!(
            pod_uid = %pod.uid,
            container = %container.name,
            case = verdict.case.name(),
            action = verdict.action.name(),
            reason = %verdict.reason,
            "GPU container"
        );
        match verdict.action {
            Action::Refused => Err(verdict.reason),
            Action::Assigned | Action::Left => Ok(verdict.adjustment),
        }
    }
}
