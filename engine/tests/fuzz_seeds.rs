//! The engine snapshots `cargo xtask fuzz` starts its `snapshot` target from still load: a
//! seed the engine refuses would leave the fuzzer knocking at the format's first check.

use std::path::Path;

#[test]
fn the_snapshot_fuzz_seeds_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/snapshot");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let engine = tandem_engine::Recommender::load(&bytes)
            .unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
        assert!(tandem_engine::Recommender::load(&engine.save()).is_ok());
        seeds += 1;
    }
    assert_eq!(
        seeds, 2,
        "fuzz/seeds/snapshot holds the empty and the bootstrapped engine"
    );
}
