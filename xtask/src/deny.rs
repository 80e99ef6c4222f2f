//! `cargo deny check licenses bans sources`: what the workspace's dependencies may be (licences,
//! banned crates and versions, registries) as `deny.toml` says, checked by the gate.
//!
//! cargo-deny is built from crates.io with `cargo install cargo-deny@<version> --locked` into
//! `~/.cache/tandem/cargo-deny-<version>` (about two minutes on two cores), once: nothing is
//! rebuilt when it is there, and a file lock lets one build run while another process waits for
//! it. The check itself runs offline, after `cargo fetch` has put every package of the lock
//! file, for every target, in the registry cache; advisories are not checked (they need the
//! advisory database from the network).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::process::{fresh_cargo, hold_lock, run};

/// The cargo-deny release built.
pub const CARGO_DENY_VERSION: &str = "0.20.2";

/// The checks the gate runs.
const CHECKS: [&str; 3] = ["licenses", "bans", "sources"];

/// `cargo-deny`, built if missing. Returns its path.
pub fn ensure_cargo_deny() -> Result<PathBuf> {
    let root = crate::toolchain::cache_dir(
        "TANDEM_CARGO_DENY_DIR",
        &format!("cargo-deny-{CARGO_DENY_VERSION}"),
    );
    let binary = root.join("bin").join("cargo-deny");
    if binary.is_file() {
        return Ok(binary);
    }
    fs::create_dir_all(&root).with_context(|| format!("could not create {}", root.display()))?;
    let _lock = hold_lock(
        &root.join(".build.lock"),
        &format!("another build of cargo-deny in {}", root.display()),
    )?;
    if binary.is_file() {
        return Ok(binary);
    }
    let started = Instant::now();
    let mut install = fresh_cargo();
    install
        .args(["install", "--locked", "--root"])
        .arg(&root)
        .arg(format!("cargo-deny@{CARGO_DENY_VERSION}"))
        // Its own target directory, not the workspace's: a tool build shares nothing with it.
        .env("CARGO_TARGET_DIR", root.join("target"));
    run(&mut install).with_context(|| {
        format!(
            "could not build cargo-deny {CARGO_DENY_VERSION} (set TANDEM_CARGO_DENY_DIR to use \
             another directory than {})",
            root.display()
        )
    })?;
    let _ = fs::remove_dir_all(root.join("target"));
    eprintln!(
        "tandem-xtask: cargo-deny {CARGO_DENY_VERSION} built in {:.0?}",
        started.elapsed()
    );
    Ok(binary)
}

/// Fetches every package of the lock file, then runs `cargo deny check licenses bans sources`
/// offline in the workspace at `root`.
pub fn check(root: &Path) -> Result<()> {
    let deny = ensure_cargo_deny()?;
    let mut fetch = fresh_cargo();
    fetch.current_dir(root).args(["fetch", "--locked"]);
    run(&mut fetch).context("cargo fetch could not fill the registry cache for cargo-deny")?;
    let mut check = std::process::Command::new(&deny);
    check
        .current_dir(root)
        .args(["--offline", "check"])
        .args(CHECKS);
    eprintln!("==> cargo deny --offline check {}", CHECKS.join(" "));
    run(&mut check).context(
        "cargo deny found a dependency that deny.toml does not allow (licence, ban or source)",
    )
}
