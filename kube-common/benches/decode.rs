//! Decoding a bound pod as the API server sends it: `k8s_openapi`'s full `Pod` against the
//! adapters' lean decoding ([`tandem_kube_common::lean`]), in one run.
//!
//! Every watch event and every scheduler request carries a whole pod, so its decoding is paid
//! once per event in the extender's process. The pod (`benches/data/bound-pod.json`) is a Job's
//! one-GPU pod just bound by Tandem: three managers' `managedFields`, the defaults admission
//! adds (tolerations, the service-account volume), a Pending status. Each way is timed over
//! batches of decodes for at least two seconds after a warm-up; the median batch gives the
//! time per decode, and the ratio compares the two.
//!
//! Run: `cargo bench -p tandem-kube-common --bench decode`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tandem_kube_common::lean::LeanPod;

const POD: &str = include_str!("data/bound-pod.json");
const BATCH: u32 = 1_000;

/// Median time of one call of `decode`, over batches run for at least two seconds.
fn median_per_call(decode: impl Fn(&str)) -> Duration {
    for _ in 0..BATCH {
        decode(POD);
    }
    let mut batches = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) || batches.len() < 5 {
        let batch = Instant::now();
        for _ in 0..BATCH {
            decode(black_box(POD));
        }
        batches.push(batch.elapsed() / BATCH);
    }
    batches.sort_unstable();
    batches[batches.len() / 2]
}

fn main() {
    // Both decode the same pod to the same fields Tandem reads (the lean module's tests check
    // which); a failure here would time an error path.
    let full: Pod = serde_json::from_str(POD).expect("the bench pod decodes");
    let lean: LeanPod = serde_json::from_str(POD).expect("the bench pod decodes lean");
    assert_eq!(lean.0.metadata.annotations, full.metadata.annotations);

    let full = median_per_call(|text| {
        black_box(serde_json::from_str::<Pod>(text).expect("decodes"));
    });
    let lean = median_per_call(|text| {
        black_box(serde_json::from_str::<LeanPod>(text).expect("decodes"));
    });
    println!(
        "decode one bound pod ({} bytes of JSON), median of batches:",
        POD.len()
    );
    println!("  k8s_openapi Pod   {:>8.2} µs", full.as_secs_f64() * 1e6);
    println!("  lean              {:>8.2} µs", lean.as_secs_f64() * 1e6);
    println!(
        "  lean / full       {:>8.2}",
        lean.as_secs_f64() / full.as_secs_f64()
    );
}
