//! The `onnx` fuzz target: libFuzzer drives [`tandem_fuzz::onnx::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::onnx::run(data));
