//! The verdict for one container: which GPU it gets, and with what memory limit — pure, so
//! every case is tested without a runtime.
//!
//! | the pod | a GPU container gets |
//! |---|---|
//! | placed by Tandem on GPUs of this node | exactly those GPUs: `NVIDIA_VISIBLE_DEVICES` = their UUIDs, their device nodes (whatever the device plugin chose is removed), and the memory limit of [`MemoryLimit`] |
//! | placed on a GPU index this node does not have | refused: an error, never a guess |
//! | placed on another node | [`Policy::other_node`]: refused (default) or left as the device plugin chose |
//! | not placed by Tandem (a fallback binder while Tandem was down, another scheduler) | [`Policy::without_annotation`]: left as the device plugin chose (default) or refused |
//! | annotations that do not parse | refused |
//!
//! A container that asks for no GPU is left alone whatever its pod says. Every verdict on a GPU
//! container names its [`Case`] and [`Action`] for the metrics; a refusal carries the text the
//! runtime fails the container with, which the kubelet shows in the pod's events.

use std::collections::HashMap;
use std::fmt;

use crate::inventory::{Gpu, Inventory};
use crate::nri::api::{
    ContainerAdjustment, KeyValue, LinuxContainerAdjustment, LinuxDevice, OptionalFileMode,
    OptionalUInt32, removal,
};
use crate::placement::{GPU_ANNOTATION, Placement, placement};

/// The variable NVIDIA's container toolkit selects GPUs by (and NVIDIA's device plugin sets in
/// its default `envvar` mode).
pub const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
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
    /// GPU containers of pods Tandem did not place.
    pub without_annotation: Fallback,
    /// GPU containers of pods Tandem placed on another node.
    pub other_node: Fallback,
    /// How the reservation is enforced.
    pub memory: MemoryLimit,
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
}

