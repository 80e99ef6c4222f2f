//! The knowledge base no request can poison or brick, against the real extender and API server:
//!
//! - the poison outcome (alone 1e-300 s, beside its partner 1e300 s: the engine's statistics
//!   overflow, and a knowledge base holding the result cannot be loaded) posted to the intake is
//!   refused `400` naming the field, and the adapter restarts on what it stored;
//! - a node profiler, authenticated by its pod's projected service-account token (reviewed by
//!   the API server, which names the node the token is bound to), may post profiles of the pods
//!   on its own node only: one for a pod on another node is refused `403`, and so is an outcome.

use anyhow::Result;

pub(crate) use tandem_e2e::scenarios::poison::*;

#[tokio::test]
async fn the_poison_outcome_is_refused_naming_the_field_and_the_adapter_restarts_on_what_it_stored()
-> Result<()> {
    on_control_plane(|cluster| async move {
        let result = poison(&cluster).await;
        (cluster, result)
    })
    .await
}

#[tokio::test]
async fn a_node_profiler_may_post_profiles_only_for_pods_on_its_own_node() -> Result<()> {
    on_control_plane(|cluster| async move {
        let result = node_scoped(&cluster).await;
        (cluster, result)
    })
    .await
}
