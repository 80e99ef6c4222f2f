//! Files of observations for `tandem kb observe`: profiles, then outcomes that refer to them.
//!
//! Profiles: a JSON list of jobs shaped as in a queue file,
//! `[{"id": "a", "profile": {"gpu_util_pct": 64.7, "mem_access_pct": 29.4, "mem_used_mib": 5106, "gpu_model": "V100"}}]`.
//!
//! Outcomes: a JSON list of finished co-locations, each with measured times,
//! `{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100, 80], "colocated_s": [130, 95]}`,
//! or with measured speeds instead (co-located throughput / solo throughput),
//! `{"gpu_model": "V100", "jobs": ["a", "b"], "speeds": [0.77, 0.84]}`. Speeds become times by
//! the definitions every Tandem tool uses: both jobs take the same solo time and progress at
//! their speed until the first finishes, then the other runs alone.

use std::path::Path;

use serde::Deserialize;
use tandem_api::{Outcome, Profile};

use crate::queue::{InputError, check_profile};

/// One observed profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileEntry {
    /// The job's id (keyed before it reaches the engine).
    pub id: String,
    /// Its telemetry.
    pub profile: Profile,
    /// Accepted so jobs copied from a queue file parse; ignored.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted for queue-file compatibility, not used")]
    running_on: Option<String>,
    /// Accepted so jobs copied from a queue file parse; ignored.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted for queue-file compatibility, not used")]
    submitted_at_s: Option<f64>,
}

/// One finished co-location, as written in an outcomes file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeEntry {
    /// GPU model the jobs shared.
    pub gpu_model: String,
    /// Ids of the jobs (profiles observed earlier).
    pub jobs: Vec<String>,
    /// Solo completion times, in seconds.
    #[serde(default)]
    pub solo_s: Option<Vec<f64>>,
    /// Co-located completion times, in seconds.
    #[serde(default)]
    pub colocated_s: Option<Vec<f64>>,
    /// Co-located throughput / solo throughput, instead of times (two jobs).
    #[serde(default)]
    pub speeds: Option<Vec<f64>>,
}

fn parse_list<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::in_file(path, "", format!("cannot read the file: {e}")))?;
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| InputError::in_file(path, e.path().to_string(), e.inner().to_string()))
}

/// Reads and checks a profiles file.
pub fn read_profiles(path: &Path) -> Result<Vec<ProfileEntry>, InputError> {
    let entries: Vec<ProfileEntry> = parse_list(path)?;
    let mut seen = std::collections::HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if entry.id.is_empty() {
            return Err(InputError::in_file(
                path,
                format!("[{i}].id"),
                "must not be empty",
            ));
        }
        if let Some(first) = seen.insert(entry.id.as_str(), i) {
            return Err(InputError::in_file(
                path,
                format!("[{i}].id"),
                format!("duplicate job id `{}` (first at [{first}])", entry.id),
            ));
        }
        check_profile(&entry.profile).map_err(|(field, problem)| {
            InputError::in_file(path, format!("[{i}].profile.{field}"), problem)
        })?;
    }
    Ok(entries)
}

/// Reads and checks an outcomes file; speeds become times.
pub fn read_outcomes(path: &Path) -> Result<Vec<Outcome>, InputError> {
    let entries: Vec<OutcomeEntry> = parse_list(path)?;
    entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            to_outcome(entry).map_err(|(field, problem)| {
                InputError::in_file(path, format!("[{i}]{field}"), problem)
            })
        })
        .collect()
}

fn positive(list: &[f64], field: &str) -> Result<(), (String, String)> {
    match list.iter().position(|x| !(x.is_finite() && *x > 0.0)) {
        Some(at) => Err((
            format!(".{field}[{at}]"),
            format!("must be a positive number, got {}", list[at]),
        )),
        None => Ok(()),
    }
}

/// Refuses times no run can show ([`tandem_api::bounds`]: each time from 1 ms to 366 days, and
/// co-located from 0.1 to 10,000 times solo), naming the field: the engine's statistics would
/// overflow on them, and a knowledge base holding what overflowed cannot be loaded back.
/// `speeds` names the speeds the times were made of, if they were.
fn within_bounds(solo: &[f64], colocated: &[f64], speeds: bool) -> Result<(), (String, String)> {
    use tandem_api::bounds;
    let named = |field: String| move |e: bounds::OutOfBounds| (field, e.problem);
    for (i, (&alone, &together)) in solo.iter().zip(colocated).enumerate() {
        if speeds {
            bounds::colocated_ratio(alone, together, "").map_err(named(format!(".speeds[{i}]")))?;
            continue;
        }
        bounds::run_time(alone, "").map_err(named(format!(".solo_s[{i}]")))?;
        bounds::run_time(together, "").map_err(named(format!(".colocated_s[{i}]")))?;
        bounds::colocated_ratio(alone, together, "")
            .map_err(named(format!(".colocated_s[{i}]")))?;
    }
    Ok(())
}

