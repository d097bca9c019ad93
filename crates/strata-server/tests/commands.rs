//! Every command through a real Redis client (the `redis` crate) against a
//! server started in-process on a free loopback port.
//!
//! Every test runs on both engines behind the one door (`strata::open`):
//! the LSM and KVell.

mod lsm {
    const ENGINE: &str = "engine=lsm";
    include!("engines/commands.rs");
}

mod kvell {
    const ENGINE: &str = "engine=kvell";
    include!("engines/commands.rs");
}
