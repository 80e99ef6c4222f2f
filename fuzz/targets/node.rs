//! The `node` fuzz target: libFuzzer drives [`tandem_fuzz::node::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::node::run(data));
