//! Compaction-time expiry of string keys: the LSM's compactions drop the
//! record of a string key whose expiry has passed, whether or not the
//! sweeper (`Data::sweep_expired`) has reached it yet.
//!
//! A string's value lives in its metadata record, so removing that record
//! removes the key whole. A hash or sorted set keeps its metadata record
//! until the sweeper deletes it together with its fields (by range
//! deletion): a compaction sees one record at a time and cannot remove
//! the fields with it. The expiry index entry of a string the filter
//! removed is deleted by the sweeper when it comes due, as before.

use crate::cmd::now_ms;
use crate::keys::{Kind, Meta, META};
use strata::compaction_filter::{CompactionFilter, Decision};
use strata::{EngineKind, FilterOp, Options};

/// The compaction filter of a server database; see the module doc.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExpiredStrings;

impl CompactionFilter for ExpiredStrings {
    fn name(&self) -> &str {
        "strata-server-expired-strings"
    }

    fn filter(&self, key: &[u8], value: &[u8]) -> Decision {
        if key.first() != Some(&META) {
            return Decision::Keep;
        }
        match Meta::decode(value) {
            Some(m) if m.kind == Kind::String && m.expired(now_ms()) => Decision::Remove,
            _ => Decision::Keep,
        }
    }
}

/// `opts` as the server opens its database: with [`ExpiredStrings`] as
/// the compaction filter where the engine compacts (the LSM) and the
/// caller set none.
pub fn server_options(mut opts: Options) -> Options {
    if opts.engine == EngineKind::Lsm && opts.compaction_filter.get().is_none() {
        opts.compaction_filter = FilterOp::new(ExpiredStrings);
    }
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_expired_string_metadata_is_removed() {
        let meta = |m: Meta| m.encode();
        let f = ExpiredStrings;
        let k = crate::keys::meta_key(b"a");
        assert_eq!(
            f.filter(&k, &meta(Meta::string(b"v".to_vec(), 1))),
            Decision::Remove
        );
        assert_eq!(
            f.filter(&k, &meta(Meta::string(b"v".to_vec(), 0))),
            Decision::Keep
        );
        let later = now_ms() + 3_600_000;
        assert_eq!(
            f.filter(&k, &meta(Meta::string(b"v".to_vec(), later))),
            Decision::Keep
        );
        let mut h = Meta::container(Kind::Hash, 2);
        h.expire_at = 1;
        assert_eq!(f.filter(&k, &meta(h)), Decision::Keep);
        // Not metadata, or not decodable: kept.
        let other = crate::keys::expiry_key(1, b"a");
        assert_eq!(f.filter(&other, &[]), Decision::Keep);
        assert_eq!(f.filter(&k, b"?"), Decision::Keep);
    }
}
