//! The schedulers' verb bodies as the adapters read them: kube-scheduler's `ExtenderArgs`
//! (`filter`, `prioritize`) and `ExtenderBindingArgs` (`bind`), and vc-scheduler's extender
//! requests, each parsed with `tandem_adapter_core::http::parse`; the pod of a request is then
//! read as the adapters read it (requested GPUs, the GPU annotation, the `tandem.dev/*`
//! declarations). Any body is a request or a `400` (`413` for too many items) naming the verb.

use std::sync::LazyLock;

use k8s_openapi::api::core::v1::Pod;
use tandem_adapter_core::JobKeys;
use tandem_adapter_core::http::{Failure, parse};
use tandem_kube_adapter::extender::{BindingArgs, ExtenderArgs};
use tandem_kube_common::cluster;
use tandem_kube_common::placement::{Placements, Signer};
use tandem_volcano_adapter::wire::{
    EventRequest, PredicateRequest, PrioritizeRequest, SessionOpenRequest, TaskInfo,
};

/// The GPU resource the adapters manage by default.
const RESOURCE: &str = "nvidia.com/gpu";

static KEYS: LazyLock<JobKeys> = LazyLock::new(|| {
    JobKeys::new(b"a fuzzing secret, 16 bytes or more".to_vec()).expect("a long enough secret")
});

/// Placements signed with a key of the run's own, so every placement a body carries is read and
/// verified (and found forged) as the adapters do.
static PLACEMENTS: LazyLock<Placements> = LazyLock::new(|| {
    let (signer, _) = Signer::generate().expect("a key pair is generated");
    Placements::signed(signer)
});

/// Feeds one input to the target.
pub fn run(body: &[u8]) {
    if let Some(args) = accepted::<ExtenderArgs>("filter", body) {
        let candidates = args.candidates();
        if let Some(names) = &args.node_names {
            assert_eq!(&candidates, names, "names sent are the candidates");
        }
        read_pod(&args.pod);
    }
    let _ = accepted::<BindingArgs>("bind", body);
    let _ = accepted::<SessionOpenRequest>("onSessionOpen", body);
    if let Some(request) = accepted::<PredicateRequest>("predicate", body) {
        read_task(&request.task);
    }
    if let Some(request) = accepted::<PrioritizeRequest>("prioritize", body) {
        read_task(&request.task);
    }
    if let Some(request) = accepted::<EventRequest>("allocate", body) {
        read_task(&request.task);
    }
}

/// The request in `body`, or `None` after checking that the refusal is the caller's fault and
/// names the verb.
fn accepted<T: serde::de::DeserializeOwned>(verb: &str, body: &[u8]) -> Option<T> {
    match parse::<T>(verb, body) {
        Ok(request) => Some(request),
        Err(Failure {
            status, message, ..
        }) => {
            assert!(
                status == 400 || status == 413,
                "{verb}: a body is refused with {status}"
            );
            assert!(
                message.starts_with(&format!("invalid {verb} request")),
                "{verb}: the refusal does not name the verb: {message}"
            );
            None
        }
    }
}

/// A Volcano task's pod, kept unparsed by the wire types, as the Volcano adapter reads it.
fn read_task(task: &TaskInfo) {
    if let Ok(pod) = serde_json::from_str::<Pod>(task.pod.get()) {
        read_pod(&pod);
    }
}

/// What the adapters read of a pod before the engine sees it.
fn read_pod(pod: &Pod) {
    let requested = cluster::requested_gpus(pod, RESOURCE);
    match cluster::gpu_pod(pod, &KEYS, RESOURCE, &PLACEMENTS) {
        Some(gpu_pod) => {
            assert_eq!(gpu_pod.gpus, requested);
            let _ = gpu_pod.job();
            let _ = gpu_pod.resident();
            let _ = gpu_pod.refusal();
        }
        None => assert_eq!(requested, 0, "a pod requesting GPUs is not managed"),
    }
}
