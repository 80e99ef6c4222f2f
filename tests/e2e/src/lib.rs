//! `tandem-e2e`: what Tandem's end-to-end tiers share, so that each suite starts real
//! processes the same way and leaves nothing behind.
//!
//! - [`cluster`]: a throwaway control plane — `etcd`, `kube-apiserver` and `kube-scheduler`
//!   built from Kubernetes' Go modules (`cargo xtask kube-bins`) — on loopback ports, and the
//!   process guard ([`cluster::spawn_logged`]) the suites also start Tandem's binaries with;
//! - [`nodes`]: real nodes beside it — containerd with NRI, runc and the kubelet
//!   (`cargo xtask node-bins`) — each with fake GPUs, pods that really run, and the host's
//!   state restored when they stop;
//! - [`tls`]: mutual TLS between kube-scheduler and the extender, as the Helm chart sets it
//!   up (a CA, the adapter's and the scheduler's certificates);
//! - [`intake`]: a Tandem adapter's process and its HTTP intake, as a node profiler feeds it;
//! - [`pairing`]: the jobs, outcomes and residents of the node tier's pairing scenario, run
//!   through each scheduler path.
//!
//! Used by the end-to-end suites and benchmarks of the scheduler adapters; a plain
//! `cargo test` builds it but starts nothing.

pub mod cluster;
pub mod intake;
pub mod nodes;
pub mod pairing;
pub mod tls;
