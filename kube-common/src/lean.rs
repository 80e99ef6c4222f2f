//! Pods decoded for what Tandem reads, and nothing else.
//!
//! A Pod from the API server carries `managedFields` (server-side apply's record of which
//! manager owns which field: a JSON tree per manager, often larger than the rest of the pod)
//! and dozens of spec fields Tandem never reads (volumes, probes, tolerations, the image and
//! its environment). Decoding them into `k8s_openapi`'s `Pod` builds a `serde_json::Value`
//! tree and a string for each, only to drop them: in the extender under a burst of pods, most
//! of the process's time went to that decoding and its allocations. Here the pod is read
//! through shadow types holding what the adapters use — identity, labels and annotations,
//! deletion, the node, the containers' resources, the phase and the containers' run times —
//! and the rest of the text is skipped without allocating. The result is an ordinary
//! [`Pod`] with those fields set, so everything downstream reads it as before.
//!
//! [`LeanPod`] is the watcher's resource type (the same `v1/pods` endpoints); [`pod`] decodes
//! the pod inside a kube-scheduler extender request.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// A [`Pod`] decoded with only the fields Tandem reads (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeanPod(pub Pod);

impl k8s_openapi::Resource for LeanPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for LeanPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

impl<'de> Deserialize<'de> for LeanPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        pod(deserializer).map(LeanPod)
    }
}

/// Decodes a pod keeping only the fields Tandem reads; for `#[serde(deserialize_with)]`.
pub fn pod<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Pod, D::Error> {
    Shadow::deserialize(deserializer).map(Pod::from)
}

#[derive(Deserialize)]
struct Shadow {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Spec>,
    status: Option<Status>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    node_name: Option<String>,
    scheduler_name: Option<String>,
    priority: Option<i32>,
    #[serde(default)]
    containers: Vec<ContainerShadow>,
}

#[derive(Deserialize)]
struct ContainerShadow {
    #[serde(default)]
    name: String,
    resources: Option<ResourceRequirements>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    phase: Option<String>,
    start_time: Option<Time>,
    container_statuses: Option<Vec<ContainerStatusShadow>>,
}

#[derive(Deserialize)]
struct ContainerStatusShadow {
    #[serde(default)]
    name: String,
    state: Option<ContainerState>,
}

impl From<Shadow> for Pod {
    fn from(shadow: Shadow) -> Self {
        let Shadow {
            metadata: m,
            spec,
            status,
        } = shadow;
        Pod {
            metadata: ObjectMeta {
                name: m.name,
                generate_name: m.generate_name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                generation: m.generation,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                labels: m.labels,
                annotations: m.annotations,
                owner_references: m.owner_references,
                ..ObjectMeta::default()
            },
            spec: spec.map(|s| PodSpec {
                node_name: s.node_name,
                scheduler_name: s.scheduler_name,
                priority: s.priority,
                containers: s
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        resources: c.resources,
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: status.map(|s| PodStatus {
                phase: s.phase,
                start_time: s.start_time,
                container_statuses: s.container_statuses.map(|list| {
                    list.into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            state: c.state,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod as the API server sends it: managed fields, a full spec and status.
    const POD: &str = r#"{
      "kind": "Pod", "apiVersion": "v1",
      "metadata": {
        "name": "train-0", "generateName": "train-", "namespace": "ml",
        "uid": "6f1c", "resourceVersion": "812", "generation": 1,
        "creationTimestamp": "2026-11-27T10:00:00Z",
        "deletionTimestamp": "2026-11-27T11:00:00Z",
        "labels": {"tandem.dev/job": "resnet"},
        "annotations": {"tandem.dev/gpu": "node-a/1", "tandem.dev/work": "3"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                             "uid": "aa", "controller": true}],
        "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
          "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1",
          "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:tandem.dev/job": {}}},
                       "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}}}}}}]
      },
      "spec": {
        "nodeName": "node-a", "schedulerName": "tandem", "priority": 5,
        "volumes": [{"name": "data", "emptyDir": {}}],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "containers": [{
          "name": "main", "image": "trainer:1", "command": ["python", "train.py"],
          "env": [{"name": "EPOCHS", "value": "3"}],
          "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "2"},
                        "limits": {"nvidia.com/gpu": "1"}}
        }]
      },
      "status": {
        "phase": "Succeeded", "startTime": "2026-11-27T10:00:05Z",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{
          "name": "main", "image": "trainer:1", "imageID": "sha256:00", "ready": false,
          "restartCount": 0,
          "state": {"terminated": {"exitCode": 0, "startedAt": "2026-11-27T10:00:06Z",
                                   "finishedAt": "2026-11-27T10:30:00Z"}}
        }]
      }
    }"#;

    #[test]
    fn keeps_what_tandem_reads_and_drops_the_rest() {
        let full: Pod = serde_json::from_str(POD).unwrap();
        let lean: LeanPod = serde_json::from_str(POD).unwrap();
        let lean = lean.0;

        // Everything the adapters read is identical.
        assert_eq!(lean.metadata.name, full.metadata.name);
        assert_eq!(lean.metadata.namespace, full.metadata.namespace);
        assert_eq!(lean.metadata.uid, full.metadata.uid);
        assert_eq!(
            lean.metadata.resource_version,
            full.metadata.resource_version
        );
        assert_eq!(lean.metadata.labels, full.metadata.labels);
        assert_eq!(lean.metadata.annotations, full.metadata.annotations);
        assert_eq!(
            lean.metadata.deletion_timestamp,
            full.metadata.deletion_timestamp
        );
        assert_eq!(
            lean.metadata.owner_references,
            full.metadata.owner_references
        );
        let (spec, full_spec) = (lean.spec.unwrap(), full.spec.unwrap());
        assert_eq!(spec.node_name.as_deref(), Some("node-a"));
        assert_eq!(spec.scheduler_name, full_spec.scheduler_name);
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(
            spec.containers[0].resources,
            full_spec.containers[0].resources
        );
        let (status, full_status) = (lean.status.unwrap(), full.status.unwrap());
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        assert_eq!(status.start_time, full_status.start_time);
        assert_eq!(
            status.container_statuses.unwrap()[0].state,
            full_status.container_statuses.unwrap()[0].state
        );

        // What it never reads is not kept.
        assert!(full.metadata.managed_fields.is_some());
        assert!(lean.metadata.managed_fields.is_none());
        assert!(spec.volumes.is_none() && spec.tolerations.is_none());
        assert!(spec.containers[0].image.is_none() && spec.containers[0].env.is_none());
        assert!(status.conditions.is_none());
    }

    #[test]
    fn a_bare_pod_decodes() {
        let lean: LeanPod = serde_json::from_str(r#"{"metadata": {"name": "p"}}"#).unwrap();
        assert_eq!(lean.0.metadata.name.as_deref(), Some("p"));
        assert!(lean.0.spec.is_none() && lean.0.status.is_none());
    }

    #[test]
    fn a_malformed_field_is_still_an_error() {
        let error = serde_json::from_str::<LeanPod>(
            r#"{"metadata": {"name": "p"}, "spec": {"containers": [{"resources": 3}]}}"#,
        )
        .unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");
    }
}
