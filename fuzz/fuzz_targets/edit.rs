#![no_main]
//! Fuzz target `edit`: see `strata::fuzzing::edit`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::edit(data);
});
