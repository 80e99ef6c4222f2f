//! The verdict for one container: which GPU it gets, and with what memory limit — pure, so
//! every case is tested without a runtime.
//!
//! A pod's placement ([`tandem_wire::Placement`]) is annotations, which anyone allowed to
//! create or update the pod can write. So a node honours one only when a scheduler of
//! Tandem's signed it for this very pod ([`Trust`]), and only when it agrees with the pod and
//! the node: as many GPUs as the pod requests, GPUs the node has, a reservation the GPU can
//! hold.
//!
//! | the pod | a GPU container gets |
//! |---|---|
//! | placed by Tandem on GPUs of this node, signed, and consistent | exactly those GPUs: `NVIDIA_VISIBLE_DEVICES` = their UUIDs, their device nodes (whatever the device plugin chose is removed), and the memory limit of [`MemoryLimit`] |
//! | a placement whose signature is missing or does not verify | [`Policy::unsigned`]: refused (default), or judged as a pod placed without Tandem |
//! | more or fewer GPUs than the pod requests, a GPU index the node does not have, a reservation larger than the GPU, no reservation on a node that enforces memory | refused: an error, never a guess |
//! | its spec could not be read (so its GPU request is unknown) | refused; the kubelet retries |
//! | placed on another node | [`Policy::other_node`]: refused (default) or left as the device plugin chose |
//! | not placed by Tandem (a fallback binder while Tandem was down, another scheduler) | [`Policy::without_annotation`]: left as the device plugin chose (default) or refused |
//! | annotations that do not parse (a GPU named twice, two nodes, a reservation of 0) | refused |
//!
//! A container that asks for no GPU gets `NVIDIA_VISIBLE_DEVICES=void` ([`Judgement::NoGpu`]),
//! which NVIDIA's container toolkit reads as "no GPU", so that it cannot pick GPUs itself
//! (`=all`) where the device plugin selects by that variable; pods of the namespaces of
//! [`Policy::all_gpus_namespaces`] (monitoring that must see every GPU) keep their value. Every
//! verdict on a GPU container names its [`Case`] and [`Action`] for the metrics; a refusal
//! carries the text the runtime fails the container with, which the kubelet shows in the
//! pod's events.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use tandem_wire::{GPU_ANNOTATION, Placement, SignatureError, Verifier};

use crate::inventory::{Gpu, Inventory};
use crate::nri::api::{
    ContainerAdjustment, KeyValue, LinuxContainerAdjustment, LinuxDevice, OptionalFileMode,
    OptionalUInt32, removal,
};

/// The variable NVIDIA's container toolkit selects GPUs by (and NVIDIA's device plugin sets in
/// its default `envvar` mode).
pub const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// The value of [`VISIBLE_DEVICES`] NVIDIA's container toolkit reads as "no GPU" (unlike
/// `none`, which still mounts the driver's libraries and tools).
pub const NO_GPU: &str = "void";
/// The MPS client's per-device memory limit: `<ordinal>=<limit>`.
pub const MPS_MEMORY_LIMIT: &str = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
/// HAMi-core's memory limit of the container's first (here: only) device.
pub const HAMI_MEMORY_LIMIT: &str = "CUDA_DEVICE_MEMORY_LIMIT_0";
/// The major number of NVIDIA's GPU device nodes.
pub const NVIDIA_MAJOR: i64 = 195;

/// What to do with a GPU container the case allows to run without Tandem's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fallback {
    /// Leave the GPU the device plugin chose (counted).
    Leave,
    /// Refuse the container, with the reason in the pod's events (counted).
    Refuse,
}

/// How the guard's reservation reaches the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryLimit {
    /// Not enforced: the reservation is reported (metrics, log) only.
    Report,
    /// The node runs NVIDIA MPS: `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M`.
    Mps,
    /// The node runs HAMi-core (`libvgpu.so` preloaded): `CUDA_DEVICE_MEMORY_LIMIT_0=<MiB>m`.
    HamiCore,
}

impl MemoryLimit {
    /// The name used in options and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Report => "report",
            Self::Mps => "mps",
            Self::HamiCore => "hami-core",
        }
    }
}

/// The node's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// This node's name, as Tandem's annotation names it.
    pub node: String,
    /// The GPU resource pods request (`nvidia.com/gpu`), for the messages.
    pub resource: String,
    /// GPU containers of pods Tandem did not place.
    pub without_annotation: Fallback,
    /// GPU containers of pods Tandem placed on another node.
    pub other_node: Fallback,
    /// GPU containers whose placement's signature is missing or does not verify: refused, or
    /// judged as placed without Tandem ([`Policy::without_annotation`]).
    pub unsigned: Fallback,
    /// How the reservation is enforced.
    pub memory: MemoryLimit,
    /// Namespaces whose containers keep their `NVIDIA_VISIBLE_DEVICES` without requesting a
    /// GPU (monitoring that must see every GPU: Tandem's profiler, NVIDIA's device plugin and
    /// DCGM exporter).
    pub all_gpus_namespaces: BTreeSet<String>,
}

/// Which placements the node believes.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// Those signed with one of these keys, for the pod that carries them.
    Signed(&'a Verifier),
    /// Every placement, unverified (`--insecure-unsigned-placements`): anyone who can annotate
    /// a pod chooses its GPUs.
    Insecure,
}

