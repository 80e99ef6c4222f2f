//! The contract's JSON as hosts receive it in requests and files (jobs with declared models,
//! profiles, outcomes, cluster changes, policies): any text decodes or is an error.
#![no_main]

use tandem_api::{ClusterChange, Job, Outcome, Policy, Profile};

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = serde_json::from_slice::<Vec<Job>>(bytes);
    let _ = serde_json::from_slice::<Vec<Profile>>(bytes);
    let _ = serde_json::from_slice::<Vec<Outcome>>(bytes);
    let _ = serde_json::from_slice::<Vec<ClusterChange>>(bytes);
    let _ = serde_json::from_slice::<Policy>(bytes);
});
