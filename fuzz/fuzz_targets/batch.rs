#![no_main]
//! Fuzz target `batch`: see `strata::fuzzing::batch`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::batch(data);
});
