//! Ed25519 signatures over placements: the schedulers sign, the nodes verify.
//!
//! The key pair is asymmetric on purpose: the private key lives in a Secret only Tandem's
//! scheduler paths read, the public key in a ConfigMap every node reads, so a compromised node
//! (or a tenant who can read what a node reads) cannot forge a placement for another node. A
//! signature covers the pod's UID, the node, the GPUs and the reservation
//! ([`Placement`]'s signed message), so it cannot be moved to another pod, node, GPU or
//! memory limit.
//!
//! Keys are PEM, as OpenSSL writes them (`openssl genpkey -algorithm ed25519`, `openssl pkey
//! -pubout`) and as Helm generates them (`genPrivateKey "ed25519"`): the private key as PKCS#8
//! (`PRIVATE KEY`), a public key as an SPKI (`PUBLIC KEY`) or inside an X.509 certificate
//! (`CERTIFICATE`, which is how a Helm chart, unable to derive a public key, publishes one:
//! `genSelfSignedCertWithKey`; only the key is used, not the certificate's dates or names).
//! A verifier may hold several public keys (a rotation), each named by its [`key id`](Signer::key_id).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use rustls_pki_types::pem::{PemObject, SectionKind};
use rustls_pki_types::{CertificateDer, SubjectPublicKeyInfoDer};
use thiserror::Error;

use crate::placement::Placement;

/// The scheme a signature names first: `ed25519:<key id>:<base64>`.
const SCHEME: &str = "ed25519";

/// An Ed25519 SubjectPublicKeyInfo is this prefix and the 32-byte key (RFC 8410).
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Why a key cannot be used.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum KeyError {
    /// The text is not PEM.
    #[error("not PEM: {0}")]
    Pem(String),
    /// The PEM holds no section of the kind needed.
    #[error("no {0} in the PEM")]
    Missing(&'static str),
    /// A key or certificate holds a key that is not Ed25519.
    #[error("{0} is not an Ed25519 key")]
    NotEd25519(&'static str),
    /// The private key was rejected (malformed PKCS#8).
    #[error("the Ed25519 private key was rejected: {0}")]
    Rejected(String),
    /// A certificate cannot be parsed.
    #[error("a certificate cannot be parsed: {0}")]
    Certificate(String),
    /// No key could be generated (the operating system's random source failed).
    #[error("cannot generate a key: the system's random source failed")]
    Random,
}

/// Why a placement's signature does not hold.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum SignatureError {
    /// The pod carries no signature.
    #[error("the placement is not signed")]
    Missing,
    /// The signature annotation is not `ed25519:<key id>:<base64 signature>`.
    #[error("the placement's signature is not ed25519:<key id>:<base64>: {0}")]
    Format(String),
    /// It names a key this verifier does not hold.
    #[error("the placement is signed with key {0}, which this node does not trust")]
    UnknownKey(String),
    /// It does not verify: the placement was changed, or signed for another pod.
    #[error("the placement's signature (key {0}) does not match the pod and its placement")]
    Invalid(String),
}

/// Signs placements with the schedulers' private key.
pub struct Signer {
    pair: Ed25519KeyPair,
    id: String,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("key_id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// The signer of the first `PRIVATE KEY` (PKCS#8, Ed25519) in `pem`.
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let der = sections(pem)?
            .into_iter()
            .find_map(|(kind, der)| (kind == SectionKind::PrivateKey).then_some(der))
            .ok_or(KeyError::Missing("PRIVATE KEY"))?;
        Self::from_pkcs8(&der)
    }

    /// A fresh key pair: the signer and its private key as PEM (for tests and for operators
    /// who generate their own keys with `tandem`).
    pub fn generate() -> Result<(Self, String), KeyError> {
        let document =
            Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).map_err(|_| KeyError::Random)?;
        let signer = Self::from_pkcs8(document.as_ref())?;
        Ok((signer, pem_encode("PRIVATE KEY", document.as_ref())))
    }

    fn from_pkcs8(der: &[u8]) -> Result<Self, KeyError> {
        // "maybe unchecked": PKCS#8 v1, as OpenSSL and Go write it, carries no public key to
        // check the private one against; ring derives it.
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|rejected| KeyError::Rejected(rejected.to_string()))?;
        let id = key_id(pair.public_key().as_ref());
        Ok(Self { pair, id })
    }

    /// The public key's id, which signatures name (the first 4 bytes of its SHA-256, in hex).
    pub fn key_id(&self) -> &str {
        &self.id
    }

    /// The public key as PEM (`PUBLIC KEY`), what nodes are given to verify with.
    pub fn public_key_pem(&self) -> String {
        let mut spki = SPKI_PREFIX.to_vec();
        spki.extend_from_slice(self.pair.public_key().as_ref());
        pem_encode("PUBLIC KEY", &spki)
    }

    /// The signature of `placement` for the pod with UID `pod_uid`, as
    /// [`crate::SIGNATURE_ANNOTATION`] carries it.
    pub fn sign(&self, pod_uid: &str, placement: &Placement) -> String {
        let signature = self.pair.sign(&placement.signed_message(pod_uid));
        format!(
            "{SCHEME}:{}:{}",
            self.id,
            STANDARD.encode(signature.as_ref())
        )
    }

    /// `placement`, signed for the pod with UID `pod_uid`.
    pub fn signed(&self, pod_uid: &str, placement: Placement) -> Placement {
        let signature = self.sign(pod_uid, &placement);
        placement.with_signature(signature)
    }
}

