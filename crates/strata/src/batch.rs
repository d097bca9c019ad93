//! WriteBatch (being written).
