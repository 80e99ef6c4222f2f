//! The Kubernetes binaries of the end-to-end tests: `kube-apiserver`, `kube-scheduler` and
//! `etcd`, built from their published Go modules and cached outside the work tree.
//!
//! The Go module is `xtask/kube` (`go.mod`, `go.sum`, `tools.go`): Kubernetes v1.35.3 with every
//! staging module replaced by its published v0.35.3, and etcd v3.6.10. Its three files are
//! compiled into this crate, so the binaries built are exactly the ones this crate was built
//! with, wherever the tree is at run time. [`ensure_kube_binaries`] writes them into
//! `<kube_dir()>/<hash>/src` and builds there with
//! `CGO_ENABLED=1 go build -trimpath -mod=readonly` (the committed `go.sum` decides every
//! module; nothing is resolved anew) into `<kube_dir()>/<hash>/bin`. The hash covers the three
//! files and the build recipe, so a changed module gets a fresh directory and an unchanged one
//! is built once. Go's own build cache stays where Go keeps it (`go env GOCACHE`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail, ensure};

use crate::process::{display, hold_lock, output, run};

/// `xtask/kube/go.mod`: what the binaries are built from.
pub const GO_MOD: &str = include_str!("../kube/go.mod");
/// `xtask/kube/go.sum`: the checksums `-mod=readonly` verifies every module against.
pub const GO_SUM: &str = include_str!("../kube/go.sum");
/// `xtask/kube/tools.go`: the blank imports that keep `go mod tidy` from dropping the
/// requirements. Not needed to build, copied so the build directory is the module as committed.
const TOOLS_GO: &str = include_str!("../kube/tools.go");

/// The variable `cargo xtask test` sets for the tests it runs: the directory holding the
/// three binaries it has just ensured (see [`KubeBinaries::from_env`]).
pub const KUBE_BIN_DIR_VAR: &str = "TANDEM_KUBE_BIN_DIR";

/// How the binaries are built, beyond the module files. Part of the cache hash: change it
/// whenever the flags below change, so binaries built the old way are not reused.
const RECIPE: &str = "CGO_ENABLED=1 go build -trimpath -mod=readonly -ldflags '-s -w <version>' v2";

/// Every Go build of the tiers uses cgo: `tandem-kube-scheduler` must (it links the Rust
/// library), and Go's build cache keys a package by whether cgo is on, so with one setting the
/// plugin's build reuses every Kubernetes package the control plane's built (minutes on two
/// cores), and Volcano's the ones its module shares.
pub(crate) const CGO_ENABLED: &str = "1";

/// The binaries of the end-to-end tests. All three are in the same directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeBinaries {
    /// `kube-apiserver` (`k8s.io/kubernetes/cmd/kube-apiserver`).
    pub apiserver: PathBuf,
    /// `kube-scheduler` (`k8s.io/kubernetes/cmd/kube-scheduler`).
    pub scheduler: PathBuf,
    /// `etcd` (`go.etcd.io/etcd/server/v3`).
    pub etcd: PathBuf,
}

impl KubeBinaries {
    /// The binaries as named in `dir`, whether they exist or not.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            apiserver: dir.join(Program::APISERVER.binary),
            scheduler: dir.join(Program::SCHEDULER.binary),
            etcd: dir.join(Program::ETCD.binary),
        }
    }

    /// The binaries in `$TANDEM_KUBE_BIN_DIR` when it is set (`cargo xtask test` sets it; a
    /// caller with binaries of its own can too), else [`ensure_kube_binaries`]. An error when
    /// the variable names a directory without all three.
    pub fn from_env() -> Result<Self> {
        let Some(dir) = std::env::var_os(KUBE_BIN_DIR_VAR).filter(|dir| !dir.is_empty()) else {
            return ensure_kube_binaries();
        };
        let binaries = Self::in_dir(Path::new(&dir));
        ensure!(
            binaries.all_exist(),
            "{KUBE_BIN_DIR_VAR}={} lacks one of kube-apiserver, kube-scheduler, etcd (unset it \
             to build them with `cargo xtask kube-bins`)",
            Path::new(&dir).display()
        );
        Ok(binaries)
    }

    /// The directory holding the three binaries.
    pub fn dir(&self) -> &Path {
        self.apiserver.parent().unwrap_or(Path::new("."))
    }

    /// Whether all three are there (each is renamed into place only once fully built).
    pub fn all_exist(&self) -> bool {
        [&self.apiserver, &self.scheduler, &self.etcd]
            .iter()
            .all(|binary| binary.is_file())
    }
}

