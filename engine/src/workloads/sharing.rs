//! Which GPU models each pair of workloads was observed sharing.

use std::collections::BTreeSet;

/// GPU models each unordered pair of workloads was observed sharing, kept by the pair's
/// smaller index: row `a` holds `(b, models)` for the pairs `(a, b)` with `b ≥ a`, sorted by
/// `b`. Rows rather than one ordered map over the pairs: the guard asks this of nearly every
/// placement it judges beside one job, and a binary search within one workload's partners is a
/// fraction of a search of every pair.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Sharing {
    /// As many rows as one past the largest first index of a pair held.
    rows: Vec<Vec<(usize, BTreeSet<String>)>>,
}

impl Sharing {
    /// The models `a` and `b` (either order) were observed sharing, if any.
    pub fn models(&self, a: usize, b: usize) -> Option<&BTreeSet<String>> {
        let row = self.rows.get(a.min(b))?;
        let at = row.binary_search_by_key(&a.max(b), |entry| entry.0).ok()?;
        Some(&row[at].1)
    }

    /// Records that `a` and `b` were observed sharing a GPU of `gpu_model`.
    pub fn insert(&mut self, a: usize, b: usize, gpu_model: &str) {
        let entry = self.entry(a.min(b), a.max(b));
        if !entry.contains(gpu_model) {
            entry.insert(gpu_model.to_owned());
        }
    }

    /// Sets the models of the pair `(a, b)`, `a ≤ b`, replacing any held.
    pub fn set(&mut self, a: usize, b: usize, gpu_models: BTreeSet<String>) {
        *self.entry(a, b) = gpu_models;
    }

    /// Every pair `(a, b)`, `a ≤ b`, with its models, in order of `(a, b)`.
    pub fn iter(&self) -> impl Iterator<Item = ((usize, usize), &BTreeSet<String>)> {
        self.rows
            .iter()
            .enumerate()
            .flat_map(|(a, row)| row.iter().map(move |(b, models)| ((a, *b), models)))
    }

    /// The models of the pair `(a, b)`, `a ≤ b`, an empty set added if it had none.
    fn entry(&mut self, a: usize, b: usize) -> &mut BTreeSet<String> {
        if self.rows.len() <= a {
            self.rows.resize_with(a + 1, Vec::new);
        }
        let row = &mut self.rows[a];
        let at = match row.binary_search_by_key(&b, |entry| entry.0) {
            Ok(at) => at,
            Err(at) => {
                row.insert(at, (b, BTreeSet::new()));
                at
            }
        };
        &mut row[at].1
    }
}
