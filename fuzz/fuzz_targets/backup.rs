#![no_main]
//! Fuzz target `backup`: see `strata::fuzzing::backup`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    strata::fuzzing::backup(data);
});
