//! ONNX model files: the subset of `onnx.proto` this crate decodes, and [`build`], which writes
//! small models for tests.

pub mod build;
pub(crate) mod proto;
