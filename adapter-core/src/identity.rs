//! Keying job identities before they reach the engine: the contract's
//! ([`tandem_wire::identity`]), re-exported for the adapters.

pub use tandem_wire::identity::{JOB_LABEL, JobKeys, SecretError, SecretFileError, is_keyed};
