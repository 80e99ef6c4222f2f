//! Building one guest crate of the workspace into a component.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, ensure};
use wit_component::ComponentEncoder;

use crate::process::{fresh_cargo, run};
use crate::toolchain::{HostRust, WASM_TARGET, WasmToolchain, ensure_toolchain};

/// The cargo profile guests are built with; the workspace's root `Cargo.toml` defines it.
const WASM_PROFILE: &str = "wasm";

/// One guest build: which package of which workspace, and where things go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestBuild {
    /// The cargo package to build, e.g. `tandem-engine-component`: a library using wit-bindgen.
    /// Its lib target is built as a `cdylib` whatever its declared crate-type, so a guest can
    /// stay an `rlib` natively (WIT export names such as `tandem:engine/...` do not link into a
    /// native cdylib).
    pub package: String,
    /// The root of the workspace the package belongs to: the nested cargo runs there, so the
    /// root's `[profile.wasm]` and `Cargo.lock` apply.
    pub workspace_root: PathBuf,
    /// The nested cargo's target directory. Never the outer build's own: cargo would wait
    /// forever for its own lock.
    pub target_dir: PathBuf,
    /// Where the component is written.
    pub out_dir: PathBuf,
}

impl GuestBuild {
    /// The crate name of the package: its name with `-` replaced by `_`.
    pub fn crate_name(&self) -> String {
        self.package.replace('-', "_")
    }

    /// Where cargo leaves the core module.
    pub fn core_module_path(&self) -> PathBuf {
        self.target_dir
            .join(WASM_TARGET)
            .join(WASM_PROFILE)
            .join(format!("{}.wasm", self.crate_name()))
    }

    /// Where [`build_component`] writes the component:
    /// `<out_dir>/<crate_name>.component.wasm`.
    pub fn component_path(&self) -> PathBuf {
        self.out_dir
            .join(format!("{}.component.wasm", self.crate_name()))
    }
}

/// Builds `build.package` for `wasm32-unknown-unknown` with the `wasm` profile (as a `cdylib`:
/// `cargo rustc --lib --crate-type cdylib`), turns the core module into a component (the module
/// carries wit-bindgen's component-type section) and writes it atomically to
/// [`GuestBuild::component_path`], which it returns.
///
/// Runs [`ensure_toolchain`] first, which may bootstrap the Debian toolchain. A component whose
/// bytes did not change is not rewritten, so its modification time stays.
pub fn build_component(build: &GuestBuild) -> Result<PathBuf> {
    let toolchain = ensure_toolchain()?;
    let core_module = build_core_module(build, &toolchain)?;
    let module = fs::read(&core_module)
        .with_context(|| format!("could not read the core module {}", core_module.display()))?;
    let component = componentize(&module).with_context(|| {
        format!(
            "could not turn {} into a component (are wit-bindgen's bindings and `export!` in {}?)",
            core_module.display(),
            build.package
        )
    })?;
    let path = build.component_path();
    write_if_changed(&path, &component)?;
    Ok(path)
}

/// Runs the nested cargo that builds `build.package` into a core wasm module with `toolchain`,
/// and returns the module's path.
pub fn build_core_module(build: &GuestBuild, toolchain: &WasmToolchain) -> Result<PathBuf> {
    let mut cargo = fresh_cargo();
    cargo
        .current_dir(&build.workspace_root)
        .args(["rustc", "--lib", "--crate-type", "cdylib"])
        .args(["--package", &build.package])
        .args(["--profile", WASM_PROFILE, "--target", WASM_TARGET])
        .arg("--target-dir")
        .arg(&build.target_dir);
    if let WasmToolchain::Debian { .. } = toolchain {
        let host = HostRust::detect().context("could not find the host's rust-lld")?;
        // `std` without its default features: on wasm32-unknown-unknown it captures no
        // backtrace (the engine's panic hook forwards the message alone), and the
        // `backtrace` feature's symbolizer (object, gimli, addr2line, miniz_oxide) is about a
        // sixth of the guest's compile time.
        cargo
            .args(["-Zbuild-std=std,panic_abort", "-Zbuild-std-features="])
            .env(
                format!(
                    "CARGO_TARGET_{}_LINKER",
                    WASM_TARGET.to_uppercase().replace('-', "_")
                ),
                host.rust_lld()?,
            );
        toolchain.configure(&mut cargo);
    }
    run(&mut cargo).with_context(|| {
        format!(
            "building the guest {} for {WASM_TARGET} with {toolchain} failed",
            build.package
        )
    })?;
    let module = build.core_module_path();
    ensure!(
        module.is_file(),
        "cargo built {} but left no {}: does the package have a lib target named {}?",
        build.package,
        module.display(),
        build.crate_name()
    );
    Ok(module)
}

