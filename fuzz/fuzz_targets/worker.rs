#![no_main]
//! Fuzz target `worker`: see `strata::fuzzing::worker`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::worker(data);
});
