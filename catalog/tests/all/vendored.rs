//! The converters on the real, vendored sources.

use std::path::PathBuf;

use tandem_catalog::Catalog;
use tandem_catalog::convert::{Converted, convert_all};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data")
}

fn converted() -> Vec<Converted> {
    convert_all(&data_dir()).expect("the vendored sources convert")
}

fn find<'a>(all: &'a [Converted], file_name: &str) -> &'a Catalog {
    &all.iter()
        .find(|c| c.file_name == file_name)
        .unwrap_or_else(|| panic!("{file_name} is produced"))
        .catalog
}

/// (job types, pairs, job types with a profile)
fn counts(catalog: &Catalog) -> (usize, usize, usize) {
    let profiled = catalog
        .job_types()
        .iter()
        .filter(|j| j.profile.is_some())
        .count();
    (catalog.job_types().len(), catalog.pairs().len(), profiled)
}

#[test]
fn committed_catalogs_equal_a_fresh_conversion() {
    let all = converted();
    let names: Vec<&str> = all.iter().map(|c| c.file_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "futurewei-p100.json",
            "futurewei-p100-profiled.json",
            "alnair-mps.json",
            "gavel-k80.json",
            "gavel-p100.json",
            "gavel-v100.json",
            "schedtune-memory.json"
        ]
    );
    for converted in &all {
        let path = data_dir().join("catalogs").join(&converted.file_name);
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fresh = converted.catalog.to_json_pretty().expect("serializes");
        assert!(
            committed == fresh,
            "{} differs from a fresh conversion: run `cargo run -p tandem-catalog --bin \
             tandem-catalog-convert` from the repository root and review the diff",
            path.display()
        );
        // And the committed file reads back as the same catalog.
        let read = Catalog::read(&path).expect("the committed catalog is valid");
        assert_eq!(read.name(), converted.catalog.name());
        assert_eq!(counts(&read), counts(&converted.catalog));
    }
}

#[test]
fn futurewei_has_the_twelve_jobs_and_thirty_four_pairs_of_the_papers() {
    let all = converted();
    let catalog = find(&all, "futurewei-p100.json");
    // No Table II job has a measured run with the same model, batch size and epochs.
    assert_eq!(counts(catalog), (12, 34, 0));
    assert!(
        catalog
            .job_types()
            .iter()
            .all(|j| j.solo_time_s.contains_key("P100"))
    );
    assert!(catalog.pairs().iter().all(|p| p.colocated_time_s.is_some()));
    // Inceptionv3 (BS=20) with ResNet-50 (BS=20), the worst pair of Table IV.
    let (a, b) = catalog
        .pair(
            "P100",
            "Inceptionv3 (BS=20, Epoch=5)",
            "ResNet-50 (BS=20, Epoch=5)",
        )
        .expect("measured");
    assert_eq!((a, b), (316.2 / 535.67, 332.6 / 541.07));
    // The two rows of the source that contradict their own times are named.
    let source = catalog.source();
    assert!(source.contains("line 9 (`Inceptionv3 (BS=20, Epoch=5)` with `Small BERT L4"));
    assert!(source.contains("line 20 (`Inceptionv3 (BS=20, Epoch=5)` with `ResNet-50"));
    assert_eq!(source.matches("slowdown_a_pct ").count(), 2, "{source}");
}

#[test]
fn futurewei_with_the_looser_join_profiles_five_jobs() {
    use tandem_catalog::convert::{Input, ProfileJoin, futurewei};
    let read = |name: &str| {
        std::fs::read_to_string(data_dir().join("alnair").join(name)).expect("vendored")
    };
    let (individual, pairs, workload) = (
        read("futurewei_tableII_individual_runtime.csv"),
        read("futurewei_tableIII_IV_pair_interference.csv"),
        read("futurewei_mini_ml_workload.csv"),
    );
    fn input(text: &str) -> Input<'_> {
        Input {
            origin: "vendored",
            text,
        }
    }
    let catalog = futurewei(
        input(&individual),
        input(&pairs),
        input(&workload),
        ProfileJoin::ModelBatch,
    )
    .expect("converts");
    let profiled: Vec<&str> = catalog
        .job_types()
        .iter()
        .filter(|j| j.profile.is_some())
        .map(|j| j.name.as_str())
        .collect();
    assert_eq!(
        profiled,
        [
            "Small BERT L2-H128-A2 (BS=256, Epoch=1)",
            "RL (BS=1024, Epoch=5000)",
            "DCGAN (BS=256, Epoch=5)",
            "Small BERT L4-H512-A8 (BS=256, Epoch=1)",
            "Image Segmentation (BS=256, Epoch=5)",
        ]
    );
}

