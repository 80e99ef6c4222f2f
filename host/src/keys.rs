//! Keying job identities before they reach the engine.
//!
//! The contract says hosts key real names before the engine sees them, so that the engine, its
//! snapshots and its logs never hold a job name. Every Tandem host keys the same way, so a
//! knowledge base built by one (the CLI, the kube adapter, a node profiler) answers another
//! that holds the same secret: `HMAC-SHA256(secret, identity)`, its first 128 bits in lower-case
//! hex ([`SCHEME`]). Stable for one secret; unlinkable to the name without it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Name of the keying scheme, as knowledge-base files record it.
pub const SCHEME: &str = "hmac-sha256/128";

/// Hex digits of a keyed id.
const KEYED_LEN: usize = 32;

/// Fewest secret bytes accepted.
pub const MIN_SECRET_BYTES: usize = 16;

/// The keyed id of `identity` under `secret`.
pub fn keyed_id(secret: &[u8], identity: &str) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(identity.as_bytes());
    let digest = mac.finalize().into_bytes();
    digest[..KEYED_LEN / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `id` has the shape of a keyed id (32 lower-case hex digits). Hosts that accept ids
/// from elsewhere refuse anything else, so a caller that forgot to key cannot leak a name.
pub fn is_keyed(id: &str) -> bool {
    id.len() == KEYED_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why a secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not an even number of hex digits.
    #[error("the id secret is not hex")]
    NotHex,
    /// Fewer than [`MIN_SECRET_BYTES`] bytes.
    #[error("an id secret must be at least {MIN_SECRET_BYTES} bytes written as hex")]
    TooShort,
}

/// Parses a secret written as hex (surrounding whitespace ignored).
pub fn parse_secret(text: &str) -> Result<Vec<u8>, SecretError> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return Err(SecretError::NotHex);
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or(SecretError::NotHex)?;
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_ids_are_stable_per_secret_and_well_formed() {
        let keyed = keyed_id(&[1; 32], "alice/resnet");
        assert!(is_keyed(&keyed));
        assert_eq!(keyed_id(&[1; 32], "alice/resnet"), keyed);
        assert_ne!(keyed_id(&[2; 32], "alice/resnet"), keyed);
        assert!(!is_keyed("alice/resnet"));
        assert!(!is_keyed(&"A".repeat(32)));
    }

    #[test]
    fn secrets_must_be_long_enough_hex() {
        assert_eq!(parse_secret(&"ab".repeat(16)).unwrap(), vec![0xab; 16]);
        assert_eq!(parse_secret(" 0g "), Err(SecretError::NotHex));
        assert_eq!(parse_secret("abc"), Err(SecretError::NotHex));
        assert_eq!(parse_secret("abcd"), Err(SecretError::TooShort));
    }
}
