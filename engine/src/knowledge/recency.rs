//! When each job was last observed, and which jobs are the stalest.
//!
//! The engine has no clock, so "when" is the number of the observation: the knowledge base
//! numbers every observation that names a job (`observe-profile`, `observe-outcome`,
//! `observe-speed`) and keeps, per job, the number of the last one. The stalest jobs are those
//! with the smallest numbers, ties to the smaller id: a function of the state alone, the same
//! in every instance that replays the same observations.
//!
//! Saved compactly: the numbers alone, in id order of the jobs the knowledge base holds (the
//! ids are saved already, with the profiles, speeds and outcomes they key). A state saved before
//! jobs were numbered has no numbers; its jobs count as observed before any other.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The number of the last observation that named each job.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recency {
    by_job: BTreeMap<String, u64>,
    /// The numbers as loaded, until [`Recency::resolve`] gives them their ids.
    loaded: Vec<u64>,
}

/// Two are equal when they number the same jobs alike.
impl PartialEq for Recency {
    fn eq(&self, other: &Self) -> bool {
        self.by_job == other.by_job
    }
}

impl Serialize for Recency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.by_job.values())
    }
}

impl<'de> Deserialize<'de> for Recency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self {
            by_job: BTreeMap::new(),
            loaded: Vec::deserialize(deserializer)?,
        })
    }
}

impl Recency {
    /// Records that observation `number` named `job`.
    pub(crate) fn touch(&mut self, job: &str, number: u64) {
        match self.by_job.get_mut(job) {
            Some(last) => *last = number,
            None => {
                self.by_job.insert(job.to_owned(), number);
            }
        }
    }

    /// Gives the loaded numbers to `jobs`, every job the knowledge base holds: in id order
    /// when there is one number per job, else 0 for each (a state saved before jobs were
    /// numbered, or one whose numbers do not match its jobs).
    pub(crate) fn resolve(&mut self, jobs: &BTreeSet<&str>) {
        let loaded = std::mem::take(&mut self.loaded);
        let numbers = if loaded.len() == jobs.len() {
            loaded
        } else {
            vec![0; jobs.len()]
        };
        self.by_job = jobs
            .iter()
            .zip(numbers)
            .map(|(job, number)| ((*job).to_owned(), number))
            .collect();
    }

    /// Whether `jobs` are exactly the jobs numbered.
    #[cfg(test)]
    pub(crate) fn numbers_exactly(&self, jobs: &BTreeSet<&str>) -> bool {
        self.by_job.len() == jobs.len() && self.by_job.keys().zip(jobs).all(|(a, b)| a == b)
    }

    /// The `count` stalest jobs, stalest first, no longer numbered.
    pub(crate) fn take_stalest(&mut self, count: usize) -> Vec<String> {
        let mut order: Vec<(u64, &String)> = self
            .by_job
            .iter()
            .map(|(job, &number)| (number, job))
            .collect();
        order.sort_unstable();
        let stalest: Vec<String> = order
            .into_iter()
            .take(count)
            .map(|(_, job)| job.clone())
            .collect();
        for job in &stalest {
            self.by_job.remove(job);
        }
        stalest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stalest_go_first_ties_to_the_smaller_id() {
        let mut recency = Recency::default();
        for (job, number) in [("c", 1), ("a", 3), ("b", 1), ("d", 2), ("c", 4)] {
            recency.touch(job, number);
        }
        assert_eq!(recency.take_stalest(2), ["b", "d"]);
        assert_eq!(recency.take_stalest(5), ["a", "c"]);
        assert!(recency.numbers_exactly(&BTreeSet::new()));
    }

    #[test]
    fn numbers_are_saved_in_id_order_and_given_back_to_their_jobs() {
        let mut recency = Recency::default();
        recency.touch("b", 7);
        recency.touch("a", 9);
        let json = serde_json::to_string(&recency).unwrap();
        assert_eq!(json, "[9,7]");
        let mut loaded: Recency = serde_json::from_str(&json).unwrap();
        loaded.resolve(&BTreeSet::from(["a", "b"]));
        assert_eq!(loaded, recency);
        // Numbers that do not match the jobs (or none, from an older state): all 0.
        let mut older: Recency = serde_json::from_str("[]").unwrap();
        older.resolve(&BTreeSet::from(["a", "b"]));
        assert_eq!(older.take_stalest(1), ["a"]);
    }
}