#[test]
fn futurewei_profiled_gives_every_job_the_row_the_papers_clustered() {
    let all = converted();
    let plain = find(&all, "futurewei-p100.json");
    let catalog = find(&all, "futurewei-p100-profiled.json");
    assert_eq!(counts(catalog), (12, 34, 12));
    // The same jobs and pairs as the catalog without profiles.
    assert_eq!(catalog.pairs(), plain.pairs());
    let names =
        |c: &Catalog| -> Vec<String> { c.job_types().iter().map(|j| j.name.clone()).collect() };
    assert_eq!(names(catalog), names(plain));
    let profile = |name: &str| {
        catalog
            .job_type(name)
            .and_then(|j| j.profile.clone())
            .unwrap_or_else(|| panic!("{name} is profiled"))
    };
    // Row 102 (model 5 = Inception_v3, batch size 20): interpolated by the authors.
    let inception = profile("Inceptionv3 (BS=20, Epoch=5)");
    assert_eq!(
        (
            inception.gpu_util_pct,
            inception.mem_access_pct,
            inception.mem_used_mib
        ),
        // 52.24% of 16280 MiB = 8504.7
        (60.79, 18.28, 8505)
    );
    // Row 106 repeats run 26 (the same model and batch size, 3 epochs): the looser join's
    // profile, MaGTSAMP read as MGTSAMP.
    let bert = profile("Small BERT L4-H512-A8 (BS=256, Epoch=1)");
    assert_eq!((bert.gpu_util_pct, bert.mem_access_pct), (68.6, 44.33));
    let source = catalog.source();
    assert!(
        source
            .contains("`Inceptionv3 (BS=20, Epoch=5)` <- row ID 102 (interpolated by the authors)")
    );
    assert!(
        source.contains(
            "`Small BERT L4-H512-A8 (BS=256, Epoch=1)` <- row ID 106 (measured: run ID 26)"
        )
    );
    assert_eq!(source.matches("(measured: run ID").count(), 5, "{source}");
    assert_eq!(
        source.matches("(interpolated by the authors)").count(),
        7,
        "{source}"
    );
    assert!(source.contains("Not joined: none."));
}

#[test]
fn alnair_mps_pairs_only_jobs_measured_both_ways() {
    let all = converted();
    let catalog = find(&all, "alnair-mps.json");
    // 18 jobs alone; the 12 column jobs pair up: 66 pairs of two types + 12 of one type.
    assert_eq!(counts(catalog), (18, 78, 0));
    assert!(
        catalog
            .job_types()
            .iter()
            .all(|j| j.gpu_util_pct_approx.is_some())
    );
    // Row pyt-cf10-inc:32 beside column pyt-cf10-rn50:256 is 350714 us (363744 alone);
    // row pyt-cf10-rn50:256 beside column pyt-cf10-inc:32 is 379112 us (173173 alone).
    let (a, b) = catalog
        .pair("unstated", "pyt-cf10-inc:32", "pyt-cf10-rn50:256")
        .expect("measured both ways");
    assert_eq!((a, b), (363744.0 / 350714.0, 173173.0 / 379112.0));
    assert!(
        catalog
            .pair("unstated", "pyt-imdb-lstm:1", "pyt-cf10-inc:1")
            .is_none()
    );
    assert!(
        catalog
            .source()
            .contains("Left out: 72 measurements of one side only")
    );
}

#[test]
fn gavel_has_every_single_gpu_pair_that_can_share() {
    let all = converted();
    // 26 single-GPU job types: 351 unordered pairs, minus those that cannot share.
    let expected = [
        ("gavel-k80.json", "K80", 12288),
        ("gavel-p100.json", "P100", 16384),
        ("gavel-v100.json", "V100", 16384),
    ];
    let mut pair_counts = Vec::new();
    for (file_name, model, memory) in expected {
        let catalog = find(&all, file_name);
        let (job_types, pairs, profiled) = counts(catalog);
        assert_eq!((job_types, profiled), (26, 0), "{file_name}");
        assert_eq!(catalog.gpu_model(model).map(|g| g.memory_mib), Some(memory));
        assert!(
            catalog
                .job_types()
                .iter()
                .all(|j| j.solo_throughput.contains_key(model))
        );
        pair_counts.push(pairs);
    }
    assert_eq!(pair_counts, [351 - 45, 351 - 11, 351 - 21]);
    let v100 = find(&all, "gavel-v100.json");
    // The data set's "25 pairs without slowdown" counts both orientations.
    assert!(v100.source().contains(
        "14 pairs (25 entries of the file, counting both orientations) show no slowdown at all"
    ));
    let (a, b) = v100
        .pair(
            "V100",
            "ResNet-18 (batch size 64)",
            "ResNet-18 (batch size 16)",
        )
        .expect("measured");
    assert!(a > 0.0 && a <= 1.0 && b > 0.0 && b <= 1.0);
}

#[test]
fn schedtune_declares_48_jobs_with_a_measured_peak_on_each_of_five_gpus() {
    let all = converted();
    let catalog = find(&all, "schedtune-memory.json");
    assert_eq!(counts(catalog), (48, 0, 0));
    assert_eq!(catalog.gpu_models().len(), 5);
    for job in catalog.job_types() {
        assert_eq!(job.peak_mem_mib.len(), 5, "{}", job.name);
        assert!(job.declared.is_some(), "{}", job.name);
    }
    let vgg = catalog
        .job_types()
        .iter()
        .find(|j| j.name == "vgg19-b64")
        .expect("listed");
    // SchedTune's table: 10,088 MiB on the K80, 10,673 on the V100.
    assert_eq!(vgg.peak_mem_mib["K80"], 10088);
    assert_eq!(vgg.peak_mem_mib["V100"], 10673);
}
