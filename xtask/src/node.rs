//! The pieces of a real Kubernetes node for the `node` end-to-end tier: the kubelet (from the
//! Kubernetes module of [`crate::kube`]), containerd v2.4.2 with NRI, its runc shim and `ctr`
//! (from containerd's own Go module, pinned by version), and from Debian runc, the CNI plugins
//! and a static busybox for the test images.
//!
//! Debian's containerd is 1.6, which has no NRI of the current API; containerd is therefore
//! built with `go install …@v2.4.2` into `<node_dir()>/containerd-v2.4.2/bin`, once per
//! machine (about three minutes on two cores). The images the tier runs are written by
//! [`crate::oci`] from busybox, without a registry.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, ensure};

use crate::oci::{self, Entry, Image};
use crate::process::run;

/// The containerd release the node tier runs (its NRI is `containerd/nri` v0.12.3, whose
/// default validator can require a plugin per pod).
pub const CONTAINERD_VERSION: &str = "v2.4.2";

/// The variable `cargo xtask e2e node` sets for the tier: the directory with `containerd`,
/// `containerd-shim-runc-v2` and `ctr`.
pub const CONTAINERD_DIR_VAR: &str = "TANDEM_CONTAINERD_DIR";

/// Debian packages the node tier needs.
pub const PACKAGES: &[&str] = &["runc", "containernetworking-plugins", "busybox-static"];

/// Files whose presence shows each package is installed.
const MARKERS: &[&str] = &["/usr/sbin/runc", "/usr/lib/cni/bridge", "/bin/busybox"];

/// The Debian runc the runtime runs containers with.
pub const RUNC: &str = "/usr/sbin/runc";
/// Where Debian installs the CNI plugins (bridge, host-local, loopback).
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";
/// Debian's static busybox, the test images' only program.
pub const BUSYBOX: &str = "/bin/busybox";

/// The programs of containerd's module the tier uses.
const CONTAINERD_PROGRAMS: [&str; 3] = ["containerd", "containerd-shim-runc-v2", "ctr"];

/// Installs [`PACKAGES`] with apt-get unless they are all there (idempotent).
pub fn ensure_node_packages() -> Result<()> {
    if MARKERS.iter().all(|marker| Path::new(marker).exists()) {
        return Ok(());
    }
    eprintln!(
        "==> installing Debian packages for the node tier: {}",
        PACKAGES.join(" ")
    );
    crate::slurm::apt_install(
        PACKAGES,
        "the node tier needs runc, CNI plugins and busybox",
    )
}

/// Where containerd is built: `$TANDEM_NODE_DIR`, else `$XDG_CACHE_HOME/tandem/node`, else
/// `$HOME/.cache/tandem/node`.
pub fn node_dir() -> PathBuf {
    crate::toolchain::cache_dir("TANDEM_NODE_DIR", "node")
}

/// The directory with containerd's programs, building them if missing.
pub fn ensure_containerd() -> Result<PathBuf> {
    let bin = node_dir()
        .join(format!("containerd-{CONTAINERD_VERSION}"))
        .join("bin");
    let all_exist = || {
        CONTAINERD_PROGRAMS
            .iter()
            .all(|program| bin.join(program).is_file())
    };
    if all_exist() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&bin).with_context(|| format!("cannot create {}", bin.display()))?;
    let lock_path = bin.join(".build.lock");
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    if all_exist() {
        return Ok(bin);
    }
    // `go install` builds into GOBIN directly: build into a scratch directory and move each
    // binary into place, so a killed build never leaves one that looks finished.
    let scratch = bin.join(format!(".build-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let started = Instant::now();
    eprintln!(
        "tandem-xtask: building containerd {CONTAINERD_VERSION} into {} (about three minutes \
         on two cores the first time)",
        bin.display()
    );
    let packages: Vec<String> = CONTAINERD_PROGRAMS
        .iter()
        .map(|program| {
            format!("github.com/containerd/containerd/v2/cmd/{program}@{CONTAINERD_VERSION}")
        })
        .collect();
    let mut install = Command::new("go");
    install
        .current_dir(&bin)
        .env("GOBIN", &scratch)
        // A module outside any main module: nothing in the environment may redirect it.
        .env("GOFLAGS", "-trimpath")
        .env("GO111MODULE", "on")
        .arg("install")
        .args(&packages);
    let installed = run(&mut install).context("could not build containerd");
    if installed.is_ok() {
        for program in CONTAINERD_PROGRAMS {
            std::fs::rename(scratch.join(program), bin.join(program))
                .with_context(|| format!("cannot move {program} into {}", bin.display()))?;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    installed?;
    ensure!(all_exist(), "go install left no containerd binaries");
    eprintln!(
        "tandem-xtask: built containerd {CONTAINERD_VERSION} in {:.0?}",
        started.elapsed()
    );
    Ok(bin)
}

/// The test image's reference: busybox as `/bin/busybox` with the applets the tests use.
pub const TEST_IMAGE: &str = "tandem.invalid/busybox:e2e";
/// The sandbox ("pause") image's reference: busybox's shell sleeping until SIGTERM.
pub const PAUSE_IMAGE: &str = "tandem.invalid/pause:e2e";

/// The busybox applets linked in the test images.
const APPLETS: &[&str] = &[
    "cat", "echo", "env", "grep", "ls", "sh", "sleep", "test", "true", "wc",
];

fn busybox_entries() -> Vec<Entry> {
    let mut entries = vec![
        Entry::Dir { path: "bin".into() },
        Entry::Dir { path: "dev".into() },
        Entry::Dir { path: "etc".into() },
        Entry::Dir {
            path: "proc".into(),
        },
        Entry::Dir { path: "sys".into() },
        Entry::Dir { path: "tmp".into() },
        Entry::File {
            path: "bin/busybox".into(),
            from: PathBuf::from(BUSYBOX),
            mode: 0o755,
        },
    ];
    entries.extend(APPLETS.iter().map(|applet| Entry::Symlink {
        path: format!("bin/{applet}"),
        target: "busybox".into(),
    }));
    entries
}

/// Writes the test and sandbox images as OCI archives into `dir` (Debian's busybox must be
/// installed: [`ensure_node_packages`]) and returns them, test image first.
pub fn write_test_images(dir: &Path) -> Result<[oci::Archive; 2]> {
    let test = Image {
        name: TEST_IMAGE.into(),
        entries: busybox_entries(),
        entrypoint: vec!["/bin/sh".into()],
        env: vec!["PATH=/bin".into()],
        user: String::new(),
        labels: Vec::new(),
    };
    let pause = Image {
        name: PAUSE_IMAGE.into(),
        entries: busybox_entries(),
        // PID 1 of the pod sandbox: sleeps until SIGTERM, and exits 0 on it.
        entrypoint: vec![
            "/bin/sh".into(),
            "-c".into(),
            "trap 'exit 0' TERM INT; while true; do sleep 3600 & wait $!; done".into(),
        ],
        env: vec!["PATH=/bin".into()],
        user: String::new(),
        labels: Vec::new(),
    };
    Ok([
        oci::write_archive(&test, &dir.join("busybox.tar"))?,
        oci::write_archive(&pause, &dir.join("pause.tar"))?,
    ])
}
