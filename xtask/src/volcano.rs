//! `vc-scheduler`, Volcano's scheduler, for the Volcano end-to-end tier: built from Volcano's
//! source with Go and cached outside the work tree.
//!
//! The Go module proxy on the project's machines refuses every `volcano.sh/*` module, so the
//! source is a directory: `$TANDEM_VOLCANO_SRC` when set (the test command points it at
//! `../shared/vendor/volcano-v1.15.1`, a copy of tag v1.15.1 holding what `cmd/scheduler`
//! needs), else that vendor copy beside the repository when it exists (mirrored into the cache
//! when found), else the cache's copy, else a shallow clone of tag [`VOLCANO_TAG`] of
//! <https://github.com/volcano-sh/volcano> made into the cache. Nothing of Volcano is ever
//! copied into the repository.
//!
//! The source is copied into `<volcano_dir()>/<hash>/src` (the vendor copy is read-only, and
//! `go build` writes nothing into a module it builds, but a copy keeps the build independent of
//! the source's later changes) and built there with
//! `CGO_ENABLED=1 go build -trimpath -mod=readonly ./cmd/scheduler` into
//! `<volcano_dir()>/<hash>/bin/vc-scheduler`. The hash covers the recipe and every file of the
//! source Go reads (`go.mod`, `go.sum`, `*.go`, `*.s`, embedded files; `.git` is skipped), so
//! a changed source gets a fresh entry and an unchanged one is built once, under a file lock.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, ensure};

use crate::kube::{check_go, hash_parts, remove_leftovers};
use crate::process::{display, hold_lock, output, run};

/// The variable naming the directory of Volcano's source to build from.
pub const VOLCANO_SRC_VAR: &str = "TANDEM_VOLCANO_SRC";

/// The variable `cargo xtask e2e volcano` sets for the tests: the `vc-scheduler` it ensured.
pub const VC_SCHEDULER_VAR: &str = "TANDEM_VC_SCHEDULER";

/// The Volcano release the adapter is tested against.
pub const VOLCANO_TAG: &str = "v1.15.1";

/// Where the vendor copy lives, relative to the repository root.
pub const VENDOR_COPY: &str = "../shared/vendor/volcano-v1.15.1";

/// Where Volcano's CRDs are, relative to its source.
pub const CRD_DIR: &str = "config/crd/volcano/bases";

/// How `vc-scheduler` is built. Part of the cache hash: change it with the flags below.
const RECIPE: &str = "CGO_ENABLED=1 go build -trimpath -mod=readonly ./cmd/scheduler v2";

/// Where builds are cached: `$TANDEM_VOLCANO_DIR`, else `$XDG_CACHE_HOME/tandem/volcano`, else
/// `$HOME/.cache/tandem/volcano`.
pub fn volcano_dir() -> PathBuf {
    crate::toolchain::cache_dir("TANDEM_VOLCANO_DIR", "volcano")
}

/// A built `vc-scheduler` and the source it was built from (its CRDs are in the source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolcanoBuild {
    /// The binary.
    pub scheduler: PathBuf,
    /// The copy of the source it was built from.
    pub source: PathBuf,
}

impl VolcanoBuild {
    /// The directory of Volcano's CRDs (PodGroup, Queue, ...).
    pub fn crds(&self) -> PathBuf {
        self.source.join(CRD_DIR)
    }

    /// The build named by `$TANDEM_VC_SCHEDULER` (set by `cargo xtask e2e volcano`), else
    /// [`ensure_vc_scheduler`] from the source [`volcano_source`] finds for `root`.
    pub fn from_env(root: &Path) -> Result<Self> {
        if let Some(binary) = std::env::var_os(VC_SCHEDULER_VAR).filter(|v| !v.is_empty()) {
            let scheduler = PathBuf::from(binary);
            ensure!(
                scheduler.is_file(),
                "{VC_SCHEDULER_VAR}={} is not a file (unset it to build vc-scheduler)",
                scheduler.display()
            );
            // <entry>/bin/vc-scheduler beside <entry>/src.
            let source = scheduler
                .parent()
                .and_then(Path::parent)
                .map(|entry| entry.join("src"))
                .context("vc-scheduler is not in a build entry")?;
            return Ok(Self { scheduler, source });
        }
        ensure_vc_scheduler(&volcano_source(root)?)
    }
}

/// The source to build: `$TANDEM_VOLCANO_SRC`, else the vendor copy beside `root` (the
/// repository), else the copy of [`VOLCANO_TAG`] kept in the cache, else a shallow clone of it
/// made there (needs `git` and GitHub).
///
/// The vendor copy is mirrored into the cache the first time it is found, so a checkout that is
/// not beside it (a clone in a temporary directory, as CI may make) still builds the same
/// source without reaching GitHub.
pub fn volcano_source(root: &Path) -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(VOLCANO_SRC_VAR).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        ensure!(
            dir.join("go.mod").is_file(),
            "{VOLCANO_SRC_VAR}={} holds no go.mod: it must name Volcano's source",
            dir.display()
        );
        return Ok(dir);
    }
    let cached = volcano_dir().join(format!("source-{VOLCANO_TAG}"));
    let partial = volcano_dir().join(format!(".source-{VOLCANO_TAG}.tmp-{}", std::process::id()));
    let vendored = root.join(VENDOR_COPY);
    if vendored.join("go.mod").is_file() {
        if !cached.join("go.mod").is_file() {
            copy_tree(&vendored, &partial)?;
            replace_dir(&partial, &cached)?;
        }
        return Ok(vendored);
    }
    if cached.join("go.mod").is_file() {
        return Ok(cached);
    }
    fs::create_dir_all(volcano_dir())?;
    let mut git = Command::new("git");
    git.args(["clone", "--quiet", "--depth", "1", "--branch", VOLCANO_TAG])
        .arg("https://github.com/volcano-sh/volcano")
        .arg(&partial);
    eprintln!("tandem-xtask: {}", display(&git));
    run(&mut git).with_context(|| {
        format!(
            "could not clone Volcano {VOLCANO_TAG}; set {VOLCANO_SRC_VAR} to a copy of its source"
        )
    })?;
    replace_dir(&partial, &cached)?;
    Ok(cached)
}

