//! The kube-scheduler extender protocol's wire types.
//!
//! kube-scheduler sends the Go structs of `k8s.io/kube-scheduler/extender/v1`, which carry no
//! JSON tags, so their keys are the Go field names (`Pod`, `NodeNames`, `FailedNodes`). Go
//! decodes keys case-insensitively; these types accept the PascalCase kube-scheduler sends and
//! answer in it.
//!
//! The decisions behind the verbs are [`tandem_kube_common::decide`]'s; the HTTP layer in
//! [`crate::http`] parses, times and counts them, and `bind` talks to the API server there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

/// A list of nodes as kube-scheduler sends it (`v1.NodeList`; only `items` matters).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeList {
    /// The nodes.
    #[serde(default)]
    pub items: Vec<Node>,
}

/// `ExtenderArgs`: the pod and the candidate nodes of a `filter` or `prioritize` call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderArgs {
    /// The pod being scheduled, decoded lean ([`tandem_kube_common::lean`]).
    #[serde(deserialize_with = "tandem_kube_common::lean::pod")]
    pub pod: Pod,
    /// Candidate nodes, in full (when the extender is not `nodeCacheCapable`).
    #[serde(default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names (when it is).
    #[serde(default)]
    pub node_names: Option<Vec<String>>,
}

impl ExtenderArgs {
    /// [`ExtenderArgs::candidates`], moved out of the request when it sent names rather than
    /// copied (a filter's answer is made of them: one allocation per candidate fewer).
    pub fn take_candidates(&mut self) -> Vec<String> {
        self.node_names.take().unwrap_or_else(|| self.candidates())
    }

    /// The candidate nodes' names, whichever way they were sent.
    pub fn candidates(&self) -> Vec<String> {
        match (&self.node_names, &self.nodes) {
            (Some(names), _) => names.clone(),
            (None, Some(list)) => list
                .items
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect(),
            (None, None) => Vec::new(),
        }
    }
}

/// `ExtenderFilterResult`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct FilterResult {
    /// Nodes that passed, in full (answering a request that sent nodes in full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<serde_json::Value>,
    /// Names of nodes that passed (answering a request that sent names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_names: Option<Vec<String>>,
    /// Nodes that failed, and why; preemption might help.
    pub failed_nodes: BTreeMap<String, String>,
    /// Nodes that failed, and why; preemption cannot help.
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// Set when the extender could not judge at all.
    pub error: String,
}

/// `HostPriority`: one node's score.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    /// Node name.
    pub host: String,
    /// 0..=10.
    pub score: i64,
}

/// `ExtenderBindingArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BindingArgs {
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Pod UID.
    #[serde(rename = "PodUID", alias = "PodUid")]
    pub pod_uid: String,
    /// Node chosen.
    pub node: String,
}

/// `ExtenderBindingResult`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct BindingResult {
    /// Empty on success.
    pub error: String,
}
