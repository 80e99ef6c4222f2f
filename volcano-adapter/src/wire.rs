//! The wire types of vc-scheduler's `extender` plugin (Volcano v1.15.1,
//! `pkg/scheduler/plugins/extender/argument.go`).
//!
//! The requests embed Volcano's internal `TaskInfo`, `NodeInfo` and `JobInfo`, which carry no
//! JSON tags (so their keys are Go's field names, `UID`, `Pod`, `MinAvailable`) and are large:
//! a `NodeInfo` holds the whole Node and every task on it. Only what Tandem uses is read; the
//! rest is skipped without being built, and a task's Pod is kept as raw JSON until its UID was
//! not seen before (predicate is called once per task *and node*, with the same Pod each time).
//! Unknown fields are accepted: these structs change between Volcano releases.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `api.TaskInfo`: a pod of a Volcano job.
#[derive(Debug, Deserialize)]
pub struct TaskInfo {
    /// The pod's UID (`TaskID`).
    #[serde(rename = "UID")]
    pub uid: String,
    /// `namespace/podgroup` (`JobID`).
    #[serde(rename = "Job", default)]
    pub job: String,
    /// The node the session placed it on (from the embedded `TransactionContext`; empty until
    /// then).
    #[serde(rename = "NodeName", default)]
    pub node_name: String,
    /// The pod, as the API server holds it, unparsed.
    #[serde(rename = "Pod")]
    pub pod: Box<RawValue>,
}

/// `api.NodeInfo`: only its name is read.
#[derive(Debug, Deserialize)]
pub struct NodeInfo {
    /// The node's name.
    #[serde(rename = "Name")]
    pub name: String,
}

/// `api.JobInfo`: only its gang size and its PodGroup's annotations are read.
#[derive(Debug, Deserialize)]
pub struct JobInfo {
    /// The PodGroup's `minMember`: more than one makes the job a gang.
    #[serde(rename = "MinAvailable", default)]
    pub min_available: i32,
    /// The job's PodGroup (`api.PodGroup`, which embeds the PodGroup object, so its
    /// `metadata` sits at the top).
    #[serde(rename = "PodGroup", default)]
    pub pod_group: Option<PodGroup>,
}

/// A PodGroup: only its annotations are read.
#[derive(Debug, Default, Deserialize)]
pub struct PodGroup {
    /// The PodGroup's metadata.
    #[serde(default)]
    pub metadata: GroupMetadata,
}

/// A PodGroup's metadata: only its annotations are read.
#[derive(Debug, Default, Deserialize)]
pub struct GroupMetadata {
    /// The PodGroup's annotations (what its tasks declare unless they say otherwise).
    #[serde(default)]
    pub annotations: Option<HashMap<String, String>>,
}

impl JobInfo {
    /// The PodGroup's annotation `key`, if it has one.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.pod_group
            .as_ref()?
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

/// `OnSessionOpenRequest`: the session's snapshot. Only the jobs are read.
#[derive(Debug, Deserialize)]
pub struct SessionOpenRequest {
    /// The session's jobs, by `JobID`.
    #[serde(rename = "Jobs", default)]
    pub jobs: Option<HashMap<String, JobInfo>>,
}

/// `PredicateRequest`: may `task` run on `node`?
#[derive(Debug, Deserialize)]
pub struct PredicateRequest {
    /// The task.
    pub task: TaskInfo,
    /// The node.
    pub node: NodeInfo,
}

/// `PredicateResponse`. The message's key is `status`: an empty one passes the node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PredicateResponse {
    /// Why the node fails, for a person; empty when it passes.
    #[serde(rename = "status")]
    pub message: String,
    /// Volcano's status code: 2 (Unschedulable: preemption or time might help) or 3
    /// (UnschedulableAndUnresolvable); 0 when passing.
    pub code: i32,
}

/// Volcano's `Unschedulable`.
pub const UNSCHEDULABLE: i32 = 2;
/// Volcano's `UnschedulableAndUnresolvable`.
pub const UNRESOLVABLE: i32 = 3;

impl PredicateResponse {
    /// The node passes.
    pub fn pass() -> Self {
        Self::default()
    }

