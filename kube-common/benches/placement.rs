//! What signing a placement costs the bind path, and what reading one costs the view.
//!
//! Every bind (the extender's, the framework plugin's Reserve, the Volcano extender's
//! allocate) signs the placement it writes once: one Ed25519 signature over the pod's UID and
//! its placement ([`tandem_kube_common::placement::Placements::annotations`]). The view reads
//! every pod's placement at each rebuild: a placement the front-end signed itself reads from
//! the verdict it kept when signing; one signed elsewhere (another replica, before a restart) is
//! verified on its first read, and later reads of the same annotations reuse the verdict. First
//! reads are timed over 20,000 pods read once each (the mean); the rest over batches of calls
//! for at least two seconds after a warm-up (the median batch), beside unsigned placements as
//! they were written and read before signatures.
//!
//! Run: `cargo bench -p tandem-kube-common --bench placement`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use tandem_kube_common::placement::{Placements, Read, Signer};

const BATCH: u32 = 200;

/// Pods whose placement is read for the first time.
const FRESH: u32 = 20_000;

/// A pod of UID `uid` bound to the node of the bench's GPU, carrying `annotations`.
fn bound(uid: &str, annotations: BTreeMap<String, String>) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.uid = Some(uid.to_owned());
    pod.metadata.annotations = Some(annotations);
    pod.spec = Some(PodSpec {
        node_name: Some("gpu-node-0417".to_owned()),
        ..PodSpec::default()
    });
    pod
}

/// Median time of one call of `work`, over batches run for at least two seconds.
fn median_per_call(mut work: impl FnMut()) -> Duration {
    for _ in 0..BATCH {
        work();
    }
    let mut batches = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) || batches.len() < 5 {
        let batch = Instant::now();
        for _ in 0..BATCH {
            work();
        }
        batches.push(batch.elapsed() / BATCH);
    }
    batches.sort_unstable();
    batches[batches.len() / 2]
}

fn main() {
    let (signer, private) = Signer::generate().expect("a key pair is generated");
    let signed = Placements::signed(signer);
    // The same key in a front-end that did not sign these pods' placements.
    let replica = Placements::signed(Signer::from_pem(private.as_bytes()).expect("a key reads"));
    let unsigned = Placements::unsigned();
    let gpus = ["gpu-node-0417/2".to_owned()];
    let uid = "6f1c2a9e-4b1e-4c2f-9a3d-5e6f7a8b9c0d";

    let write_unsigned = median_per_call(|| {
        black_box(
            unsigned
                .annotations(black_box(uid), &gpus, Some(12_660))
                .unwrap(),
        );
    });
    let write_signed = median_per_call(|| {
        black_box(
            signed
                .annotations(black_box(uid), &gpus, Some(12_660))
                .unwrap(),
        );
    });

    // Pods bound with signed placements, each read once, by the front-end that signed them and
    // by a replica, for which every read verifies.
    let pods: Vec<Pod> = (0..FRESH)
        .map(|n| {
            let uid = format!("uid-{n}");
            let annotations = signed.annotations(&uid, &gpus, Some(12_660)).unwrap();
            bound(&uid, annotations)
        })
        .collect();
    let started = Instant::now();
    for pod in &pods {
        assert!(matches!(signed.read(black_box(pod)), Read::Placed(_)));
    }
    let own_read = started.elapsed() / FRESH;
    let started = Instant::now();
    for pod in &pods {
        assert!(matches!(replica.read(black_box(pod)), Read::Placed(_)));
    }
    let first_read = started.elapsed() / FRESH;
    assert_eq!(signed.verifications(), 0, "its own placements were checked");
    assert_eq!(replica.verifications(), u64::from(FRESH));
    // The same pods read again, as the next rebuild of the view reads them.
    let mut next = pods.iter().cycle();
    let again = median_per_call(|| {
        let pod = next.next().expect("a cycle never ends");
        assert!(matches!(replica.read(black_box(pod)), Read::Placed(_)));
    });
    let one = &pods[0];
    let trusting = median_per_call(|| {
        assert!(matches!(unsigned.read(black_box(one)), Read::Placed(_)));
    });

    println!("one placement (one GPU, its reservation), median of batches:");
    println!(
        "  write, unsigned               {:>8.2} µs",
        micros(write_unsigned)
    );
    println!(
        "  write, signed (the bind)      {:>8.2} µs",
        micros(write_signed)
    );
    println!(
        "  read, signed here (kept)      {:>8.2} µs",
        micros(own_read)
    );
    println!(
        "  read, first time (verified)   {:>8.2} µs",
        micros(first_read)
    );
    println!("  read again (verdict kept)     {:>8.2} µs", micros(again));
    println!(
        "  read, unsigned (trusted)      {:>8.2} µs",
        micros(trusting)
    );
}

fn micros(time: Duration) -> f64 {
    time.as_secs_f64() * 1e6
}
