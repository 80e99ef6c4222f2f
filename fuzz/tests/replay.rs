//! Every fuzz target's known inputs through the ordinary test build: the seeds committed with
//! the repository and, when `cargo xtask fuzz` ran on this machine, the corpus it grew. A
//! target that panics on one of them fails here with the input's path, so the gate checks them
//! all without building the instrumented binaries (`cargo xtask fuzz` still explores).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files of `dir`, sorted (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_has_its_library_function_and_seeds_that_exist() {
    for target in tandem_xtask::fuzz::TARGETS {
        assert!(
            tandem_fuzz::target(target.name).is_some(),
            "no library function for fuzz target {}",
            target.name
        );
        assert!(!target.seeds().is_empty(), "{} has no seeds", target.name);
        for seed in target.seeds() {
            assert!(
                root().join(seed).is_file(),
                "{}: seed {seed} is missing",
                target.name
            );
        }
    }
    assert_eq!(
        tandem_fuzz::TARGETS.len(),
        tandem_xtask::fuzz::TARGETS.len()
    );
}

#[test]
fn every_seed_and_corpus_input_passes_its_target() {
    let mut replayed = 0;
    for target in tandem_xtask::fuzz::TARGETS {
        let run = tandem_fuzz::target(target.name).expect("checked above");
        let mut inputs: Vec<PathBuf> = target
            .seeds()
            .iter()
            .map(|seed| root().join(seed))
            .collect();
        inputs.extend(files(&target.corpus_dir()));
        for input in inputs {
            let bytes = std::fs::read(&input)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", input.display()));
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(
                outcome.is_ok(),
                "fuzz target {} panics on {} (replay it with the target's binary)",
                target.name,
                input.display()
            );
            replayed += 1;
        }
    }
    eprintln!(
        "replayed {replayed} inputs through {} targets",
        tandem_xtask::fuzz::TARGETS.len()
    );
}
