//! What the adapter knows about the cluster: GPU nodes and the pods that use their GPUs.
//!
//! Kubernetes counts GPUs per node (`nvidia.com/gpu: 4`) but not which pods share which GPU,
//! so Tandem records its own choice on the pod ([`GPU_ANNOTATION`], written by `bind` and
//! signed: [`crate::placement`]) and rebuilds every GPU's residents from the pods carrying a
//! placement it trusts. This module is pure: the
//! watchers in [`crate::watch`] feed it Node and Pod objects, and it answers with the engine's
//! [`Gpu`] records.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use tandem_api::{Gpu, GpuSpec, Job, ModelSummary};

use tandem_adapter_core::JobKeys;
use tandem_adapter_core::declaration::{Carrier, Declaration, Declared, Field, Raw, Refusal};
use tandem_adapter_core::identity::JOB_LABEL;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The annotations of a placement, as [`tandem_wire`] defines them (one definition for the
/// schedulers that write them and the nodes that read them).
pub use crate::placement::{ANNOTATIONS, GPU_ANNOTATION, MEMORY_ANNOTATION, SIGNATURE_ANNOTATION};
use crate::placement::{Placements, Read};

/// Node label with the GPU product, as NVIDIA's GPU feature discovery sets it
/// (for example `Tesla-V100-SXM2-16GB`).
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// Node label with each GPU's memory in MiB, as GPU feature discovery sets it.
pub const MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// Node label with the number of physical GPUs, as GPU feature discovery sets it. With
/// time-slicing the device plugin advertises `replicas` units per GPU; this label still counts
/// devices, so Tandem judges the real GPUs.
pub const COUNT_LABEL: &str = "nvidia.com/gpu.count";

/// The GPU model name the engine uses for a product label (shared with the node profiler, so
/// profiles and GPUs name models alike).
pub use tandem_adapter_core::gpu_models::gpu_model;

/// The GPUs of one node: how many, and what each is. `Err` says, for a person, why the node
/// has none Tandem can use.
pub fn node_gpus(node: &Node, resource: &str) -> Result<(u32, GpuSpec), String> {
    let count = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .and_then(|resources| resources.get(resource))
        .map(|quantity| quantity.0.trim().parse::<u32>())
        .transpose()
        .map_err(|_| format!("node's {resource} capacity is not a whole number"))?
        .unwrap_or(0);
    if count == 0 {
        return Err(format!("node has no {resource}"));
    }
    let labels = node.metadata.labels.as_ref();
    let count = match labels.and_then(|l| l.get(COUNT_LABEL)) {
        Some(text) => match text.trim().parse::<u32>() {
            Ok(devices) if devices > 0 => devices,
            _ => {
                return Err(format!(
                    "node label {COUNT_LABEL}={text:?} is not a GPU count"
                ));
            }
        },
        None => count,
    };
    let product = labels
        .and_then(|l| l.get(PRODUCT_LABEL))
        .ok_or_else(|| format!("node has {resource} but no {PRODUCT_LABEL} label"))?;
    let (model, known_memory) = gpu_model(product);
    let memory_mib = match labels.and_then(|l| l.get(MEMORY_LABEL)) {
        Some(text) => text
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("node label {MEMORY_LABEL}={text:?} is not MiB"))?,
        None => known_memory.ok_or_else(|| {
            format!("GPU memory of {product:?} is unknown: set the {MEMORY_LABEL} label")
        })?,
    };
    Ok((
        count,
        GpuSpec {
            model,
            memory_mib,
            ..GpuSpec::default()
        },
    ))
}

/// What the adapter needs of one pod that requests managed GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuPod {
    /// The pod's UID.
    pub uid: String,
    /// Keyed job id (see [`tandem_adapter_core::identity`]).
    pub job: String,
    /// GPUs requested.
    pub gpus: u32,
    /// Node the pod is bound to, if any.
    pub node: Option<String>,
    /// GPUs named by [`GPU_ANNOTATION`], when Tandem's placement is trusted (signed with the
    /// front-end's key, see [`crate::placement`]); empty otherwise.
    pub assigned: Vec<String>,
    /// Why the pod's placement annotations are ignored, when it carries some Tandem does not
    /// vouch for (forged, changed since Tandem signed them, malformed): the pod then counts as
    /// one bound without Tandem's record.
    pub untrusted: Option<String>,
    /// Whether the pod still holds its GPUs (not finished, not being deleted).
    pub active: bool,
    /// What the pod declared in its annotations (`tandem.dev/priority`, `tandem.dev/work`,
    /// `tandem.dev/model`, `tandem.dev/batch-size`), or why Tandem refuses it.
    pub declared: Declared,
    /// The model it declared, as far as the front-end has it.
    pub model: DeclaredModel,
}

