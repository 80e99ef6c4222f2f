//! The node's GPUs: for each index Tandem names (NVML's, as `nvidia-smi` numbers them), the
//! GPU's UUID and the minor number of its device node `/dev/nvidia<minor>`.
//!
//! On a GPU node they come from NVML ([`Inventory::from_nvml`]; `nvml-wrapper` loads
//! `libnvidia-ml.so.1` at run time, so the binary starts without the driver and says so). For
//! tests and machines without GPUs they come from a file ([`Inventory::from_file`]):
//!
//! ```json
//! {"gpus": [{"index": 0, "uuid": "GPU-1c5a…", "minor": 0, "name": "Tesla V100-SXM2-16GB", "memory_mib": 16384}]}
//! ```
//!
//! An index the node does not have is an error for the caller to report, never a guess.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use serde::{Deserialize, Serialize};
use thiserror::Error;

const MIB: u64 = 1 << 20;

/// One GPU of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// NVML's index, the one Tandem's annotation names.
    pub index: u32,
    /// The GPU's UUID (`GPU-…`), what `NVIDIA_VISIBLE_DEVICES` selects it by.
    pub uuid: String,
    /// The minor number of its device node, `/dev/nvidia<minor>` (not always the index).
    pub minor: u32,
    /// The product name, as NVML reports it.
    #[serde(default)]
    pub name: String,
    /// Its device memory, in MiB.
    #[serde(default)]
    pub memory_mib: u32,
}

impl Gpu {
    /// The path of its device node.
    pub fn device_path(&self) -> String {
        format!("/dev/nvidia{}", self.minor)
    }
}

/// The node's GPUs, by index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inventory {
    gpus: Vec<Gpu>,
}

/// Why the node's GPUs cannot be known.
#[derive(Debug, Error)]
pub enum InventoryError {
    /// The NVIDIA driver's library is not there (a node without GPUs or driver).
    #[error("NVML not available (no NVIDIA driver on this node)")]
    NvmlUnavailable(#[source] NvmlError),
    /// An NVML call failed on a working driver.
    #[error("NVML call {call} failed")]
    Nvml {
        /// The call, for example `uuid`.
        call: &'static str,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// The GPU file cannot be read.
    #[error("cannot read the GPU file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The GPU file is not the documented JSON.
    #[error("the GPU file {path} is not valid")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field's path.
        #[source]
        source: serde_path_to_error::Error<serde_json::Error>,
    },
    /// The GPUs listed break a rule (two with one index or UUID, an empty UUID).
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    gpus: Vec<Gpu>,
}

impl Inventory {
    /// The GPUs given, checked: indexes, UUIDs and minor numbers unique, UUIDs not empty.
    pub fn new(mut gpus: Vec<Gpu>) -> Result<Self, InventoryError> {
        gpus.sort_by_key(|gpu| gpu.index);
        let mut uuids = BTreeSet::new();
        let mut minors = BTreeSet::new();
        for pair in gpus.windows(2) {
            if pair[0].index == pair[1].index {
                return Err(InventoryError::Invalid(format!(
                    "two GPUs have index {}",
                    pair[0].index
                )));
            }
        }
        for gpu in &gpus {
            if gpu.uuid.trim().is_empty() {
                return Err(InventoryError::Invalid(format!(
                    "GPU {} has an empty uuid",
                    gpu.index
                )));
            }
            if !uuids.insert(gpu.uuid.as_str()) {
                return Err(InventoryError::Invalid(format!(
                    "two GPUs have uuid {}",
                    gpu.uuid
                )));
            }
            if !minors.insert(gpu.minor) {
                return Err(InventoryError::Invalid(format!(
                    "two GPUs have device minor {}",
                    gpu.minor
                )));
            }
        }
        Ok(Self { gpus })
    }

    /// The GPUs NVML sees on this node.
    pub fn from_nvml() -> Result<Self, InventoryError> {
        let nvml = Nvml::init().map_err(|error| match error {
            NvmlError::LibloadingError(_)
            | NvmlError::LibraryNotFound
            | NvmlError::DriverNotLoaded
            | NvmlError::FunctionNotFound => InventoryError::NvmlUnavailable(error),
            source => InventoryError::Nvml {
                call: "init",
                source,
            },
        })?;
        let call = |call| move |source| InventoryError::Nvml { call, source };
        let count = nvml.device_count().map_err(call("device_count"))?;
        let mut gpus = Vec::with_capacity(count as usize);
        for index in 0..count {
            let device = nvml
                .device_by_index(index)
                .map_err(call("device_by_index"))?;
            gpus.push(Gpu {
                index,
                uuid: device.uuid().map_err(call("uuid"))?,
                minor: device.minor_number().map_err(call("minor_number"))?,
                name: device.name().map_err(call("name"))?,
                memory_mib: u32::try_from(
                    device.memory_info().map_err(call("memory_info"))?.total / MIB,
                )
                .unwrap_or(u32::MAX),
            });
        }
        Self::new(gpus)
    }

