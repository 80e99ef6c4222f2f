//! What the node component reads: NRI's multiplexed frames from the runtime
//! (`tandem_node::nri::wire::Streams`), the ttrpc calls in them and each call's message, the
//! verdict on a container the runtime is about to create (`tandem_node::verdict::judge`), and
//! Tandem's annotations as the node reads them (`tandem_wire::Placement::read`, with the
//! signature checked). Any input is messages or an error, a message decodes or is refused, a
//! verdict is reached: never a panic, and never GPUs for a placement the node's key did not
//! sign.

use std::collections::HashMap;
use std::sync::LazyLock;

use prost::Message as _;
use tandem_node::inventory::{Gpu, Inventory};
use tandem_node::nri::api;
use tandem_node::nri::wire::{FRAME_HEADER, Kind, Streams, frame_header};
use tandem_node::verdict::{
    self, Action, Fallback, Judgement, MemoryLimit, PodView, Policy, Requests, Selection, Trust,
};
use tandem_wire::{GPU_ANNOTATION, Placement, Verifier};

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy {
    node: "node-a".to_owned(),
    resource: "nvidia.com/gpu".to_owned(),
    without_annotation: Fallback::Refuse,
    other_node: Fallback::Leave,
    unsigned: Fallback::Leave,
    memory: MemoryLimit::Mps,
    all_gpus_namespaces: ["monitoring".to_owned()].into(),
});

/// A key no input can sign with: its private half is not kept.
static VERIFIER: LazyLock<Verifier> = LazyLock::new(|| {
    let (signer, _) = tandem_wire::Signer::generate().expect("a key");
    Verifier::from_pem(signer.public_key_pem().as_bytes()).expect("its public key")
});

static INVENTORY: LazyLock<Inventory> = LazyLock::new(|| {
    let gpus = (0..4)
        .map(|index| Gpu {
            index,
            uuid: format!("GPU-fuzz-{index}"),
            minor: index,
            name: "Tesla V100-SXM2-16GB".to_owned(),
            memory_mib: 16_384,
        })
        .collect();
    Inventory::new(gpus).expect("four distinct GPUs")
});

/// Feeds one input to the target: first as frames from the runtime, then as annotation lines
/// (`key=value`).
pub fn run(data: &[u8]) {
    let mut streams = Streams::default();
    let mut rest = data;
    while rest.len() >= FRAME_HEADER {
        let header: [u8; FRAME_HEADER] = rest[..FRAME_HEADER].try_into().expect("8 bytes");
        let (connection, length) = frame_header(header);
        let length = length.min(rest.len() - FRAME_HEADER);
        let payload = &rest[FRAME_HEADER..FRAME_HEADER + length];
        rest = &rest[FRAME_HEADER + length..];
        let Ok(messages) = streams.push(connection, payload) else {
            break;
        };
        for message in messages {
            if message.kind == Kind::Request {
                call(&message.payload);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let annotations: HashMap<String, String> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        match Placement::read(|key| annotations.get(key).map(String::as_str)) {
            Ok(Some(placed)) => assert!(!placed.gpus().is_empty(), "a placement names a GPU"),
            Ok(None) => assert!(!annotations.contains_key(GPU_ANNOTATION)),
            Err(_) => {}
        }
    }
}

/// A call of the runtime's: its message decoded as the plugin does, and a container to be
/// created judged.
fn call(payload: &[u8]) {
    let Ok(request) = api::Request::decode(payload) else {
        return;
    };
    let body = request.payload.as_slice();
    match request.method.as_str() {
        "Configure" => {
            let _ = api::ConfigureRequest::decode(body);
        }
        "Synchronize" => {
            let _ = api::SynchronizeRequest::decode(body);
        }
        "CreateContainer" => {
            let Ok(create) = api::CreateContainerRequest::decode(body) else {
                return;
            };
            let pod = create.pod.unwrap_or_default();
            let container = create.container.unwrap_or_default();
            let selection = Selection::of(&container);
            let requests = [
                Requests::Known {
                    pod_gpus: 1,
                    container: true,
                },
                Requests::Known {
                    pod_gpus: 2,
                    container: false,
                },
                Requests::Unknown("fuzzed".to_owned()),
            ];
            for requests in &requests {
                for trust in [Trust::Signed(&VERIFIER), Trust::Insecure] {
                    let view = PodView {
                        uid: &pod.uid,
                        namespace: &pod.namespace,
                        annotations: &pod.annotations,
                        requests,
                    };
                    let Judgement::Gpu(verdict) =
                        verdict::judge(&POLICY, &INVENTORY, trust, view, &selection)
                    else {
                        continue;
                    };
                    // No input holds a signature of the node's key.
                    if matches!(trust, Trust::Signed(_)) {
                        assert_ne!(verdict.action, Action::Assigned, "{}", verdict.reason);
                    }
                    // An assigned GPU is one of the node's, as many as the pod requests.
                    for gpu in &verdict.gpus {
                        assert!(INVENTORY.get(gpu.index).is_some());
                    }
                    if verdict.action == Action::Assigned {
                        assert!(matches!(
                            requests,
                            Requests::Known { pod_gpus, .. } if *pod_gpus as usize == verdict.gpus.len()
                        ));
                    }
                }
            }
        }
        _ => {}
    }
}