/// The model a pod declares (`tandem.dev/model`), as far as the front-end has it.
#[derive(Debug, Clone, PartialEq)]
pub enum DeclaredModel {
    /// No model declared.
    Undeclared,
    /// Its summary: given inline, or read from the ConfigMap it references.
    Known(ModelSummary),
    /// Given by reference, its ConfigMap not read yet: not a refusal, a later call may find it.
    NotRead,
    /// Given by reference and not usable: why (the ConfigMap missing or not a model, or a
    /// front-end that reads no references).
    Unusable(String),
}

impl DeclaredModel {
    /// What [`DeclaredModel::NotRead`] tells a person.
    pub const NOT_READ: &str =
        "not read yet: Tandem reads the ConfigMap when it sees the pod; retried shortly";
}

impl GpuPod {
    /// The summary of its declared model, once known.
    pub fn summary(&self) -> Option<&ModelSummary> {
        match &self.model {
            DeclaredModel::Known(summary) => Some(summary),
            _ => None,
        }
    }

    /// The engine's record of the pod as a job to place: its keyed id and what it declared.
    pub fn job(&self) -> Job {
        match &self.declared {
            Ok(declaration) => declaration.job(&self.job, self.summary()),
            Err(_) => Job::new(self.job.clone()),
        }
    }

    /// The engine's record of the pod as a GPU's resident: its id and declared model (what
    /// the memory guard needs of a job that was not profiled yet).
    pub fn resident(&self) -> Job {
        Job {
            declared: self.summary().cloned(),
            ..Job::new(self.job.clone())
        }
    }

    /// Why Tandem refuses what the pod declared, if it does: a value that does not parse, or
    /// a model reference that could not be read.
    pub fn refusal(&self) -> Option<Refusal> {
        let declaration = match &self.declared {
            Err(refusal) => return Some(Refusal::clone(refusal)),
            Ok(declaration) => declaration,
        };
        let why = match &self.model {
            DeclaredModel::NotRead => DeclaredModel::NOT_READ.to_owned(),
            DeclaredModel::Unusable(why) => why.clone(),
            DeclaredModel::Undeclared | DeclaredModel::Known(_) => return None,
        };
        let reference = declaration.reference()?;
        Some(Refusal::new(
            Field::Model,
            Carrier::Annotations,
            &reference.source.to_string(),
            why,
        ))
    }
}

/// What `pod` declares in its annotations (see [`tandem_adapter_core::declaration`]).
pub fn declared(pod: &Pod) -> Declared {
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return Ok(tandem_adapter_core::declaration::empty());
    };
    let raw = Raw::from_lookup(Carrier::Annotations, |name| {
        annotations.get(name).map(String::as_str)
    });
    Declaration::declared(&raw, Carrier::Annotations)
}

/// The model a declaration gives inline; a reference is left for the front-end that reads
/// it (the extender and the Volcano adapter read ConfigMaps; the framework plugin does not).
fn inline_model(declared: &Declared) -> DeclaredModel {
    let Ok(declaration) = declared else {
        return DeclaredModel::Undeclared;
    };
    match (declaration.inline_model(), declaration.reference()) {
        (Some(summary), _) => DeclaredModel::Known(summary.clone()),
        (None, Some(_)) => DeclaredModel::Unusable(
            "not read: a model given by reference is read by tandem-kube-adapter and \
             tandem-volcano-adapter; the framework plugin reads inline summaries only"
                .to_owned(),
        ),
        (None, None) => DeclaredModel::Undeclared,
    }
}

