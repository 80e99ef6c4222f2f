//! In which order queued jobs choose their GPUs: the two precedences the objectives use.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use tandem_api::Job;

use super::resolve::Resolved;

/// A queued job by its index in the queue, resolved on the request's models.
pub(super) type Entry = (usize, Resolved);

/// First-fit decreasing: the largest jobs first, as bin packing does; a job of unknown memory
/// takes a GPU of its own, so it counts as the largest.
pub(super) fn largest_first(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_by_key(|(_, r)| {
        let largest = r
            .views
            .iter()
            .map(|v| v.memory_mib.unwrap_or(u32::MAX))
            .max();
        std::cmp::Reverse(largest)
    });
    entries
}

/// Jobs the knowledge base is surest about choose first (JRS), earlier submissions first among
/// equals; with probability `exploration` a job's precedence is drawn at random instead, so
/// uncertain jobs also get good slots and produce the outcomes that make them certain.
pub(super) fn surest_first(
    entries: Vec<Entry>,
    queue: &[Job],
    exploration: f64,
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<Entry> {
    let mut keyed: Vec<(f64, f64, Entry)> = entries
        .into_iter()
        .map(|entry| {
            let key = if exploration > 0.0 && rng.r#gen::<f64>() < exploration {
                rng.r#gen::<f64>()
            } else {
                entry.1.any().assignment_uncertainty
            };
            (key, queue[entry.0].submitted_at_s, entry)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    keyed.into_iter().map(|(_, _, entry)| entry).collect()
}
