//! What the Slurm adapter needs from the machine: Debian's Slurm (munged, slurmctld, slurmd,
//! the clients and `job_submit_lua.so`), Slurm's headers and libclang (the SPANK plugin's
//! bindings are generated from `<slurm/spank.h>` at build time), LuaSocket (the placement
//! hook's HTTP) and LuaSec (its HTTPS, where callers are authenticated by client certificate).
//! Installed with apt-get once, when missing.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result};

/// Debian packages the Slurm adapter's build and end-to-end tier need.
pub const PACKAGES: &[&str] = &[
    "slurm-wlm",
    "munge",
    "libslurm-dev",
    "libclang-dev",
    "lua-socket",
    "lua-sec",
];

/// Files whose presence shows each package is installed.
const MARKERS: &[&str] = &[
    "/usr/sbin/slurmctld",
    "/usr/sbin/munged",
    "/usr/include/slurm/spank.h",
    "/usr/share/lua/5.1/socket.lua",
    "/usr/share/lua/5.1/ssl.lua",
];

fn libclang_present() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .filter_map(|dir| std::fs::read_dir(dir).ok())
    .flatten()
    .flatten()
    .any(|entry| entry.file_name().to_string_lossy().starts_with("libclang"))
}

/// Installs [`PACKAGES`] with apt-get unless they are all there (idempotent).
pub fn ensure_slurm_packages() -> Result<()> {
    if MARKERS.iter().all(|m| Path::new(m).exists()) && libclang_present() {
        return Ok(());
    }
    eprintln!(
        "==> installing Debian packages for Slurm: {}",
        PACKAGES.join(" ")
    );
    apt_install(PACKAGES, "the Slurm adapter needs Debian's Slurm packages")
}

/// Installs Debian `packages` with apt-get (root is needed); `why` says who needs them when
/// apt-get cannot even run.
pub fn apt_install(packages: &[&str], why: &str) -> Result<()> {
    let install = |update: bool| -> Result<bool> {
        if update {
            let status = Command::new("apt-get").arg("update").status()?;
            anyhow::ensure!(status.success(), "apt-get update failed");
        }
        Ok(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .with_context(|| format!("cannot run apt-get ({why})"))?
            .success())
    };
    // Stale package lists are the usual reason an install fails: refresh them and try again.
    if !install(false)? {
        anyhow::ensure!(
            install(true)?,
            "apt-get install {} failed (root is needed)",
            packages.join(" ")
        );
    }
    Ok(())
}
