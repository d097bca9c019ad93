//! The expiry sweeper: `Data::sweep_expired` deletes the records of keys
//! whose expiry has passed (metadata, hash fields, zset members and scores,
//! and the expiry index entry) and leaves everything else; the running
//! server calls it in the background, so an expired key's records go away
//! without any command touching it.
//!
//! Every test runs on both engines behind the one door (`strata::open`):
//! the LSM and KVell.

mod lsm {
    const ENGINE: &str = "engine=lsm";
    include!("engines/sweeper.rs");
}

mod kvell {
    const ENGINE: &str = "engine=kvell";
    include!("engines/sweeper.rs");
}
