//! The placement a scheduler path of Tandem writes on a pod: the GPUs it chose, the memory the
//! guard reserved there, and the signature over both.
//!
//! Every path writes these annotations before the kubelet sees the pod (the extender and the
//! framework plugin on the Binding, whose annotations the API server copies onto the pod; the
//! Volcano extender by a patch before vc-scheduler binds), and the kubelet hands a pod's
//! annotations to the container runtime with its sandbox — which is how they reach
//! `tandem-node`. Reading is strict: a placement names at least one GPU, all on one node, each
//! once, and a reservation is a positive whole number of MiB.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// Pod annotation naming the GPUs Tandem bound the pod to: `<node>/<index>`, comma-separated
/// for a pod that needs several (the index is NVML's, as `nvidia-smi` numbers the GPUs).
pub const GPU_ANNOTATION: &str = "tandem.dev/gpu";

/// Pod annotation with the device memory, in MiB, Tandem's memory guard reserved for the pod
/// on its GPU (the predicted peak plus the memory model's margin, or the whole GPU when
/// unknown). Written for one-GPU pods, the only ones that share.
pub const MEMORY_ANNOTATION: &str = "tandem.dev/gpu-memory-mib";

/// Pod annotation with the scheduler's signature over the pod's UID and the two annotations
/// above ([`crate::signature`]): `ed25519:<key id>:<base64 signature>`.
pub const SIGNATURE_ANNOTATION: &str = "tandem.dev/placement-signature";

/// Every annotation only Tandem's scheduler paths may write (the chart's admission policy
/// refuses them from anyone else).
pub const ANNOTATIONS: [&str; 3] = [GPU_ANNOTATION, MEMORY_ANNOTATION, SIGNATURE_ANNOTATION];

/// Most GPUs one placement may name: more than any node has, far fewer than an annotation
/// could list.
pub const MAX_GPUS: usize = 64;

/// Longest node name a placement may carry (a Kubernetes node name is a DNS subdomain).
pub const MAX_NODE_NAME: usize = 253;

/// Longest signature annotation read; a real one is about a hundred characters.
pub const MAX_SIGNATURE: usize = 256;

/// One GPU of a placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GpuRef {
    /// The node's name.
    pub node: String,
    /// The GPU's index on that node.
    pub index: u32,
}

impl fmt::Display for GpuRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.node, self.index)
    }
}

impl FromStr for GpuRef {
    type Err = PlacementError;

    /// Reads `<node>/<index>`.
    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let bad = || PlacementError::Gpu(entry.to_owned());
        let (node, index) = entry.rsplit_once('/').ok_or_else(bad)?;
        let index = index.parse().map_err(|_| bad())?;
        let plausible = !node.is_empty()
            && node.len() <= MAX_NODE_NAME
            && !node.contains([',', '/'])
            && !node.chars().any(|c| c.is_whitespace() || c.is_control());
        if !plausible {
            return Err(bad());
        }
        Ok(Self {
            node: node.to_owned(),
            index,
        })
    }
}

/// Tandem's decision for a pod, as its annotations carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    gpus: Vec<GpuRef>,
    reserved_mib: Option<u32>,
    signature: Option<String>,
}

/// Why a placement cannot be read or written.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PlacementError {
    /// [`GPU_ANNOTATION`] holds an entry that is not `<node>/<index>` (or a node name that
    /// cannot be one).
    #[error("{GPU_ANNOTATION} entry {0:?} is not <node>/<index>")]
    Gpu(String),
    /// [`GPU_ANNOTATION`] is present but names no GPU.
    #[error("{GPU_ANNOTATION} names no GPU")]
    Empty,
    /// [`GPU_ANNOTATION`] names one GPU twice.
    #[error("{GPU_ANNOTATION} names GPU {0} twice")]
    Duplicate(String),
    /// [`GPU_ANNOTATION`] names GPUs of two nodes.
    #[error("{GPU_ANNOTATION} names GPUs of two nodes, {0} and {1}")]
    Nodes(String, String),
    /// [`GPU_ANNOTATION`] names more GPUs than [`MAX_GPUS`].
    #[error("{GPU_ANNOTATION} names {0} GPUs, more than {MAX_GPUS}")]
    TooMany(usize),
    /// [`MEMORY_ANNOTATION`] is not a positive whole number of MiB.
    #[error("{MEMORY_ANNOTATION} {0:?} is not a positive whole number of MiB")]
    Memory(String),
    /// [`SIGNATURE_ANNOTATION`] is longer than [`MAX_SIGNATURE`].
    #[error("{SIGNATURE_ANNOTATION} is {0} characters long, more than {MAX_SIGNATURE}")]
    SignatureLength(usize),
}

