//! What crosses between Tandem's processes on a cluster, as types and checks with no I/O.
//!
//! A scheduler path of Tandem (the extender's bind, the framework plugin's bind, the Volcano
//! extender's allocate) writes its decision on the pod as annotations ([`placement`]) before the
//! kubelet sees it; `tandem-node`, on the pod's node, reads them and gives the container those
//! GPUs. Annotations are writable by whoever may update the pod, so the decision is signed
//! ([`signature`]): the schedulers hold an Ed25519 private key, the nodes only the public key,
//! and a node honours a placement only when its signature covers the pod's UID, the node, the
//! GPUs and the memory reserved. Both sides use this crate, so what is signed and what is
//! verified cannot drift apart.

pub mod placement;
pub mod signature;

pub use placement::{
    GPU_ANNOTATION, GpuRef, MEMORY_ANNOTATION, Placement, PlacementError, SIGNATURE_ANNOTATION,
};
pub use signature::{KeyError, SignatureError, Signer, Verifier};
