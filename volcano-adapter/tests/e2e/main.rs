//! End-to-end tests against a real Volcano scheduler: etcd and kube-apiserver (the kube
//! adapter's harness, [`cluster::Cluster`], built by `cargo xtask kube-bins`), Volcano's CRDs
//! from its source, `vc-scheduler` built from that source (`cargo xtask vc-scheduler`), and the
//! adapter binary, all separate processes on loopback. No kubelet: nodes are objects, bound
//! pods never run.

// The kube adapter's control-plane harness, shared rather than copied; this suite uses only
// part of it (no kube-scheduler).
#[expect(
    dead_code,
    reason = "this suite starts vc-scheduler, not kube-scheduler"
)]
#[path = "../../../kube-adapter/tests/e2e/cluster.rs"]
mod cluster;
mod volcano;
