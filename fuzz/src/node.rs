//! What the node component reads: NRI's multiplexed frames from the runtime
//! (`tandem_node::nri::wire::Streams`), the ttrpc calls in them and each call's message, the
//! verdict on a container the runtime is about to create (`tandem_node::enforce::judge`), and
//! Tandem's annotations (`tandem_node::placement`). Any input is messages or an error, a
//! message decodes or is refused, a verdict is reached: never a panic.

use std::collections::HashMap;
use std::sync::LazyLock;

use prost::Message as _;
use tandem_node::enforce::{self, Fallback, GpuRequest, MemoryLimit, Policy, Selection};
use tandem_node::inventory::{Gpu, Inventory};
use tandem_node::nri::api;
use tandem_node::nri::wire::{FRAME_HEADER, Kind, Streams, frame_header};
use tandem_node::placement::{GPU_ANNOTATION, placement};

static POLICY: LazyLock<Policy> = LazyLock::new(|| Policy {
    node: "node-a".to_owned(),
    without_annotation: Fallback::Refuse,
    other_node: Fallback::Leave,
    memory: MemoryLimit::Mps,
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
        match placement(&annotations) {
            Ok(Some(placed)) => assert!(!placed.gpus.is_empty(), "a placement names a GPU"),
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
            for request in [GpuRequest::Yes, GpuRequest::No, GpuRequest::Unknown] {
                if let Some(verdict) =
                    enforce::judge(&POLICY, &INVENTORY, &pod.annotations, &selection, request)
                {
                    // An assigned GPU is one of the node's, named by the pod.
                    for gpu in &verdict.gpus {
                        assert!(INVENTORY.get(gpu.index).is_some());
                    }
                }
            }
        }
        _ => {}
    }
}