impl Placement {
    /// A scheduler path's decision: `gpus` as the engine names them (`<node>/<index>`) and the
    /// guard's reservation, kept only for a one-GPU placement (a pod on several GPUs has them
    /// to itself). Unsigned until [`crate::Signer::sign`].
    pub fn decided(gpus: &[String], reserved_mib: Option<u32>) -> Result<Self, PlacementError> {
        let gpus = checked(gpus.iter().map(String::as_str))?;
        if reserved_mib == Some(0) {
            return Err(PlacementError::Memory("0".into()));
        }
        let reserved_mib = reserved_mib.filter(|_| gpus.len() == 1);
        Ok(Self {
            gpus,
            reserved_mib,
            signature: None,
        })
    }

    /// The placement a pod's annotations carry, looked up by `annotation`: `None` when the pod
    /// has no [`GPU_ANNOTATION`] (Tandem did not place it).
    pub fn read<'a>(
        annotation: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<Self>, PlacementError> {
        let Some(list) = annotation(GPU_ANNOTATION) else {
            return Ok(None);
        };
        let gpus = checked(list.split(','))?;
        let reserved_mib = annotation(MEMORY_ANNOTATION)
            .map(|text| match text.trim().parse::<u32>() {
                Ok(mib) if mib > 0 => Ok(mib),
                _ => Err(PlacementError::Memory(text.to_owned())),
            })
            .transpose()?;
        let signature = annotation(SIGNATURE_ANNOTATION)
            .map(|text| {
                if text.len() > MAX_SIGNATURE {
                    Err(PlacementError::SignatureLength(text.len()))
                } else {
                    Ok(text.trim().to_owned())
                }
            })
            .transpose()?;
        Ok(Some(Self {
            gpus,
            reserved_mib,
            signature,
        }))
    }

    /// The GPUs, in the annotation's order: at least one, each once, all on [`Self::node`].
    pub fn gpus(&self) -> &[GpuRef] {
        &self.gpus
    }

    /// The node all the GPUs are on.
    pub fn node(&self) -> &str {
        &self.gpus[0].node
    }

    /// What the memory guard reserved on the GPU, in MiB, when the pod carries it.
    pub fn reserved_mib(&self) -> Option<u32> {
        self.reserved_mib
    }

    /// The signature annotation, when the pod carries one (not verified: see
    /// [`crate::Verifier::verify`]).
    pub fn signature(&self) -> Option<&str> {
        self.signature.as_deref()
    }

    /// This placement with `signature`.
    pub fn with_signature(self, signature: String) -> Self {
        Self {
            signature: Some(signature),
            ..self
        }
    }

    /// [`GPU_ANNOTATION`]'s value: `<node>/<index>` joined with commas.
    pub fn gpu_list(&self) -> String {
        self.gpus
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The annotations that record this placement on a pod.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::from([(GPU_ANNOTATION.to_owned(), self.gpu_list())]);
        if let Some(mib) = self.reserved_mib {
            annotations.insert(MEMORY_ANNOTATION.to_owned(), mib.to_string());
        }
        if let Some(signature) = &self.signature {
            annotations.insert(SIGNATURE_ANNOTATION.to_owned(), signature.clone());
        }
        annotations
    }

    /// What a signature covers: a version line, then the pod's UID, the node, the GPUs and the
    /// reservation, one per line. Pod UIDs and node names hold no line break, and every field
    /// is named, so no two placements share a message.
    pub(crate) fn signed_message(&self, pod_uid: &str) -> Vec<u8> {
        format!(
            "{SIGNATURE_ANNOTATION}/v1\npod-uid={pod_uid}\nnode={}\ngpus={}\nreserved-mib={}\n",
            self.node(),
            self.gpu_list(),
            self.reserved_mib
                .map(|mib| mib.to_string())
                .unwrap_or_default(),
        )
        .into_bytes()
    }
}

