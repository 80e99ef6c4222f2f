//! Integration tests of `tandem-declare`: summaries of the models in `onnx::build` checked
//! against hand counts, the errors a user sees, hand-written JSON summaries, and property tests
//! that no input makes the crate panic.

mod errors;
mod json;
mod models;
mod robustness;
