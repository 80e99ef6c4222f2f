//! The CLI's queue files (`tandem_cli::QueueFile`, checked but with any ONNX file left unread,
//! so no input reaches the file system): any text is a queue or an error naming the file, and
//! a queue's request holds every job exactly once, queued or as a GPU's resident.

use std::collections::BTreeSet;
use std::path::Path;

use tandem_cli::QueueFile;

/// Feeds one input to the target (inputs that are not UTF-8 are skipped, as libFuzzer's
/// `&str` targets skip them).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/queue.json");
    let queue = match QueueFile::parse_unread(path, text) {
        Ok(queue) => queue,
        Err(error) => {
            assert_eq!(error.file.as_deref(), Some(path));
            assert!(
                error.to_string().starts_with("fuzz/queue.json: "),
                "the error does not name the file: {error}"
            );
            return;
        }
    };
    let jobs: BTreeSet<String> = queue.jobs.iter().map(|job| job.id.clone()).collect();
    let _ = queue.speeds();
    let request = queue.into_request();
    let mut placed = BTreeSet::new();
    let ids = request
        .queue
        .iter()
        .chain(request.gpus.iter().flat_map(|gpu| gpu.residents.iter()));
    for job in ids {
        assert!(
            placed.insert(job.id.clone()),
            "job `{}` is placed twice",
            job.id
        );
    }
    assert!(
        jobs.is_subset(&placed),
        "jobs missing from the request: {:?}",
        jobs.difference(&placed).collect::<Vec<_>>()
    );
}
