//! The NRI handler: judges each container the runtime is about to create ([`crate::verdict`])
//! and counts what it decided; at every (re)connection, checks the running containers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tandem_wire::Placement;

use crate::inventory::Inventory;
use crate::keys::PlacementKeys;
use crate::metrics::Metrics;
use crate::nri::{self, Deadline, api};
use crate::pods::{PodSpecs, Source};
use crate::verdict::{self, Action, Judgement, PodView, Policy, Requests, Selection, Trust};

/// The longest a container's judgement may wait for the API server: well inside NRI's
/// request timeout (containerd's `plugin_request_timeout`, 2 s by default), past which the
/// runtime drops the plugin and creates the container without it. A runtime that says it
/// waits less gets half of what it says.
pub const LOOKUP_BUDGET: Duration = Duration::from_secs(1);

/// Tandem's node component as an NRI plugin.
#[derive(Debug)]
pub struct Enforcer {
    policy: Policy,
    inventory: Inventory,
    /// `None`: placements honoured unverified (`--insecure-unsigned-placements`).
    keys: Option<PlacementKeys>,
    specs: Arc<PodSpecs>,
    metrics: Arc<Metrics>,
    budget: Duration,
}

impl Enforcer {
    /// An enforcer of `policy` on the GPUs of `inventory`, believing placements signed with
    /// `keys` (every placement, unverified, without), reading containers' GPU requests from
    /// their pods' specs in `specs`.
    pub fn new(
        policy: Policy,
        inventory: Inventory,
        keys: Option<PlacementKeys>,
        specs: Arc<PodSpecs>,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics
            .gpus
            .set(i64::try_from(inventory.gpus().len()).unwrap_or(i64::MAX));
        if let Some(keys) = &keys {
            let current = keys.current();
            metrics
                .placement_keys
                .set(i64::try_from(current.verifier.key_ids().count()).unwrap_or(i64::MAX));
        }
        Self {
            policy,
            inventory,
            keys,
            specs,
            metrics,
            budget: LOOKUP_BUDGET,
        }
    }

    /// The same with another longest wait for the API server than [`LOOKUP_BUDGET`].
    pub fn with_budget(self, budget: Duration) -> Self {
        Self { budget, ..self }
    }

    /// What the spec of `pod` says about its GPUs, within what is left of the budget.
    async fn requests(
        &self,
        pod: &api::PodSandbox,
        container: &str,
        deadline: Deadline,
    ) -> Requests {
        let budget = deadline
            .timeout
            .map_or(self.budget, |timeout| self.budget.min(timeout / 2))
            .saturating_sub(deadline.received.elapsed());
        match self
            .specs
            .lookup(&pod.namespace, &pod.name, &pod.uid, budget)
            .await
        {
            Ok((requests, source)) => {
                if source == Source::Get {
                    self.metrics.pod_cache_misses.inc();
                }
                Requests::Known {
                    pod_gpus: requests.gpus,
                    container: requests.container(container),
                }
            }
            Err(error) => {
                self.metrics.pod_cache_misses.inc();
                self.metrics.pod_lookup_errors.inc();
                let why = crate::report(&error);
                tracing::warn!(pod_uid = %pod.uid, error = %why, "the pod's spec could not be read");
                Requests::Unknown(why)
            }
        }
    }

    /// The keys in force, after reading them again if their file changed.
    fn verifier(&self) -> Option<Arc<tandem_wire::Verifier>> {
        let keys = self.keys.as_ref()?;
        let current = keys.current();
        match current.reloaded {
            Some(Ok(ids)) => {
                tracing::info!(
                    file = %keys.path().display(),
                    keys = ?ids,
                    "the placement keys changed; verifying with the new ones"
                );
                self.metrics
                    .placement_keys
                    .set(i64::try_from(ids.len()).unwrap_or(i64::MAX));
            }
            Some(Err(error)) => {
                self.metrics.placement_key_errors.inc();
                tracing::error!(
                    error = %crate::report(&error),
                    "the placement keys changed but cannot be read; the keys before stay in force"
                );
            }
            None => {}
        }
        Some(current.verifier)
    }

    /// The UUIDs a container of `pod` must see, when Tandem placed the pod on GPUs of this
    /// node that exist.
    fn expected(&self, pod: &api::PodSandbox) -> Option<String> {
        let placement = Placement::read(|key| pod.annotations.get(key).map(String::as_str))
            .ok()
            .flatten()?;
        if placement.node() != self.policy.node {
            return None;
        }
        let uuids: Option<Vec<&str>> = placement
            .gpus()
            .iter()
            .map(|gpu| self.inventory.get(gpu.index).map(|gpu| gpu.uuid.as_str()))
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
        deadline: Deadline,
    ) -> Result<api::ContainerAdjustment, String> {
        let selection = Selection::of(&container);
        let requests = self.requests(&pod, &container.name, deadline).await;
        let verifier = self.verifier();
        let trust = verifier.as_deref().map_or(Trust::Insecure, Trust::Signed);
        let view = PodView {
            uid: &pod.uid,
            namespace: &pod.namespace,
            annotations: &pod.annotations,
            requests: &requests,
        };
        let verdict = match verdict::judge(&self.policy, &self.inventory, trust, view, &selection) {
            Judgement::NoGpu { exempt, adjustment } => {
                self.metrics.count_gpuless(exempt);
                tracing::debug!(
                    pod_uid = %pod.uid,
                    container = %container.name,
                    exempt,
                    "container without a GPU"
                );
                return Ok(adjustment);
            }
            Judgement::Gpu(verdict) => verdict,
        };
        self.metrics.count(verdict.case, verdict.action);
        if let Some((_, mode)) = verdict.memory {
            self.metrics.count_memory(mode);
        }
        if verdict.unverified {
            tracing::warn!(
                pod_uid = %pod.uid,
                container = %container.name,
                "honouring a placement whose signature was not verified \
                 (--insecure-unsigned-placements): anyone who can annotate a pod chooses its GPUs"
            );
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