/// What the node knows of a container's pod.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    /// The pod's UID, what a placement's signature covers.
    pub uid: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its annotations, as the kubelet handed them to the runtime.
    pub annotations: &'a HashMap<String, String>,
    /// What its spec requests.
    pub requests: &'a Requests,
}

/// What a container's pod requests of the GPU resource, from its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requests {
    /// The spec was read.
    Known {
        /// The pod's GPUs, as Tandem's schedulers count them (the sum over its containers of
        /// the larger of request and limit).
        pod_gpus: u32,
        /// Whether this container requests any.
        container: bool,
    },
    /// The spec could not be read: why.
    Unknown(String),
}

/// Which kind of pod a GPU container belongs to (the metric's `case` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Case {
    /// Tandem placed it on GPUs of this node.
    Placed,
    /// Tandem did not place it.
    WithoutAnnotation,
    /// Tandem placed it on another node.
    OtherNode,
    /// Tandem named a GPU index this node does not have.
    UnknownGpu,
    /// Its Tandem annotations do not parse.
    Malformed,
    /// Its placement carries no signature.
    Unsigned,
    /// Its placement's signature does not verify (another pod's, another placement's, a key
    /// the node does not trust, or not a signature).
    BadSignature,
    /// Its placement names more or fewer GPUs than it requests.
    GpuCount,
    /// Its placement reserves more memory than the GPU has.
    ReservationTooLarge,
    /// Its one-GPU placement reserves no memory on a node that enforces memory limits.
    NoReservation,
    /// It carries a placement but its spec could not be read.
    SpecUnknown,
}

impl Case {
    /// Every case, for metrics that start at zero.
    pub const ALL: [Case; 11] = [
        Case::Placed,
        Case::WithoutAnnotation,
        Case::OtherNode,
        Case::UnknownGpu,
        Case::Malformed,
        Case::Unsigned,
        Case::BadSignature,
        Case::GpuCount,
        Case::ReservationTooLarge,
        Case::NoReservation,
        Case::SpecUnknown,
    ];

    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Placed => "placed",
            Self::WithoutAnnotation => "without_annotation",
            Self::OtherNode => "other_node",
            Self::UnknownGpu => "unknown_gpu",
            Self::Malformed => "malformed",
            Self::Unsigned => "unsigned",
            Self::BadSignature => "bad_signature",
            Self::GpuCount => "gpu_count",
            Self::ReservationTooLarge => "reservation_too_large",
            Self::NoReservation => "no_reservation",
            Self::SpecUnknown => "spec_unknown",
        }
    }
}

/// What happened to a GPU container (the metric's `action` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// It gets Tandem's GPUs.
    Assigned,
    /// It keeps what the device plugin chose.
    Left,
    /// Its creation fails.
    Refused,
}

impl Action {
    /// Every action, for metrics that start at zero.
    pub const ALL: [Action; 3] = [Action::Assigned, Action::Left, Action::Refused];

    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Assigned => "assigned",
            Self::Left => "left",
            Self::Refused => "refused",
        }
    }
}

/// The verdict on one GPU container.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Which kind of pod.
    pub case: Case,
    /// What happens.
    pub action: Action,
    /// The changes to make (empty unless assigned).
    pub adjustment: ContainerAdjustment,
    /// For a person: what was decided and why (the refusal's text when refused).
    pub reason: String,
    /// The GPUs assigned.
    pub gpus: Vec<Gpu>,
    /// The memory reservation, when the pod carries one, and whether it is enforced.
    pub memory: Option<(u32, MemoryLimit)>,
    /// Whether the placement was honoured without its signature being checked
    /// ([`Trust::Insecure`]).
    pub unverified: bool,
}

/// What becomes of one container.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// It asks for a GPU: the verdict.
    Gpu(Verdict),
    /// It asks for none.
    NoGpu {
        /// Its namespace is one of [`Policy::all_gpus_namespaces`]: left as it is.
        exempt: bool,
        /// `NVIDIA_VISIBLE_DEVICES=void` (nothing when exempt).
        adjustment: ContainerAdjustment,
    },
}

/// What the device plugin (or the pod's spec) put in a container to select GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `NVIDIA_VISIBLE_DEVICES`, when set.
    pub visible_devices: Option<String>,
    /// GPU device nodes (`/dev/nvidia<N>`).
    pub device_nodes: Vec<String>,
    /// NVIDIA GPU CDI devices (`nvidia.com/gpu=…`).
    pub cdi_devices: Vec<String>,
}

impl Selection {
    /// What `container` carries.
    pub fn of(container: &crate::nri::api::Container) -> Self {
        let visible_devices = container.env.iter().rev().find_map(|entry| {
            entry
                .strip_prefix(VISIBLE_DEVICES)
                .and_then(|rest| rest.strip_prefix('='))
                .map(str::to_owned)
        });
        let device_nodes = container
            .linux
            .iter()
            .flat_map(|linux| &linux.devices)
            .map(|device| device.path.clone())
            .filter(|path| Inventory::is_gpu_device(path))
            .collect();
        let cdi_devices = container
            .cdi_devices
            .iter()
            .map(|device| device.name.clone())
            .filter(|name| name.starts_with("nvidia.com/gpu="))
            .collect();
        Self {
            visible_devices,
            device_nodes,
            cdi_devices,
        }
    }

