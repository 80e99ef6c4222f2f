//! Writing output files so that a crash or an error mid-write never leaves a half file: the
//! content goes to a temporary file in the same directory, is flushed to disk, and is renamed
//! over the target only once complete; then the directory is flushed too, since the rename is
//! durable only once the directory entry is.

use std::fs::File;
use std::path::Path;

use anyhow::Context as _;

/// Writes `path` atomically with `fill`, returning what `fill` returns.
pub(crate) fn write<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let value = fill(temp.as_file_mut())?;
    temp.as_file().sync_all()?;
    // The persist error's message repeats its source (the I/O error): keep the source alone.
    temp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    sync_dir(dir).with_context(|| format!("cannot flush the directory {}", dir.display()))?;
    Ok(value)
}

/// Flushes a directory's entries to disk (after a rename or a create in it).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `text` to `path` atomically, readable by everyone: reports and traces are meant to be
/// shared (the temporary file starts private).
pub(crate) fn write_shared(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    write(path, |file| {
        file.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o644))
                .with_context(|| format!("cannot make {} readable", path.display()))?;
        }
        Ok(())
    })
}