    /// The node fails with `code` for `message`.
    pub fn fail(code: i32, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code,
        }
    }
}

/// `PrioritizeRequest`: how good is each of `nodes` for `task`?
#[derive(Debug, Deserialize)]
pub struct PrioritizeRequest {
    /// The task.
    pub task: TaskInfo,
    /// The nodes that passed every predicate.
    pub nodes: Vec<NodeInfo>,
}

/// `PrioritizeResponse`: scores vc-scheduler adds to its node-order plugins' as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PrioritizeResponse {
    /// Score by node name.
    #[serde(rename = "nodeScore")]
    pub node_score: HashMap<String, f64>,
    /// Non-empty makes vc-scheduler ignore the scores.
    #[serde(rename = "errorMessage")]
    pub error_message: String,
}

/// `EventHandlerRequest`: the task of an allocate or deallocate event.
#[derive(Debug, Deserialize)]
pub struct EventRequest {
    /// The task.
    pub task: TaskInfo,
}

/// `EventHandlerResponse`: a non-empty message aborts the allocation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventResponse {
    /// Why the event failed; empty on success.
    #[serde(rename = "errorMessage")]
    pub error_message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_adapter_core::http::parse;

    #[test]
    fn a_predicate_request_as_vc_scheduler_sends_it_parses_and_skips_the_rest() {
        let body = br#"{"task": {"UID": "u1", "Job": "ns/pg", "Name": "p", "Namespace": "ns",
            "Resreq": {"MilliCPU": 100}, "NodeName": "", "Pod": {"metadata": {"name": "p"}}},
            "node": {"Name": "n1", "Node": {"metadata": {"name": "n1"}}, "Tasks": {"x": {}}}}"#;
        let request: PredicateRequest = parse("predicate", body).unwrap();
        assert_eq!(request.task.uid, "u1");
        assert_eq!(request.task.job, "ns/pg");
        assert_eq!(request.node.name, "n1");
        assert_eq!(request.task.pod.get(), r#"{"metadata": {"name": "p"}}"#);
    }

    #[test]
    fn a_session_reads_gang_sizes_and_podgroup_annotations() {
        let body = br#"{"Jobs": {"ns/pg": {"UID": "ns/pg", "MinAvailable": 2,
            "PodGroup": {"kind": "PodGroup", "metadata": {"name": "pg",
                "annotations": {"tandem.dev/priority": "cost"}}, "spec": {"minMember": 2},
                "Version": "v1beta1"}},
            "ns/bare": {"MinAvailable": 1, "PodGroup": null}}, "Nodes": {}}"#;
        let request: SessionOpenRequest = parse("onSessionOpen", body).unwrap();
        let jobs = request.jobs.unwrap();
        assert_eq!(jobs["ns/pg"].min_available, 2);
        assert_eq!(
            jobs["ns/pg"].annotation("tandem.dev/priority"),
            Some("cost")
        );
        assert_eq!(jobs["ns/pg"].annotation("tandem.dev/work"), None);
        assert_eq!(jobs["ns/bare"].annotation("tandem.dev/priority"), None);
    }

    #[test]
    fn malformed_requests_name_the_field() {
        let error = parse::<PredicateRequest>("predicate", br#"{"task": {"UID": 5}}"#)
            .unwrap_err()
            .message;
        assert!(error.contains("`task.UID`"), "{error}");
        let error =
            parse::<PrioritizeRequest>("prioritize", br#"{"task": {"UID": "u", "Pod": {}}}"#)
                .unwrap_err()
                .message;
        assert!(error.contains("nodes"), "{error}");
    }

    #[test]
    fn responses_use_volcanos_keys() {
        let failed = serde_json::to_value(PredicateResponse::fail(UNSCHEDULABLE, "why")).unwrap();
        assert_eq!(failed, serde_json::json!({"status": "why", "code": 2}));
        let scores = PrioritizeResponse {
            node_score: HashMap::from([("n".to_owned(), 50.0)]),
            error_message: String::new(),
        };
        assert_eq!(
            serde_json::to_value(scores).unwrap(),
            serde_json::json!({"nodeScore": {"n": 50.0}, "errorMessage": ""})
        );
    }
}