/// Verifies placements with the schedulers' public keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    /// Each key's id and its 32 bytes.
    keys: Vec<(String, Vec<u8>)>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("key_ids", &self.key_ids().collect::<Vec<_>>())
            .finish()
    }
}

impl Verifier {
    /// A verifier trusting every `PUBLIC KEY` and every `CERTIFICATE`'s key in `pem` (at
    /// least one; every one must be Ed25519).
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let mut keys = Vec::new();
        for (kind, der) in sections(pem)? {
            let key = match kind {
                SectionKind::PublicKey => raw_key(&der, "a PUBLIC KEY")?,
                SectionKind::Certificate => {
                    let der = CertificateDer::from(der);
                    let certificate = webpki::EndEntityCert::try_from(&der)
                        .map_err(|error| KeyError::Certificate(format!("{error:?}")))?;
                    let spki: SubjectPublicKeyInfoDer<'_> = certificate.subject_public_key_info();
                    raw_key(spki.as_ref(), "a CERTIFICATE's key")?
                }
                _ => continue,
            };
            let id = key_id(&key);
            if !keys.iter().any(|(known, _)| *known == id) {
                keys.push((id, key));
            }
        }
        if keys.is_empty() {
            return Err(KeyError::Missing("PUBLIC KEY or CERTIFICATE"));
        }
        Ok(Self { keys })
    }

    /// The ids of the keys trusted.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// Whether `placement` carries a valid signature for the pod with UID `pod_uid`; the id of
    /// the key that signed it when it does.
    pub fn verify(&self, pod_uid: &str, placement: &Placement) -> Result<&str, SignatureError> {
        let signature = placement.signature().ok_or(SignatureError::Missing)?;
        let format = |why: &str| SignatureError::Format(why.to_owned());
        let mut parts = signature.splitn(3, ':');
        let (Some(scheme), Some(id), Some(encoded)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format("not three fields"));
        };
        if scheme != SCHEME {
            return Err(format("not ed25519"));
        }
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| format("the signature is not base64"))?;
        let (id, key) = self
            .keys
            .iter()
            .find(|(known, _)| known == id)
            .ok_or_else(|| SignatureError::UnknownKey(id.chars().take(16).collect()))?;
        UnparsedPublicKey::new(&ED25519, key)
            .verify(&placement.signed_message(pod_uid), &bytes)
            .map_err(|_| SignatureError::Invalid(id.clone()))?;
        Ok(id)
    }
}

/// Every PEM section of `pem`, with its kind.
fn sections(pem: &[u8]) -> Result<Vec<(SectionKind, Vec<u8>)>, KeyError> {
    <(SectionKind, Vec<u8>)>::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| KeyError::Pem(error.to_string()))
}

