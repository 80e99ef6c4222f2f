//! The messages of NRI's API (`nri.pkg.api.v1alpha1`, NRI v0.12) and of ttrpc that the node
//! component reads and writes, declared by hand for `prost`'s derive (there is no `protoc` to
//! generate them).
//!
//! Field numbers are those of NRI's `api.proto` and ttrpc's `request.proto`. Fields not declared
//! here are skipped on decode, as protobuf requires, so a runtime with a newer API is read
//! correctly; nothing this side writes needs them.

use std::collections::HashMap;

/// The service name of the plugin's API (the runtime calls it).
pub const PLUGIN_SERVICE_NAME: &str = "nri.pkg.api.v1alpha1.Plugin";
/// The service name of the runtime's API (the plugin calls it).
pub const RUNTIME_SERVICE_NAME: &str = "nri.pkg.api.v1alpha1.Runtime";

/// NRI's `Event` values the node component subscribes to.
pub mod event {
    /// A container is about to be created (the only event that can adjust it).
    pub const CREATE_CONTAINER: i32 = 4;

    /// The `ConfigureResponse.events` bit of an event.
    pub const fn mask(event: i32) -> i32 {
        1 << (event - 1)
    }
}

/// gRPC status codes used in ttrpc responses.
pub mod code {
    /// The call succeeded.
    pub const OK: i32 = 0;
    /// The handler failed (a refused container).
    pub const UNKNOWN: i32 = 2;
    /// The method is not served.
    pub const UNIMPLEMENTED: i32 = 12;
}

/// A ttrpc call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// The service, e.g. [`PLUGIN_SERVICE_NAME`].
    #[prost(string, tag = "1")]
    pub service: String,
    /// The method, e.g. `CreateContainer`.
    #[prost(string, tag = "2")]
    pub method: String,
    /// The method's request message.
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    /// The caller's deadline, in nanoseconds (0: none).
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
}

/// A ttrpc answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The outcome; absent or code 0 on success.
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    /// The method's response message.
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// `google.rpc.Status`: a call's outcome.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// A gRPC status code ([`code`]).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// What went wrong, for a person to read.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// The plugin introduces itself to the runtime.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterPluginRequest {
    /// The plugin's name (what validators and logs call it).
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// Its index: plugins are called in ascending order of index.
    #[prost(string, tag = "2")]
    pub plugin_idx: String,
    /// The NRI version the plugin speaks.
    #[prost(string, tag = "3")]
    pub nri_version: String,
}

/// An empty message (answers to events).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// The runtime configures the plugin after it registered.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureRequest {
    /// Plugin-specific configuration from the runtime's NRI settings, if any.
    #[prost(string, tag = "1")]
    pub config: String,
    /// The runtime's name (`containerd`, `cri-o`).
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    /// The runtime's version.
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    /// How long the runtime waits for a plugin to register, in milliseconds.
    #[prost(int64, tag = "4")]
    pub registration_timeout: i64,
    /// How long the runtime waits for a plugin to answer, in milliseconds.
    #[prost(int64, tag = "5")]
    pub request_timeout: i64,
}

/// The plugin's answer to [`ConfigureRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureResponse {
    /// The events the plugin subscribes to, one bit each ([`event::mask`]).
    #[prost(int32, tag = "2")]
    pub events: i32,
}

/// The runtime's pods and containers, sent once after configuration (in parts when `more`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeRequest {
    /// Pods the runtime knows.
    #[prost(message, repeated, tag = "1")]
    pub pods: Vec<PodSandbox>,
    /// Containers the runtime knows.
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    /// Whether more pods and containers follow in another request.
    #[prost(bool, tag = "3")]
    pub more: bool,
}

/// The plugin's answer to [`SynchronizeRequest`] (no updates: the node component changes no
/// running container).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeResponse {
    /// Whether the plugin can take the rest (echoes the request's `more`).
    #[prost(bool, tag = "2")]
    pub more: bool,
}

/// A container is about to be created.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerRequest {
    /// Its pod.
    #[prost(message, optional, tag = "1")]
    pub pod: Option<PodSandbox>,
    /// The container, as the orchestrator and earlier plugins specified it.
    #[prost(message, optional, tag = "2")]
    pub container: Option<Container>,
}

