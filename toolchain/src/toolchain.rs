//! Finding, or bootstrapping from Debian's packages, the wasm32 toolchain that builds guests.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail, ensure};

use crate::process::{display, hold_lock, output, run};

/// The target guests are built for: no WASI, so a component imports only what its WIT world
/// names.
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// The Rust release of Debian's `rustc-web` that the bootstrap installs. The compiler and the
/// standard-library sources must be the same release (a 1.95 or nightly compiler fails on the
/// 1.96 sources with unknown lang items).
pub const DEBIAN_RUST_RELEASE: &str = "1.96";

/// The Debian packages of the bootstrap: the compiler, its driver library, its host standard
/// library, the standard-library sources (for `-Zbuild-std`) and the LLVM it links against.
pub const DEBIAN_PACKAGES: [&str; 5] = [
    "rustc-web",
    "libstd-rust-web-dev",
    "libstd-rust-web-1.96",
    "rust-web-src",
    "libllvm22",
];

/// Where the bootstrapped toolchain and its downloads live: `$TANDEM_TOOLCHAIN_DIR`, else
/// `$XDG_CACHE_HOME/tandem/toolchain`, else `$HOME/.cache/tandem/toolchain`.
///
/// A relative `$TANDEM_TOOLCHAIN_DIR` is taken relative to the current directory (a build
/// script runs in its package's directory, so prefer an absolute path there). Build scripts
/// using [`crate::BuildScriptGuests`] rerun when these variables change.
pub fn toolchain_dir() -> PathBuf {
    cache_dir("TANDEM_TOOLCHAIN_DIR", "toolchain")
}

/// A cache directory of the project: `$<env_var>` if set, else `$XDG_CACHE_HOME/tandem/<leaf>`,
/// else `$HOME/.cache/tandem/<leaf>`; made absolute against the current directory.
pub fn cache_dir(env_var: &str, leaf: &str) -> PathBuf {
    let dir = cache_dir_from(
        leaf,
        std::env::var_os(env_var),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    );
    std::path::absolute(&dir).unwrap_or(dir)
}

/// [`cache_dir`] from given values of `$<env_var>`, `$XDG_CACHE_HOME` and `$HOME` (empty ones
/// count as unset), relative as given: what it computes, apart from the process environment.
pub fn cache_dir_from(
    leaf: &str,
    tandem: Option<OsString>,
    xdg_cache: Option<OsString>,
    home: Option<OsString>,
) -> PathBuf {
    let set = |value: Option<OsString>| value.filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(tandem) {
        return dir;
    }
    // The XDG spec says to ignore a relative XDG_CACHE_HOME.
    if let Some(cache) = set(xdg_cache).filter(|cache| cache.is_absolute()) {
        return cache.join("tandem").join(leaf);
    }
    let home = set(home).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("tandem").join(leaf)
}

/// Which wasm32 toolchain builds guests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WasmToolchain {
    /// The host's rustup toolchain has the `wasm32-unknown-unknown` standard library installed.
    Rustup,
    /// Debian's `rustc-web` unpacked under `prefix` (its sysroot is `prefix/usr`): it builds the
    /// standard library from source with `-Zbuild-std`, and rustup's `rust-lld` links.
    Debian {
        /// The directory the Debian packages were unpacked into.
        prefix: PathBuf,
    },
}

impl WasmToolchain {
    /// `rustc-web`'s sysroot for [`WasmToolchain::Debian`], `None` for rustup.
    pub fn sysroot(&self) -> Option<PathBuf> {
        match self {
            Self::Rustup => None,
            Self::Debian { prefix } => Some(prefix.join("usr")),
        }
    }

    /// The compiler binary for [`WasmToolchain::Debian`], `None` for rustup.
    pub fn rustc(&self) -> Option<PathBuf> {
        self.sysroot()
            .map(|sysroot| sysroot.join("bin").join("rustc"))
    }

    /// The `LD_LIBRARY_PATH` the Debian compiler needs to find `librustc_driver` and LLVM.
    pub fn library_path(&self) -> Option<OsString> {
        let sysroot = self.sysroot()?;
        let dirs = [
            sysroot.join("lib").join(debian_multiarch()),
            sysroot.join("lib").join("llvm-22").join("lib"),
        ];
        std::env::join_paths(dirs).ok()
    }

