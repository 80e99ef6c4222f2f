//! Build orchestration for Tandem: the CI gate, the end-to-end tiers' provisioning (real
//! Kubernetes, Volcano, Slurm and node binaries built from pinned sources into caches outside
//! the tree), the images and the chart's checks.
//!
//! The wasm32 toolchain and guest builds are not here: they are `tandem-toolchain`'s, the one
//! crate build scripts use, so no build script compiles this crate. The library is what the
//! `xtask` binary and the end-to-end tests share: [`kube::ensure_kube_binaries`] builds
//! `kube-apiserver`, `kube-scheduler` and `etcd` from the Go module in `xtask/kube` (pinned by
//! its committed `go.sum`) into [`kube::kube_dir`], once per version of the module;
//! [`kube_plugin::ensure_plugin_scheduler`] builds `tandem-kube-scheduler`, kube-scheduler with
//! the Tandem framework plugin linked in through cgo; [`volcano::ensure_vc_scheduler`] builds
//! Volcano's `vc-scheduler` from a directory of its source.

mod background;
pub mod cycles;
pub mod deny;
pub mod docs;
pub mod fuzz;
pub mod helm;
pub mod images;
pub mod kube;
pub mod kube_plugin;
pub mod node;
pub mod oci;
pub mod slurm;
pub mod tasks;
pub mod volcano;

// The process and cache helpers every task shares, from the toolchain crate.
pub(crate) use tandem_toolchain::{process, toolchain};
