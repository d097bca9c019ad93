//! `strata::open`: the one place an engine is chosen. It does one `match`
//! on `Options::engine` and hands back the store behind the engine-neutral
//! [`KvStore`] door.

use crate::db::Db;
use crate::error::{Error, Result};
use crate::kvell::{self, Kvell};
use crate::options::{EngineKind, Options};
use crate::store::KvStore;
use std::path::Path;

/// Opens (by default creating) the database in `path` with the engine
/// `opts.engine` names. A directory holds one engine's files: opening it
/// with the other engine fails with `InvalidArgument` and touches nothing.
pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Box<dyn KvStore>> {
    let path = path.as_ref();
    match opts.engine {
        EngineKind::Lsm => {
            if path.join(kvell::format::META_FILE).exists() {
                return Err(Error::InvalidArgument(format!(
                    "{} holds a KVell store; open it with engine=kvell",
                    path.display()
                )));
            }
            Ok(Box::new(Db::open(path, opts)?))
        }
        EngineKind::Kvell => {
            if opts.compaction_filter.get().is_some() {
                return Err(Error::NotSupported(
                    "engine=kvell does not compact: it cannot run a compaction_filter".into(),
                ));
            }
            if opts.ttl_secs > 0 {
                return Err(Error::NotSupported(
                    "engine=kvell keeps no write times: it has no ttl_secs".into(),
                ));
            }
            Ok(Box::new(Kvell::open(path, opts)?))
        }
    }
}
