//! What a job id names. Job ids reaching the engine are opaque (hosts key real names), but
//! one convention is the engine's: an id may name an instance of a recurring workload.

/// The workload an id names: `<workload>~<instance>` is one instance of a recurring workload
/// (several may be queued or running at once, and ids must be unique in a request), any other
/// id is its own workload. Instances share what was learned about their workload: its observed
/// profile and its outcomes. Keyed ids are hexadecimal, so `~` never occurs in one.
pub(crate) fn workload_of(id: &str) -> &str {
    id.split_once('~').map_or(id, |(workload, _)| workload)
}
