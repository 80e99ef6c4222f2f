//! Container images of the programs Tandem runs in a cluster, built here without a registry
//! or an image builder: each image is its program, the shared libraries it links (as `ldd`
//! finds them on this machine) and the dynamic loader, in one layer ([`crate::oci`]), run as
//! an unprivileged user, labelled with what the program's `--version` prints.
//!
//! The archives load with `ctr -n k8s.io images import`, `podman load`, `skopeo copy
//! oci-archive:…`, or `docker load` where its containerd image store is on. Each is checked
//! before it is kept: its layer is unpacked and the program answers `--version` from inside
//! it, as the image's user (under `chroot`, when this runs as root).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};

use crate::kube_plugin::{self, Profile};
use crate::oci::{self, Entry, Image};
use crate::process::run;
use crate::tasks::Workspace;

/// The user and group every image runs as: no name, no home, no privileges (the number
/// distroless images use for `nonroot`).
pub const USER: &str = "65532:65532";

/// Where a program sits in its image.
const BIN_DIR: &str = "usr/local/bin";

/// The registry part of the images' names: none, as podman names images built locally. Tag
/// and push them to a registry of your own (`skopeo copy oci-archive:… docker://…`).
pub const REPOSITORY: &str = "localhost";

/// The workspace's version, which tags every image.
pub const TANDEM_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A program that runs in a cluster and gets an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// The image's name, without registry or tag.
    pub image: &'static str,
    /// The executable.
    pub binary: &'static str,
    /// The cargo package that builds it; `None` for `tandem-kube-scheduler`, built by
    /// [`kube_plugin::ensure_plugin_scheduler`] (Go, with the engine's C ABI library).
    pub package: Option<&'static str>,
    /// What it is, for the image's description label.
    pub description: &'static str,
}

/// Every program with an image.
pub const PROGRAMS: [Program; 5] = [
    Program {
        image: "tandem-kube-adapter",
        binary: "tandem-kube-adapter",
        package: Some("tandem-kube-adapter"),
        description: "Tandem's kube-scheduler extender: which GPU a pod shares, and with whom",
    },
    Program {
        image: "tandem-kube-scheduler",
        binary: "tandem-kube-scheduler",
        package: None,
        description: "kube-scheduler with Tandem's framework plugin and engine linked in",
    },
    Program {
        image: "tandem-volcano-adapter",
        binary: "tandem-volcano-adapter",
        package: Some("tandem-volcano-adapter"),
        description: "Tandem's extender for Volcano's vc-scheduler",
    },
    Program {
        image: "tandem-profiler",
        binary: "tandem-profiler",
        package: Some("tandem-profiler"),
        description: "Tandem's node profiler: GPU telemetry of running jobs through NVML",
    },
    Program {
        image: "tandem-node",
        binary: "tandem-node",
        package: Some("tandem-node"),
        description: "Tandem's node component: gives each container the GPU Tandem chose (NRI)",
    },
];

impl Program {
    /// The program called `name` (an image or binary name).
    pub fn named(name: &str) -> Result<Self> {
        PROGRAMS
            .iter()
            .find(|p| p.image == name || p.binary == name)
            .copied()
            .with_context(|| {
                let names: Vec<&str> = PROGRAMS.iter().map(|p| p.image).collect();
                format!("no image is called {name:?}; images: {}", names.join(", "))
            })
    }
}

/// Where the archives go: `$TANDEM_IMAGES_DIR`, else `$XDG_CACHE_HOME/tandem/images`, else
/// `$HOME/.cache/tandem/images`.
pub fn images_dir() -> PathBuf {
    crate::toolchain::cache_dir("TANDEM_IMAGES_DIR", "images")
}

/// One image written.
#[derive(Debug, Clone)]
pub struct Built {
    /// The program inside.
    pub program: Program,
    /// Its full name (`localhost/tandem-kube-adapter:0.1.0`).
    pub name: String,
    /// The archive.
    pub archive: oci::Archive,
    /// What `--version` printed inside the image, or why that was not checked.
    pub checked: String,
}

