//! `tandem-kube-scheduler`: kube-scheduler with the Tandem framework plugin, built from the Go
//! module in `kube-plugin/scheduler` with cgo against the static library of
//! `tandem-kube-capi`, and cached outside the work tree like the other Kubernetes binaries.
//!
//! [`ensure_plugin_scheduler`] builds the library (`cargo build`, in the profile the caller
//! names: the dev profile, `--release` for the throughput benchmark; cargo decides whether
//! anything changed), or [`ensure_plugin_scheduler_linking`] takes the one the end-to-end test
//! build produced; either hashes it with the Go module's files and the recipe, and builds
//! the binary into `<kube_dir()>/plugin-<hash>/bin` unless it is there: a change on either side
//! gets a fresh directory, an unchanged tree is built once, and after a build only the two
//! most recent other builds are kept. The Go code is checked in the same directory, with the
//! same module tree and build cache, before a binary is kept: `gofmt -l` lists no file, `go
//! vet` finds nothing, and the plugin's unit tests (`go test`) pass; so a cached binary is one
//! whose checks passed. The Go module pins Kubernetes
//! v1.35.3 with the same `replace` lines as `xtask/kube` (its `go.mod` is that file, tidied
//! for the plugin's imports), so the scheduler is the release the end-to-end suite runs.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, ensure};

use crate::kube::{
    check_go, hash_parts, kube_dir, kubernetes_version_ldflags, remove_leftovers, required_version,
};
use crate::process::{display, fresh_cargo, hold_lock, output, run};

/// The variable `cargo xtask` sets for the tests and benchmarks it runs: the path of the
/// `tandem-kube-scheduler` it has just ensured.
pub const PLUGIN_SCHEDULER_VAR: &str = "TANDEM_PLUGIN_SCHEDULER";

/// The binary's name.
pub const BINARY: &str = "tandem-kube-scheduler";

/// The crate whose static library the plugin links.
pub const CAPI_PACKAGE: &str = "tandem-kube-capi";

/// Where the Go module is, relative to the workspace root.
const MODULE_DIR: &str = "kube-plugin/scheduler";

/// How it is built, beyond the files hashed (the library's bytes tell the profiles apart).
/// Change it whenever the flags below change.
const RECIPE: &str = "cargo build [--release] -p tandem-kube-capi; gofmt -l .; CGO_ENABLED=1 \
    CGO_LDFLAGS=-L<lib> go vet -trimpath -mod=readonly ./...; go build -trimpath -mod=readonly \
    -ldflags '-s -w <version>'; go test -trimpath -mod=readonly ./... v2";

/// The cargo profile the plugin's static library is built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The dev profile `cargo test` builds the workspace in: the library links the artefacts
    /// the tests built, so the end-to-end tiers compile nothing twice. The engine runs as
    /// fast either way (the component is compiled by Cranelift at start, optimized in both).
    Dev,
    /// `--release`: what the throughput benchmark measures, and what is deployed.
    Release,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Self::Dev => "debug",
            Self::Release => "release",
        }
    }
}

/// `$TANDEM_PLUGIN_SCHEDULER` when set (`cargo xtask` sets it), else
/// [`ensure_plugin_scheduler`] in `profile` for the workspace at `root` and the target
/// directory `$CARGO_TARGET_DIR` (else `<root>/target`). An error when the variable names no
/// file.
pub fn plugin_scheduler_from_env(root: &Path, profile: Profile) -> Result<PathBuf> {
    match std::env::var_os(PLUGIN_SCHEDULER_VAR).filter(|path| !path.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            ensure!(
                path.is_file(),
                "{PLUGIN_SCHEDULER_VAR}={} is not a file (unset it to build one with `cargo \
                 xtask kube-scheduler-plugin`)",
                path.display()
            );
            Ok(path)
        }
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .filter(|dir| !dir.is_empty())
                .map_or_else(|| root.join("target"), PathBuf::from);
            ensure_plugin_scheduler(root, &target, profile)
        }
    }
}