    /// Configures `command` (a cargo or the compiler itself) to use this toolchain's compiler:
    /// `RUSTC`, `RUSTC_BOOTSTRAP=1` (for `-Zbuild-std`) and `LD_LIBRARY_PATH`. Nothing for rustup.
    pub fn configure(&self, command: &mut Command) {
        if let (Some(rustc), Some(library_path)) = (self.rustc(), self.library_path()) {
            command
                .env("RUSTC", rustc)
                .env("RUSTC_BOOTSTRAP", "1")
                .env("LD_LIBRARY_PATH", library_path);
        }
    }
}

impl fmt::Display for WasmToolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rustup => write!(f, "rustup's {WASM_TARGET} standard library"),
            Self::Debian { prefix } => write!(
                f,
                "Debian's rustc-web {DEBIAN_RUST_RELEASE} with -Zbuild-std, in {}",
                prefix.display()
            ),
        }
    }
}

/// Debian's multiarch library directory for this machine (`x86_64-linux-gnu`).
fn debian_multiarch() -> String {
    format!("{}-linux-gnu", std::env::consts::ARCH)
}

/// The host's own Rust compiler (rustup's): where its sysroot is and which triple it targets.
#[derive(Debug, Clone)]
pub struct HostRust {
    /// The compiler that was asked: `$RUSTC` (cargo sets it for build scripts), else `rustc`.
    pub rustc: OsString,
    /// Its `--print sysroot`.
    pub sysroot: PathBuf,
    /// Its host triple, e.g. `x86_64-unknown-linux-gnu`.
    pub triple: String,
}

impl HostRust {
    /// Asks the host compiler for its sysroot and triple.
    pub fn detect() -> Result<Self> {
        let rustc = std::env::var_os("RUSTC")
            .filter(|rustc| !rustc.is_empty())
            .unwrap_or_else(|| OsString::from("rustc"));
        let verbose_version = output(Command::new(&rustc).arg("-vV"))?;
        let triple = verbose_version
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .with_context(|| format!("`{} -vV` printed no `host:` line", rustc.display()))?
            .trim()
            .to_owned();
        let sysroot = output(Command::new(&rustc).args(["--print", "sysroot"]))?;
        Ok(Self {
            rustc,
            sysroot: PathBuf::from(sysroot.trim()),
            triple,
        })
    }

    /// Whether the host toolchain has the standard library for `target` installed.
    pub fn has_target(&self, target: &str) -> bool {
        let lib = self.sysroot.join("lib/rustlib").join(target).join("lib");
        fs::read_dir(lib).is_ok_and(|mut entries| {
            entries.any(|entry| {
                entry.is_ok_and(|entry| entry.file_name().to_string_lossy().starts_with("libstd-"))
            })
        })
    }

    /// rustup's `rust-lld`, which links wasm for the Debian toolchain (Debian's own is a
    /// symlink to an `lld-22` that is not installed).
    pub fn rust_lld(&self) -> Result<PathBuf> {
        let lld = self
            .sysroot
            .join("lib/rustlib")
            .join(&self.triple)
            .join("bin/rust-lld");
        ensure!(
            lld.is_file(),
            "the host toolchain has no rust-lld at {}; it links the wasm guests \
             (`rustup component add rust-lld` or a full rustup toolchain provides it)",
            lld.display()
        );
        Ok(lld)
    }
}

/// Makes sure a toolchain that builds `wasm32-unknown-unknown` guests is there, and says which.
///
/// If the host's rustup toolchain has the wasm32 standard library, that is all. Otherwise the
/// Debian packages [`DEBIAN_PACKAGES`] are downloaded with `apt-get download` into
/// `toolchain_dir()/debs` (running `apt-get update` first only when the package lists are
/// missing or the download fails) and unpacked with `dpkg -x` into `toolchain_dir()/rust-web`.
/// The unpacking happens in a temporary directory renamed into place, under a file lock, so a
/// killed or concurrent bootstrap never leaves a half prefix. The result is checked by running
/// its `rustc --version`. Idempotent and fast once done.
pub fn ensure_toolchain() -> Result<WasmToolchain> {
    let host = HostRust::detect().context("could not ask the host Rust compiler about itself")?;
    if host.has_target(WASM_TARGET) {
        return Ok(WasmToolchain::Rustup);
    }
    let dir = toolchain_dir();
    ensure_debian_toolchain(&dir).with_context(|| {
        format!(
            "could not set up the wasm32 toolchain in {} (the host toolchain has no {WASM_TARGET} \
             standard library, so Tandem bootstraps Debian's rustc-web; set TANDEM_TOOLCHAIN_DIR \
             to use another directory)",
            dir.display()
        )
    })
}