/// Builds the release binaries of `programs` and writes an image archive of each into `out`.
pub fn build_images(workspace: &Workspace, programs: &[Program], out: &Path) -> Result<Vec<Built>> {
    let target = workspace.target_dir();
    let packages: Vec<&str> = programs.iter().filter_map(|p| p.package).collect();
    if !packages.is_empty() {
        let mut args = vec!["build", "--release", "--locked"];
        for package in &packages {
            args.extend(["--package", package]);
        }
        run(&mut workspace.cargo(args))?;
    }
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    programs
        .iter()
        .map(|&program| {
            let binary = match program.package {
                Some(_) => target.join("release").join(program.binary),
                None => kube_plugin::ensure_plugin_scheduler(
                    workspace.root(),
                    &target,
                    Profile::Release,
                )?,
            };
            write_image(program, &binary, out)
        })
        .collect()
}

/// Writes the image of `program`, whose executable is `binary`, into `out`, and checks it.
fn write_image(program: Program, binary: &Path, out: &Path) -> Result<Built> {
    let version_line = version_of(binary)?;
    // Every image is tagged with Tandem's version (`tandem-kube-scheduler --version` prints
    // Kubernetes' instead, which its label keeps).
    let version = TANDEM_VERSION.to_owned();
    let name = format!("{REPOSITORY}/{}:{version}", program.image);
    let image = Image {
        name: name.clone(),
        entries: entries(binary, program.binary)?,
        entrypoint: vec![format!("/{BIN_DIR}/{}", program.binary)],
        env: vec![format!("PATH=/{BIN_DIR}")],
        user: USER.into(),
        labels: vec![
            (
                "org.opencontainers.image.title".into(),
                program.image.into(),
            ),
            (
                "org.opencontainers.image.description".into(),
                program.description.into(),
            ),
            ("org.opencontainers.image.version".into(), version),
            (
                "org.opencontainers.image.licenses".into(),
                "Apache-2.0".into(),
            ),
            ("dev.tandem.version".into(), version_line.clone()),
        ],
    };
    let archive = oci::write_archive(&image, &out.join(format!("{}.tar", program.image)))?;
    let checked = check(&image, program.binary, &version_line, out)?;
    Ok(Built {
        program,
        name,
        archive,
        checked,
    })
}

/// Unpacks into `root` the files the image of `binary` (as `name`) would hold: the program at
/// `/usr/local/bin/<name>`, its shared libraries and the loader. A test that runs a program as
/// its container would (chrooted there, as the image's user) starts from this root, without
/// writing an archive first.
pub fn unpack_root(binary: &Path, name: &str, root: &Path) -> Result<()> {
    let entries = entries(binary, name)?;
    tar::Archive::new(oci::layer(&entries)?.as_slice())
        .unpack(root)
        .with_context(|| format!("cannot unpack the image's files into {}", root.display()))
}

/// The first line `binary --version` prints.
fn version_of(binary: &Path) -> Result<String> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {} --version", binary.display()))?;
    ensure!(
        output.status.success(),
        "{} --version failed: {}",
        binary.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
        .with_context(|| format!("{} --version printed nothing", binary.display()))
}

/// The files of an image holding `binary` as `name`: the program, every shared library it
/// loads and the loader, at the paths the program looks for them, and their directories.
fn entries(binary: &Path, name: &str) -> Result<Vec<Entry>> {
    let mut files = vec![(format!("{BIN_DIR}/{name}"), binary.to_path_buf(), 0o755)];
    for library in shared_libraries(binary)? {
        let path = library
            .to_str()
            .with_context(|| format!("{} is not UTF-8", library.display()))?
            .trim_start_matches('/')
            .to_owned();
        files.push((path, library, 0o755));
    }
    let mut dirs: Vec<String> = Vec::new();
    for (path, _, _) in &files {
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(dir.to_string_lossy().into_owned());
            parent = dir.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    let mut entries: Vec<Entry> = dirs.into_iter().map(|path| Entry::Dir { path }).collect();
    entries.extend(
        files
            .into_iter()
            .map(|(path, from, mode)| Entry::File { path, from, mode }),
    );
    Ok(entries)
}

/// The shared libraries `binary` loads, the dynamic loader among them, as `ldd` resolves them
/// on this machine. A statically linked program has none.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .context("cannot run ldd (Debian's libc-bin)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        // ldd says "not a dynamic executable" and fails for a static program.
        let said = format!("{text}{}", String::from_utf8_lossy(&output.stderr));
        if said.contains("not a dynamic executable") || said.contains("statically linked") {
            return Ok(Vec::new());
        }
        bail!("ldd {} failed: {said}", binary.display());
    }
    parse_ldd(&text).with_context(|| format!("ldd {}", binary.display()))
}

