//! Guest builds from a build script (`cli/build.rs`, `tests/build.rs`).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::guest::{GuestBuild, build_component};

/// The guest target directory for a build script whose `OUT_DIR` is `out_dir`:
/// `<target>/wasm-guests`, shared by every build script of the build (so `std` for wasm32 is
/// built once) and separate from `<target>` itself (the outer cargo holds its lock).
///
/// `<target>` is the nearest ancestor of `out_dir` holding cargo's `CACHEDIR.TAG`, else the
/// directory four levels up (`<target>/<profile>/build/<package>-<hash>/out`).
pub fn guest_target_dir(out_dir: &Path) -> PathBuf {
    let target = out_dir
        .ancestors()
        .skip(1)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .or_else(|| out_dir.ancestors().nth(4))
        .unwrap_or(out_dir);
    target.join("wasm-guests")
}

/// Builds guest components from a build script and tells cargo when to run it again.
///
/// [`BuildScriptGuests::from_env`] prints the `cargo:rerun-if-*` lines every guest shares (the
/// root `Cargo.toml` with its `[profile.wasm]`, `Cargo.lock`, `wit/`, the toolchain location);
/// [`BuildScriptGuests::build`] adds the package directories of the guest's own sources, as
/// listed by the dep-info file cargo writes next to the core module.
#[derive(Debug)]
pub struct BuildScriptGuests {
    workspace_root: PathBuf,
    target_dir: PathBuf,
    out_dir: PathBuf,
    /// What is already watched, so that guests sharing sources do not repeat lines.
    watched: RefCell<BTreeSet<PathBuf>>,
}

impl BuildScriptGuests {
    /// Reads `OUT_DIR` and `CARGO_MANIFEST_DIR`, finds the workspace root (the nearest ancestor
    /// of the manifest directory whose `Cargo.toml` has a `[workspace]` table), and prints the
    /// shared `cargo:rerun-if-*` lines.
    pub fn from_env() -> Result<Self> {
        let out_dir = env_path("OUT_DIR")?;
        let manifest_dir = env_path("CARGO_MANIFEST_DIR")?;
        let workspace_root = find_workspace_root(&manifest_dir)?;
        let guests = Self {
            target_dir: guest_target_dir(&out_dir),
            workspace_root,
            out_dir,
            watched: RefCell::default(),
        };
        for input in ["Cargo.toml", "Cargo.lock", "wit"] {
            let path = guests.workspace_root.join(input);
            if path.exists() {
                guests.watch(path);
            }
        }
        for variable in ["TANDEM_TOOLCHAIN_DIR", "XDG_CACHE_HOME"] {
            println!("cargo:rerun-if-env-changed={variable}");
        }
        Ok(guests)
    }

    /// The workspace the guests belong to.
    pub fn workspace_root(&self) -> &Path {
        &self.workspace_root
    }

    /// The [`GuestBuild`] of `package`: the guest target directory, components in `OUT_DIR`.
    pub fn guest(&self, package: &str) -> GuestBuild {
        GuestBuild {
            package: package.to_owned(),
            workspace_root: self.workspace_root.clone(),
            target_dir: self.target_dir.clone(),
            out_dir: self.out_dir.clone(),
        }
    }

    /// Builds `package` into `OUT_DIR/<crate_name>.component.wasm` (see [`build_component`]),
    /// prints `cargo:rerun-if-changed` for the directories of the workspace packages it was
    /// built from, and returns the component's path.
    pub fn build(&self, package: &str) -> Result<PathBuf> {
        let build = self.guest(package);
        let component = build_component(&build)?;
        let dep_info = build.core_module_path().with_extension("d");
        let contents = fs::read_to_string(&dep_info)
            .with_context(|| format!("could not read cargo's dep-info {}", dep_info.display()))?;
        for input in watched_inputs(&self.workspace_root, &contents) {
            self.watch(input);
        }
        Ok(component)
    }

    /// Builds the engine component and tells cargo to embed it: sets the compile-time
    /// environment variable `TANDEM_ENGINE_COMPONENT` to its path, for
    /// `include_bytes!(env!("TANDEM_ENGINE_COMPONENT"))` in binaries that carry their engine.
    pub fn embed_engine(&self) -> Result<PathBuf> {
        let component = self.build("tandem-engine-component")?;
        println!(
            "cargo:rustc-env=TANDEM_ENGINE_COMPONENT={}",
            component.display()
        );
        Ok(component)
    }

    /// Prints `cargo:rerun-if-changed` for `path` unless it or a directory above it already is.
    fn watch(&self, path: PathBuf) {
        let mut watched = self.watched.borrow_mut();
        if !path.ancestors().any(|covered| watched.contains(covered)) {
            println!("cargo:rerun-if-changed={}", path.display());
            watched.insert(path);
        }
    }
}

fn env_path(name: &str) -> Result<PathBuf> {
    std::env::var_os(name).map(PathBuf::from).with_context(|| {
        format!("{name} is not set: BuildScriptGuests works in build scripts only")
    })
}