/// One program of the module: the binary's name and the Go package that is its `main`.
#[derive(Debug, Clone, Copy)]
struct Program {
    binary: &'static str,
    package: &'static str,
    /// Whether it is a Kubernetes component, whose version `-ldflags -X` sets (unset, it says
    /// `v0.0.0-master`); etcd's version is a constant in its sources.
    kubernetes: bool,
}

impl Program {
    const APISERVER: Self = Self {
        binary: "kube-apiserver",
        package: "k8s.io/kubernetes/cmd/kube-apiserver",
        kubernetes: true,
    };
    const SCHEDULER: Self = Self {
        binary: "kube-scheduler",
        package: "k8s.io/kubernetes/cmd/kube-scheduler",
        kubernetes: true,
    };
    const ETCD: Self = Self {
        binary: "etcd",
        package: "go.etcd.io/etcd/server/v3",
        kubernetes: false,
    };
    const KUBELET: Self = Self {
        binary: "kubelet",
        package: "k8s.io/kubernetes/cmd/kubelet",
        kubernetes: true,
    };
    /// The control plane, in build order: the apiserver is the largest, the scheduler then
    /// mostly hits Go's build cache. The kubelet is built only for the node tier.
    const CONTROL_PLANE: [Self; 3] = [Self::APISERVER, Self::SCHEDULER, Self::ETCD];
}

/// Where the binaries are cached: `$TANDEM_KUBE_DIR`, else `$XDG_CACHE_HOME/tandem/kube`, else
/// `$HOME/.cache/tandem/kube` (the convention of [`tandem_toolchain::toolchain_dir`]).
pub fn kube_dir() -> PathBuf {
    crate::toolchain::cache_dir("TANDEM_KUBE_DIR", "kube")
}

/// The cache key of the module: 16 hex digits of a 64-bit FNV-1a over the recipe and the three
/// module files. Not cryptographic (nothing here is adversarial), but stable across Rust
/// releases, unlike `std`'s `DefaultHasher`.
pub fn module_hash() -> String {
    hash_parts(&[RECIPE, GO_MOD, GO_SUM, TOOLS_GO])
}

