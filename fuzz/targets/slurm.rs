//! The `slurm` fuzz target: libFuzzer drives [`tandem_fuzz::slurm::run`] (see there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::slurm::run(data));
