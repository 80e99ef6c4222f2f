//! Helm, for checking Tandem's chart (`deploy/helm/tandem`): `helm lint`, `helm template` of
//! each mode, and the installs of the end-to-end tests.
//!
//! Built from its Go module with `go install helm.sh/helm/v3/cmd/helm@<version>` (the Go
//! module proxy serves it; no release download is needed) into `<kube_dir>/helm-<version>`,
//! beside the Kubernetes binaries and cached the same way: nothing is rebuilt when it is there,
//! and a file lock lets one build run while another process waits for it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::process::{display, hold_lock, output, run};

/// The Helm release built: v3, the major version most clusters' tooling runs.
pub const HELM_VERSION: &str = "v3.22.0";

/// The variable `cargo xtask test` sets for the tiers: the path of the `helm` binary.
pub const HELM_BIN_VAR: &str = "TANDEM_HELM_BIN";

/// The chart, relative to the repository root.
pub const CHART_DIR: &str = "deploy/helm/tandem";

/// The modes the chart installs Tandem in (its `mode` value).
pub const MODES: [&str; 3] = ["plugin", "extender", "volcano"];

/// `helm`, built if missing. Returns its path.
pub fn ensure_helm() -> Result<PathBuf> {
    let entry = crate::kube::kube_dir().join(format!("helm-{HELM_VERSION}"));
    let binary = entry.join("helm");
    if binary.is_file() {
        return Ok(binary);
    }
    fs::create_dir_all(&entry).with_context(|| format!("could not create {}", entry.display()))?;
    let _lock = hold_lock(
        &entry.join(".build.lock"),
        &format!("another build of helm in {}", entry.display()),
    )?;
    if binary.is_file() {
        return Ok(binary);
    }
    crate::kube::check_go(&entry)?;
    let staging = entry.join(format!(".bin-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let started = Instant::now();
    let mut command = Command::new("go");
    command
        // Outside any module: `go install pkg@version` resolves helm's own go.mod.
        .current_dir(&entry)
        .env("GOBIN", &staging)
        .env("GOFLAGS", "-trimpath")
        // Helm's own release builds are static (CGO_ENABLED=0).
        .env("CGO_ENABLED", "0")
        .arg("install")
        .arg(format!(
            "-ldflags=-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"
        ))
        .arg(format!("helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"));
    eprintln!("tandem-xtask: CGO_ENABLED=0 {}", display(&command));
    let built = run(&mut command);
    if built.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    built.with_context(|| {
        format!(
            "could not build helm {HELM_VERSION} from its Go module (set TANDEM_KUBE_DIR to use \
             another cache directory than {})",
            entry.display()
        )
    })?;
    fs::rename(staging.join("helm"), &binary)
        .with_context(|| format!("could not move helm into {}", binary.display()))?;
    let _ = fs::remove_dir_all(&staging);
    eprintln!(
        "tandem-xtask: helm {HELM_VERSION} built in {:.0?}",
        started.elapsed()
    );
    Ok(binary)
}

/// `helm` as the tiers find it: `$TANDEM_HELM_BIN` when set, else [`ensure_helm`].
pub fn helm_from_env() -> Result<PathBuf> {
    match std::env::var_os(HELM_BIN_VAR) {
        Some(path) => Ok(PathBuf::from(path)),
        None => ensure_helm(),
    }
}

/// `helm template` of the chart in `root` as release `release` in `namespace`, with `values`
/// (`key=value`, as `--set` takes them). Returns the rendered YAML.
pub fn template(
    helm: &Path,
    root: &Path,
    release: &str,
    namespace: &str,
    values: &[&str],
) -> Result<String> {
    let mut command = Command::new(helm);
    command
        .current_dir(root)
        .args(["template", release, CHART_DIR, "--namespace", namespace])
        // Without a cluster helm assumes Kubernetes v1.20, older than the chart's kubeVersion:
        // render for the release the end-to-end tiers run.
        .args(["--kube-version", &kubernetes_version()?]);
    for value in values {
        command.args(["--set", value]);
    }
    output(&mut command).with_context(|| format!("`{}` failed", display(&command)))
}

/// The Kubernetes release of the end-to-end tiers (xtask/kube/go.mod's k8s.io/kubernetes).
fn kubernetes_version() -> Result<String> {
    crate::kube::required_version(crate::kube::GO_MOD, "k8s.io/kubernetes")
        .context("xtask/kube/go.mod requires no k8s.io/kubernetes")
}

/// `helm lint --strict` of the chart in `root` with `values`.
pub fn lint(helm: &Path, root: &Path, values: &[&str]) -> Result<()> {
    let mut command = Command::new(helm);
    command
        .current_dir(root)
        .args(["lint", "--strict", CHART_DIR]);
    for value in values {
        command.args(["--set", value]);
    }
    run(&mut command).with_context(|| format!("`{}` failed", display(&command)))
}
