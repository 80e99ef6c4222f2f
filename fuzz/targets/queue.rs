//! The `queue` fuzz target: libFuzzer drives [`tandem_fuzz::queue::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::queue::run(data));
