//! `tandem-e2e`: Tandem's end-to-end tiers, one test target per tier (`kube`, `kube-plugin`,
//! `helm`, `slurm`, `volcano`, `node`, each a folder of this crate), and what they share, so
//! that each suite starts real processes the same way and leaves nothing behind.
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
//!   through each scheduler path;
//! - [`extender`], [`plugin`], [`volcano`]: Tandem's adapter processes and schedulers as the
//!   tiers start them, with the pods, profiles and knowledge they use;
//! - [`scenarios`]: scenarios the extender and the framework plugin both pass;
//! - [`dashboard`]: the chart's dashboard and alerts checked against an adapter's metrics.
//!
//! The tiers' targets are behind the `e2e` feature: a plain `cargo test` builds this library
//! and starts nothing. `cargo xtask e2e <tier>` builds a tier's target with the programs it
//! starts, provisions what it runs against, and runs it.

use std::path::{Path, PathBuf};

use anyhow::{Result, ensure};

pub mod cluster;
pub mod dashboard;
pub mod extender;
pub mod intake;
pub mod nodes;
pub mod pairing;
pub mod plugin;
pub mod scenarios;
pub mod tls;
pub mod volcano;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate is two folders below the repository's root")
        .to_path_buf()
}

/// Where program `name` of the workspace is when it was built with the running test
/// executable: cargo puts test executables in `deps/` below the profile's directory, and
/// programs in that directory.
pub fn program_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    profile_dir.join(name)
}

/// Program `name` of the workspace (an adapter, say), built beside the running test executable
/// (`cargo xtask e2e` builds every tier's programs with their tests); an error naming the
/// command that builds it when it is not there.
pub fn program(name: &str) -> Result<PathBuf> {
    let path = program_path(name);
    ensure!(
        path.is_file(),
        "{name} is not built beside this test executable (no {}); run the tier with \
         `cargo xtask e2e <tier>`, which builds it",
        path.display()
    );
    Ok(path)
}