/// The library paths in `ldd`'s output: `name => /path (0x…)` and `/loader (0x…)`; the vDSO,
/// which the kernel provides, has no path.
fn parse_ldd(text: &str) -> Result<Vec<PathBuf>> {
    let mut libraries = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = match line.split_once("=>") {
            Some((library, target)) => {
                let target = target.trim();
                ensure!(
                    !target.starts_with("not found"),
                    "{} is not installed here",
                    library.trim()
                );
                target.split(" (").next().unwrap_or_default().trim()
            }
            None => line.split(" (").next().unwrap_or_default().trim(),
        };
        if path.starts_with('/') {
            libraries.push(PathBuf::from(path));
        }
    }
    Ok(libraries)
}

/// Unpacks `image`'s layer into a directory of `scratch` and runs `binary --version` inside it
/// as the image's user; it must print `expected`. Needs root for `chroot`: otherwise the check
/// is skipped, and says so.
fn check(image: &Image, binary: &str, expected: &str, scratch: &Path) -> Result<String> {
    if !running_as_root() {
        return Ok("not run inside the image (chroot needs root)".into());
    }
    let root = scratch.join(format!(".check-{binary}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    tar::Archive::new(oci::layer(&image.entries)?.as_slice())
        .unpack(&root)
        .context("cannot unpack the image's layer")?;
    // The program inside gets an empty environment, and so no PATH to find chroot with.
    let chroot = ["/usr/sbin/chroot", "/sbin/chroot", "/usr/bin/chroot"]
        .into_iter()
        .find(|path| Path::new(path).is_file())
        .context("chroot (Debian's coreutils) is not installed")?;
    let output = Command::new(chroot)
        .arg(format!("--userspec={USER}"))
        .arg(&root)
        .arg(format!("/{BIN_DIR}/{binary}"))
        .arg("--version")
        .env_clear()
        .output();
    let _ = fs::remove_dir_all(&root);
    let output = output.context("cannot run chroot")?;
    let printed = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success() && printed.lines().next().map(str::trim) == Some(expected),
        "{binary} does not run inside its image {}: it printed {printed:?} and {:?}",
        image.name,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(format!("runs inside the image as {USER}: {expected}"))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_paths_and_the_loader_but_not_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_missing_library_is_named() {
        let error = parse_ldd("\tlibnvidia-ml.so.1 => not found\n").unwrap_err();
        assert!(error.to_string().contains("libnvidia-ml.so.1"), "{error}");
    }

    #[test]
    fn an_image_of_a_host_program_holds_its_libraries_and_runs_inside() {
        // `ls` from Debian's coreutils links libc and more: the image must hold them, under
        // their directories, and run as the unprivileged user.
        let ls = PathBuf::from("/bin/ls");
        let entries = entries(&ls, "ls").unwrap();
        let paths: Vec<&str> = entries
            .iter()
            .map(|e| match e {
                Entry::File { path, .. } | Entry::Dir { path } | Entry::Symlink { path, .. } => {
                    path.as_str()
                }
            })
            .collect();
        assert!(paths.contains(&"usr/local/bin/ls"), "{paths:?}");
        assert!(paths.contains(&"usr/local"), "{paths:?}");
        assert!(paths.iter().any(|p| p.ends_with("libc.so.6")), "{paths:?}");
        assert!(paths.iter().any(|p| p.contains("ld-linux")), "{paths:?}");
        let image = Image {
            name: "localhost/ls:test".into(),
            entries,
            entrypoint: vec!["/usr/local/bin/ls".into()],
            env: Vec::new(),
            user: USER.into(),
            labels: Vec::new(),
        };
        let expected = version_of(&ls).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let checked = check(&image, "ls", &expected, scratch.path()).unwrap();
        assert!(
            checked.contains(&expected) || checked.contains("needs root"),
            "{checked}"
        );
    }

    #[test]
    fn a_program_is_found_by_image_or_binary_name_and_a_wrong_name_lists_the_right_ones() {
        assert_eq!(Program::named("tandem-node").unwrap().binary, "tandem-node");
        let error = Program::named("tandem-nope").unwrap_err().to_string();
        assert!(error.contains("tandem-kube-scheduler"), "{error}");
    }
}