/// The nearest ancestor of `start` (itself included) whose `Cargo.toml` has a `[workspace]`.
fn find_workspace_root(start: &Path) -> Result<PathBuf> {
    start
        .ancestors()
        .find(|dir| {
            fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.lines().any(|line| line.trim() == "[workspace]"))
        })
        .map(Path::to_path_buf)
        .with_context(|| format!("no Cargo.toml with [workspace] above {}", start.display()))
}

/// What to watch for a guest whose dep-info is `dep_info`: for each source inside the
/// workspace, the directory of its package (so new files and `Cargo.toml` edits count too);
/// a source with no package below the root is watched on its own. Sources outside the
/// workspace (registry crates, the standard library) never change under us.
fn watched_inputs(workspace_root: &Path, dep_info: &str) -> BTreeSet<PathBuf> {
    dep_info_sources(dep_info)
        .into_iter()
        .map(|source| workspace_root.join(source))
        .filter(|source| source.starts_with(workspace_root))
        .map(|source| {
            source
                .ancestors()
                .skip(1)
                .take_while(|dir| *dir != workspace_root && dir.starts_with(workspace_root))
                .find(|dir| dir.join("Cargo.toml").is_file())
                .map_or_else(|| source.clone(), Path::to_path_buf)
        })
        .collect()
}

/// The prerequisites listed in a makefile-style dep-info file (`target: dep dep\ with\ space`).
fn dep_info_sources(dep_info: &str) -> Vec<PathBuf> {
    let mut sources = Vec::new();
    for line in dep_info.lines() {
        let Some((_, prerequisites)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut escaped = false;
        for c in prerequisites.chars() {
            match c {
                '\\' if !escaped => escaped = true,
                ' ' if !escaped => {
                    if !current.is_empty() {
                        sources.push(PathBuf::from(std::mem::take(&mut current)));
                    }
                }
                _ => {
                    if escaped && c != ' ' {
                        current.push('\\');
                    }
                    escaped = false;
                    current.push(c);
                }
            }
        }
        if !current.is_empty() {
            sources.push(PathBuf::from(current));
        }
    }
    sources
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_target_dir_is_next_to_the_profiles_of_the_outer_target_dir() -> Result<()> {
        let target = tempfile::tempdir()?;
        fs::write(target.path().join("CACHEDIR.TAG"), "")?;
        let out_dir = target.path().join("debug/build/tandem-cli-0123abcd/out");
        assert_eq!(
            guest_target_dir(&out_dir),
            target.path().join("wasm-guests")
        );

        let cross = target
            .path()
            .join("x86_64-unknown-linux-gnu/release/build/tandem-cli-0123abcd/out");
        assert_eq!(guest_target_dir(&cross), target.path().join("wasm-guests"));
        Ok(())
    }

    #[test]
    fn guest_target_dir_without_a_tag_is_four_levels_up() {
        let out_dir = Path::new("/nowhere/target/debug/build/tandem-cli-0123abcd/out");
        assert_eq!(
            guest_target_dir(out_dir),
            Path::new("/nowhere/target/wasm-guests")
        );
    }

    #[test]
    fn workspace_root_is_the_nearest_manifest_with_a_workspace_table() -> Result<()> {
        let root = tempfile::tempdir()?;
        fs::write(
            root.path().join("Cargo.toml"),
            "[workspace]\nmembers = [\"cli\"]\n",
        )?;
        fs::create_dir_all(root.path().join("cli"))?;
        fs::write(
            root.path().join("cli/Cargo.toml"),
            "[package]\nname = \"cli\"\n[workspace.lints]\n",
        )?;
        assert_eq!(find_workspace_root(&root.path().join("cli"))?, root.path());
        Ok(())
    }

    #[test]
    fn dep_info_prerequisites_keep_escaped_spaces() {
        let dep_info =
            "/t/guest.wasm: /ws/a/src/lib.rs /ws/my\\ dir/x.rs /wit/e.wit\n\n/ws/a/src/lib.rs:\n";
        assert_eq!(
            dep_info_sources(dep_info),
            [
                PathBuf::from("/ws/a/src/lib.rs"),
                PathBuf::from("/ws/my dir/x.rs"),
                PathBuf::from("/wit/e.wit"),
            ]
        );
    }

    /// A package inside another's directory (the component in the engine's) is its own input.
    #[test]
    fn watched_inputs_are_package_directories_inside_the_workspace() -> Result<()> {
        let root = tempfile::tempdir()?;
        let root = root.path();
        for package in ["engine/component", "engine"] {
            fs::create_dir_all(root.join(package).join("src"))?;
            fs::write(root.join(package).join("Cargo.toml"), "[package]\n")?;
        }
        fs::create_dir_all(root.join("wit/v0.3.0"))?;
        let dep_info = format!(
            "{root}/target/guest.wasm: {root}/engine/component/src/lib.rs \
             {root}/engine/src/lib.rs {root}/engine/src/knowledge.rs \
             {root}/wit/v0.3.0/engine.wit /registry/serde/src/lib.rs\n",
            root = root.display()
        );
        let watched: Vec<PathBuf> = watched_inputs(root, &dep_info).into_iter().collect();
        assert_eq!(
            watched,
            [
                root.join("engine"),
                root.join("engine/component"),
                root.join("wit/v0.3.0/engine.wit"),
            ]
        );
        Ok(())
    }
}
