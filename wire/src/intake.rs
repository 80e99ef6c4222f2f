//! The bodies of the adapters' intake (`POST /v1/profiles`, `/v1/outcomes`, `/v1/predict`,
//! `/v1/estimate`), as the adapters read them and the node profilers and clients write them.
//!
//! Each is `deny_unknown_fields`, and every list a caller can make long is [`bounded`]: one
//! request carries at most [`MAX_BATCH_ITEMS`] items, refused while the body is read. Ranges
//! (run times, speeds, memory) are the engine contract's ([`tandem_api::bounds`]), checked by
//! the intake after the body parses.

use serde::{Deserialize, Serialize};
use tandem_api::{Assignment, GpuSpec, ModelSummary, Outcome, Priority, Profile};

/// A list of at most [`MAX_BATCH_ITEMS`] items, refused while it is read
/// once it has more: a batch of a million items costs the memory of the limit, not of the batch.
pub fn bounded<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_BATCH_ITEMS} items")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(item) = seq.next_element()? {
                if items.len() == MAX_BATCH_ITEMS {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX_BATCH_ITEMS} {TOO_MANY_ITEMS}"
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(Bounded(std::marker::PhantomData))
}

/// Most items one intake request may carry ([`bounded`]).
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// How [`bounded`]'s refusal reads, so an intake can tell it from other malformed bodies (and
/// answer `413`, not `400`).
pub const TOO_MANY_ITEMS: &str = "items in one request; send them in batches";

/// One profile posted by a node profiler.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRecord {
    /// Keyed job id (32 hex digits; see [`crate::identity`]).
    pub job: String,
    /// The measured profile.
    pub profile: Profile,
}

/// Body of `POST /v1/profiles`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilesRequest {
    /// The profiles (at most [`MAX_BATCH_ITEMS`]).
    #[serde(deserialize_with = "bounded")]
    pub profiles: Vec<ProfileRecord>,
}

/// Answer of `POST /v1/profiles`: where each profile was filed, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfilesAnswer {
    /// Cluster and uncertainty per profile.
    pub assignments: Vec<Assignment>,
    /// Peaks the memory model learned from these profiles (those of jobs that declared their
    /// model, on GPUs whose characteristics the engine knows).
    #[serde(default)]
    pub peaks_learned: u32,
}

/// Body of `POST /v1/outcomes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomesRequest {
    /// The outcomes, with keyed job ids (at most [`MAX_BATCH_ITEMS`]).
    #[serde(deserialize_with = "bounded")]
    pub outcomes: Vec<Outcome>,
}

/// Body of `POST /v1/predict`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// Keyed ids of the jobs sharing the GPU.
    pub jobs: Vec<String>,
    /// The GPU.
    pub gpu: GpuSpec,
}

/// Body of `POST /v1/estimate`: one job, by its keyed id (what the engine knows of it) and/or
/// what it declares, and the GPU models to estimate it on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateRequest {
    /// The job's keyed id; without it, a job the engine knows nothing of but what is declared.
    #[serde(default)]
    pub job: Option<String>,
    /// Its declared model.
    #[serde(default)]
    pub declared: Option<ModelSummary>,
    /// Its priority.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Its work, in the unit of its speeds.
    #[serde(default)]
    pub work: Option<f64>,
    /// The GPU models (at most [`MAX_BATCH_ITEMS`]).
    #[serde(deserialize_with = "bounded")]
    pub gpus: Vec<GpuSpec>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_past_the_bound_is_refused_while_it_is_read_and_unknown_fields_are_refused() {
        #[derive(Debug, Deserialize)]
        struct Numbers {
            #[serde(deserialize_with = "bounded")]
            n: Vec<u8>,
        }
        let body = |count: usize| format!(r#"{{"n":[{}]}}"#, vec!["1"; count].join(","));
        let full: Numbers = serde_json::from_str(&body(MAX_BATCH_ITEMS)).unwrap();
        assert_eq!(full.n.len(), MAX_BATCH_ITEMS);
        let refused = serde_json::from_str::<Numbers>(&body(MAX_BATCH_ITEMS + 1))
            .unwrap_err()
            .to_string();
        assert!(refused.contains(TOO_MANY_ITEMS), "{refused}");
        let empty: ProfilesRequest = serde_json::from_str(r#"{"profiles":[]}"#).unwrap();
        assert!(empty.profiles.is_empty());
        let unknown = serde_json::from_str::<ProfilesRequest>(r#"{"profiles":[],"x":1}"#)
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("unknown field"), "{unknown}");
    }
}
