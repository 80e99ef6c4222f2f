//! What a scheduler path of Tandem wrote on a pod: the GPUs it chose and the memory the guard
//! reserved there.
//!
//! Every path (the extender's bind, the framework plugin's bind, the Volcano extender's
//! allocate) writes both before the kubelet sees the pod, and the kubelet hands a pod's
//! annotations to the runtime with its sandbox — which is how they reach this component.

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

/// Pod annotation naming the GPUs Tandem bound the pod to: `<node>/<index>`, comma-separated
/// for a pod that needs several (the index is NVML's, as `nvidia-smi` numbers the GPUs).
pub const GPU_ANNOTATION: &str = "tandem.dev/gpu";

/// Pod annotation with the device memory, in MiB, Tandem's memory guard reserved for the pod
/// on its GPU (the predicted peak plus the memory model's margin, or the whole GPU when
/// unknown). Written for one-GPU pods, the only ones that share.
pub const MEMORY_ANNOTATION: &str = "tandem.dev/gpu-memory-mib";

/// One GPU named by [`GPU_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Tandem's decision for a pod, as its annotations carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The GPUs, in the annotation's order (at least one).
    pub gpus: Vec<GpuRef>,
    /// What the memory guard reserved on the GPU, in MiB, when the pod carries it.
    pub reserved_mib: Option<u32>,
}

/// Why a pod's Tandem annotations cannot be read.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PlacementError {
    /// [`GPU_ANNOTATION`] holds an entry that is not `<node>/<index>`.
    #[error("{GPU_ANNOTATION} entry {0:?} is not <node>/<index>")]
    Gpu(String),
    /// [`GPU_ANNOTATION`] is present but names no GPU.
    #[error("{GPU_ANNOTATION} names no GPU")]
    Empty,
    /// [`MEMORY_ANNOTATION`] is not a whole number of MiB.
    #[error("{MEMORY_ANNOTATION} {0:?} is not a whole number of MiB")]
    Memory(String),
}

/// The placement `annotations` carry: `None` when the pod has no [`GPU_ANNOTATION`] (Tandem
/// did not place it).
pub fn placement(
    annotations: &HashMap<String, String>,
) -> Result<Option<Placement>, PlacementError> {
    let Some(list) = annotations.get(GPU_ANNOTATION) else {
        return Ok(None);
    };
    let gpus = list
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (node, index) = entry
                .rsplit_once('/')
                .ok_or_else(|| PlacementError::Gpu(entry.to_owned()))?;
            let index = index
                .parse()
                .map_err(|_| PlacementError::Gpu(entry.to_owned()))?;
            if node.is_empty() {
                return Err(PlacementError::Gpu(entry.to_owned()));
            }
            Ok(GpuRef {
                node: node.to_owned(),
                index,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if gpus.is_empty() {
        return Err(PlacementError::Empty);
    }
    let reserved_mib = annotations
        .get(MEMORY_ANNOTATION)
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|_| PlacementError::Memory(text.clone()))
        })
        .transpose()?;
    Ok(Some(Placement { gpus, reserved_mib }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn reads_the_gpus_and_the_reservation() {
        let placed = placement(&annotations(&[
            (GPU_ANNOTATION, "gpu-a.example/2"),
            (MEMORY_ANNOTATION, "12660"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            placed.gpus,
            [GpuRef {
                node: "gpu-a.example".into(),
                index: 2
            }]
        );
        assert_eq!(placed.reserved_mib, Some(12660));

        let several = placement(&annotations(&[(GPU_ANNOTATION, "n/0, n/1")]))
            .unwrap()
            .unwrap();
        assert_eq!(several.gpus.len(), 2);
        assert_eq!(several.gpus[1].to_string(), "n/1");
        assert_eq!(several.reserved_mib, None);
    }

    #[test]
    fn a_pod_without_the_annotation_has_no_placement() {
        assert_eq!(placement(&annotations(&[("other", "x")])), Ok(None));
    }

    #[test]
    fn malformed_annotations_are_errors_that_quote_them() {
        for bad in ["n", "n/x", "/1", "n/-1"] {
            let error = placement(&annotations(&[(GPU_ANNOTATION, bad)])).unwrap_err();
            assert_eq!(error, PlacementError::Gpu(bad.to_owned()));
            assert!(error.to_string().contains(bad), "{error}");
        }
        assert_eq!(
            placement(&annotations(&[(GPU_ANNOTATION, " , ")])),
            Err(PlacementError::Empty)
        );
        assert_eq!(
            placement(&annotations(&[
                (GPU_ANNOTATION, "n/0"),
                (MEMORY_ANNOTATION, "12 GiB")
            ])),
            Err(PlacementError::Memory("12 GiB".into()))
        );
    }
}