fn to_outcome(entry: OutcomeEntry) -> Result<Outcome, (String, String)> {
    let n = entry.jobs.len();
    if entry.gpu_model.is_empty() {
        return Err((".gpu_model".into(), "must not be empty".into()));
    }
    if n < 2 {
        return Err((
            ".jobs".into(),
            format!("a co-location needs at least two jobs, got {n}"),
        ));
    }
    for (j, id) in entry.jobs.iter().enumerate() {
        if entry.jobs[..j].contains(id) {
            return Err((format!(".jobs[{j}]"), format!("job `{id}` is listed twice")));
        }
    }
    let length = |list: &[f64], field: &str| {
        if list.len() == n {
            Ok(())
        } else {
            Err((
                format!(".{field}"),
                format!("has {} entries but `jobs` has {n}", list.len()),
            ))
        }
    };
    let (solo_s, colocated_s) = match (entry.solo_s, entry.colocated_s, entry.speeds) {
        (Some(solo), Some(colocated), None) => {
            length(&solo, "solo_s")?;
            length(&colocated, "colocated_s")?;
            positive(&solo, "solo_s")?;
            positive(&colocated, "colocated_s")?;
            within_bounds(&solo, &colocated, false)?;
            (solo, colocated)
        }
        (None, None, Some(speeds)) => {
            length(&speeds, "speeds")?;
            positive(&speeds, "speeds")?;
            let [a, b] = speeds[..] else {
                return Err((
                    ".speeds".into(),
                    "speeds describe two jobs; give times for larger groups".into(),
                ));
            };
            let times = tandem_catalog::colocated_times([1.0, 1.0], [a, b]);
            within_bounds(&[1.0, 1.0], &times, true)?;
            (vec![1.0, 1.0], times.to_vec())
        }
        _ => {
            return Err((
                String::new(),
                "give either `solo_s` and `colocated_s`, or `speeds`".into(),
            ));
        }
    };
    Ok(Outcome {
        gpu_model: entry.gpu_model,
        jobs: entry.jobs,
        solo_s,
        colocated_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Outcome, (String, String)> {
        to_outcome(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn times_and_speeds_are_both_accepted() {
        let times = parse(r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100, 80], "colocated_s": [130, 95]}"#).unwrap();
        assert_eq!(times.colocated_s, [130.0, 95.0]);
        let speeds =
            parse(r#"{"gpu_model": "V100", "jobs": ["a", "b"], "speeds": [0.5, 1.0]}"#).unwrap();
        // b finishes at 1.0 having run at full speed; a did half its work, then runs alone.
        assert_eq!(speeds.colocated_s, [1.5, 1.0]);
    }

    #[test]
    fn bad_outcomes_name_the_field() {
        let cases = [
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100], "colocated_s": [130, 95]}"#,
                ".solo_s",
            ),
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100, -5], "colocated_s": [130, 95]}"#,
                ".solo_s[1]",
            ),
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "a"], "speeds": [0.5, 0.5]}"#,
                ".jobs[1]",
            ),
            (r#"{"gpu_model": "V100", "jobs": ["a", "b"]}"#, ""),
            (
                r#"{"gpu_model": "V100", "jobs": ["a"], "speeds": [0.5]}"#,
                ".jobs",
            ),
            // Times no run shows: the engine's statistics would overflow on them.
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [1e-300, 1e-300], "colocated_s": [1e300, 1e300]}"#,
                ".solo_s[0]",
            ),
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100, 100], "colocated_s": [100, 1e300]}"#,
                ".colocated_s[1]",
            ),
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "solo_s": [100, 100], "colocated_s": [100, 1e7]}"#,
                ".colocated_s[1]",
            ),
            (
                r#"{"gpu_model": "V100", "jobs": ["a", "b"], "speeds": [1e-300, 1e-300]}"#,
                ".speeds[0]",
            ),
        ];
        for (json, field) in cases {
            assert_eq!(parse(json).unwrap_err().0, field, "{json}");
        }
    }
}