/// The FNV-1a hash of `parts` (text or bytes), each preceded by its length.
pub(crate) fn hash_parts<P: AsRef<[u8]>>(parts: &[P]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for part in parts {
        let part = part.as_ref();
        // The length first, so that moving text from one part to the next changes the hash.
        for byte in (part.len() as u64).to_le_bytes().iter().chain(part) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    format!("{hash:016x}")
}

/// The binaries for this crate's module, building whichever are missing.
///
/// Fast when they are there (three `stat`s; Go is not even asked). Otherwise, under a file lock
/// in the cache entry (a second process, or thread, waits and then finds them built), it checks
/// that `go` is in `PATH` and at least the `go` line of `go.mod`, writes the module into
/// `<entry>/src` and runs `go build` once per missing binary into a temporary name that is
/// renamed into place: a killed build never leaves a binary that looks finished. The first
/// build compiles Kubernetes: about ten minutes on two cores.
pub fn ensure_kube_binaries() -> Result<KubeBinaries> {
    let entry = kube_dir().join(module_hash());
    ensure_in(&entry, &Program::CONTROL_PLANE).with_context(|| {
        format!(
            "could not build kube-apiserver, kube-scheduler and etcd in {} (set TANDEM_KUBE_DIR \
             to use another directory)",
            entry.display()
        )
    })?;
    Ok(KubeBinaries::in_dir(&entry.join("bin")))
}

/// The kubelet of the same module (the node tier's), building it if missing, beside the
/// binaries of [`ensure_kube_binaries`]. Returns its path.
pub fn ensure_kubelet() -> Result<PathBuf> {
    let entry = kube_dir().join(module_hash());
    ensure_in(&entry, &[Program::KUBELET]).with_context(|| {
        format!(
            "could not build the kubelet in {} (set TANDEM_KUBE_DIR to use another directory)",
            entry.display()
        )
    })?;
    Ok(entry.join("bin").join(Program::KUBELET.binary))
}

/// Builds whichever of `programs` are missing from `<entry>/bin`.
fn ensure_in(entry: &Path, programs: &[Program]) -> Result<()> {
    let bin = entry.join("bin");
    let all_exist = || {
        programs
            .iter()
            .all(|program| bin.join(program.binary).is_file())
    };
    if all_exist() {
        return Ok(());
    }

    fs::create_dir_all(&bin).with_context(|| format!("could not create {}", bin.display()))?;
    let _lock = hold_lock(
        &entry.join(".build.lock"),
        &format!(
            "another build of the Kubernetes binaries in {}",
            entry.display()
        ),
    )?;
    // Someone else may have finished while we waited.
    if all_exist() {
        return Ok(());
    }

    check_go(entry)?;
    remove_leftovers(&bin)?;
    let src = entry.join("src");
    write_module(&src)?;

    let kubernetes = required_version(GO_MOD, "k8s.io/kubernetes")
        .context("xtask/kube/go.mod requires no k8s.io/kubernetes")?;
    let started = Instant::now();
    let names: Vec<&str> = programs.iter().map(|program| program.binary).collect();
    eprintln!(
        "tandem-xtask: building {} of Kubernetes {kubernetes} into {} (the first build \
         compiles Kubernetes: about ten minutes on two cores; Go caches the packages)",
        names.join(", "),
        bin.display()
    );
    for program in programs {
        let binary = bin.join(program.binary);
        if binary.is_file() {
            continue;
        }
        build(&src, *program, &kubernetes, &binary)?;
    }
    eprintln!(
        "tandem-xtask: built {} in {:.0?}",
        names.join(", "),
        started.elapsed()
    );
    Ok(())
}

/// `go build`s `program` into a temporary name next to `binary`, then renames it into place.
fn build(src: &Path, program: Program, kubernetes: &str, binary: &Path) -> Result<()> {
    let dir = binary.parent().unwrap_or(Path::new("."));
    let temporary = dir.join(format!(".{}.tmp-{}", program.binary, std::process::id()));
    let mut ldflags = String::from("-s -w");
    if program.kubernetes {
        ldflags.push_str(&kubernetes_version_ldflags(kubernetes));
    }
    let mut command = Command::new("go");
    command
        .current_dir(src)
        .env("CGO_ENABLED", CGO_ENABLED)
        .arg("build")
        .arg("-trimpath")
        // The committed go.sum decides; a GOFLAGS=-mod=mod in the environment must not let
        // go rewrite go.mod (the flag on the command line wins over GOFLAGS).
        .arg("-mod=readonly")
        .arg(format!("-ldflags={ldflags}"))
        .arg("-o")
        .arg(&temporary)
        .arg(program.package);
    let started = Instant::now();
    eprintln!(
        "tandem-xtask: CGO_ENABLED={CGO_ENABLED} {}",
        display(&command)
    );
    let built = run(&mut command);
    if built.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    built.with_context(|| format!("could not build {}", program.binary))?;
    fs::rename(&temporary, binary).with_context(|| {
        format!(
            "could not rename {} to {}",
            temporary.display(),
            binary.display()
        )
    })?;
    eprintln!(
        "tandem-xtask: {} built in {:.0?}",
        program.binary,
        started.elapsed()
    );
    Ok(())
}

/// The `-X` flags Kubernetes' own build (`hack/lib/version.sh`) sets, so that `--version` and
/// the apiserver's `/version` name the release rather than `v0.0.0-master`.
pub(crate) fn kubernetes_version_ldflags(version: &str) -> String {
    let numbers = version.trim_start_matches('v');
    let mut parts = numbers.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    let mut flags = String::new();
    for (name, value) in [
        ("gitVersion", version),
        ("gitMajor", major),
        ("gitMinor", minor),
        ("gitTreeState", "clean"),
    ] {
        for package in [
            "k8s.io/component-base/version",
            "k8s.io/client-go/pkg/version",
        ] {
            flags.push_str(&format!(" -X {package}.{name}={value}"));
        }
    }
    flags
}

/// Writes `go.mod`, `go.sum` and `tools.go` into `src` (we hold the lock: nobody reads them).
fn write_module(src: &Path) -> Result<()> {
    fs::create_dir_all(src).with_context(|| format!("could not create {}", src.display()))?;
    for (name, contents) in [
        ("go.mod", GO_MOD),
        ("go.sum", GO_SUM),
        ("tools.go", TOOLS_GO),
    ] {
        let path = src.join(name);
        fs::write(&path, contents)
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    Ok(())
}

/// Removes the temporary binaries a killed build left (we hold the lock).
pub(crate) fn remove_leftovers(bin: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(bin) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().contains(".tmp-") {
            let path = entry.path();
            fs::remove_file(&path)
                .with_context(|| format!("could not remove the leftover {}", path.display()))?;
        }
    }
    Ok(())
}

/// Checks that `go` runs and is at least the `go` line of `go.mod`.
pub(crate) fn check_go(entry: &Path) -> Result<()> {
    let needed = go_directive(GO_MOD).context("xtask/kube/go.mod has no `go` line")?;
    let mut command = Command::new("go");
    // Asked outside the module: inside it, GOTOOLCHAIN=auto would first fetch a newer Go.
    command.current_dir(entry).args(["env", "GOVERSION"]);
    let reported = match output(&mut command) {
        Ok(reported) => reported,
        Err(error) => {
            let missing = which("go").is_none();
            let why = if missing {
                "`go` is not in PATH".to_owned()
            } else {
                format!("`go env GOVERSION` failed: {error:#}")
            };
            bail!(
                "{why}: the end-to-end tests build kube-apiserver, kube-scheduler and etcd from \
                 their Go modules and need Go {needed} or newer (https://go.dev/dl/; Debian's \
                 golang-go is too old)"
            );
        }
    };
    let reported = reported.trim();
    // A development build (`devel go1.27-...`) has no comparable release number: let it try.
    if let Some(have) = reported.strip_prefix("go").and_then(parse_version) {
        let need = parse_version(&needed).unwrap_or_default();
        ensure!(
            have >= need,
            "`go` in PATH is {reported}, but xtask/kube/go.mod needs Go {needed} or newer \
             (https://go.dev/dl/; Debian's golang-go is too old)"
        );
    }
    Ok(())
}

/// The first executable `name` in `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The version of the `go` directive: `go 1.25.0` gives `1.25.0`.
fn go_directive(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let version = line.trim().strip_prefix("go ")?;
        Some(version.trim().to_owned())
    })
}