/// Moves the complete directory `from` to `to`, replacing what an interrupted run left there.
fn replace_dir(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        fs::remove_dir_all(to).with_context(|| format!("could not remove {}", to.display()))?;
    }
    fs::rename(from, to)
        .with_context(|| format!("could not move {} to {}", from.display(), to.display()))
}

/// The files of `source` whose contents decide the build, sorted: what Go reads.
fn build_inputs(source: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![source.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in
            fs::read_dir(&dir).with_context(|| format!("could not list {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type()?.is_dir() {
                if !name.starts_with('.') {
                    pending.push(path);
                }
            } else if !name.ends_with("_test.go") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The cache key of `source`: the recipe, then each file's path and contents.
pub fn source_hash(source: &Path) -> Result<String> {
    let mut parts: Vec<Vec<u8>> = vec![RECIPE.as_bytes().to_vec()];
    for file in build_inputs(source)? {
        let relative = file.strip_prefix(source).unwrap_or(&file);
        parts.push(relative.to_string_lossy().as_bytes().to_vec());
        parts.push(fs::read(&file).with_context(|| format!("could not read {}", file.display()))?);
    }
    Ok(hash_parts(&parts))
}

/// Builds `vc-scheduler` from `source` unless a build of the same source is cached (about five
/// minutes on two cores with an empty Go cache).
pub fn ensure_vc_scheduler(source: &Path) -> Result<VolcanoBuild> {
    let entry = volcano_dir().join(source_hash(source)?);
    let build = VolcanoBuild {
        scheduler: entry.join("bin").join("vc-scheduler"),
        source: entry.join("src"),
    };
    if build.scheduler.is_file() {
        return Ok(build);
    }
    let bin = entry.join("bin");
    fs::create_dir_all(&bin).with_context(|| format!("could not create {}", bin.display()))?;
    let _lock = hold_lock(
        &entry.join(".build.lock"),
        &format!("another build of vc-scheduler in {}", entry.display()),
    )?;
    if build.scheduler.is_file() {
        return Ok(build);
    }
    check_go(&entry)?;
    remove_leftovers(&bin)?;
    if build.source.exists() {
        fs::remove_dir_all(&build.source)?;
    }
    copy_tree(source, &build.source)?;
    let temporary = bin.join(format!(".vc-scheduler.tmp-{}", std::process::id()));
    let mut go = Command::new("go");
    go.current_dir(&build.source)
        // As every Go build of the tiers, so Go's cache serves the packages they share.
        .env("CGO_ENABLED", crate::kube::CGO_ENABLED)
        .args(["build", "-trimpath", "-mod=readonly", "-o"])
        .arg(&temporary)
        .arg("./cmd/scheduler");
    let started = Instant::now();
    eprintln!(
        "tandem-xtask: building vc-scheduler from {} (about five minutes on two cores the first \
         time): CGO_ENABLED=1 {}",
        source.display(),
        display(&go)
    );
    let built = run(&mut go);
    if built.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    built.context("could not build vc-scheduler")?;
    fs::rename(&temporary, &build.scheduler)?;
    let version = output(Command::new(&build.scheduler).arg("--version")).unwrap_or_default();
    eprintln!(
        "tandem-xtask: built vc-scheduler {} in {:.0?}",
        version.lines().next().unwrap_or("").trim(),
        started.elapsed()
    );
    Ok(build)
}

/// Copies `from` into `to` (files made writable; `.git` skipped).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("could not create {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("could not list {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            if entry.file_name() != ".git" {
                copy_tree(&entry.path(), &target)?;
            }
        } else {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("could not copy {}", entry.path().display()))?;
            let mut permissions = fs::metadata(&target)?.permissions();
            #[expect(
                clippy::permissions_set_readonly_false,
                reason = "the copy is ours to rewrite on the next build"
            )]
            permissions.set_readonly(false);
            fs::set_permissions(&target, permissions)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_the_sources_and_skips_tests_and_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("go.mod"), "module x\n").unwrap();
        fs::create_dir_all(root.join("cmd/scheduler")).unwrap();
        fs::write(root.join("cmd/scheduler/main.go"), "package main\n").unwrap();
        let first = source_hash(root).unwrap();
        fs::write(root.join("cmd/scheduler/main_test.go"), "package main\n").unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/HEAD"), "ref\n").unwrap();
        assert_eq!(source_hash(root).unwrap(), first);
        fs::write(
            root.join("cmd/scheduler/main.go"),
            "package main // changed\n",
        )
        .unwrap();
        assert_ne!(source_hash(root).unwrap(), first);
        let target = tempfile::tempdir().unwrap();
        let copy = target.path().join("src");
        copy_tree(root, &copy).unwrap();
        assert!(copy.join("cmd/scheduler/main.go").is_file());
        assert!(!copy.join(".git").exists());
    }
}
