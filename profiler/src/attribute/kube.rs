//! Pod identities from the API server, for this node's pods only.
//!
//! The profiler lists the pods bound to its node (`fieldSelector=spec.nodeName=<node>`, which
//! the DaemonSet's RBAC allows: `get`/`list` on pods) and maps each UID to the pod's namespace
//! and job: the `tandem.dev/job` label, or the pod's name without one — the same rule the kube
//! adapter keys pods by, so both arrive at the same keyed id. A UID not in the list (a pod
//! created after it) triggers a new list, at most every [`RELIST_EVERY`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tandem_wire::JOB_LABEL;

use super::identity::{AttributeError, Identity};

/// Shortest time between two lists of the node's pods.
pub const RELIST_EVERY: Duration = Duration::from_secs(5);

/// This node's pods, by UID.
pub struct KubePods {
    api: Api<Pod>,
    node: String,
    by_uid: HashMap<String, Identity>,
    listed_at: Option<Instant>,
}

impl KubePods {
    /// Looks up the pods of `node` through `client`.
    pub fn new(client: kube::Client, node: String) -> Self {
        Self {
            api: Api::all(client),
            node,
            by_uid: HashMap::new(),
            listed_at: None,
        }
    }

    /// The node whose pods are looked up.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The identity of the pod with `uid`, listing the node's pods again if it is unknown and
    /// the last list is old enough.
    pub async fn identity(&mut self, uid: &str) -> Result<Option<Identity>, AttributeError> {
        if let Some(identity) = self.by_uid.get(uid) {
            return Ok(Some(identity.clone()));
        }
        if self.listed_at.is_some_and(|at| at.elapsed() < RELIST_EVERY) {
            return Ok(None);
        }
        // Counted from the attempt, so an API server that fails is not asked every tick either.
        self.listed_at = Some(Instant::now());
        let params = ListParams::default().fields(&format!("spec.nodeName={}", self.node));
        let pods = self
            .api
            .list(&params)
            .await
            .map_err(|source| AttributeError::ListPods {
                node: self.node.clone(),
                source,
            })?;
        self.by_uid = pods.items.iter().filter_map(pod_identity).collect();
        tracing::debug!(pods = self.by_uid.len(), "listed this node's pods");
        Ok(self.by_uid.get(uid).cloned())
    }
}

/// A pod's UID and identity: its namespace and its `tandem.dev/job` label, or its name.
pub fn pod_identity(pod: &Pod) -> Option<(String, Identity)> {
    let uid = pod.metadata.uid.clone()?;
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let job = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(JOB_LABEL))
        .or(pod.metadata.name.as_ref())?
        .clone();
    Some((uid, Identity { namespace, job }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::ObjectMeta;

    use super::*;

    fn pod(name: &str, label: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("team-a".to_owned()),
                uid: Some("0f3c2a1e-7b4d-4c59-9a0e-5d2b8f6e1a37".to_owned()),
                labels: label.map(|l| BTreeMap::from([(JOB_LABEL.to_owned(), l.to_owned())])),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn a_pod_is_its_namespace_and_job_label_or_its_name() {
        let (uid, labelled) = pod_identity(&pod("resnet-7f9c", Some("resnet"))).unwrap();
        assert_eq!(uid, "0f3c2a1e-7b4d-4c59-9a0e-5d2b8f6e1a37");
        assert_eq!(labelled.to_string(), "team-a/resnet");
        let (_, unlabelled) = pod_identity(&pod("resnet-7f9c", None)).unwrap();
        assert_eq!(unlabelled.to_string(), "team-a/resnet-7f9c");
        let mut no_uid = pod("x", None);
        no_uid.metadata.uid = None;
        assert!(pod_identity(&no_uid).is_none());
    }
}