    /// Whether a device plugin gave the container GPUs: specific devices in
    /// `NVIDIA_VISIBLE_DEVICES` (not `all`, `none` or `void`, which any pod can set itself),
    /// GPU device nodes or CDI devices.
    pub fn has_gpus(&self) -> bool {
        let specific = self.visible_devices.as_deref().is_some_and(|value| {
            let value = value.trim();
            !value.is_empty() && !matches!(value, "all" | "none" | "void")
        });
        specific || !self.device_nodes.is_empty() || !self.cdi_devices.is_empty()
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.visible_devices {
            Some(value) => write!(f, "{VISIBLE_DEVICES}={value}"),
            None => f.write_str("no NVIDIA_VISIBLE_DEVICES"),
        }?;
        if !self.device_nodes.is_empty() {
            write!(f, ", devices {}", self.device_nodes.join(" "))?;
        }
        Ok(())
    }
}

/// What becomes of the container carrying `selection` of `pod`.
pub fn judge(
    policy: &Policy,
    inventory: &Inventory,
    trust: Trust<'_>,
    pod: PodView<'_>,
    selection: &Selection,
) -> Judgement {
    let placed = Placement::read(|key| pod.annotations.get(key).map(String::as_str));
    let annotated = !matches!(placed, Ok(None));
    let (gpu_container, pod_gpus) = match pod.requests {
        Requests::Known {
            pod_gpus,
            container,
        } => (*container, *pod_gpus),
        // Without the spec the GPU count cannot be checked: a placement is never honoured
        // blind (the kubelet retries the container, by then the spec is usually known).
        Requests::Unknown(why) if annotated => {
            return Judgement::Gpu(refused(
                Case::SpecUnknown,
                format!(
                    "Tandem: the pod carries a placement, but its spec could not be read \
                     ({why}), so its GPU request cannot be checked against it"
                ),
            ));
        }
        // A pod Tandem did not place: judged by what its device plugin left in it.
        Requests::Unknown(_) => (selection.has_gpus(), 0),
    };
    if !gpu_container {
        return no_gpu(policy, pod.namespace);
    }
    let placement = match placed {
        Err(error) => {
            return Judgement::Gpu(refused(
                Case::Malformed,
                format!("Tandem: the pod's placement cannot be read: {error}"),
            ));
        }
        Ok(None) => {
            return Judgement::Gpu(fallback(
                Case::WithoutAnnotation,
                policy.without_annotation,
                format!(
                    "Tandem: the pod was placed without Tandem (no {GPU_ANNOTATION} annotation)"
                ),
                selection,
            ));
        }
        Ok(Some(placement)) => placement,
    };
    let unverified = match trust {
        Trust::Insecure => true,
        Trust::Signed(verifier) => match verifier.verify(pod.uid, &placement) {
            Ok(_) => false,
            Err(error) => return Judgement::Gpu(unsigned(policy, &error, selection)),
        },
    };
    Judgement::Gpu(
        match checked(policy, inventory, &placement, pod_gpus, selection) {
            Ok(verdict) | Err(verdict) => Verdict {
                unverified,
                ..verdict
            },
        },
    )
}