impl Case {
    /// Every case, for metrics that start at zero.
    pub const ALL: [Case; 5] = [
        Case::Placed,
        Case::WithoutAnnotation,
        Case::OtherNode,
        Case::UnknownGpu,
        Case::Malformed,
    ];

    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Placed => "placed",
            Self::WithoutAnnotation => "without_annotation",
            Self::OtherNode => "other_node",
            Self::UnknownGpu => "unknown_gpu",
            Self::Malformed => "malformed",
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

/// Whether a container asks for the GPU resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuRequest {
    /// Its spec requests the resource.
    Yes,
    /// Its spec does not.
    No,
    /// The spec could not be read: judged by what the device plugin put in the container.
    Unknown,
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
    /// `NVIDIA_VISIBLE_DEVICES` (not `all`, `none` or `void`, which monitoring pods such as
    /// Tandem's profiler set without asking for a GPU), GPU device nodes or CDI devices.
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

/// The verdict on `container` of a pod with `annotations`; `None` when it is not a GPU
/// container (nothing to do, nothing counted).
pub fn judge(
    policy: &Policy,
    inventory: &Inventory,
    annotations: &HashMap<String, String>,
    selection: &Selection,
    request: GpuRequest,
) -> Option<Verdict> {
    let placed = placement(annotations);
    let gpu_container = match request {
        GpuRequest::Yes => true,
        GpuRequest::No => false,
        // A pod Tandem placed is a GPU pod: its annotation says so.
        GpuRequest::Unknown => selection.has_gpus() || matches!(placed, Ok(Some(_)) | Err(_)),
    };
    if !gpu_container {
        return None;
    }
    let placement = match placed {
        Err(error) => {
            return Some(refused(
                Case::Malformed,
                format!("Tandem: the pod's placement cannot be read: {error}"),
            ));
        }
        Ok(None) => {
            return Some(fallback(
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
    if let Some(elsewhere) = placement.gpus.iter().find(|gpu| gpu.node != policy.node) {
        return Some(fallback(
            Case::OtherNode,
            policy.other_node,
            format!(
                "Tandem placed the pod on GPU {elsewhere}, not on this node ({})",
                policy.node
            ),
            selection,
        ));
    }
    let mut gpus = Vec::with_capacity(placement.gpus.len());
    for wanted in &placement.gpus {
        match inventory.get(wanted.index) {
            Some(gpu) => gpus.push(gpu.clone()),
            None => {
                let have: Vec<String> = inventory
                    .gpus()
                    .iter()
                    .map(|gpu| gpu.index.to_string())
                    .collect();
                return Some(refused(
                    Case::UnknownGpu,
                    format!(
                        "Tandem placed the pod on GPU {wanted}, but this node has GPU indexes [{}]",
                        have.join(", ")
                    ),
                ));
            }
        }
    }
    Some(assigned(policy, &placement, gpus, selection))
}

fn refused(case: Case, reason: String) -> Verdict {
    Verdict {
        case,
        action: Action::Refused,
        adjustment: ContainerAdjustment::default(),
        reason,
        gpus: Vec::new(),
        memory: None,
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
    // Only pods that share carry a reservation; a multi-GPU pod has its GPUs to itself.
    let memory = placement
        .reserved_mib
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
    let names: Vec<String> = placement.gpus.iter().map(ToString::to_string).collect();
    let mut reason = format!("Tandem's GPU {} ({})", names.join(","), uuids.join(","));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nri::api::{CdiDevice, Container, LinuxContainer};
    use crate::placement::MEMORY_ANNOTATION;

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
            without_annotation: Fallback::Leave,
            other_node: Fallback::Refuse,
            memory: MemoryLimit::Report,
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
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

    fn env(verdict: &Verdict) -> Vec<(String, String)> {
        verdict
            .adjustment
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
        let verdict = judge(
            &policy(),
            &inventory(),
            &annotations(&[(GPU_ANNOTATION, "node-a/2")]),
            &Selection::of(&container),
            GpuRequest::Yes,
        )
        .unwrap();
        assert_eq!(
            (verdict.case, verdict.action),
            (Case::Placed, Action::Assigned)
        );
        assert_eq!(
            env(&verdict),
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
        let placed = annotations(&[(GPU_ANNOTATION, "node-a/1"), (MEMORY_ANNOTATION, "12660")]);
        let judge_with = |memory| {
            let policy = Policy { memory, ..policy() };
            judge(
                &policy,
                &inventory(),
                &placed,
                &Selection::default(),
                GpuRequest::Yes,
            )
            .unwrap()
        };
        let mps = judge_with(MemoryLimit::Mps);
        assert!(env(&mps).contains(&(MPS_MEMORY_LIMIT.into(), "0=12660M".into())));
        assert_eq!(mps.memory, Some((12660, MemoryLimit::Mps)));
        let hami = judge_with(MemoryLimit::HamiCore);
        assert!(env(&hami).contains(&(HAMI_MEMORY_LIMIT.into(), "12660m".into())));
        let report = judge_with(MemoryLimit::Report);
        assert_eq!(env(&report).len(), 1);
        assert!(
            report.reason.contains("12660 MiB reserved, not enforced"),
            "{}",
            report.reason
        );
    }

    #[test]
    fn a_multi_gpu_pod_sees_all_its_gpus_and_no_memory_limit() {
        let verdict = judge(
            &Policy {
                memory: MemoryLimit::Mps,
                ..policy()
            },
            &inventory(),
            &annotations(&[
                (GPU_ANNOTATION, "node-a/0,node-a/3"),
                (MEMORY_ANNOTATION, "100"),
            ]),
            &Selection::default(),
            GpuRequest::Yes,
        )
        .unwrap();
        assert_eq!(
            env(&verdict),
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
        let verdict = judge(
            &policy(),
            &inventory(),
            &annotations(&[(GPU_ANNOTATION, "node-a/7")]),
            &Selection::default(),
            GpuRequest::Yes,
        )
        .unwrap();
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
        let left = judge(
            &policy(),
            &inventory(),
            &unplaced,
            &selection,
            GpuRequest::Yes,
        )
        .unwrap();
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
        let refused = judge(
            &strict,
            &inventory(),
            &unplaced,
            &selection,
            GpuRequest::Yes,
        )
        .unwrap();
        assert_eq!(refused.action, Action::Refused);
        assert!(
            refused.reason.contains("placed without Tandem"),
            "{}",
            refused.reason
        );

        let elsewhere = annotations(&[(GPU_ANNOTATION, "node-b/1")]);
        let other = judge(
            &policy(),
            &inventory(),
            &elsewhere,
            &selection,
            GpuRequest::Yes,
        )
        .unwrap();
        assert_eq!(
            (other.case, other.action),
            (Case::OtherNode, Action::Refused)
        );
        assert!(other.reason.contains("node-b/1") && other.reason.contains("(node-a)"));
        let lenient = Policy {
            other_node: Fallback::Leave,
            ..policy()
        };
        let left = judge(
            &lenient,
            &inventory(),
            &elsewhere,
            &selection,
            GpuRequest::Yes,
        )
        .unwrap();
        assert_eq!(left.action, Action::Left);
    }

    #[test]
    fn malformed_annotations_are_refused_with_the_parse_error() {
        let verdict = judge(
            &policy(),
            &inventory(),
            &annotations(&[(GPU_ANNOTATION, "node-a")]),
            &Selection::default(),
            GpuRequest::Unknown,
        )
        .unwrap();
        assert_eq!(
            (verdict.case, verdict.action),
            (Case::Malformed, Action::Refused)
        );
        assert!(verdict.reason.contains("\"node-a\""), "{}", verdict.reason);
    }

    #[test]
    fn containers_without_a_gpu_are_left_alone_whatever_the_pod_says() {
        let placed = annotations(&[(GPU_ANNOTATION, "node-a/1")]);
        // A sidecar of a placed pod.
        assert_eq!(
            judge(
                &policy(),
                &inventory(),
                &placed,
                &Selection::default(),
                GpuRequest::No
            ),
            None
        );
        // A monitoring pod that sees every GPU without asking for one, spec unknown.
        let monitor = Container {
            env: vec![format!("{VISIBLE_DEVICES}=all")],
            ..Container::default()
        };
        let strict = Policy {
            without_annotation: Fallback::Refuse,
            ..policy()
        };
        assert_eq!(
            judge(
                &strict,
                &inventory(),
                &annotations(&[]),
                &Selection::of(&monitor),
                GpuRequest::Unknown
            ),
            None
        );
        // With the spec unknown, a placed pod's container still gets its GPU.
        let verdict = judge(
            &policy(),
            &inventory(),
            &placed,
            &Selection::default(),
            GpuRequest::Unknown,
        );
        assert_eq!(verdict.unwrap().action, Action::Assigned);
    }

    #[test]
    fn device_plugin_evidence_is_env_device_nodes_or_cdi_devices() {
        let mut container = Container::default();
        assert!(!Selection::of(&container).has_gpus());
        container.cdi_devices = vec![CdiDevice {
            name: "nvidia.com/gpu=GPU-node-a-0".into(),
        }];
        assert!(Selection::of(&container).has_gpus());
        let container = Container {
            env: vec![format!("{VISIBLE_DEVICES}=void")],
            ..Container::default()
        };
        assert!(!Selection::of(&container).has_gpus());
        assert!(Selection::of(&device_plugin_chose(2)).has_gpus());
    }
}
