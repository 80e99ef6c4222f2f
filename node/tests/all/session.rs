//! The plugin's NRI session against a runtime played by the test over a socket pair, with the
//! framing and messages a runtime uses: registration, configuration, a synchronization in two
//! parts, containers adjusted and refused, and the runtime hanging up.

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message as _;
use tandem_node::enforcer::Enforcer;
use tandem_node::inventory::{Gpu, Inventory};
use tandem_node::keys::PlacementKeys;
use tandem_node::metrics::Metrics;
use tandem_node::nri::api::{self, event};
use tandem_node::nri::wire::{self, FRAME_HEADER, Kind, Message, PLUGIN_SERVICE, RUNTIME_SERVICE};
use tandem_node::nri::{self, Ended, Registration};
use tandem_node::pods::PodSpecs;
use tandem_node::verdict::{Fallback, MemoryLimit, Policy, VISIBLE_DEVICES};
use tandem_wire::{GPU_ANNOTATION, Placement, Signer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

/// The runtime's end of the socket.
struct Runtime {
    socket: UnixStream,
    streams: wire::Streams,
    received: Vec<Message>,
    next_stream: u32,
}

impl Runtime {
    async fn next(&mut self) -> Message {
        loop {
            if !self.received.is_empty() {
                return self.received.remove(0);
            }
            let mut header = [0; FRAME_HEADER];
            self.socket.read_exact(&mut header).await.unwrap();
            let (connection, length) = wire::frame_header(header);
            assert!(
                length <= wire::MAX_FRAME_PAYLOAD,
                "a frame of {length} bytes"
            );
            let mut payload = vec![0; length];
            self.socket.read_exact(&mut payload).await.unwrap();
            self.received
                .extend(self.streams.push(connection, &payload).unwrap());
        }
    }

    async fn send(&mut self, message: Message) {
        self.socket
            .write_all(&wire::encode_frames(&message))
            .await
            .unwrap();
    }

    /// Calls the plugin's `method` and returns its ttrpc response.
    async fn call(&mut self, method: &str, request: &impl prost::Message) -> api::Response {
        let stream = self.next_stream;
        self.next_stream += 2;
        let call = api::Request {
            service: api::PLUGIN_SERVICE_NAME.into(),
            method: method.into(),
            payload: request.encode_to_vec(),
            timeout_nano: 0,
        };
        self.send(Message {
            connection: PLUGIN_SERVICE,
            stream,
            kind: Kind::Request,
            flags: 0,
            payload: call.encode_to_vec(),
        })
        .await;
        let answer = self.next().await;
        assert_eq!(
            (answer.connection, answer.stream, answer.kind),
            (PLUGIN_SERVICE, stream, Kind::Response)
        );
        api::Response::decode(answer.payload.as_slice()).unwrap()
    }
}

fn inventory() -> Inventory {
    Inventory::new(
        (0..4)
            .map(|index| Gpu {
                index,
                uuid: format!("GPU-fake-a-{index}"),
                minor: index,
                name: "Tesla V100-SXM2-16GB".into(),
                memory_mib: 16384,
            })
            .collect(),
    )
    .unwrap()
}

fn pod(id: &str, annotations: &[(&str, &str)]) -> api::PodSandbox {
    api::PodSandbox {
        id: id.into(),
        name: id.into(),
        uid: format!("uid-{id}"),
        namespace: "default".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>(),
        ..api::PodSandbox::default()
    }
}

/// The spec of pod `id` ([`pod`]) as the API server holds it: container `main` requesting
/// `gpus` GPUs.
fn spec(id: &str, gpus: u32) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": id, "namespace": "default", "uid": format!("uid-{id}")},
        "spec": {"containers": [{"name": "main", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .unwrap()
}

/// A policy of node `node-a` with `without_annotation` and `memory`.
fn policy(without_annotation: Fallback, memory: MemoryLimit) -> Policy {
    Policy {
        node: "node-a".into(),
        resource: "nvidia.com/gpu".into(),
        without_annotation,
        other_node: Fallback::Refuse,
        unsigned: Fallback::Refuse,
        memory,
        all_gpus_namespaces: Default::default(),
    }
}

fn gpu_container(pod: &str, visible: &str) -> api::Container {
    api::Container {
        id: format!("{pod}-main"),
        pod_sandbox_id: pod.into(),
        name: "main".into(),
        state: api::CONTAINER_RUNNING,
        env: vec![format!("{VISIBLE_DEVICES}={visible}")],
        ..api::Container::default()
    }
}

#[tokio::test]
async fn a_runtime_registers_configures_synchronizes_and_gets_adjustments_and_refusals() {
    let (plugin_end, runtime_end) = UnixStream::pair().unwrap();
    let metrics = Arc::new(Metrics::default());
    let (signer, _) = Signer::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("placement.pub");
    std::fs::write(&keys, signer.public_key_pem()).unwrap();
    let specs = PodSpecs::without_api("nvidia.com/gpu".into());
    for (id, gpus) in [("p", 1), ("q", 1), ("sidecar", 0)] {
        specs.insert(&spec(id, gpus));
    }
    let enforcer = Arc::new(Enforcer::new(
        policy(Fallback::Refuse, MemoryLimit::Mps),
        inventory(),
        Some(PlacementKeys::load(&keys).unwrap()),
        Arc::new(specs),
        Arc::clone(&metrics),
    ));
    let placed = signer.signed(
        "uid-p",
        Placement::decided(&["node-a/2".into()], Some(9000)).unwrap(),
    );
    let registration = Registration {
        name: "tandem-node".into(),
        index: "90".into(),
    };
    let session =
        tokio::spawn(async move { nri::serve(plugin_end, &registration, enforcer).await });
    let mut runtime = Runtime {
        socket: runtime_end,
        streams: wire::Streams::default(),
        received: Vec::new(),
        next_stream: 1,
    };

    // 1. The plugin registers on the runtime's service.
    let register = runtime.next().await;
    assert_eq!(
        (register.connection, register.kind),
        (RUNTIME_SERVICE, Kind::Request)
    );
    let call = api::Request::decode(register.payload.as_slice()).unwrap();
    assert_eq!(
        (call.service.as_str(), call.method.as_str()),
        (api::RUNTIME_SERVICE_NAME, "RegisterPlugin")
    );
    let request = api::RegisterPluginRequest::decode(call.payload.as_slice()).unwrap();
    assert_eq!(
        (request.plugin_name.as_str(), request.plugin_idx.as_str()),
        ("tandem-node", "90")
    );
    let registered = api::Response {
        status: None,
        payload: api::Empty {}.encode_to_vec(),
    };
    runtime
        .send(Message {
            connection: RUNTIME_SERVICE,
            stream: register.stream,
            kind: Kind::Response,
            flags: 0,
            payload: registered.encode_to_vec(),
        })
        .await;

    // 2. Configure: the plugin subscribes to container creation.
    let configured = runtime
        .call(
            "Configure",
            &api::ConfigureRequest {
                runtime_name: "containerd".into(),
                runtime_version: "v2.4.2".into(),
                ..api::ConfigureRequest::default()
            },
        )
        .await;
    let events = api::ConfigureResponse::decode(configured.payload.as_slice())
        .unwrap()
        .events;
    assert_eq!(
        events & event::mask(event::CREATE_CONTAINER),
        event::mask(event::CREATE_CONTAINER)
    );
    assert!(metrics.encode().contains("tandem_node_connected 1"));

    // 3. Synchronize in two parts: one running container of a pod placed on GPU 1 sees GPU 3
    //    (created while the plugin was away), one sees its GPU.
    let first = runtime
        .call(
            "Synchronize",
            &api::SynchronizeRequest {
                pods: vec![pod("wrong", &[(GPU_ANNOTATION, "node-a/1")])],
                containers: vec![gpu_container("wrong", "GPU-fake-a-3")],
                more: true,
            },
        )
        .await;
    assert!(
        api::SynchronizeResponse::decode(first.payload.as_slice())
            .unwrap()
            .more
    );
    runtime
        .call(
            "Synchronize",
            &api::SynchronizeRequest {
                pods: vec![pod("right", &[(GPU_ANNOTATION, "node-a/2")])],
                containers: vec![gpu_container("right", "GPU-fake-a-2")],
                more: false,
            },
        )
        .await;
    assert!(
        metrics
            .encode()
            .contains("tandem_node_unenforced_containers 1")
    );

    // 4. A placed pod's container gets its GPU and the reservation as the MPS limit.
    let annotations: Vec<(String, String)> = placed.annotations().into_iter().collect();
    let annotations: Vec<(&str, &str)> = annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let created = runtime
        .call(
            "CreateContainer",
            &api::CreateContainerRequest {
                pod: Some(pod("p", &annotations)),
                container: Some(gpu_container("p", "GPU-fake-a-0")),
            },
        )
        .await;
    assert_eq!(created.status, None);
    let adjust = api::CreateContainerResponse::decode(created.payload.as_slice())
        .unwrap()
        .adjust
        .unwrap();
    let env: Vec<(&str, &str)> = adjust
        .env
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            (VISIBLE_DEVICES, "GPU-fake-a-2"),
            ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=9000M")
        ]
    );
    let devices = &adjust.linux.unwrap().devices;
    assert_eq!(devices.len(), 1);
    assert_eq!(
        (devices[0].path.as_str(), devices[0].minor),
        ("/dev/nvidia2", 2)
    );

    // 5. A GPU container of a pod Tandem did not place is refused under this policy: the
    //    runtime gets an error status whose text the kubelet would show.
    let refused = runtime
        .call(
            "CreateContainer",
            &api::CreateContainerRequest {
                pod: Some(pod("q", &[])),
                container: Some(gpu_container("q", "GPU-fake-a-0")),
            },
        )
        .await;
    let status = refused.status.unwrap();
    assert_eq!(status.code, api::code::UNKNOWN);
    assert!(
        status.message.contains("placed without Tandem"),
        "{}",
        status.message
    );

    // 6. A container that asks for no GPU and names every GPU itself is given none.
    let mut all = gpu_container("sidecar", "all");
    all.name = "main".into();
    let hidden = runtime
        .call(
            "CreateContainer",
            &api::CreateContainerRequest {
                pod: Some(pod("sidecar", &[])),
                container: Some(all),
            },
        )
        .await;
    let adjust = api::CreateContainerResponse::decode(hidden.payload.as_slice())
        .unwrap()
        .adjust
        .unwrap();
    assert_eq!(adjust.env.len(), 1);
    assert_eq!(
        (adjust.env[0].key.as_str(), adjust.env[0].value.as_str()),
        (VISIBLE_DEVICES, "void")
    );

    // 7. A pod whose spec is unknown (not watched, no API server) carrying a placement: its
    //    container is refused, never created blind.
    let unknown = runtime
        .call(
            "CreateContainer",
            &api::CreateContainerRequest {
                pod: Some(pod("r", &annotations)),
                container: Some(gpu_container("r", "GPU-fake-a-0")),
            },
        )
        .await;
    let status = unknown.status.unwrap();
    assert!(
        status.message.contains("its spec could not be read"),
        "{}",
        status.message
    );

    // An unknown method is answered, not dropped.
    let unknown = runtime.call("Frobnicate", &api::Empty {}).await;
    assert_eq!(unknown.status.unwrap().code, api::code::UNIMPLEMENTED);

    let text = metrics.encode();
    assert!(
        text.contains(r#"tandem_node_containers_total{case="placed",action="assigned"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"tandem_node_containers_total{case="without_annotation",action="refused"} 1"#
        )
    );
    assert!(text.contains(r#"tandem_node_memory_limits_total{mode="mps"} 1"#));
    assert!(text.contains(r#"tandem_node_gpuless_containers_total{action="hidden"} 1"#));
    assert!(
        text.contains(r#"tandem_node_containers_total{case="spec_unknown",action="refused"} 1"#)
    );
    assert!(text.contains("tandem_node_placement_keys 1"), "{text}");

    // 8. The runtime hangs up: the session ends.
    drop(runtime);
    assert_eq!(session.await.unwrap().unwrap(), Ended::Closed);
}

#[tokio::test]
async fn a_runtime_that_refuses_registration_ends_the_session_with_its_reason() {
    let (plugin_end, runtime_end) = UnixStream::pair().unwrap();
    let enforcer = Arc::new(Enforcer::new(
        policy(Fallback::Leave, MemoryLimit::Report),
        inventory(),
        None,
        Arc::new(PodSpecs::without_api("nvidia.com/gpu".into())),
        Arc::new(Metrics::default()),
    ));
    let registration = Registration {
        name: "tandem-node".into(),
        index: "90".into(),
    };
    let session =
        tokio::spawn(async move { nri::serve(plugin_end, &registration, enforcer).await });
    let mut runtime = Runtime {
        socket: runtime_end,
        streams: wire::Streams::default(),
        received: Vec::new(),
        next_stream: 1,
    };
    let register = runtime.next().await;
    let refusal = api::Response {
        status: Some(api::Status {
            code: api::code::UNKNOWN,
            message: "plugin tandem-node already registered".into(),
        }),
        payload: Vec::new(),
    };
    runtime
        .send(Message {
            connection: RUNTIME_SERVICE,
            stream: register.stream,
            kind: Kind::Response,
            flags: 0,
            payload: refusal.encode_to_vec(),
        })
        .await;
    let error = session.await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "the runtime refused RegisterPlugin: plugin tandem-node already registered"
    );
}
