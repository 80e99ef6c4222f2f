//! OCI image archives written without a registry or an image builder: a layer tar of files
//! taken from the host, a config, a manifest and an index, in the OCI image layout that
//! `ctr images import` (and `skopeo`, `podman load`) reads.
//!
//! The archive is reproducible: entries are sorted, owned by root and dated at the epoch, so
//! the same files give the same digests on every machine and every rebuild.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde_json::json;
use sha2::{Digest as _, Sha256};

/// One file of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file at `path` in the image, copied from `from` on the host, with `mode`.
    File {
        /// Its path in the image (no leading `/`).
        path: String,
        /// The host file.
        from: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A symbolic link at `path` pointing to `target`.
    Symlink {
        /// Its path in the image (no leading `/`).
        path: String,
        /// What it points to.
        target: String,
    },
    /// A directory.
    Dir {
        /// Its path in the image (no leading `/`).
        path: String,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Self::File { path, .. } | Self::Symlink { path, .. } | Self::Dir { path } => path,
        }
    }
}

/// An image to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Its reference, as runtimes will know it (`tandem.invalid/busybox:e2e`).
    pub name: String,
    /// Its one layer.
    pub entries: Vec<Entry>,
    /// `config.Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `config.Env`.
    pub env: Vec<String>,
    /// `config.User` (empty: root).
    pub user: String,
    /// `config.Labels`.
    pub labels: Vec<(String, String)>,
}

/// What [`write_archive`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The OCI layout tar.
    pub path: PathBuf,
    /// The manifest's digest (`sha256:…`).
    pub manifest_digest: String,
    /// The archive's size in bytes.
    pub size: u64,
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    format!("sha256:{hex}")
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// The layer of `entries`: an uncompressed tar, sorted by path.
pub fn layer(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path().cmp(b.path()));
    let mut tar = tar::Builder::new(Vec::new());
    for entry in sorted {
        match entry {
            Entry::Dir { path } => {
                let mut header = header(tar::EntryType::Directory, 0o755, 0);
                tar.append_data(&mut header, format!("{path}/"), std::io::empty())?;
            }
            Entry::Symlink { path, target } => {
                let mut header = header(tar::EntryType::Symlink, 0o777, 0);
                tar.append_link(&mut header, path, target)?;
            }
            Entry::File { path, from, mode } => {
                let bytes =
                    fs::read(from).with_context(|| format!("cannot read {}", from.display()))?;
                let mut header = header(tar::EntryType::Regular, *mode, bytes.len() as u64);
                tar.append_data(&mut header, path, bytes.as_slice())?;
            }
        }
    }
    Ok(tar.into_inner()?)
}

/// Writes `image` as an OCI layout tar at `path` (through a temporary file renamed into place).
pub fn write_archive(image: &Image, path: &Path) -> Result<Archive> {
    let layer = layer(&image.entries)?;
    let layer_digest = sha256(&layer);
    let labels: serde_json::Map<String, serde_json::Value> = image
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": image.entrypoint,
            "Env": image.env,
            "User": image.user,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "tandem-xtask oci"}],
    }))?;
    let config_digest = sha256(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer.len(),
        }],
    }))?;
    let manifest_digest = sha256(&manifest);
    let tag = image.name.rsplit_once(':').map_or("latest", |(_, tag)| tag);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest.len(),
            "annotations": {
                "io.containerd.image.name": image.name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    }))?;

    let mut archive = tar::Builder::new(Vec::new());
    let mut add = |name: &str, bytes: &[u8]| -> Result<()> {
        let mut header = header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
        archive.append_data(&mut header, name, bytes)?;
        Ok(())
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add("index.json", &index)?;
    for (digest, bytes) in [
        (&manifest_digest, &manifest),
        (&config_digest, &config),
        (&layer_digest, &layer),
    ] {
        let hex = digest.trim_start_matches("sha256:");
        add(&format!("blobs/sha256/{hex}"), bytes)?;
    }
    let bytes = archive.into_inner()?;

    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = fs::File::create(&temporary)
        .with_context(|| format!("cannot create {}", temporary.display()))?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    fs::rename(&temporary, path).with_context(|| {
        format!(
            "cannot rename {} to {}",
            temporary.display(),
            path.display()
        )
    })?;
    Ok(Archive {
        path: path.to_owned(),
        manifest_digest,
        size: bytes.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(dir: &Path) -> Image {
        let file = dir.join("hello");
        fs::write(&file, b"hello\n").unwrap();
        Image {
            name: "tandem.invalid/hello:test".into(),
            entries: vec![
                Entry::Symlink {
                    path: "bin/hi".into(),
                    target: "hello".into(),
                },
                Entry::File {
                    path: "bin/hello".into(),
                    from: file,
                    mode: 0o755,
                },
                Entry::Dir { path: "bin".into() },
            ],
            entrypoint: vec!["/bin/hello".into()],
            env: vec!["PATH=/bin".into()],
            user: "65534".into(),
            labels: vec![("version".into(), "1".into())],
        }
    }

    #[test]
    fn the_archive_is_an_oci_layout_with_sorted_layer_entries_and_stable_digests() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_archive(&image(dir.path()), &dir.path().join("a.tar")).unwrap();
        let second = write_archive(&image(dir.path()), &dir.path().join("b.tar")).unwrap();
        assert_eq!(first.manifest_digest, second.manifest_digest);

        let mut archive = tar::Archive::new(fs::File::open(&first.path).unwrap());
        let mut names = Vec::new();
        let mut index = String::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            if name == "index.json" {
                std::io::Read::read_to_string(&mut entry, &mut index).unwrap();
            }
            names.push(name);
        }
        assert_eq!(names[..2], ["oci-layout", "index.json"]);
        assert_eq!(names.len(), 5);
        assert!(index.contains(r#""io.containerd.image.name":"tandem.invalid/hello:test""#));
        assert!(index.contains(&first.manifest_digest));

        let layer = layer(&image(dir.path()).entries).unwrap();
        let mut layer = tar::Archive::new(layer.as_slice());
        let paths: Vec<String> = layer
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(paths, ["bin/", "bin/hello", "bin/hi"]);
    }
}