fn ensure_debian_toolchain(dir: &Path) -> Result<WasmToolchain> {
    let prefix = dir.join("rust-web");
    if prefix.is_dir() && check_prefix(&prefix).is_ok() {
        return Ok(WasmToolchain::Debian { prefix });
    }

    fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let _lock = hold_lock(
        &dir.join(".bootstrap.lock"),
        &format!("another bootstrap of {}", dir.display()),
    )?;
    // Someone else may have finished while we waited.
    if prefix.is_dir() && check_prefix(&prefix).is_ok() {
        return Ok(WasmToolchain::Debian { prefix });
    }

    eprintln!(
        "tandem-toolchain: bootstrapping Debian's rustc-web {DEBIAN_RUST_RELEASE} into {}",
        prefix.display()
    );
    remove_leftovers(dir)?;
    let debs = ensure_debs(&dir.join("debs"))?;

    let staging = dir.join(format!(".rust-web.tmp-{}", std::process::id()));
    fs::create_dir_all(&staging)
        .with_context(|| format!("could not create {}", staging.display()))?;
    for deb in &debs {
        run(Command::new("dpkg").arg("-x").arg(deb).arg(&staging)).with_context(|| {
            format!(
                "could not unpack {} (dpkg is needed: the bootstrap expects a Debian-based system)",
                deb.display()
            )
        })?;
    }
    fix_std_sources(&staging)?;
    let version = check_prefix(&staging)?;

    if prefix.exists() {
        // A prefix that failed its check: move it aside first so the rename below is atomic.
        let broken = dir.join(format!(".rust-web.old-{}", std::process::id()));
        fs::rename(&prefix, &broken)
            .with_context(|| format!("could not move the broken {} aside", prefix.display()))?;
        fs::remove_dir_all(&broken)
            .with_context(|| format!("could not remove {}", broken.display()))?;
    }
    fs::rename(&staging, &prefix).with_context(|| {
        format!(
            "could not rename {} to {}",
            staging.display(),
            prefix.display()
        )
    })?;
    eprintln!("tandem-toolchain: installed {version}");
    Ok(WasmToolchain::Debian { prefix })
}

