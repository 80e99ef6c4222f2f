//! The contract's JSON as hosts receive it in requests and files (jobs with declared models,
//! profiles, outcomes, cluster changes, policies): any text decodes or is an error.

use tandem_api::{ClusterChange, Job, Outcome, Policy, Profile};

/// Feeds one input to the target.
pub fn run(bytes: &[u8]) {
    let _ = serde_json::from_slice::<Vec<Job>>(bytes);
    let _ = serde_json::from_slice::<Vec<Profile>>(bytes);
    let _ = serde_json::from_slice::<Vec<Outcome>>(bytes);
    let _ = serde_json::from_slice::<Vec<ClusterChange>>(bytes);
    let _ = serde_json::from_slice::<Policy>(bytes);
}