/// The GPUs of `entries` (blank ones skipped), checked: at least one, at most [`MAX_GPUS`],
/// each once, all on one node.
fn checked<'a>(entries: impl Iterator<Item = &'a str>) -> Result<Vec<GpuRef>, PlacementError> {
    let mut gpus: Vec<GpuRef> = Vec::new();
    for entry in entries.map(str::trim).filter(|entry| !entry.is_empty()) {
        if gpus.len() == MAX_GPUS {
            return Err(PlacementError::TooMany(MAX_GPUS + 1));
        }
        let gpu: GpuRef = entry.parse()?;
        if let Some(first) = gpus.first()
            && first.node != gpu.node
        {
            return Err(PlacementError::Nodes(first.node.clone(), gpu.node));
        }
        if gpus.contains(&gpu) {
            return Err(PlacementError::Duplicate(gpu.to_string()));
        }
        gpus.push(gpu);
    }
    if gpus.is_empty() {
        return Err(PlacementError::Empty);
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<Placement>, PlacementError> {
        let annotations: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Placement::read(|key| annotations.get(key).map(String::as_str))
    }

    #[test]
    fn reads_the_gpus_the_reservation_and_the_signature() {
        let placed = read(&[
            (GPU_ANNOTATION, "gpu-a.example/2"),
            (MEMORY_ANNOTATION, "12660"),
            (SIGNATURE_ANNOTATION, "ed25519:0a1b2c3d:AAAA"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            placed.gpus(),
            [GpuRef {
                node: "gpu-a.example".into(),
                index: 2
            }]
        );
        assert_eq!(placed.node(), "gpu-a.example");
        assert_eq!(placed.reserved_mib(), Some(12660));
        assert_eq!(placed.signature(), Some("ed25519:0a1b2c3d:AAAA"));

        let several = read(&[(GPU_ANNOTATION, "n/0, n/1")]).unwrap().unwrap();
        assert_eq!(several.gpu_list(), "n/0,n/1");
        assert_eq!((several.reserved_mib(), several.signature()), (None, None));
    }

    #[test]
    fn a_pod_without_the_annotation_has_no_placement() {
        assert_eq!(read(&[(MEMORY_ANNOTATION, "100")]), Ok(None));
    }

    #[test]
    fn malformed_placements_are_errors_that_quote_them() {
        for bad in ["n", "n/x", "/1", "n/-1", "a b/1", "n/1/"] {
            let error = read(&[(GPU_ANNOTATION, bad)]).unwrap_err();
            assert!(matches!(error, PlacementError::Gpu(_)), "{bad}: {error}");
            assert!(
                error.to_string().contains("is not <node>/<index>"),
                "{error}"
            );
        }
        assert_eq!(read(&[(GPU_ANNOTATION, " , ")]), Err(PlacementError::Empty));
        assert_eq!(
            read(&[(GPU_ANNOTATION, "n/0,n/0")]),
            Err(PlacementError::Duplicate("n/0".into()))
        );
        assert_eq!(
            read(&[(GPU_ANNOTATION, "n/0,m/1")]),
            Err(PlacementError::Nodes("n".into(), "m".into()))
        );
        let many: Vec<String> = (0..=MAX_GPUS).map(|i| format!("n/{i}")).collect();
        assert_eq!(
            read(&[(GPU_ANNOTATION, &many.join(","))]),
            Err(PlacementError::TooMany(MAX_GPUS + 1))
        );
        for memory in ["12 GiB", "0", "-5", ""] {
            assert_eq!(
                read(&[(GPU_ANNOTATION, "n/0"), (MEMORY_ANNOTATION, memory)]),
                Err(PlacementError::Memory(memory.into()))
            );
        }
        let long = "x".repeat(MAX_SIGNATURE + 1);
        assert_eq!(
            read(&[(GPU_ANNOTATION, "n/0"), (SIGNATURE_ANNOTATION, &long)]),
            Err(PlacementError::SignatureLength(MAX_SIGNATURE + 1))
        );
    }

    #[test]
    fn a_decision_keeps_its_reservation_only_on_one_gpu_and_round_trips() {
        let one = Placement::decided(&["n/1".into()], Some(4096)).unwrap();
        let written = one.annotations();
        assert_eq!(written[GPU_ANNOTATION], "n/1");
        assert_eq!(written[MEMORY_ANNOTATION], "4096");
        let back = Placement::read(|key| written.get(key).map(String::as_str));
        assert_eq!(back, Ok(Some(one)));

        let two = Placement::decided(&["n/1".into(), "n/3".into()], Some(4096)).unwrap();
        assert_eq!(two.reserved_mib(), None);
        assert!(!two.annotations().contains_key(MEMORY_ANNOTATION));
        assert_eq!(
            Placement::decided(&["n/1".into(), "n/1".into()], None),
            Err(PlacementError::Duplicate("n/1".into()))
        );
    }

    #[test]
    fn every_field_changes_the_signed_message() {
        let base = Placement::decided(&["n/1".into()], Some(100)).unwrap();
        let message = base.signed_message("uid-1");
        let others = [
            base.signed_message("uid-2"),
            Placement::decided(&["m/1".into()], Some(100))
                .unwrap()
                .signed_message("uid-1"),
            Placement::decided(&["n/2".into()], Some(100))
                .unwrap()
                .signed_message("uid-1"),
            Placement::decided(&["n/1".into()], Some(101))
                .unwrap()
                .signed_message("uid-1"),
            Placement::decided(&["n/1".into()], None)
                .unwrap()
                .signed_message("uid-1"),
        ];
        for other in others {
            assert_ne!(message, other);
        }
        // The signature itself is not part of what it signs.
        assert_eq!(
            base.clone()
                .with_signature("ed25519:x:y".into())
                .signed_message("uid-1"),
            message
        );
    }
}