/// The version `go_mod` requires of `module` (in a `require` block or a one-line `require`).
pub(crate) fn required_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("require ").unwrap_or(line);
        let mut words = line.split_whitespace();
        (words.next()? == module).then_some(())?;
        Some(words.next()?.to_owned())
    })
}

/// `1.26.8` (or `1.25`, `1.21rc2`) as comparable numbers; missing parts are 0 and a pre-release
/// suffix is ignored (`1.26rc1` counts as `1.26.0`).
fn parse_version(version: &str) -> Option<(u32, u32, u32)> {
    let mut numbers = version.split('.').map(|part| {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = numbers.next()??;
    let minor = numbers.next().flatten().unwrap_or(0);
    let patch = numbers.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_dir_prefers_tandem_then_xdg_then_home() {
        let some = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            crate::toolchain::cache_dir_from(
                "kube",
                some("/opt/kube"),
                some("/xdg"),
                some("/home/me")
            ),
            PathBuf::from("/opt/kube")
        );
        assert_eq!(
            crate::toolchain::cache_dir_from("kube", some(""), some("/xdg"), some("/home/me")),
            PathBuf::from("/xdg/tandem/kube")
        );
        assert_eq!(
            crate::toolchain::cache_dir_from("kube", None, some("relative"), some("/home/me")),
            PathBuf::from("/home/me/.cache/tandem/kube")
        );
    }

    #[test]
    fn the_module_pins_kubernetes_etcd_and_a_go_release() {
        assert_eq!(
            required_version(GO_MOD, "k8s.io/kubernetes").as_deref(),
            Some("v1.35.3")
        );
        assert!(
            required_version(GO_MOD, "go.etcd.io/etcd/server/v3")
                .is_some_and(|version| version.starts_with("v3.6."))
        );
        assert!(go_directive(GO_MOD).is_some_and(|go| parse_version(&go) >= Some((1, 25, 0))));
        // The staging modules are required at v0.0.0 by k8s.io/kubernetes: each needs a
        // replace with the published tag.
        for staging in ["k8s.io/api", "k8s.io/apiserver", "k8s.io/kube-scheduler"] {
            assert!(
                GO_MOD.contains(&format!("{staging} => {staging} v0.35.3")),
                "{staging} is not replaced"
            );
        }
    }

    #[test]
    fn versions_compare_by_number_and_ignore_pre_release_suffixes() {
        assert_eq!(parse_version("1.26.8"), Some((1, 26, 8)));
        assert_eq!(parse_version("1.25"), Some((1, 25, 0)));
        assert_eq!(parse_version("1.26rc1"), Some((1, 26, 0)));
        assert_eq!(parse_version("devel"), None);
        assert!(parse_version("1.9.0") < parse_version("1.25.0"));
        assert_eq!(
            go_directive("module x\n\ngo 1.25.0\n").as_deref(),
            Some("1.25.0")
        );
        assert_eq!(
            required_version("require example.com/a v1.2.3\n", "example.com/a").as_deref(),
            Some("v1.2.3")
        );
    }

    #[test]
    fn the_hash_changes_with_any_part_and_with_moved_text() {
        let base = hash_parts(&["recipe", "mod", "sum"]);
        assert_eq!(base.len(), 16);
        assert_eq!(base, hash_parts(&["recipe", "mod", "sum"]));
        assert_ne!(base, hash_parts(&["recipe", "mod", "sum2"]));
        assert_ne!(base, hash_parts(&["recipe", "mo", "dsum"]));
    }

    #[test]
    fn kubernetes_version_flags_set_component_base_and_client_go() {
        let flags = kubernetes_version_ldflags("v1.35.3");
        assert!(flags.contains(" -X k8s.io/component-base/version.gitVersion=v1.35.3"));
        assert!(flags.contains(" -X k8s.io/component-base/version.gitMinor=35"));
        assert!(flags.contains(" -X k8s.io/client-go/pkg/version.gitMajor=1"));
    }

    #[test]
    fn binaries_share_one_directory() {
        let binaries = KubeBinaries::in_dir(Path::new("/cache/bin"));
        assert_eq!(binaries.dir(), Path::new("/cache/bin"));
        assert_eq!(binaries.etcd, Path::new("/cache/bin/etcd"));
        assert!(!binaries.all_exist());
    }
}