/// Builds `tandem-kube-scheduler` for the workspace's current sources, unless it is cached.
///
/// The first build compiles kube-scheduler with cgo: minutes, most of it shared with Go's
/// build cache from `cargo xtask kube-bins`.
pub fn ensure_plugin_scheduler(
    root: &Path,
    target_dir: &Path,
    profile: Profile,
) -> Result<PathBuf> {
    let library = build_library(root, target_dir, profile)?;
    ensure_plugin_scheduler_linking(root, &library)
}

/// [`ensure_plugin_scheduler`] with a static library of `tandem-kube-capi` built already: the
/// one the end-to-end test build produced beside the test binaries, whose features cargo
/// resolved with the whole workspace's (a `cargo build --package` of the library alone resolves
/// them anew and compiles the wasmtime stack a second time).
pub fn ensure_plugin_scheduler_linking(root: &Path, library: &Path) -> Result<PathBuf> {
    let module = read_module(&root.join(MODULE_DIR))?;
    let library_bytes =
        fs::read(library).with_context(|| format!("could not read {}", library.display()))?;
    let mut parts: Vec<&[u8]> = vec![RECIPE.as_bytes()];
    for (path, contents) in &module {
        parts.push(path.as_bytes());
        parts.push(contents);
    }
    parts.push(&library_bytes);
    let entry = kube_dir().join(format!("plugin-{}", hash_parts(&parts)));
    ensure_in(&entry, &module, library).with_context(|| {
        format!(
            "could not build {BINARY} in {} (set TANDEM_KUBE_DIR to use another directory)",
            entry.display()
        )
    })
}

/// `cargo build` of the C ABI crate in the workspace at `root`, in `profile`; the static
/// library's path.
fn build_library(root: &Path, target_dir: &Path, profile: Profile) -> Result<PathBuf> {
    let mut cargo = fresh_cargo();
    cargo
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target_dir)
        .args(["build", "--package", CAPI_PACKAGE, "--lib"]);
    if profile == Profile::Release {
        cargo.arg("--release");
    }
    eprintln!("tandem-xtask: {}", display(&cargo));
    run(&mut cargo).with_context(|| format!("could not build {CAPI_PACKAGE}"))?;
    let library = target_dir
        .join(profile.dir())
        .join(format!("lib{}.a", CAPI_PACKAGE.replace('-', "_")));
    ensure!(
        library.is_file(),
        "cargo built {CAPI_PACKAGE} but {} is missing",
        library.display()
    );
    Ok(library)
}

/// The module's `go.mod`, `go.sum`, Go files and C headers (the C ABI's, which cgo includes),
/// by path relative to `dir`, sorted.
fn read_module(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries =
            fs::read_dir(&current).with_context(|| format!("cannot list {}", current.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "go.mod" || name == "go.sum" || name.ends_with(".go") || name.ends_with(".h")
            {
                let relative = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                let contents =
                    fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
                files.push((relative, contents));
            }
        }
    }
    files.sort();
    ensure!(
        files.iter().any(|(path, _)| path == "go.mod"),
        "{} has no go.mod",
        dir.display()
    );
    Ok(files)
}

