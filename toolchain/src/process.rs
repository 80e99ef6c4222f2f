//! Child processes: a cargo that behaves like a fresh one, and running commands with errors
//! that name the command.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{Context as _, Result, bail};

/// Variables an outer cargo sets for build scripts, rustc wrappers and `cargo run`, which would
/// leak into a nested cargo: another target directory (lock deadlock), host rustflags on a wasm
/// build, clippy as the compiler, the outer jobserver, the outer package's identity.
const SCRUBBED_VARS: &[&str] = &[
    "CARGO",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_LINKER",
    "RUSTDOC",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTDOC",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_RUSTDOCFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "CARGO_TARGET_DIR",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "CLIPPY_ARGS",
    "CLIPPY_CONF_DIR",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
];

/// Prefixes of the same kind: per-package metadata, cfg values, features, `links` metadata and
/// cargo's private variables.
const SCRUBBED_PREFIXES: &[&str] = &[
    "CARGO_PKG_",
    "CARGO_MANIFEST_",
    "CARGO_CFG_",
    "CARGO_FEATURE_",
    "CARGO_BIN_EXE_",
    "DEP_",
    "__CARGO",
];

/// The cargo binary to run: `$CARGO` (set by cargo for build scripts and `cargo run`, so the
/// nested cargo is the same release as the outer one), else `cargo` from `PATH`.
pub fn cargo_program() -> OsString {
    std::env::var_os("CARGO")
        .filter(|cargo| !cargo.is_empty())
        .unwrap_or_else(|| OsString::from("cargo"))
}

/// A `cargo` command whose environment is scrubbed of everything an outer cargo set (see the
/// list in the source), so that it behaves like a cargo started from a shell.
///
/// User configuration that is not per-invocation stays (`CARGO_HOME`, `RUSTUP_TOOLCHAIN`,
/// `CARGO_NET_OFFLINE`, `CARGO_PROFILE_*`, ...). The target directory is removed too: callers
/// pass `--target-dir` or set `CARGO_TARGET_DIR` themselves.
pub fn fresh_cargo() -> Command {
    let mut command = Command::new(cargo_program());
    for (name, _) in std::env::vars_os() {
        if is_scrubbed(&name) {
            command.env_remove(&name);
        }
    }
    command
}

fn is_scrubbed(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    SCRUBBED_VARS.contains(&name)
        || SCRUBBED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// `program arg1 arg2`, for messages.
pub fn display(command: &Command) -> String {
    let mut shown = shell_word(command.get_program());
    for arg in command.get_args() {
        shown.push(' ');
        shown.push_str(&shell_word(arg));
    }
    shown
}

fn shell_word(word: &OsStr) -> String {
    let word = word.to_string_lossy();
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+/.,:@%".contains(c))
    {
        word.into_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Runs `command`, letting it print, with its stdout sent to our stderr: inside a build script
/// our stdout is read by cargo as `cargo:` directives.
pub fn run(command: &mut Command) -> Result<()> {
    let status = command
        .stdout(Stdio::from(io::stderr()))
        .status()
        .with_context(|| format!("could not start `{}`", display(command)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", display(command));
    }
    Ok(())
}

/// Runs `command` and returns its stdout; on failure the error quotes its stderr.
pub fn output(command: &mut Command) -> Result<String> {
    let Output {
        status,
        stdout,
        stderr,
    } = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{}`", display(command)))?;
    if !status.success() {
        bail!(
            "`{}` failed ({status}): {}",
            display(command),
            String::from_utf8_lossy(&stderr).trim()
        );
    }
    String::from_utf8(stdout).with_context(|| format!("`{}` printed non-UTF-8", display(command)))
}

/// Takes the lock file at `lock_path` (created if missing), waiting while another process holds
/// it and saying so (`tandem-toolchain: waiting for <waiting_for>`): what xtask builds into its
/// caches is built by one process at a time, and the others use the result. The lock is held
/// while the returned file lives.
pub fn hold_lock(lock_path: &Path, waiting_for: &str) -> Result<File> {
    let lock = File::create(lock_path)
        .with_context(|| format!("could not create {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        eprintln!("tandem-toolchain: waiting for {waiting_for}");
        lock.lock()
            .with_context(|| format!("could not lock {}", lock_path.display()))?;
    }
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_cargo_variables_are_scrubbed_and_user_configuration_is_kept() {
        for scrubbed in [
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_MAKEFLAGS",
            "CARGO_PKG_NAME",
            "CARGO_MANIFEST_DIR",
            "CARGO_CFG_TARGET_ARCH",
            "CARGO_FEATURE_DEFAULT",
            "OUT_DIR",
            "NUM_JOBS",
            "__CARGO_FIX_PLZ",
        ] {
            assert!(
                is_scrubbed(OsStr::new(scrubbed)),
                "{scrubbed} should be scrubbed"
            );
        }
        for kept in [
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
            "CARGO_NET_OFFLINE",
            "CARGO_PROFILE_WASM_LTO",
            "PATH",
            "HOME",
        ] {
            assert!(!is_scrubbed(OsStr::new(kept)), "{kept} should be kept");
        }
    }

    #[test]
    fn displayed_commands_quote_only_what_needs_it() {
        let mut command = Command::new("cargo");
        command.args(["build", "-p", "tandem-cli", "--", "two words", "it's"]);
        assert_eq!(
            display(&command),
            r"cargo build -p tandem-cli -- 'two words' 'it'\''s'"
        );
    }
}
