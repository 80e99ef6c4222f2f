//! The `cluster` fuzz target: libFuzzer drives [`tandem_fuzz::cluster::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::cluster::run(data));