/// The 32 bytes of an Ed25519 SubjectPublicKeyInfo.
fn raw_key(spki: &[u8], what: &'static str) -> Result<Vec<u8>, KeyError> {
    match spki.strip_prefix(&SPKI_PREFIX[..]) {
        Some(key) if key.len() == 32 => Ok(key.to_vec()),
        _ => Err(KeyError::NotEd25519(what)),
    }
}

fn key_id(public_key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, public_key);
    digest.as_ref()[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key pair OpenSSL wrote (`openssl genpkey -algorithm ed25519`, PKCS#8 v1, as Go and
    /// Helm write it too) and its public key (`openssl pkey -pubout`).
    const OPENSSL_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIDRSQzqpWQpD03NFBS3R4MzfL3HSW0amToyh0CSKGHJd
-----END PRIVATE KEY-----
";
    const OPENSSL_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAv98NoJl9noeA+BDUZUBDdYdPprlNl0oBjeN+6+hHsCk=
-----END PUBLIC KEY-----
";

    const OPENSSL_CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----
MIIBSjCB/aADAgECAhQ6veOr87Vcws0RXNjdfWeckeWEXDAFBgMrZXAwGzEZMBcG
A1UEAwwQdGFuZGVtLXBsYWNlbWVudDAeFw0yNjEyMDEyMTM0NDBaFw0zNjExMjgy
MTM0NDBaMBsxGTAXBgNVBAMMEHRhbmRlbS1wbGFjZW1lbnQwKjAFBgMrZXADIQC/
3w2gmX2eh4D4ENRlQEN1h0+muU2XSgGN437r6EewKaNTMFEwHQYDVR0OBBYEFJPO
ucUzdRi99518wUf6vNkDzFhhMB8GA1UdIwQYMBaAFJPOucUzdRi99518wUf6vNkD
zFhhMA8GA1UdEwEB/wQFMAMBAf8wBQYDK2VwA0EAXU4GaRY9mvmVc/maXapHFjMT
FvJkXZIcPhph2lBxGvyDZ3bjmsOncKi1bufSJNlc0YTPzJ9axqXLoWvu1ni0Dg==
-----END CERTIFICATE-----
";

    fn placement() -> Placement {
        Placement::decided(&["gpu-node-7/1".into()], Some(12_660)).unwrap()
    }

    #[test]
    fn a_signed_placement_verifies_and_any_change_to_it_does_not() {
        let (signer, _) = Signer::generate().unwrap();
        let verifier = Verifier::from_pem(signer.public_key_pem().as_bytes()).unwrap();
        let signed = signer.signed("uid-1", placement());
        assert_eq!(verifier.verify("uid-1", &signed), Ok(signer.key_id()));

        // Another pod.
        let invalid = Err(SignatureError::Invalid(signer.key_id().to_owned()));
        assert_eq!(verifier.verify("uid-2", &signed), invalid);
        // More GPUs, another GPU, another memory limit, no memory limit.
        let signature = signed.signature().unwrap().to_owned();
        for gpus in [&["gpu-node-7/1", "gpu-node-7/2"][..], &["gpu-node-7/0"]] {
            let gpus: Vec<String> = gpus.iter().map(|g| (*g).to_owned()).collect();
            let forged = Placement::decided(&gpus, Some(12_660))
                .unwrap()
                .with_signature(signature.clone());
            assert_eq!(verifier.verify("uid-1", &forged), invalid);
        }
        for reserved in [Some(1), None] {
            let forged = Placement::decided(&["gpu-node-7/1".into()], reserved)
                .unwrap()
                .with_signature(signature.clone());
            assert_eq!(verifier.verify("uid-1", &forged), invalid);
        }
        // Another node's GPU with the same index.
        let forged = Placement::decided(&["gpu-node-8/1".into()], Some(12_660))
            .unwrap()
            .with_signature(signature);
        assert_eq!(verifier.verify("uid-1", &forged), invalid);
    }

    #[test]
    fn unsigned_malformed_and_foreign_signatures_are_named() {
        let (signer, _) = Signer::generate().unwrap();
        let (stranger, _) = Signer::generate().unwrap();
        let verifier = Verifier::from_pem(signer.public_key_pem().as_bytes()).unwrap();
        assert_eq!(
            verifier.verify("uid", &placement()),
            Err(SignatureError::Missing)
        );
        for bad in ["ed25519", "rsa:abc:AAAA", "ed25519:abc:not base64!"] {
            let forged = placement().with_signature(bad.into());
            let error = verifier.verify("uid", &forged).unwrap_err();
            assert!(matches!(error, SignatureError::Format(_)), "{bad}: {error}");
        }
        let foreign = stranger.signed("uid", placement());
        assert_eq!(
            verifier.verify("uid", &foreign),
            Err(SignatureError::UnknownKey(stranger.key_id().to_owned()))
        );
        // A signature of the right key id but of another key's making.
        let mut parts: Vec<String> = foreign
            .signature()
            .unwrap()
            .split(':')
            .map(str::to_owned)
            .collect();
        parts[1] = signer.key_id().to_owned();
        let spoofed = placement().with_signature(parts.join(":"));
        assert_eq!(
            verifier.verify("uid", &spoofed),
            Err(SignatureError::Invalid(signer.key_id().to_owned()))
        );
    }

    #[test]
    fn openssl_keys_sign_and_verify_and_rotations_trust_every_key() {
        let signer = Signer::from_pem(OPENSSL_PRIVATE.as_bytes()).unwrap();
        let (newer, private) = Signer::generate().unwrap();
        // The generated private key reads back as the same key.
        assert_eq!(
            Signer::from_pem(private.as_bytes()).unwrap().key_id(),
            newer.key_id()
        );
        // The public key OpenSSL derived is the one ring derives.
        assert_eq!(signer.public_key_pem(), OPENSSL_PUBLIC);
        let both = format!("{OPENSSL_PUBLIC}{}", newer.public_key_pem());
        let verifier = Verifier::from_pem(both.as_bytes()).unwrap();
        assert_eq!(verifier.key_ids().count(), 2);
        for key in [&signer, &newer] {
            let signed = key.signed("uid", placement());
            assert_eq!(verifier.verify("uid", &signed), Ok(key.key_id()));
        }
    }

    #[test]
    fn keys_that_are_not_ed25519_or_not_pem_are_refused() {
        assert_eq!(
            Verifier::from_pem(b"no pem here").unwrap_err(),
            KeyError::Missing("PUBLIC KEY or CERTIFICATE")
        );
        assert_eq!(
            Signer::from_pem(OPENSSL_PUBLIC.as_bytes()).unwrap_err(),
            KeyError::Missing("PRIVATE KEY")
        );
        // A P-256 public key (`openssl ecparam -name prime256v1 -genkey | openssl ec -pubout`).
        let p256 = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEWtjYDor5jq9MashbNA5tFAAF5HX/
fS74oEAWL3HkUXTCz/KV/ax/+2FpnlqScG/Dxp2mMFbbdgFuNLkp2vAQdA==
-----END PUBLIC KEY-----
";
        assert_eq!(
            Verifier::from_pem(p256.as_bytes()).unwrap_err(),
            KeyError::NotEd25519("a PUBLIC KEY")
        );
        // OpenSSL's self-signed certificate of the same key (`openssl req -x509 -key`), as a
        // chart publishes a public key: the certificate's key is trusted.
        let via_certificate = Verifier::from_pem(OPENSSL_CERTIFICATE.as_bytes()).unwrap();
        let signer = Signer::from_pem(OPENSSL_PRIVATE.as_bytes()).unwrap();
        assert_eq!(
            via_certificate.key_ids().collect::<Vec<_>>(),
            [signer.key_id()]
        );
        let truncated =
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPbo\n-----END PRIVATE KEY-----\n";
        assert!(matches!(
            Signer::from_pem(truncated.as_bytes()),
            Err(KeyError::Rejected(_))
        ));
    }
}
