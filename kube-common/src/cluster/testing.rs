//! Fixtures for the tests of the Kubernetes front-ends: nodes and pods as the API server shows
//! them, and the real engine taught a small interference scenario. This crate's tests use
//! them, and so do the front-ends' own tests, with the `testing` feature.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tandem_adapter_core::{EMBEDDED_ENGINE, EngineState, JobKeys};
use tandem_api::{Outcome, Policy, Profile};
use tandem_host::{HostConfig, Runtime};

use super::{ClusterView, GPU_ANNOTATION, MEMORY_LABEL, PRODUCT_LABEL};

/// The keys of the job ids in [`engine`]'s scenario (pods of namespace `default`).
pub fn keys() -> JobKeys {
    JobKeys::new(vec![3; 32]).expect("32 bytes make a key")
}

/// A node with `count` GPUs of `product`, `memory` MiB each (no memory label if `None`).
pub fn node(name: &str, count: u32, product: &str, memory: Option<u32>) -> Node {
    let mut labels = BTreeMap::from([(PRODUCT_LABEL.to_owned(), product.to_owned())]);
    if let Some(memory) = memory {
        labels.insert(MEMORY_LABEL.to_owned(), memory.to_string());
    }
    let mut node = Node::default();
    node.metadata.name = Some(name.to_owned());
    node.metadata.labels = Some(labels);
    node.status = Some(NodeStatus {
        allocatable: Some(BTreeMap::from([(
            "nvidia.com/gpu".to_owned(),
            Quantity(count.to_string()),
        )])),
        ..NodeStatus::default()
    });
    node
}

/// A pod requesting `gpus` GPUs, bound to `node` with `annotation`, if given.
pub fn pod(name: &str, gpus: u32, node: Option<&str>, annotation: Option<&str>) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = Some("default".to_owned());
    pod.metadata.uid = Some(format!("uid-{name}"));
    if let Some(annotation) = annotation {
        pod.metadata.annotations = Some(BTreeMap::from([(
            GPU_ANNOTATION.to_owned(),
            annotation.to_owned(),
        )]));
    }
    pod.spec = Some(PodSpec {
        node_name: node.map(str::to_owned),
        containers: vec![Container {
            name: "main".to_owned(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([(
                    "nvidia.com/gpu".to_owned(),
                    Quantity(gpus.to_string()),
                )])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    });
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_owned()),
        ..PodStatus::default()
    });
    pod
}

/// A profile measured on a V100.
pub fn profile(util: f32, access: f32, mem: u32) -> Profile {
    Profile {
        gpu_util_pct: util,
        mem_access_pct: access,
        mem_used_mib: mem,
        gpu_model: "V100".into(),
    }
}

/// The real engine component, told the cluster `view`, knowing the profiles of jobs `x`, `y`,
/// `p` and `big` (which needs more memory than a V100 has), and outcomes saying that `p`
/// suffers little beside `x` and a lot beside `y`. The jobs are pods of namespace `default`,
/// keyed with [`keys`].
pub fn engine(view: &ClusterView) -> EngineState {
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())
        .expect("the embedded engine loads");
    let mut recommender = runtime
        .bootstrap(&Policy::default(), 1)
        .expect("the engine starts");
    let k = keys();
    for (job, p) in [
        ("x", profile(35.0, 12.0, 4_000)),
        ("y", profile(92.0, 70.0, 5_000)),
        ("p", profile(45.0, 20.0, 4_500)),
        ("big", profile(60.0, 30.0, 20_000)),
    ] {
        recommender
            .observe_profile(&k.key("default", job), &p)
            .expect("a profile is taken");
    }
    for _ in 0..3 {
        for (partner, colocated) in [("x", [112.0, 110.0]), ("y", [195.0, 160.0])] {
            recommender
                .observe_outcome(&Outcome {
                    gpu_model: "V100".into(),
                    jobs: vec![k.key("default", "p"), k.key("default", partner)],
                    solo_s: vec![100.0, 100.0],
                    colocated_s: colocated.to_vec(),
                })
                .expect("an outcome is taken");
        }
    }
    let mut engine = EngineState::new(runtime, recommender);
    engine
        .sync(view.gpus().cloned())
        .expect("the view is synced");
    engine
}