/// A signed (or, insecurely, unchecked) placement checked against the node and the pod: the
/// assignment when it holds, else the refusal (or the fallback of a pod placed elsewhere).
fn checked(
    policy: &Policy,
    inventory: &Inventory,
    placement: &Placement,
    pod_gpus: u32,
    selection: &Selection,
) -> Result<Verdict, Verdict> {
    let names = placement.gpu_list();
    if placement.node() != policy.node {
        return Err(fallback(
            Case::OtherNode,
            policy.other_node,
            format!(
                "Tandem placed the pod on GPU {names}, not on this node ({})",
                policy.node
            ),
            selection,
        ));
    }
    let named = placement.gpus().len();
    if usize::try_from(pod_gpus).ok() != Some(named) {
        let gpus = if named == 1 { "GPU" } else { "GPUs" };
        return Err(refused(
            Case::GpuCount,
            format!(
                "Tandem: the placement names {named} {gpus} ({names}) but the pod requests \
                 {pod_gpus} {}",
                policy.resource
            ),
        ));
    }
    let mut gpus = Vec::with_capacity(named);
    for wanted in placement.gpus() {
        match inventory.get(wanted.index) {
            Some(gpu) => gpus.push(gpu.clone()),
            None => {
                let have: Vec<String> = inventory
                    .gpus()
                    .iter()
                    .map(|gpu| gpu.index.to_string())
                    .collect();
                return Err(refused(
                    Case::UnknownGpu,
                    format!(
                        "Tandem placed the pod on GPU {wanted}, but this node has GPU indexes [{}]",
                        have.join(", ")
                    ),
                ));
            }
        }
    }
    // Only pods that share carry a reservation; a multi-GPU pod has its GPUs to itself.
    if let [gpu] = gpus.as_slice() {
        match placement.reserved_mib() {
            // A GPU file may leave the memory out (0): nothing to compare with.
            Some(mib) if gpu.memory_mib > 0 && mib > gpu.memory_mib => {
                return Err(refused(
                    Case::ReservationTooLarge,
                    format!(
                        "Tandem: the placement reserves {mib} MiB on GPU {names}, which has {} MiB",
                        gpu.memory_mib
                    ),
                ));
            }
            None if policy.memory != MemoryLimit::Report => {
                return Err(refused(
                    Case::NoReservation,
                    format!(
                        "Tandem: the placement on GPU {names} reserves no memory, and this node \
                         enforces memory limits ({})",
                        policy.memory.name()
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(assigned(policy, placement, gpus, selection))
}

/// A container that asks for no GPU: it sees none, unless its namespace is exempt.
fn no_gpu(policy: &Policy, namespace: &str) -> Judgement {
    if policy.all_gpus_namespaces.contains(namespace) {
        return Judgement::NoGpu {
            exempt: true,
            adjustment: ContainerAdjustment::default(),
        };
    }
    Judgement::NoGpu {
        exempt: false,
        adjustment: ContainerAdjustment {
            env: vec![KeyValue {
                key: VISIBLE_DEVICES.to_owned(),
                value: NO_GPU.to_owned(),
            }],
            linux: None,
        },
    }
}

/// The verdict on a placement whose signature does not hold.
fn unsigned(policy: &Policy, error: &SignatureError, selection: &Selection) -> Verdict {
    let case = match error {
        SignatureError::Missing => Case::Unsigned,
        _ => Case::BadSignature,
    };
    match policy.unsigned {
        Fallback::Refuse => refused(
            case,
            format!(
                "Tandem: {error}; this node refuses placements whose signature it cannot verify"
            ),
        ),
        // As a pod placed without Tandem, counted under its own case.
        Fallback::Leave => fallback(
            case,
            policy.without_annotation,
            format!("Tandem: {error}, so the pod counts as placed without Tandem"),
            selection,
        ),
    }
}

fn refused(case: Case, reason: String) -> Verdict {
    Verdict {
        case,
        action: Action::Refused,
        adjustment: ContainerAdjustment::default(),
        reason,
        gpus: Vec::new(),
        memory: None,
        unverified: false,
    }
}

fn fallback(case: Case, fallback: Fallback, why: String, selection: &Selection) -> Verdict {
    match fallback {
        Fallback::Refuse => refused(
            case,
            format!("{why}; this node refuses such GPU containers"),
        ),
        Fallback::Leave => Verdict {
            case,
            action: Action::Left,
            adjustment: ContainerAdjustment::default(),
            reason: format!("{why}; left as the device plugin chose ({selection})"),
            gpus: Vec::new(),
            memory: None,
            unverified: false,
        },
    }
}

fn assigned(
    policy: &Policy,
    placement: &Placement,
    gpus: Vec<Gpu>,
    selection: &Selection,
) -> Verdict {
    let uuids: Vec<&str> = gpus.iter().map(|gpu| gpu.uuid.as_str()).collect();
    let mut env = vec![KeyValue {
        key: VISIBLE_DEVICES.to_owned(),
        value: uuids.join(","),
    }];
    let memory = placement
        .reserved_mib()
        .filter(|_| gpus.len() == 1)
        .map(|mib| (mib, policy.memory));
    match memory {
        Some((mib, MemoryLimit::Mps)) => env.push(KeyValue {
            key: MPS_MEMORY_LIMIT.to_owned(),
            value: format!("0={mib}M"),
        }),
        Some((mib, MemoryLimit::HamiCore)) => env.push(KeyValue {
            key: HAMI_MEMORY_LIMIT.to_owned(),
            value: format!("{mib}m"),
        }),
        Some((_, MemoryLimit::Report)) | None => {}
    }
    let ours: Vec<String> = gpus.iter().map(Gpu::device_path).collect();
    let mut devices: Vec<LinuxDevice> = selection
        .device_nodes
        .iter()
        .filter(|path| !ours.contains(path))
        .map(|path| LinuxDevice {
            path: removal(path),
            ..LinuxDevice::default()
        })
        .collect();
    devices.extend(gpus.iter().map(|gpu| LinuxDevice {
        path: gpu.device_path(),
        r#type: "c".to_owned(),
        major: NVIDIA_MAJOR,
        minor: i64::from(gpu.minor),
        // As NVIDIA's own device nodes: read and write for everyone, owned by root.
        file_mode: Some(OptionalFileMode { value: 0o666 }),
        uid: Some(OptionalUInt32 { value: 0 }),
        gid: Some(OptionalUInt32 { value: 0 }),
    }));
    let mut reason = format!(
        "Tandem's GPU {} ({})",
        placement.gpu_list(),
        uuids.join(",")
    );
    if selection.has_gpus() {
        reason.push_str(&format!(" instead of {selection}"));
    }
    if let Some((mib, limit)) = memory {
        reason.push_str(&match limit {
            MemoryLimit::Report => format!("; {mib} MiB reserved, not enforced on this node"),
            enforced => format!("; {mib} MiB limit ({})", enforced.name()),
        });
    }
    Verdict {
        case: Case::Placed,
        action: Action::Assigned,
        adjustment: ContainerAdjustment {
            env,
            linux: Some(LinuxContainerAdjustment { devices }),
        },
        reason,
        gpus,
        memory,
        unverified: false,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tandem_wire::{MEMORY_ANNOTATION, SIGNATURE_ANNOTATION, Signer};

    use super::*;
    use crate::nri::api::{CdiDevice, Container, LinuxContainer};

    const UID: &str = "uid-of-the-pod";

    fn inventory() -> Inventory {
        Inventory::new(
            (0..4)
                .map(|index| Gpu {
                    index,
                    uuid: format!("GPU-node-a-{index}"),
                    // Minor numbers need not follow indexes.
                    minor: 3 - index,
                    name: "Tesla V100-SXM2-16GB".into(),
                    memory_mib: 16384,
                })
                .collect(),
        )
        .unwrap()
    }

    fn policy() -> Policy {
        Policy {
            node: "node-a".into(),
            resource: "nvidia.com/gpu".into(),
            without_annotation: Fallback::Leave,
            other_node: Fallback::Refuse,
            unsigned: Fallback::Refuse,
            memory: MemoryLimit::Report,
            all_gpus_namespaces: BTreeSet::from(["gpu-monitoring".to_owned()]),
        }
    }

    fn signer() -> &'static Signer {
        static SIGNER: std::sync::LazyLock<Signer> =
            std::sync::LazyLock::new(|| Signer::generate().unwrap().0);
        &SIGNER
    }

    fn verifier() -> Verifier {
        Verifier::from_pem(signer().public_key_pem().as_bytes()).unwrap()
    }

    /// The annotations of `gpus` with `reserved`, signed for `uid` by `key`.
    fn signed_by(key: &Signer, uid: &str, gpus: &[&str], reserved: Option<u32>) -> Annotations {
        let gpus: Vec<String> = gpus.iter().map(|gpu| (*gpu).to_owned()).collect();
        let placement = Placement::decided(&gpus, reserved).unwrap();
        key.signed(uid, placement)
            .annotations()
            .into_iter()
            .collect()
    }

    fn signed(gpus: &[&str], reserved: Option<u32>) -> Annotations {
        signed_by(signer(), UID, gpus, reserved)
    }

    type Annotations = HashMap<String, String>;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn gpus(n: u32) -> Requests {
        Requests::Known {
            pod_gpus: n,
            container: n > 0,
        }
    }

    fn judged(
        policy: &Policy,
        annotations: &Annotations,
        requests: &Requests,
        selection: &Selection,
    ) -> Judgement {
        judge(
            policy,
            &inventory(),
            Trust::Signed(&verifier()),
            PodView {
                uid: UID,
                namespace: "team-a",
                annotations,
                requests,
            },
            selection,
        )
    }

    /// The verdict on a GPU container; panics if the container is judged to ask for none.
    fn verdict(policy: &Policy, annotations: &Annotations, requests: &Requests) -> Verdict {
        match judged(policy, annotations, requests, &Selection::default()) {
            Judgement::Gpu(verdict) => verdict,
            other => panic!("not judged a GPU container: {other:?}"),
        }
    }

    /// A container as NVIDIA's device plugin (time-slicing, envvar mode) hands it over: its
    /// own choice of GPU in the environment and as a device node.
    fn device_plugin_chose(index: u32) -> Container {
        Container {
            name: "main".into(),
            env: vec![
                "PATH=/bin".into(),
                format!("{VISIBLE_DEVICES}=GPU-node-a-{index}"),
            ],
            linux: Some(LinuxContainer {
                devices: vec![LinuxDevice {
                    path: format!("/dev/nvidia{}", 3 - index),
                    ..LinuxDevice::default()
                }],
            }),
            ..Container::default()
        }
    }

    fn env(adjustment: &ContainerAdjustment) -> Vec<(String, String)> {
        adjustment
            .env
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect()
    }

    fn devices(verdict: &Verdict) -> Vec<(String, i64)> {
        verdict
            .adjustment
            .linux
            .iter()
            .flat_map(|linux| &linux.devices)
            .map(|device| (device.path.clone(), device.minor))
            .collect()
    }

    #[test]
    fn a_placed_container_gets_exactly_its_gpu_instead_of_the_device_plugins() {
        let container = device_plugin_chose(0);
        let Judgement::Gpu(verdict) = judged(
            &policy(),
            &signed(&["node-a/2"], Some(4096)),
            &gpus(1),
            &Selection::of(&container),
        ) else {
            panic!("a GPU container");
        };
        assert_eq!(
            (verdict.case, verdict.action, verdict.unverified),
            (Case::Placed, Action::Assigned, false)
        );
        assert_eq!(
            env(&verdict.adjustment),
            [(VISIBLE_DEVICES.into(), "GPU-node-a-2".into())]
        );
        // The device plugin's node (GPU 0 is /dev/nvidia3) goes, GPU 2's (/dev/nvidia1) comes.
        assert_eq!(
            devices(&verdict),
            [("-/dev/nvidia3".into(), 0), ("/dev/nvidia1".into(), 1)]
        );
        let added = &verdict.adjustment.linux.as_ref().unwrap().devices[1];
        assert_eq!((added.r#type.as_str(), added.major), ("c", NVIDIA_MAJOR));
        assert!(
            verdict.reason.contains("node-a/2") && verdict.reason.contains("instead of"),
            "{}",
            verdict.reason
        );
    }

    #[test]
    fn the_reservation_becomes_the_limit_the_node_enforces() {
        let placed = signed(&["node-a/1"], Some(12660));
        let judge_with = |memory| verdict(&Policy { memory, ..policy() }, &placed, &gpus(1));
        let mps = judge_with(MemoryLimit::Mps);
        assert!(env(&mps.adjustment).contains(&(MPS_MEMORY_LIMIT.into(), "0=12660M".into())));
        assert_eq!(mps.memory, Some((12660, MemoryLimit::Mps)));
        let hami = judge_with(MemoryLimit::HamiCore);
        assert!(env(&hami.adjustment).contains(&(HAMI_MEMORY_LIMIT.into(), "12660m".into())));
        let report = judge_with(MemoryLimit::Report);
        assert_eq!(env(&report.adjustment).len(), 1);
        assert!(
            report.reason.contains("12660 MiB reserved, not enforced"),
            "{}",
            report.reason
        );
    }

    #[test]
    fn a_multi_gpu_pod_sees_all_its_gpus_and_no_memory_limit() {
        let verdict = verdict(
            &Policy {
                memory: MemoryLimit::Mps,
                ..policy()
            },
            &signed(&["node-a/0", "node-a/3"], None),
            &gpus(2),
        );
        assert_eq!(verdict.action, Action::Assigned, "{}", verdict.reason);
        assert_eq!(
            env(&verdict.adjustment),
            [(VISIBLE_DEVICES.into(), "GPU-node-a-0,GPU-node-a-3".into())]
        );
        assert_eq!(
            devices(&verdict),
            [("/dev/nvidia3".into(), 3), ("/dev/nvidia0".into(), 0)]
        );
        assert_eq!(verdict.memory, None);
    }

    #[test]
    fn an_index_the_node_does_not_have_is_refused_not_guessed() {
        let verdict = verdict(&policy(), &signed(&["node-a/7"], Some(100)), &gpus(1));
        assert_eq!(
            (verdict.case, verdict.action),
            (Case::UnknownGpu, Action::Refused)
        );
        assert_eq!(
            verdict.reason,
            "Tandem placed the pod on GPU node-a/7, but this node has GPU indexes [0, 1, 2, 3]"
        );
    }

    #[test]
    fn pods_tandem_did_not_place_follow_the_written_policy() {
        let container = device_plugin_chose(1);
        let selection = Selection::of(&container);
        let unplaced = annotations(&[]);
        let Judgement::Gpu(left) = judged(&policy(), &unplaced, &gpus(1), &selection) else {
            panic!("a GPU container");
        };
        assert_eq!(
            (left.case, left.action),
            (Case::WithoutAnnotation, Action::Left)
        );
        assert!(
            left.reason.contains("NVIDIA_VISIBLE_DEVICES=GPU-node-a-1"),
            "{}",
            left.reason
        );
        assert_eq!(left.adjustment, ContainerAdjustment::default());

        let strict = Policy {
            without_annotation: Fallback::Refuse,
            ..policy()
        };
        let refused = verdict(&strict, &unplaced, &gpus(1));
        assert_eq!(refused.action, Action::Refused);
        assert!(
            refused.reason.contains("placed without Tandem"),
            "{}",
            refused.reason
        );

        let elsewhere = signed(&["node-b/1"], Some(100));
        let other = verdict(&policy(), &elsewhere, &gpus(1));
        assert_eq!(
            (other.case, other.action),
            (Case::OtherNode, Action::Refused)
        );
        assert!(other.reason.contains("node-b/1") && other.reason.contains("(node-a)"));
        let lenient = Policy {
            other_node: Fallback::Leave,
            ..policy()
        };
        assert_eq!(verdict(&lenient, &elsewhere, &gpus(1)).action, Action::Left);
    }

    #[test]
    fn malformed_annotations_are_refused_with_the_parse_error() {
        for (gpus_named, quoted) in [
            ("node-a", "\"node-a\""),
            ("node-a/0,node-a/0", "names GPU node-a/0 twice"),
            ("node-a/0,node-b/1", "GPUs of two nodes"),
        ] {
            let verdict = verdict(
                &policy(),
                &annotations(&[(GPU_ANNOTATION, gpus_named)]),
                &gpus(2),
            );
            assert_eq!(
                (verdict.case, verdict.action),
                (Case::Malformed, Action::Refused),
                "{gpus_named}"
            );
            assert!(verdict.reason.contains(quoted), "{}", verdict.reason);
        }
        let zero = verdict(
            &policy(),
            &annotations(&[(GPU_ANNOTATION, "node-a/0"), (MEMORY_ANNOTATION, "0")]),
            &gpus(1),
        );
        assert_eq!(zero.case, Case::Malformed, "{}", zero.reason);
    }

    #[test]
    fn placements_without_a_valid_signature_are_refused_by_default() {
        // The attack: a one-GPU pod annotated with every GPU and no reservation.
        let grab = annotations(&[(GPU_ANNOTATION, "node-a/0,node-a/1,node-a/2,node-a/3")]);
        let unsigned = verdict(&policy(), &grab, &gpus(1));
        assert_eq!(
            (unsigned.case, unsigned.action),
            (Case::Unsigned, Action::Refused)
        );
        assert_eq!(
            unsigned.reason,
            "Tandem: the placement is not signed; this node refuses placements whose \
             signature it cannot verify"
        );

        let victim = signed(&["node-a/2"], Some(4000));
        let signature = victim[SIGNATURE_ANNOTATION].clone();
        let stranger = Signer::generate().unwrap().0;
        let forgeries = [
            // The victim's signature on a grab of every GPU.
            {
                let mut forged = grab.clone();
                forged.insert(SIGNATURE_ANNOTATION.into(), signature.clone());
                forged
            },
            // The victim's whole placement, copied onto another pod.
            victim.clone(),
            // The victim's placement without its reservation.
            {
                let mut forged = victim.clone();
                forged.remove(MEMORY_ANNOTATION);
                forged
            },
            // A placement signed by a key this node does not trust.
            signed_by(&stranger, UID, &["node-a/2"], Some(4000)),
            // Not a signature at all.
            {
                let mut forged = victim.clone();
                forged.insert(SIGNATURE_ANNOTATION.into(), "ed25519:x:not base64!".into());
                forged
            },
        ];
        for forged in &forgeries {
            let verdict = judge(
                &policy(),
                &inventory(),
                Trust::Signed(&verifier()),
                PodView {
                    uid: "uid-of-another-pod",
                    namespace: "team-a",
                    annotations: forged,
                    requests: &gpus(1),
                },
                &Selection::default(),
            );
            let Judgement::Gpu(verdict) = verdict else {
                panic!("a GPU container");
            };
            assert_eq!(
                (verdict.case, verdict.action),
                (Case::BadSignature, Action::Refused),
                "{forged:?}: {}",
                verdict.reason
            );
            assert!(
                verdict.reason.starts_with("Tandem: the placement"),
                "{}",
                verdict.reason
            );
        }
        // The victim's own pod verifies.
        assert_eq!(
            verdict(&policy(), &victim, &gpus(1)).action,
            Action::Assigned
        );
    }

    #[test]
    fn with_unsigned_leave_an_unverified_placement_counts_as_placed_without_tandem() {
        let grab = annotations(&[(GPU_ANNOTATION, "node-a/0,node-a/1")]);
        let leave = Policy {
            unsigned: Fallback::Leave,
            ..policy()
        };
        let left = verdict(&leave, &grab, &gpus(1));
        assert_eq!((left.case, left.action), (Case::Unsigned, Action::Left));
        assert_eq!(left.adjustment, ContainerAdjustment::default());
        assert!(
            left.reason.contains("counts as placed without Tandem"),
            "{}",
            left.reason
        );
        let strict = Policy {
            without_annotation: Fallback::Refuse,
            ..leave
        };
        let refused = verdict(&strict, &grab, &gpus(1));
        assert_eq!(
            (refused.case, refused.action),
            (Case::Unsigned, Action::Refused)
        );
    }

    #[test]
    fn insecure_trust_honours_an_unsigned_placement_but_marks_it_unverified() {
        let placed = annotations(&[(GPU_ANNOTATION, "node-a/1"), (MEMORY_ANNOTATION, "100")]);
        let requests = gpus(1);
        let Judgement::Gpu(verdict) = judge(
            &policy(),
            &inventory(),
            Trust::Insecure,
            PodView {
                uid: UID,
                namespace: "team-a",
                annotations: &placed,
                requests: &requests,
            },
            &Selection::default(),
        ) else {
            panic!("a GPU container");
        };
        assert_eq!(
            (verdict.action, verdict.unverified),
            (Action::Assigned, true)
        );
    }

    #[test]
    fn a_placement_must_name_as_many_gpus_as_the_pod_requests() {
        let every = signed(&["node-a/0", "node-a/1", "node-a/2", "node-a/3"], None);
        let grab = verdict(&policy(), &every, &gpus(1));
        assert_eq!((grab.case, grab.action), (Case::GpuCount, Action::Refused));
        assert_eq!(
            grab.reason,
            "Tandem: the placement names 4 GPUs (node-a/0,node-a/1,node-a/2,node-a/3) but the \
             pod requests 1 nvidia.com/gpu"
        );
        let short = verdict(&policy(), &signed(&["node-a/0"], Some(100)), &gpus(2));
        assert_eq!(short.case, Case::GpuCount);
        assert!(
            short
                .reason
                .contains("names 1 GPU (node-a/0) but the pod requests 2"),
            "{}",
            short.reason
        );
    }

    #[test]
    fn reservations_the_gpu_cannot_hold_or_missing_where_enforced_are_refused() {
        let too_large = verdict(&policy(), &signed(&["node-a/1"], Some(16385)), &gpus(1));
        assert_eq!(
            (too_large.case, too_large.reason.as_str()),
            (
                Case::ReservationTooLarge,
                "Tandem: the placement reserves 16385 MiB on GPU node-a/1, which has 16384 MiB"
            )
        );
        let whole = verdict(&policy(), &signed(&["node-a/1"], Some(16384)), &gpus(1));
        assert_eq!(whole.action, Action::Assigned);

        let none = signed(&["node-a/1"], None);
        // Reported only: nothing to enforce, so nothing missing.
        assert_eq!(verdict(&policy(), &none, &gpus(1)).action, Action::Assigned);
        for memory in [MemoryLimit::Mps, MemoryLimit::HamiCore] {
            let refused = verdict(&Policy { memory, ..policy() }, &none, &gpus(1));
            assert_eq!(
                (refused.case, refused.action),
                (Case::NoReservation, Action::Refused)
            );
            assert!(
                refused.reason.contains(&format!(
                    "reserves no memory, and this node enforces memory limits ({})",
                    memory.name()
                )),
                "{}",
                refused.reason
            );
        }
    }

    #[test]
    fn an_annotated_container_whose_spec_is_unknown_is_refused_not_guessed() {
        let unknown = Requests::Unknown("the API server did not answer within 1000 ms".into());
        for placed in [
            signed(&["node-a/1"], Some(100)),
            annotations(&[(GPU_ANNOTATION, "garbage")]),
        ] {
            let refused = verdict(&policy(), &placed, &unknown);
            assert_eq!(
                (refused.case, refused.action),
                (Case::SpecUnknown, Action::Refused)
            );
            assert!(
                refused.reason.contains("did not answer within 1000 ms"),
                "{}",
                refused.reason
            );
        }
        // A pod Tandem did not place is judged by what its device plugin left in it.
        let container = device_plugin_chose(1);
        let unplaced = annotations(&[]);
        let Judgement::Gpu(left) =
            judged(&policy(), &unplaced, &unknown, &Selection::of(&container))
        else {
            panic!("a GPU container");
        };
        assert_eq!(left.case, Case::WithoutAnnotation);
    }

    #[test]
    fn containers_without_a_gpu_see_none_unless_their_namespace_is_exempt() {
        let void = ContainerAdjustment {
            env: vec![KeyValue {
                key: VISIBLE_DEVICES.into(),
                value: NO_GPU.into(),
            }],
            linux: None,
        };
        let hidden = Judgement::NoGpu {
            exempt: false,
            adjustment: void,
        };
        let sidecar = Requests::Known {
            pod_gpus: 1,
            container: false,
        };
        // A sidecar of a placed pod.
        let placed = signed(&["node-a/1"], Some(100));
        assert_eq!(
            judged(&policy(), &placed, &sidecar, &Selection::default()),
            hidden
        );
        // A pod that asks for no GPU and sets NVIDIA_VISIBLE_DEVICES=all itself.
        let all = Container {
            env: vec![format!("{VISIBLE_DEVICES}=all")],
            ..Container::default()
        };
        let none = annotations(&[]);
        let strict = Policy {
            without_annotation: Fallback::Refuse,
            ..policy()
        };
        assert_eq!(
            judged(&strict, &none, &gpus(0), &Selection::of(&all)),
            hidden
        );
        // The same with its spec unknown: `all` is no device plugin's choice.
        let unknown = Requests::Unknown("no answer".into());
        assert_eq!(
            judged(&strict, &none, &unknown, &Selection::of(&all)),
            hidden
        );
        // A monitoring pod in an exempt namespace keeps its value.
        let monitor = judge(
            &policy(),
            &inventory(),
            Trust::Signed(&verifier()),
            PodView {
                uid: UID,
                namespace: "gpu-monitoring",
                annotations: &none,
                requests: &gpus(0),
            },
            &Selection::of(&all),
        );
        assert_eq!(
            monitor,
            Judgement::NoGpu {
                exempt: true,
                adjustment: ContainerAdjustment::default()
            }
        );
    }

    #[test]
    fn device_plugin_evidence_is_env_device_nodes_or_cdi_devices() {
        let mut container = Container::default();
        assert!(!Selection::of(&container).has_gpus());
        container.cdi_devices = vec![CdiDevice {
            name: "nvidia.com/gpu=GPU-node-a-0".into(),
        }];
        assert!(Selection::of(&container).has_gpus());
        for value in ["void", "all", "none"] {
            let container = Container {
                env: vec![format!("{VISIBLE_DEVICES}={value}")],
                ..Container::default()
            };
            assert!(!Selection::of(&container).has_gpus(), "{value}");
        }
        assert!(Selection::of(&device_plugin_chose(2)).has_gpus());
    }

    proptest! {
        /// Whatever a pod's annotations and requests, a container is assigned GPUs only when a
        /// trusted key signed that placement for that pod, and then gets exactly as many
        /// distinct GPUs of this node as the pod requests, with a reservation the GPU holds.
        #[test]
        fn only_signed_consistent_placements_are_assigned(
            indexes in proptest::collection::vec(0u32..6, 0..6),
            node_b in any::<bool>(),
            reserved in proptest::option::of(0u32..20_000),
            requested in 0u32..6,
            signing in 0u8..4,
            memory in prop_oneof![
                Just(MemoryLimit::Report), Just(MemoryLimit::Mps), Just(MemoryLimit::HamiCore)
            ],
        ) {
            let node = if node_b { "node-b" } else { "node-a" };
            let list: Vec<String> = indexes.iter().map(|i| format!("{node}/{i}")).collect();
            let mut pod = annotations(&[(GPU_ANNOTATION, &list.join(","))]);
            if let Some(mib) = reserved {
                pod.insert(MEMORY_ANNOTATION.into(), mib.to_string());
            }
            let stranger = Signer::generate().unwrap().0;
            if let Ok(Some(placement)) = Placement::read(|k| pod.get(k).map(String::as_str)) {
                let signature = match signing {
                    0 => None,
                    1 => Some(signer().sign(UID, &placement)),
                    2 => Some(signer().sign("another-pod", &placement)),
                    _ => Some(stranger.sign(UID, &placement)),
                };
                if let Some(signature) = signature {
                    pod.insert(SIGNATURE_ANNOTATION.into(), signature);
                }
            }
            let policy = Policy { memory, ..policy() };
            let judgement = judged(&policy, &pod, &gpus(requested), &Selection::default());
            if let Judgement::Gpu(verdict) = judgement
                && verdict.action == Action::Assigned
            {
                prop_assert_eq!(signing, 1);
                prop_assert_eq!(node, "node-a");
                prop_assert_eq!(verdict.gpus.len(), requested as usize);
                let distinct: BTreeSet<u32> = verdict.gpus.iter().map(|g| g.index).collect();
                prop_assert_eq!(distinct.len(), verdict.gpus.len());
                if let ([gpu], Some((mib, _))) = (verdict.gpus.as_slice(), verdict.memory) {
                    prop_assert!(mib > 0 && mib <= gpu.memory_mib);
                }
                if verdict.gpus.len() == 1 && memory != MemoryLimit::Report {
                    prop_assert!(verdict.memory.is_some());
                }
            }
        }
    }
}
