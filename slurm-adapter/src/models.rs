//! Reading a model file a job declared (`--tandem-model=file:PATH`) from `--model-dir`.
//!
//! The directory may be one the cluster's users write to (a shared models directory), so
//! what a path leads to is hostile: a symbolic link out of the directory (to a secret the
//! service may read), a FIFO or a device that blocks or never ends, a file larger than memory.
//! A file is read only when it is a regular file inside the directory, of at most the limit
//! (`--model-file-limit`):
//!
//! - the path is resolved (every symbolic link followed) and must stay under the directory's
//!   own resolved path;
//! - the resolved file is opened with `O_NOFOLLOW | O_NONBLOCK`, so a link swapped in after
//!   the check is not followed and a FIFO swapped in does not block the open;
//! - the opened handle, not the path, must be a regular file within the limit, and the kernel's
//!   name for it (`/proc/self/fd/N`) must still be under the directory: a directory on the way
//!   swapped for a link between the check and the open is caught there;
//! - at most the limit plus one byte is read, so a file that grows while it is read is refused
//!   too.

use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// Default of `--model-file-limit`: an ONNX file with its weights (VGG-19's is 548 MiB) fits.
pub const DEFAULT_LIMIT: u64 = 1 << 30;

/// Why a model file was not read; every variant names the file as the job gave it.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    /// The directory itself cannot be resolved.
    #[error("the model directory cannot be read: {0}")]
    Directory(#[source] std::io::Error),
    /// The file does not exist or cannot be opened.
    #[error("cannot read {path} under the model directory: {source}")]
    Unreadable {
        /// The path the job gave.
        path: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// It leads out of the directory.
    #[error("{path} leads outside the model directory (a symbolic link): refused")]
    Outside {
        /// The path the job gave.
        path: String,
    },
    /// It is a FIFO, a device, a socket or a directory.
    #[error("{path} is not a regular file: refused")]
    NotRegular {
        /// The path the job gave.
        path: String,
    },
    /// It is larger than the limit.
    #[error("{path} is larger than the {limit} bytes this service reads (--model-file-limit)")]
    TooLarge {
        /// The path the job gave.
        path: String,
        /// The limit.
        limit: u64,
    },
}

/// Reads `path` (relative, without `..`: the declaration's check) under `dir`, at most `limit`
/// bytes, as the module describes. Blocking: run it off the async threads.
pub fn read(dir: &Path, path: &str, limit: u64) -> Result<Vec<u8>, ModelFileError> {
    let root = std::fs::canonicalize(dir).map_err(ModelFileError::Directory)?;
    let unreadable = |source| ModelFileError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let outside = || ModelFileError::Outside {
        path: path.to_owned(),
    };
    let resolved = std::fs::canonicalize(root.join(path)).map_err(unreadable)?;
    if !resolved.starts_with(&root) {
        return Err(outside());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&resolved)
        .map_err(|source| {
            // ELOOP: the last component became a link after the check.
            if source.raw_os_error() == Some(libc::ELOOP) {
                outside()
            } else {
                unreadable(source)
            }
        })?;
    let metadata = file.metadata().map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(ModelFileError::NotRegular {
            path: path.to_owned(),
        });
    }
    let opened: PathBuf =
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(unreadable)?;
    if !opened.starts_with(&root) {
        return Err(outside());
    }
    let too_large = || ModelFileError::TooLarge {
        path: path.to_owned(),
        limit,
    };
    if metadata.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_inside_is_read_and_everything_else_refused_by_name() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("models");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/m.json"), b"{}").unwrap();
        std::fs::write(base.path().join("secret"), b"outside").unwrap();
        assert_eq!(read(&dir, "sub/m.json", 10).unwrap(), b"{}");

        // A link within the directory is fine; one out of it is not.
        std::os::unix::fs::symlink("sub/m.json", dir.join("inner.json")).unwrap();
        assert_eq!(read(&dir, "inner.json", 10).unwrap(), b"{}");
        std::os::unix::fs::symlink(base.path().join("secret"), dir.join("out.json")).unwrap();
        let error = read(&dir, "out.json", 10).unwrap_err().to_string();
        assert!(error.contains("out.json leads outside"), "{error}");
        std::os::unix::fs::symlink(base.path(), dir.join("up")).unwrap();
        let error = read(&dir, "up/secret", 10).unwrap_err().to_string();
        assert!(error.contains("up/secret leads outside"), "{error}");

        // A FIFO is refused at once rather than blocking the read (the open would wait for a
        // writer forever without O_NONBLOCK).
        let fifo = dir.join("pipe.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let error = read(&dir, "pipe.json", 10).unwrap_err().to_string();
        assert!(error.contains("pipe.json is not a regular file"), "{error}");
        // A device, through a link (to /dev, so outside), and a directory.
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero.onnx")).unwrap();
        assert!(read(&dir, "zero.onnx", 10).is_err());
        let error = read(&dir, "sub", 10).unwrap_err().to_string();
        assert!(error.contains("sub is not a regular file"), "{error}");

        // Larger than the limit: refused by its size, sparse or not.
        let big = std::fs::File::create(dir.join("big.onnx")).unwrap();
        big.set_len(11).unwrap();
        let error = read(&dir, "big.onnx", 10).unwrap_err().to_string();
        assert!(
            error.contains("big.onnx is larger than the 10 bytes"),
            "{error}"
        );
        let error = read(&dir, "missing.json", 10).unwrap_err().to_string();
        assert!(error.contains("cannot read missing.json"), "{error}");
    }
}
