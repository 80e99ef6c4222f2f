//! Keying job ids before they reach the engine.
//!
//! The engine must never learn what a job is called, and a saved knowledge base must name no
//! job. So every id is replaced, on its way in, by `HMAC-SHA256(secret, id)` (the first 128
//! bits, in hex): stable for one secret, so outcomes can refer to profiles observed in an
//! earlier run, and unlinkable to the name without the secret. Answers are mapped back to the
//! caller's ids on the way out.
//!
//! The secret of a knowledge base lives next to it (`<kb>.secret`, created by `tandem kb init`,
//! readable by its owner only) or wherever `--secret-file` says; a run without a knowledge base
//! uses a fresh random secret.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tandem_wire::identity::keyed_id;

/// Bytes of a generated secret.
const SECRET_BYTES: usize = 32;

/// Keys ids with one secret and remembers how to map them back.
pub struct IdKeys {
    secret: Vec<u8>,
    originals: HashMap<String, String>,
}

impl IdKeys {
    /// Keys with `secret`.
    pub fn new(secret: Vec<u8>) -> Self {
        Self {
            secret,
            originals: HashMap::new(),
        }
    }

    /// Keys with a fresh random secret (for a run that keeps no knowledge).
    pub fn ephemeral() -> anyhow::Result<Self> {
        Ok(Self::new(generate_secret()?))
    }

    /// The keyed form of `id`.
    pub fn key(&mut self, id: &str) -> String {
        let keyed = keyed_id(&self.secret, id);
        self.originals.insert(keyed.clone(), id.to_owned());
        keyed
    }

    /// The caller's id behind a keyed one (the keyed id itself if it was never keyed here).
    pub fn original<'a>(&'a self, keyed: &'a str) -> &'a str {
        self.originals.get(keyed).map_or(keyed, String::as_str)
    }
}

/// 32 random bytes from the operating system.
pub fn generate_secret() -> anyhow::Result<Vec<u8>> {
    let mut secret = vec![0_u8; SECRET_BYTES];
    getrandom::getrandom(&mut secret).context("cannot read random bytes from the OS")?;
    Ok(secret)
}

/// Where the secret of the knowledge base at `kb` lives by default.
pub fn sidecar(kb: &Path) -> PathBuf {
    let mut name = kb.as_os_str().to_owned();
    name.push(".secret");
    PathBuf::from(name)
}

/// Reads a secret file (hex).
pub fn read_secret(path: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(tandem_wire::identity::read_secret(path)?)
}

/// Writes a new secret file readable by its owner only; refuses to overwrite one.
pub fn write_secret(path: &Path, secret: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create the id secret {}", path.display()))?;
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    writeln!(file, "{hex}")?;
    file.sync_all()?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    crate::atomic::sync_dir(dir)
        .with_context(|| format!("cannot flush the directory {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_per_secret_and_map_back() {
        let mut a = IdKeys::new(vec![1; 32]);
        let mut b = IdKeys::new(vec![2; 32]);
        let keyed = a.key("alice/resnet-finetune");
        assert_eq!(keyed.len(), 32);
        assert!(!keyed.contains("alice"));
        assert_eq!(a.key("alice/resnet-finetune"), keyed);
        assert_ne!(b.key("alice/resnet-finetune"), keyed);
        assert_eq!(a.original(&keyed), "alice/resnet-finetune");
    }
}
