//! What crosses between Tandem's processes on a cluster: the contract the scheduler paths, the
//! adapters, the node component and the node profilers share, as types, constants and checks
//! (no network, no engine; the one file read is the mounted id secret's).
//!
//! - [`identity`]: how a job's name becomes the keyed id the engine sees, the label naming it.
//! - [`gpu_models`]: the short GPU model names profiles and GPUs meet by.
//! - [`intake`]: the bodies the adapters' intake reads and profilers and clients write.
//! - [`placement`] and [`signature`]: the decision on a pod, and its signature.
//!
//! A scheduler path of Tandem (the extender's bind, the framework plugin's bind, the Volcano
//! extender's allocate) writes its decision on the pod as annotations ([`placement`]) before the
//! kubelet sees it; `tandem-node`, on the pod's node, reads them and gives the container those
//! GPUs. Annotations are writable by whoever may update the pod, so the decision is signed
//! ([`signature`]): the schedulers hold an Ed25519 private key, the nodes only the public key,
//! and a node honours a placement only when its signature covers the pod's UID, the node, the
//! GPUs and the memory reserved. Both sides use this crate, so what is signed and what is
//! verified cannot drift apart.

pub mod gpu_models;
pub mod identity;
pub mod intake;
pub mod placement;
pub mod signature;

pub use identity::{JOB_LABEL, JobKeys};
pub use placement::{
    GPU_ANNOTATION, GpuRef, MEMORY_ANNOTATION, Placement, PlacementError, SIGNATURE_ANNOTATION,
};
pub use signature::{KeyError, SignatureError, Signer, Verifier};
