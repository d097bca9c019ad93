#![no_main]
//! Fuzz target `slab`: see `strata::fuzzing::slab`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::slab(data);
});