/// Removes what a killed bootstrap left (we hold the lock, so nobody else is using them).
fn remove_leftovers(dir: &Path) -> Result<()> {
    for parent in [dir.to_path_buf(), dir.join("debs")] {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if [".rust-web.tmp-", ".rust-web.old-", ".download-"]
                .iter()
                .any(|leftover| name.starts_with(leftover))
            {
                let path = entry.path();
                fs::remove_dir_all(&path)
                    .with_context(|| format!("could not remove the leftover {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// The `.deb` of every package in `debs`, downloading those not there yet.
fn ensure_debs(debs: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(debs).with_context(|| format!("could not create {}", debs.display()))?;
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .into_iter()
        .filter(|package| find_deb(debs, package).is_none())
        .collect();
    if !missing.is_empty() {
        download_debs(debs, &missing)?;
    }
    DEBIAN_PACKAGES
        .into_iter()
        .map(|package| {
            find_deb(debs, package).with_context(|| {
                format!(
                    "apt-get download {package} reported success but left no {package}_*.deb in {}",
                    debs.display()
                )
            })
        })
        .collect()
}

/// `<package>_<version>_<arch>.deb` in `dir`, if there is one.
fn find_deb(dir: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let name = entry.file_name();
        let name = name.to_str()?;
        (name.starts_with(&prefix) && name.ends_with(".deb")).then(|| entry.path())
    })
}

/// Downloads `packages` into a private directory, then moves the files into `debs`, so an
/// interrupted download never looks like a cached package.
fn download_debs(debs: &Path, packages: &[&str]) -> Result<()> {
    let download = debs.join(format!(".download-{}", std::process::id()));
    fs::create_dir_all(&download)
        .with_context(|| format!("could not create {}", download.display()))?;
    if apt_lists_missing() {
        apt_get_update()?;
    }
    for package in packages {
        if let Err(first) = apt_get_download(&download, package) {
            if first.downcast_ref::<std::io::Error>().is_some() {
                // apt-get did not even start: updating lists cannot help.
                return Err(first);
            }
            eprintln!("tandem-toolchain: {first:#}; updating the package lists and retrying");
            apt_get_update().with_context(|| {
                format!("{first:#}; this needs Debian's package mirror, and refreshing the package lists failed too")
            })?;
            apt_get_download(&download, package).with_context(|| {
                format!(
                    "apt-get download {package} failed even after apt-get update; \
                     this needs Debian's package mirror"
                )
            })?;
        }
    }
    for entry in
        fs::read_dir(&download).with_context(|| format!("could not list {}", download.display()))?
    {
        let from = entry?.path();
        if from.extension() == Some(OsStr::new("deb")) {
            let to = debs.join(from.file_name().unwrap_or_default());
            fs::rename(&from, &to).with_context(|| {
                format!("could not move {} into {}", from.display(), debs.display())
            })?;
        }
    }
    fs::remove_dir_all(&download)
        .with_context(|| format!("could not remove {}", download.display()))?;
    Ok(())
}

fn apt_get_download(dir: &Path, package: &str) -> Result<()> {
    let mut command = Command::new("apt-get");
    command.args(["download", package]).current_dir(dir);
    let outcome = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .output()
        .with_context(|| {
            format!(
                "could not start `{}` (apt-get is needed: the bootstrap expects a Debian-based system)",
                display(&command)
            )
        })?;
    if !outcome.status.success() {
        bail!(
            "apt-get download {package} failed ({}): {}",
            outcome.status,
            String::from_utf8_lossy(&outcome.stderr).trim()
        );
    }
    Ok(())
}

fn apt_get_update() -> Result<()> {
    run(Command::new("apt-get").arg("update").stdin(Stdio::null())).context(
        "apt-get update failed: it needs root and Debian's package mirror \
         (as root, run `apt-get update` once, then retry)",
    )
}

/// No `*_Packages` index in apt's lists: `apt-get download` cannot know any package yet.
fn apt_lists_missing() -> bool {
    fs::read_dir("/var/lib/apt/lists").map_or(true, |entries| {
        !entries
            .flatten()
            .any(|entry| entry.file_name().to_string_lossy().contains("_Packages"))
    })
}

/// Where cargo's `-Zbuild-std` looks for the standard library's sources.
fn std_sources(sysroot: &Path) -> PathBuf {
    sysroot.join("lib/rustlib/src/rust/library")
}

/// `rust-web-src` ships `usr/lib/rustlib/src/rust` as a symlink to the sources in `usr/src`. A
/// relative one works inside our prefix as is; an absolute one would point at the system's
/// `/usr/src`, so it is rewritten to the same path inside `prefix`, relative so that the prefix
/// can be renamed.
fn fix_std_sources(prefix: &Path) -> Result<()> {
    let link = prefix.join("usr/lib/rustlib/src/rust");
    let Ok(metadata) = fs::symlink_metadata(&link) else {
        bail!(
            "rust-web-src did not unpack {}: the standard-library sources -Zbuild-std needs are missing",
            link.display()
        );
    };
    if metadata.file_type().is_symlink() {
        let target = fs::read_link(&link)
            .with_context(|| format!("could not read the symlink {}", link.display()))?;
        if target.is_absolute() {
            let inside = relative_symlink_target(Path::new("usr/lib/rustlib/src"), &target);
            fs::remove_file(&link)
                .with_context(|| format!("could not remove the symlink {}", link.display()))?;
            symlink_dir(&inside, &link)?;
        }
    }
    let library = std_sources(&prefix.join("usr"));
    ensure!(
        library.join("std/Cargo.toml").is_file(),
        "the standard-library sources are not at {} where cargo -Zbuild-std looks for them",
        library.display()
    );
    Ok(())
}

/// The relative symlink target, for a link in `link_dir` (relative to the prefix), that reaches
/// the absolute `target` re-rooted at the prefix: `usr/lib/rustlib/src` + `/usr/src/rustc` gives
/// `../../../../usr/src/rustc`.
fn relative_symlink_target(link_dir: &Path, target: &Path) -> PathBuf {
    let mut relative = PathBuf::new();
    for component in link_dir.components() {
        if matches!(component, Component::Normal(_)) {
            relative.push("..");
        }
    }
    for component in target.components() {
        if let Component::Normal(part) = component {
            relative.push(part);
        }
    }
    relative
}

#[cfg(unix)]
fn symlink_dir(target: &Path, link: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("could not link {} to {}", link.display(), target.display()))
}

#[cfg(not(unix))]
fn symlink_dir(_target: &Path, link: &Path) -> Result<()> {
    bail!(
        "cannot fix the symlink {}: the Debian bootstrap only works on Linux",
        link.display()
    )
}

/// Runs the prefix's `rustc --version`, checks it is the expected release and that the
/// standard-library sources are where `-Zbuild-std` looks; returns the version line.
fn check_prefix(prefix: &Path) -> Result<String> {
    let toolchain = WasmToolchain::Debian {
        prefix: prefix.to_path_buf(),
    };
    let (Some(rustc), Some(sysroot)) = (toolchain.rustc(), toolchain.sysroot()) else {
        bail!("a Debian toolchain always has a compiler and a sysroot");
    };
    let mut command = Command::new(&rustc);
    command.arg("--version");
    toolchain.configure(&mut command);
    let version = output(&mut command)
        .with_context(|| format!("the unpacked compiler {} does not run", rustc.display()))?;
    let version = version.trim().to_owned();
    ensure!(
        version.starts_with(&format!("rustc {DEBIAN_RUST_RELEASE}.")),
        "the unpacked compiler is `{version}`, expected rustc {DEBIAN_RUST_RELEASE} \
         (its standard-library sources must be the same release; the mirror may have moved on, \
         update DEBIAN_PACKAGES in tandem-toolchain)"
    );
    let library = std_sources(&sysroot);
    ensure!(
        library.join("std/Cargo.toml").is_file(),
        "the standard-library sources are not at {}",
        library.display()
    );
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolchain_dir_prefers_tandem_then_xdg_then_home() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            cache_dir_from("toolchain", some("/opt/tc"), some("/xdg"), some("/home/me")),
            PathBuf::from("/opt/tc")
        );
        assert_eq!(
            cache_dir_from("toolchain", some(""), some("/xdg"), some("/home/me")),
            PathBuf::from("/xdg/tandem/toolchain")
        );
        assert_eq!(
            cache_dir_from("toolchain", None, some("relative"), some("/home/me")),
            PathBuf::from("/home/me/.cache/tandem/toolchain")
        );
        assert_eq!(
            cache_dir_from("toolchain", None, None, some("/home/me")),
            PathBuf::from("/home/me/.cache/tandem/toolchain")
        );
    }

    #[test]
    fn debian_toolchain_paths_follow_the_package_layout() {
        let toolchain = WasmToolchain::Debian {
            prefix: PathBuf::from("/tc/rust-web"),
        };
        assert_eq!(
            toolchain.rustc(),
            Some(PathBuf::from("/tc/rust-web/usr/bin/rustc"))
        );
        let library_path = toolchain.library_path().unwrap_or_default();
        let dirs: Vec<PathBuf> = std::env::split_paths(&library_path).collect();
        assert_eq!(
            dirs,
            [
                PathBuf::from(format!("/tc/rust-web/usr/lib/{}", debian_multiarch())),
                PathBuf::from("/tc/rust-web/usr/lib/llvm-22/lib"),
            ]
        );
        assert_eq!(WasmToolchain::Rustup.rustc(), None);
    }

    #[test]
    fn absolute_symlink_targets_are_re_rooted_relative_to_the_link() {
        assert_eq!(
            relative_symlink_target(
                Path::new("usr/lib/rustlib/src"),
                Path::new("/usr/src/rustc-1.96.0")
            ),
            PathBuf::from("../../../../usr/src/rustc-1.96.0")
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_absolute_std_sources_symlink_is_fixed_to_point_inside_the_prefix() -> Result<()> {
        let prefix = tempfile::tempdir()?;
        let sources = prefix.path().join("usr/src/rustc-1.96.0/library/std");
        fs::create_dir_all(&sources)?;
        fs::write(sources.join("Cargo.toml"), "[package]\n")?;
        fs::create_dir_all(prefix.path().join("usr/lib/rustlib/src"))?;
        let link = prefix.path().join("usr/lib/rustlib/src/rust");
        std::os::unix::fs::symlink("/usr/src/rustc-1.96.0", &link)?;

        fix_std_sources(prefix.path())?;

        assert_eq!(
            fs::read_link(&link)?,
            PathBuf::from("../../../../usr/src/rustc-1.96.0")
        );
        assert!(
            std_sources(&prefix.path().join("usr"))
                .join("std/Cargo.toml")
                .is_file()
        );
        Ok(())
    }

    #[test]
    fn missing_std_sources_are_reported_with_the_path_cargo_looks_at() -> Result<()> {
        let prefix = tempfile::tempdir()?;
        let error = fix_std_sources(prefix.path()).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("usr/lib/rustlib/src/rust")),
            "{error:?}"
        );
        Ok(())
    }

    #[test]
    fn cached_debs_are_found_by_package_name_not_by_prefix_of_another() -> Result<()> {
        let debs = tempfile::tempdir()?;
        fs::write(debs.path().join("libstd-rust-web-dev_1.96.0_amd64.deb"), "")?;
        assert!(find_deb(debs.path(), "libstd-rust-web-dev").is_some());
        assert!(find_deb(debs.path(), "libstd-rust-web-1.96").is_none());
        assert!(find_deb(debs.path(), "rustc-web").is_none());
        Ok(())
    }
}
