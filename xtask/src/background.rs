//! The end-to-end tiers' Go programs, built beside the gate's cargo steps.
//!
//! From empty caches the gate compiles Kubernetes (control plane and kubelet), containerd and
//! vc-scheduler: a third of its time, none of it shared with cargo's builds. Cargo leaves a
//! core idle for long stretches (one crate at a time through cranelift, build scripts that
//! wait on the guest build), so the gate starts `cargo xtask e2e-bins` as a child at a lower
//! priority when its cargo steps begin: Go takes what cargo leaves and yields when cargo wants
//! both cores. Each build is idempotent and holds its cache entry's lock, so a tier that comes
//! before its program is done waits for it, and one whose background build failed builds it
//! again in the foreground, where its error is reported.

use std::fs::{self, File};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::process::display;

/// The niceness of the background builds: low enough that cargo's jobs win a contended core.
const NICENESS: &str = "15";

/// The lines of the log shown when the background build fails.
const TAIL_LINES: usize = 20;

/// `cargo xtask e2e-bins` running in the background, in a process group of its own.
#[derive(Debug)]
pub struct BackgroundBuild {
    child: Option<Child>,
    log: PathBuf,
    started: Instant,
}

impl BackgroundBuild {
    /// Starts this program's `e2e-bins` task under `nice`, its output in `log`.
    pub fn start(log: &Path) -> Result<Self> {
        let program = std::env::current_exe().context("could not find the xtask binary")?;
        if let Some(dir) = log.parent() {
            fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        let output =
            File::create(log).with_context(|| format!("could not create {}", log.display()))?;
        let errors = output
            .try_clone()
            .with_context(|| format!("could not reopen {}", log.display()))?;
        let mut command = Command::new("nice");
        command
            .args(["-n", NICENESS])
            .arg(&program)
            .arg("e2e-bins")
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(errors)
            // Its own group, so that a gate that stops early takes Go's compilers down with it.
            .process_group(0);
        let child = command
            .spawn()
            .with_context(|| format!("could not start `{}`", display(&command)))?;
        eprintln!(
            "==> building the end-to-end tiers' programs in the background (niceness \
             {NICENESS}): {} (log: {})",
            display(&command),
            log.display()
        );
        Ok(Self {
            child: Some(child),
            log: log.to_path_buf(),
            started: Instant::now(),
        })
    }

    /// Waits for the build and says how it went. A failure is not the gate's: each tier builds
    /// what it needs again, and that error is the one reported.
    pub fn finish(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let waiting = Instant::now();
        let status = child.wait();
        let waited = waiting.elapsed();
        match status {
            Ok(status) if status.success() => eprintln!(
                "==> the tiers' programs are built ({:.0?} after they started; {:.0?} of it \
                 waited for here; log: {})",
                self.started.elapsed(),
                waited,
                self.log.display()
            ),
            outcome => {
                let why = match outcome {
                    Ok(status) => status.to_string(),
                    Err(error) => error.to_string(),
                };
                eprintln!(
                    "==> the background build of the tiers' programs failed ({why}); each tier \
                     builds what it needs itself. The end of {}:",
                    self.log.display()
                );
                for line in tail(&self.log, TAIL_LINES) {
                    eprintln!("    {line}");
                }
            }
        }
    }
}

impl Drop for BackgroundBuild {
    /// A gate that stops before the tiers stops the build too (the group: `go` and its
    /// compilers), rather than leaving it to compile for minutes after we have exited.
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        let group = format!("-{}", child.id());
        let killed = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !matches!(killed, Ok(status) if status.success()) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

/// The last `lines` lines of the file at `path` (none if it cannot be read).
fn tail(path: &Path, lines: usize) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_lines_and_a_missing_file_has_none() {
        let dir = std::env::temp_dir().join(format!("tandem-xtask-tail-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        fs::write(&path, "one\ntwo\nthree\n").unwrap();
        assert_eq!(tail(&path, 2), ["two", "three"]);
        assert_eq!(tail(&path, 10), ["one", "two", "three"]);
        assert!(tail(&dir.join("missing"), 3).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