fn ensure_in(entry: &Path, module: &[(String, Vec<u8>)], library: &Path) -> Result<PathBuf> {
    let bin = entry.join("bin");
    let binary = bin.join(BINARY);
    if binary.is_file() {
        return Ok(binary);
    }
    fs::create_dir_all(&bin).with_context(|| format!("could not create {}", bin.display()))?;
    let _lock = hold_lock(
        &entry.join(".build.lock"),
        &format!("another build of {BINARY} in {}", entry.display()),
    )?;
    if binary.is_file() {
        return Ok(binary);
    }
    check_go(entry)?;
    remove_leftovers(&bin)?;

    let src = entry.join("src");
    for (path, contents) in module {
        let target = src.join(path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        fs::write(&target, contents)
            .with_context(|| format!("could not write {}", target.display()))?;
    }
    let lib = entry.join("lib");
    fs::create_dir_all(&lib).with_context(|| format!("could not create {}", lib.display()))?;
    // The name the Go side links (`-ltandem_kube_capi`), whatever cargo called the file
    // (`deps/libtandem_kube_capi-<hash>.a` when it came from a test build).
    let copied = lib.join(format!("lib{}.a", CAPI_PACKAGE.replace('-', "_")));
    fs::copy(library, &copied).with_context(|| {
        format!(
            "could not copy {} to {}",
            library.display(),
            copied.display()
        )
    })?;

    let go_mod = module
        .iter()
        .find(|(path, _)| path == "go.mod")
        .map(|(_, contents)| String::from_utf8_lossy(contents).into_owned())
        .unwrap_or_default();
    let kubernetes = required_version(&go_mod, "k8s.io/kubernetes")
        .context("the plugin's go.mod requires no k8s.io/kubernetes")?;
    let started = Instant::now();
    check_format(&src)?;
    let mut vet = go(&src, &lib, "vet");
    vet.arg("./...");
    eprintln!("tandem-xtask: {}", display(&vet));
    run(&mut vet).context("go vet found problems in the plugin's Go code")?;

    let temporary = bin.join(format!(".{BINARY}.tmp-{}", std::process::id()));
    let mut command = go(&src, &lib, "build");
    command
        .arg(format!(
            "-ldflags=-s -w{}",
            kubernetes_version_ldflags(&kubernetes)
        ))
        .arg("-o")
        .arg(&temporary)
        .arg(".");
    eprintln!(
        "tandem-xtask: building {BINARY} (kube-scheduler {kubernetes} + the Tandem plugin) in {}: CGO_ENABLED=1 {}",
        src.display(),
        display(&command)
    );
    let built = run(&mut command);
    if built.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    built.with_context(|| format!("could not build {BINARY}"))?;
    // The plugin's unit tests link the same library; a binary whose tests fail is not kept.
    let mut test = go(&src, &lib, "test");
    test.arg("./...");
    eprintln!("tandem-xtask: {}", display(&test));
    let tested = run(&mut test);
    if tested.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    tested.context("the plugin's Go unit tests failed")?;
    fs::rename(&temporary, &binary).with_context(|| {
        format!(
            "could not rename {} to {}",
            temporary.display(),
            binary.display()
        )
    })?;
    eprintln!("tandem-xtask: {BINARY} built in {:.0?}", started.elapsed());
    if let Some(cache) = entry.parent() {
        prune_builds(cache, entry, KEPT_BUILDS);
    }
    Ok(binary)
}

/// `go <verb> -trimpath -mod=readonly` in the module's copy at `src`, with cgo linking the
/// static library in `lib`. Vet, build and test share the flags that decide Go's build cache
/// keys, so the Kubernetes packages are compiled once for all three (and `-trimpath` is what
/// `cargo xtask kube-bins` builds with too).
fn go(src: &Path, lib: &Path, verb: &str) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(src)
        .env("CGO_ENABLED", crate::kube::CGO_ENABLED)
        .env("CGO_LDFLAGS", format!("-L{}", lib.display()))
        .arg(verb)
        .arg("-trimpath")
        // The committed go.sum decides; nothing is resolved anew.
        .arg("-mod=readonly");
    command
}

/// Fails unless `gofmt` leaves every Go file of the module's copy at `src` as it is, naming
/// the files it would change by their paths in the repository.
fn check_format(src: &Path) -> Result<()> {
    let mut gofmt = Command::new("gofmt");
    gofmt.current_dir(src).args(["-l", "."]);
    eprintln!("tandem-xtask: {}", display(&gofmt));
    let listed = output(&mut gofmt)?;
    let unformatted = unformatted_files(&listed);
    ensure!(
        unformatted.is_empty(),
        "gofmt would change {}: run `gofmt -w {MODULE_DIR}`",
        unformatted.join(", ")
    );
    Ok(())
}

/// The files `gofmt -l` listed (run in the module's root), as paths in the repository.
fn unformatted_files(listed: &str) -> Vec<String> {
    listed
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|file| format!("{MODULE_DIR}/{}", file.trim_start_matches("./")))
        .collect()
}

