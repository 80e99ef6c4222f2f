//! End-to-end tests against a real Volcano scheduler: etcd and kube-apiserver (tandem-e2e's
//! harness, [`cluster::Cluster`], built by `cargo xtask kube-bins`), Volcano's CRDs from its
//! source, `vc-scheduler` built from that source (`cargo xtask vc-scheduler`), and the adapter
//! binary, all separate processes on loopback.
//!
//! [`volcano`] runs without kubelets (nodes are objects, bound pods never run); [`node`] (the
//! `node` tier) runs on real nodes with Tandem's node component, where pods run.

use tandem_e2e::cluster;
mod node;
mod volcano;
