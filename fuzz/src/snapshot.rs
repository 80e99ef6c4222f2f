//! Engine snapshots (`tandem_engine::Recommender::load`, what knowledge-base files and the
//! adapters' stored state hold): any bytes are an engine or an error, and an engine loaded
//! from them saves what loads again.

/// Feeds one input to the target.
pub fn run(bytes: &[u8]) {
    if let Ok(engine) = tandem_engine::Recommender::load(bytes) {
        let saved = engine.save();
        assert!(
            tandem_engine::Recommender::load(&saved).is_ok(),
            "a loaded engine's own save does not load"
        );
    }
}