/// The plugin's answer to [`CreateContainerRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerResponse {
    /// Changes to the container being created.
    #[prost(message, optional, tag = "1")]
    pub adjust: Option<ContainerAdjustment>,
}

/// A pod, as NRI describes it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    /// The runtime's id of the pod sandbox.
    #[prost(string, tag = "1")]
    pub id: String,
    /// The pod's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The pod's UID.
    #[prost(string, tag = "3")]
    pub uid: String,
    /// The pod's namespace.
    #[prost(string, tag = "4")]
    pub namespace: String,
    /// The pod's labels.
    #[prost(map = "string, string", tag = "5")]
    pub labels: HashMap<String, String>,
    /// The pod's annotations (the kubelet passes them to the sandbox).
    #[prost(map = "string, string", tag = "6")]
    pub annotations: HashMap<String, String>,
}

/// A container, as NRI describes it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    /// The runtime's id of the container.
    #[prost(string, tag = "1")]
    pub id: String,
    /// The runtime's id of its pod sandbox.
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    /// The container's name in its pod.
    #[prost(string, tag = "3")]
    pub name: String,
    /// Its state (`ContainerState`: 1 created, 3 running, 4 stopped).
    #[prost(int32, tag = "4")]
    pub state: i32,
    /// Its environment, `KEY=value` each.
    #[prost(string, repeated, tag = "8")]
    pub env: Vec<String>,
    /// Linux specifics (devices).
    #[prost(message, optional, tag = "11")]
    pub linux: Option<LinuxContainer>,
    /// CDI devices requested for it.
    #[prost(message, repeated, tag = "20")]
    pub cdi_devices: Vec<CdiDevice>,
}

/// `ContainerState` of a running container.
pub const CONTAINER_RUNNING: i32 = 3;

/// A container's Linux specifics (only its devices are read).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainer {
    /// Device nodes created in the container.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<LinuxDevice>,
}

/// A device node in a container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxDevice {
    /// Its path in the container; prefixed with `-` in an adjustment, a removal.
    #[prost(string, tag = "1")]
    pub path: String,
    /// `c` (character) or `b` (block).
    #[prost(string, tag = "2")]
    pub r#type: String,
    /// Major number.
    #[prost(int64, tag = "3")]
    pub major: i64,
    /// Minor number.
    #[prost(int64, tag = "4")]
    pub minor: i64,
    /// Permission bits of the node.
    #[prost(message, optional, tag = "5")]
    pub file_mode: Option<OptionalFileMode>,
    /// Owner of the node.
    #[prost(message, optional, tag = "6")]
    pub uid: Option<OptionalUInt32>,
    /// Group of the node.
    #[prost(message, optional, tag = "7")]
    pub gid: Option<OptionalUInt32>,
}

/// An optional file mode.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalFileMode {
    /// The mode bits.
    #[prost(uint32, tag = "1")]
    pub value: u32,
}

/// An optional `u32`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalUInt32 {
    /// The value.
    #[prost(uint32, tag = "1")]
    pub value: u32,
}

/// A CDI device reference (`vendor.com/class=name`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CdiDevice {
    /// The fully qualified device name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// Changes a plugin asks for in a container being created.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerAdjustment {
    /// Environment variables to set; a key prefixed with `-` removes the variable.
    #[prost(message, repeated, tag = "4")]
    pub env: Vec<KeyValue>,
    /// Linux changes (device nodes).
    #[prost(message, optional, tag = "6")]
    pub linux: Option<LinuxContainerAdjustment>,
}

/// Linux changes to a container being created.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerAdjustment {
    /// Device nodes to add (with their device-cgroup rule), or, with a `-` path, to remove.
    #[prost(message, repeated, tag = "1")]
    pub devices: Vec<LinuxDevice>,
}

/// An environment variable.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// Its name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// NRI's marker for "remove this entry" in an adjustment's keys and paths.
pub fn removal(key: &str) -> String {
    format!("-{key}")
}