/// Builds of the plugin kept besides the newest: every change to the library or the module
/// makes a new one (about 400 MB with its sources and library), so without pruning a
/// machine that runs the gate on every commit fills its disk.
const KEPT_BUILDS: usize = 2;

/// Removes the `plugin-*` directories of `cache` but `current` and the `keep` most recently
/// modified others, skipping any whose build is in progress (its lock is held). Best effort:
/// a directory that cannot be removed is left for the next time.
fn prune_builds(cache: &Path, current: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    let mut builds: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path != current
                && path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("plugin-"))
        })
        .filter_map(|path| Some((fs::metadata(&path).ok()?.modified().ok()?, path)))
        .collect();
    builds.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    for (_, old) in builds.into_iter().skip(keep) {
        let in_use = File::open(old.join(".build.lock")).is_ok_and(|lock| lock.try_lock().is_err());
        if !in_use && fs::remove_dir_all(&old).is_ok() {
            eprintln!("tandem-xtask: removed the older build {}", old.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `replace ( ... )` block of a go.mod, its lines trimmed, comments kept out.
    fn replace_block(go_mod: &str) -> Vec<&str> {
        go_mod
            .lines()
            .map(str::trim)
            .skip_while(|line| *line != "replace (")
            .skip(1)
            .take_while(|line| *line != ")")
            .filter(|line| !line.is_empty() && !line.starts_with("//"))
            .collect()
    }

    #[test]
    fn the_plugin_module_replaces_what_the_kubernetes_build_replaces() {
        // Both modules build Kubernetes v1.35.3 from its staging modules' published tags; a
        // replace line that differs would build the plugin scheduler against other code than
        // the kube-scheduler beside it in the tiers.
        let plugin = include_str!("../../kube-plugin/scheduler/go.mod");
        let kube = replace_block(crate::kube::GO_MOD);
        assert!(kube.len() > 20, "{kube:?}");
        assert_eq!(replace_block(plugin), kube);
        assert!(replace_block("module x\n").is_empty());
    }

    #[test]
    fn gofmt_listings_name_files_by_their_repository_paths() {
        assert!(unformatted_files("").is_empty());
        assert!(unformatted_files("\n").is_empty());
        assert_eq!(
            unformatted_files("main.go\ntandem/engine.go\n"),
            [
                "kube-plugin/scheduler/main.go",
                "kube-plugin/scheduler/tandem/engine.go"
            ]
        );
    }

    #[test]
    fn the_module_carries_the_c_header_it_includes() -> Result<()> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let module = read_module(&root.join(MODULE_DIR))?;
        let paths: Vec<&str> = module.iter().map(|(path, _)| path.as_str()).collect();
        for path in ["go.mod", "go.sum", "main.go", "tandem/tandem_kube_capi.h"] {
            assert!(paths.contains(&path), "{path} not in {paths:?}");
        }
        Ok(())
    }

    #[test]
    fn only_the_newest_builds_are_kept() -> Result<()> {
        let cache = std::env::temp_dir().join(format!("tandem-prune-{}", std::process::id()));
        let _ = fs::remove_dir_all(&cache);
        let names = [
            "plugin-a",
            "plugin-b",
            "plugin-c",
            "plugin-d",
            "28d4c9438fe43176",
        ];
        let dirs: Vec<PathBuf> = names.iter().map(|name| cache.join(name)).collect();
        for dir in &dirs {
            fs::create_dir_all(dir.join("bin"))?;
        }
        // `plugin-a` is the current build though the oldest; b is in use.
        let lock = File::create(dirs[1].join(".build.lock"))?;
        lock.lock()?;
        for (i, dir) in dirs.iter().enumerate() {
            let modified = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000_000 + i as u64);
            File::open(dir)?.set_modified(modified)?;
        }
        prune_builds(&cache, &dirs[0], 1);
        let left: Vec<bool> = dirs.iter().map(|d| d.exists()).collect();
        // Kept: the current (a), the one in use (b), the newest other (d), and the Kubernetes
        // binaries (not a plugin build); c removed.
        assert_eq!(left, [true, true, false, true, true]);
        fs::remove_dir_all(&cache)?;
        Ok(())
    }
}