/// GPUs of `resource` a pod requests (the larger of request and limit, summed over its
/// containers), `0` when it requests none.
pub fn requested_gpus(pod: &Pod, resource: &str) -> u32 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    spec.containers
        .iter()
        .map(|c| {
            let amount = |m: Option<
                &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >| {
                m.and_then(|m| m.get(resource))
                    .and_then(|q| q.0.trim().parse::<u32>().ok())
                    .unwrap_or(0)
            };
            let resources = c.resources.as_ref();
            amount(resources.and_then(|r| r.requests.as_ref()))
                .max(amount(resources.and_then(|r| r.limits.as_ref())))
        })
        .sum()
}

/// The keyed job id of a pod: its namespace and [`JOB_LABEL`], or its name without the label.
pub fn job_key(pod: &Pod, keys: &JobKeys) -> String {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let job = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(JOB_LABEL))
        .or(pod.metadata.name.as_ref())
        .map_or("", String::as_str);
    keys.key(namespace, job)
}

/// The adapter's view of a pod, or `None` when it requests no managed GPU; its placement is
/// read as `placements` trusts it.
pub fn gpu_pod(
    pod: &Pod,
    keys: &JobKeys,
    resource: &str,
    placements: &Placements,
) -> Option<GpuPod> {
    let gpus = requested_gpus(pod, resource);
    if gpus == 0 {
        return None;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    let (assigned, untrusted) = match placements.read(pod) {
        Read::Placed(gpus) => (gpus, None),
        Read::Unplaced => (Vec::new(), None),
        Read::Untrusted(why) => (Vec::new(), Some(why)),
    };
    let declared = declared(pod);
    let model = inline_model(&declared);
    Some(GpuPod {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        job: job_key(pod, keys),
        gpus,
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        assigned,
        untrusted,
        active: !finished && pod.metadata.deletion_timestamp.is_none(),
        declared,
        model,
    })
}

/// The GPUs of one node as the engine sees them, or why there are none.
pub type NodeEntry = Result<Vec<Gpu>, String>;

/// Every GPU node with its GPUs' residents: what `filter`, `prioritize` and `bind` judge.
#[derive(Debug, Default, Clone)]
pub struct ClusterView {
    nodes: FxHashMap<String, NodeEntry>,
    /// The number of the last placement assumed when the view was built
    /// ([`crate::assumed::Assumptions`]).
    assumed_through: u64,
}

impl ClusterView {
    /// Builds the view from nodes and the active GPU pods.
    ///
    /// A pod bound without [`GPU_ANNOTATION`] (by the default binder while the adapter was
    /// down, or by another scheduler), or with a placement Tandem does not trust (forged), is
    /// counted on the emptiest GPUs of its node for the GPUs it requests: which device it got
    /// is unknown, and counting it nowhere would let the engine overfill its node.
    pub fn build<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        pods: impl IntoIterator<Item = GpuPod>,
        resource: &str,
    ) -> Self {
        let mut view = Self::default();
        for node in nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let entry = node_gpus(node, resource).map(|(count, spec)| {
                (0..count)
                    .map(|index| Gpu {
                        id: format!("{name}/{index}"),
                        node: name.clone(),
                        spec: spec.clone(),
                        residents: Vec::new(),
                    })
                    .collect()
            });
            view.nodes.insert(name, entry);
        }
        let mut unannotated = Vec::new();
        for pod in pods {
            if !pod.active {
                continue;
            }
            let Some(node) = pod.node.clone() else {
                continue;
            };
            if pod.assigned.is_empty() {
                unannotated.push((node, pod));
                continue;
            }
            if let Some(Ok(gpus)) = view.nodes.get_mut(&node) {
                for gpu in gpus.iter_mut().filter(|g| pod.assigned.contains(&g.id)) {
                    gpu.residents.push(pod.resident());
                }
            }
        }
        for (node, pod) in unannotated {
            if let Some(Ok(gpus)) = view.nodes.get_mut(&node) {
                let mut order: Vec<usize> = (0..gpus.len()).collect();
                order.sort_by_key(|&i| gpus[i].residents.len());
                for i in order.into_iter().take(pod.gpus as usize) {
                    gpus[i].residents.push(pod.resident());
                }
            }
        }
        // A canonical order, so a GPU whose pods did not change compares equal to what the
        // engine holds (the watchers list pods in no particular order).
        for gpus in view
            .nodes
            .values_mut()
            .flat_map(|entry| entry.as_mut().ok())
        {
            for gpu in gpus {
                gpu.residents.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        view
    }

    /// The view with each GPU's price and power set from `costs`, where they name its model.
    pub fn with_costs(mut self, costs: &tandem_adapter_core::gpu_models::GpuCosts) -> Self {
        if costs.is_empty() {
            return self;
        }
        for gpus in self
            .nodes
            .values_mut()
            .flat_map(|entry| entry.as_mut().ok())
        {
            for gpu in gpus {
                costs.apply(&mut gpu.spec);
            }
        }
        self
    }

    /// The view, noting that it counts the assumed placements numbered up to `seq`.
    pub fn counting_assumptions(mut self, seq: u64) -> Self {
        self.assumed_through = seq;
        self
    }

    /// The number of the last assumed placement the view counts.
    pub fn assumed_through(&self) -> u64 {
        self.assumed_through
    }

    /// Every GPU of the view with the residents of `extra` (by GPU id) added: placements made
    /// since the view was built ([`crate::assumed::Assumptions::newer_than`]).
    pub fn gpus_with<'a>(
        &'a self,
        extra: &'a HashMap<String, Vec<Job>>,
    ) -> impl Iterator<Item = Gpu> + 'a {
        self.gpus().map(move |gpu| {
            let mut gpu = gpu.clone();
            if let Some(residents) = extra.get(&gpu.id) {
                gpu.residents.extend(residents.iter().cloned());
                gpu.residents.sort_by(|a, b| a.id.cmp(&b.id));
            }
            gpu
        })
    }

    /// Every GPU Tandem can use, node by node.
    pub fn gpus(&self) -> impl Iterator<Item = &Gpu> {
        self.nodes
            .values()
            .filter_map(|entry| entry.as_ref().ok())
            .flatten()
    }

    /// The node's GPUs, or why it has none Tandem can use.
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes.get(name)
    }

    /// Nodes in the view.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the view has no node at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{keys, node, pod};
    use super::*;

    #[test]
    fn product_labels_map_to_engine_models() {
        assert_eq!(gpu_model("Tesla-V100-SXM2-16GB").0, "V100");
        assert_eq!(gpu_model("NVIDIA-A100-SXM4-40GB").0, "A100");
        assert_eq!(gpu_model("NVIDIA-A10").0, "A10");
        assert_eq!(gpu_model("Mystery-9000"), ("Mystery-9000".to_owned(), None));
    }

    #[test]
    fn nodes_without_usable_gpus_say_why() {
        let mut plain = node("cpu", 0, "x", None);
        plain.metadata.labels = None;
        assert_eq!(
            node_gpus(&plain, "nvidia.com/gpu").unwrap_err(),
            "node has no nvidia.com/gpu"
        );
        let unknown = node("odd", 2, "Mystery-9000", None);
        assert!(
            node_gpus(&unknown, "nvidia.com/gpu")
                .unwrap_err()
                .contains(MEMORY_LABEL)
        );
        let (count, spec) = node_gpus(&node("v", 4, "Tesla-V100", None), "nvidia.com/gpu").unwrap();
        let mut sliced = node("t", 8, "Tesla-T4", None);
        // Time-slicing: 2 devices advertised as 8 units.
        sliced
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(COUNT_LABEL.to_owned(), "2".to_owned());
        assert_eq!(node_gpus(&sliced, "nvidia.com/gpu").unwrap().0, 2);
        assert_eq!(
            (count, spec.model.as_str(), spec.memory_mib),
            (4, "V100", 16_384)
        );
    }

    #[test]
    fn residents_come_from_annotations_and_unannotated_pods_take_the_emptiest_gpu() {
        let keys = keys();
        let nodes = [node("a", 2, "Tesla-V100", Some(16_000))];
        let pods = [
            pod("x", 1, Some("a"), Some("a/0")),
            pod("y", 1, Some("a"), None),
            pod("pending", 1, None, None),
            pod("cpu-only", 0, Some("a"), None),
        ];
        let view = ClusterView::build(
            &nodes,
            pods.iter()
                .filter_map(|p| gpu_pod(p, &keys, "nvidia.com/gpu", &Placements::default())),
            "nvidia.com/gpu",
        );
        let gpus = view.node("a").unwrap().as_ref().unwrap();
        assert_eq!(gpus[0].residents.len(), 1);
        assert_eq!(gpus[0].residents[0].id, keys.key("default", "x"));
        assert_eq!(gpus[1].residents[0].id, keys.key("default", "y"));
        assert_eq!(gpus[0].spec.memory_mib, 16_000);
    }

    #[test]
    fn a_forged_placement_counts_the_pod_on_the_gpus_it_requests_not_on_those_it_names() {
        let keys = keys();
        let (signer, _) = crate::placement::Signer::generate().unwrap();
        let placements = Placements::signed(signer);
        let nodes = [node("a", 4, "Tesla-V100", Some(16_000))];
        // One GPU requested, all four named, no signature: what a pod owner can write.
        let forged = pod("forger", 1, Some("a"), Some("a/0,a/1,a/2,a/3"));
        let mut signed = pod("placed", 1, Some("a"), None);
        signed.metadata.annotations = Some(
            placements
                .annotations("uid-placed", &["a/2".into()], None)
                .unwrap(),
        );
        let read = |placements: &Placements| {
            let pods = [&forged, &signed]
                .into_iter()
                .filter_map(|p| gpu_pod(p, &keys, "nvidia.com/gpu", placements))
                .collect::<Vec<_>>();
            let view = ClusterView::build(&nodes, pods, "nvidia.com/gpu");
            view.node("a")
                .unwrap()
                .as_ref()
                .unwrap()
                .iter()
                .map(|gpu| gpu.residents.len())
                .collect::<Vec<_>>()
        };
        // Trusting every annotation, the forger holds all four GPUs.
        assert_eq!(read(&Placements::unsigned()), [1, 1, 2, 1]);
        // Signed placements: the forger is one pod bound without Tandem's record, on the
        // emptiest GPU; Tandem's own placement stays where it was signed for.
        assert_eq!(read(&placements), [1, 0, 1, 0]);
        let seen = gpu_pod(&forged, &keys, "nvidia.com/gpu", &placements).unwrap();
        assert!(seen.assigned.is_empty());
        assert_eq!(
            seen.untrusted.as_deref(),
            Some("the placement is not signed")
        );
    }

    #[test]
    fn placements_assumed_after_the_view_are_laid_over_it() {
        let keys = keys();
        let view = ClusterView::build(
            &[node("a", 2, "V100", Some(16_000))],
            gpu_pod(
                &pod("x", 1, Some("a"), Some("a/0")),
                &keys,
                "nvidia.com/gpu",
                &Placements::default(),
            ),
            "nvidia.com/gpu",
        )
        .counting_assumptions(4);
        assert_eq!(view.assumed_through(), 4);
        let z = Job::new(keys.key("default", "z"));
        let extra = HashMap::from([("a/0".to_owned(), vec![z.clone()])]);
        let gpus: Vec<Gpu> = view.gpus_with(&extra).collect();
        let ids =
            |gpu: &Gpu| -> Vec<String> { gpu.residents.iter().map(|r| r.id.clone()).collect() };
        let mut both = vec![keys.key("default", "x"), z.id];
        both.sort();
        assert_eq!(ids(&gpus[0]), both);
        assert!(gpus[1].residents.is_empty());
        // The view itself is left as built.
        assert_eq!(view.gpus().map(|g| g.residents.len()).sum::<usize>(), 1);
    }

    #[test]
    fn finished_pods_hold_no_gpu() {
        let keys = keys();
        let mut done = pod("x", 1, Some("a"), Some("a/0"));
        done.status.as_mut().unwrap().phase = Some("Succeeded".to_owned());
        let view = ClusterView::build(
            &[node("a", 1, "V100", None)],
            gpu_pod(&done, &keys, "nvidia.com/gpu", &Placements::default()),
            "nvidia.com/gpu",
        );
        assert!(
            view.node("a").unwrap().as_ref().unwrap()[0]
                .residents
                .is_empty()
        );
    }

    #[test]
    fn the_job_label_names_the_job() {
        let keys = keys();
        let mut run = pod("train-abc12", 1, None, None);
        run.metadata.labels = Some(BTreeMap::from([(JOB_LABEL.to_owned(), "train".to_owned())]));
        assert_eq!(job_key(&run, &keys), keys.key("default", "train"));
    }
}