    /// The GPUs listed in `path` (the format in the module's documentation).
    pub fn from_file(path: &Path) -> Result<Self, InventoryError> {
        let text = std::fs::read_to_string(path).map_err(|source| InventoryError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: File =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(&text))
                .map_err(|source| InventoryError::Parse {
                    path: path.to_owned(),
                    source,
                })?;
        Self::new(file.gpus)
    }

    /// The GPU with NVML index `index`, if the node has it.
    pub fn get(&self, index: u32) -> Option<&Gpu> {
        self.gpus
            .binary_search_by_key(&index, |gpu| gpu.index)
            .ok()
            .map(|at| &self.gpus[at])
    }

    /// Every GPU, by index.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Whether `path` is the device node of one of this node's GPUs, or of another NVIDIA GPU
    /// (`/dev/nvidia<digits>`; the control devices `nvidiactl`, `nvidia-uvm` are not GPUs).
    pub fn is_gpu_device(path: &str) -> bool {
        path.strip_prefix("/dev/nvidia")
            .is_some_and(|minor| !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()))
    }
}

impl fmt::Display for Inventory {
    /// One line per GPU, in `nvidia-smi -L`'s shape plus the device node and memory.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for gpu in &self.gpus {
            writeln!(
                f,
                "GPU {}: {} (UUID: {}) {} {} MiB",
                gpu.index,
                gpu.name,
                gpu.uuid,
                gpu.device_path(),
                gpu.memory_mib
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, uuid: &str, minor: u32) -> Gpu {
        Gpu {
            index,
            uuid: uuid.into(),
            minor,
            name: "Tesla V100-SXM2-16GB".into(),
            memory_mib: 16384,
        }
    }

    #[test]
    fn looks_gpus_up_by_index_and_names_their_device_nodes() {
        let inventory = Inventory::new(vec![gpu(1, "GPU-b", 3), gpu(0, "GPU-a", 0)]).unwrap();
        assert_eq!(inventory.get(1).unwrap().uuid, "GPU-b");
        assert_eq!(inventory.get(1).unwrap().device_path(), "/dev/nvidia3");
        assert_eq!(inventory.get(2), None);
        assert_eq!(
            inventory.to_string(),
            "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-a) /dev/nvidia0 16384 MiB\n\
             GPU 1: Tesla V100-SXM2-16GB (UUID: GPU-b) /dev/nvidia3 16384 MiB\n"
        );
    }

    #[test]
    fn duplicate_or_empty_identities_are_refused() {
        let twice = Inventory::new(vec![gpu(0, "GPU-a", 0), gpu(0, "GPU-b", 1)]).unwrap_err();
        assert_eq!(twice.to_string(), "two GPUs have index 0");
        let same_uuid = Inventory::new(vec![gpu(0, "GPU-a", 0), gpu(1, "GPU-a", 1)]).unwrap_err();
        assert_eq!(same_uuid.to_string(), "two GPUs have uuid GPU-a");
        let same_minor = Inventory::new(vec![gpu(0, "GPU-a", 0), gpu(1, "GPU-b", 0)]).unwrap_err();
        assert_eq!(same_minor.to_string(), "two GPUs have device minor 0");
        let empty = Inventory::new(vec![gpu(0, " ", 0)]).unwrap_err();
        assert_eq!(empty.to_string(), "GPU 0 has an empty uuid");
    }

    #[test]
    fn a_gpu_file_is_read_and_its_errors_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("gpus.json");
        std::fs::write(
            &good,
            r#"{"gpus": [{"index": 0, "uuid": "GPU-a", "minor": 0}]}"#,
        )
        .unwrap();
        assert_eq!(Inventory::from_file(&good).unwrap().gpus().len(), 1);

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"gpus": [{"index": 0, "uuid": 7, "minor": 0}]}"#).unwrap();
        let error = Inventory::from_file(&bad).unwrap_err();
        let chain = format!("{error}: {}", std::error::Error::source(&error).unwrap());
        assert!(
            chain.contains("bad.json") && chain.contains("gpus[0].uuid"),
            "{chain}"
        );
    }

    #[test]
    fn only_numbered_nvidia_nodes_are_gpus() {
        assert!(Inventory::is_gpu_device("/dev/nvidia0"));
        assert!(Inventory::is_gpu_device("/dev/nvidia12"));
        for other in [
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia",
            "/dev/null",
        ] {
            assert!(!Inventory::is_gpu_device(other), "{other}");
        }
    }
}
