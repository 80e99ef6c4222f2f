//! The `snapshot` fuzz target: libFuzzer drives [`tandem_fuzz::snapshot::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::snapshot::run(data));