/// Turns a core module carrying wit-bindgen's component-type section into a component, and
/// validates the result.
///
/// A module without that section is refused: wit-component would otherwise wrap it into a
/// component of an empty world, which exports nothing.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>> {
    let (stripped, _) = wit_component::metadata::decode(module)?;
    ensure!(
        stripped.is_some(),
        "the core module has no component-type custom section (wit-bindgen's `generate!` \
         writes it; the guest must use it and export its world)"
    );
    ComponentEncoder::default()
        .validate(true)
        .module(module)?
        .encode()
}

/// Writes `bytes` to `path` through a temporary file renamed into place, unless `path` already
/// holds exactly these bytes.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(path).is_ok_and(|existing| existing == bytes) {
        return Ok(());
    }
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    fs::write(&temporary, bytes)
        .with_context(|| format!("could not write {}", temporary.display()))?;
    fs::rename(&temporary, path).with_context(|| {
        format!(
            "could not rename {} to {}",
            temporary.display(),
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wit_component::StringEncoding;
    use wit_parser::Resolve;

    /// A core module exporting `answer: func() -> i32` (returns 42), as a guest's would.
    const CORE_MODULE: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
        0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type section: () -> i32
        0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
        0x07, 0x0a, 0x01, 0x06, b'a', b'n', b's', b'w', b'e', b'r', 0x00,
        0x00, // export "answer"
        0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x2a, 0x0b, // code: i32.const 42
    ];

    /// The component binary header: magic, then version 0x0d and layer 1.
    const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    fn module_with_component_type() -> Result<Vec<u8>> {
        let mut resolve = Resolve::default();
        let package = resolve.push_str(
            "probe.wit",
            "package tandem:probe;\nworld probe { export answer: func() -> s32; }\n",
        )?;
        let world = resolve.select_world(&[package], Some("probe"))?;
        let mut module = CORE_MODULE.to_vec();
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            StringEncoding::UTF8,
        )?;
        Ok(module)
    }

    #[test]
    fn a_core_module_with_its_component_type_becomes_a_component() -> Result<()> {
        let component = componentize(&module_with_component_type()?)?;
        assert_eq!(component[..8], COMPONENT_HEADER);
        Ok(())
    }

    #[test]
    fn a_module_without_component_type_is_rejected() {
        let error = componentize(CORE_MODULE).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("component-type")),
            "{error:?}"
        );
    }

    #[test]
    fn paths_use_the_crate_name() {
        let build = GuestBuild {
            package: "tandem-engine-component".into(),
            workspace_root: "/ws".into(),
            target_dir: "/ws/target/wasm-guests".into(),
            out_dir: "/out".into(),
        };
        assert_eq!(
            build.core_module_path(),
            Path::new(
                "/ws/target/wasm-guests/wasm32-unknown-unknown/wasm/tandem_engine_component.wasm"
            )
        );
        assert_eq!(
            build.component_path(),
            Path::new("/out/tandem_engine_component.component.wasm")
        );
    }

    #[test]
    fn unchanged_components_are_not_rewritten() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("nested/guest.component.wasm");
        write_if_changed(&path, b"one")?;
        let written = fs::metadata(&path)?.modified()?;
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_if_changed(&path, b"one")?;
        assert_eq!(fs::metadata(&path)?.modified()?, written);
        write_if_changed(&path, b"two")?;
        assert_eq!(fs::read(&path)?, b"two");
        assert_eq!(fs::read_dir(dir.path().join("nested"))?.count(), 1);
        Ok(())
    }
}
