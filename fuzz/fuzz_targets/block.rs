#![no_main]
//! Fuzz target `block`: see `strata::fuzzing::block`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::block(data);
});
