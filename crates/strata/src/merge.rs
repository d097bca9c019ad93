//! Merge operators: how a key's merge operands fold into a value.
//!
//! [`Db::merge`](crate::Db::merge) writes an *operand* instead of a value.
//! A read folds the operands of a key, oldest first, onto the newest value
//! below them (or onto nothing, when a deletion or the end of the key's
//! history comes first) with [`MergeOperator::full_merge`]. Flushes and
//! compactions fold what no snapshot needs apart the same way, and combine
//! operands with no base in reach with [`MergeOperator::partial_merge`].
//! The result must not depend on where the fold happens: the operator must
//! be *associative* (`partial_merge(a, b)` then `c` folds as `a` then
//! `partial_merge(b, c)`), and deterministic. It need not be commutative:
//! operands always fold in write order.
//!
//! The built-ins cover the common cases: [`U64Add`] (counters, RocksDB's
//! `uint64add` encoding), [`Append`] (lists with a separator) and [`Max`].
//! A database keeps no record of its operator: open it with the one it was
//! written with (a read that meets an operand without one fails with
//! [`Error::Merge`](crate::Error::Merge)).

use std::fmt;
use std::sync::Arc;

/// Why a fold failed; reads return it as [`Error::Merge`](crate::Error::Merge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(pub String);

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user-supplied fold of merge operands; see the module doc for the laws
/// it must keep. Implementations are called from reads, flushes and
/// compactions on any thread, and must not panic (a panic in a compaction
/// poisons the database).
pub trait MergeOperator: Send + Sync {
    /// A stable name (the C ABI and the CLI choose built-ins by it).
    fn name(&self) -> &str;

    /// The value of `key` after `operands` (oldest first, at least one) are
    /// applied to `base` (`None`: the key had no value).
    fn full_merge(
        &self,
        key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeError>;

    /// One operand equivalent to applying `older` then `newer`, or `None`
    /// when the operator cannot combine them without a base (both are then
    /// kept). The default combines nothing.
    fn partial_merge(&self, _key: &[u8], _older: &[u8], _newer: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

impl fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MergeOperator({})", self.name())
    }
}

/// Unsigned 64-bit counters: values and operands are 8 bytes, little
/// endian (RocksDB's `uint64add` encoding); the sum wraps. A value or
/// operand of another length fails the fold.
#[derive(Debug, Clone, Copy, Default)]
pub struct U64Add;

impl U64Add {
    /// The operand or value encoding of `n`.
    pub fn encode(n: u64) -> [u8; 8] {
        n.to_le_bytes()
    }

    /// The number `v` encodes.
    pub fn decode(v: &[u8]) -> Result<u64, MergeError> {
        let b: [u8; 8] = v.try_into().map_err(|_| {
            MergeError(format!(
                "u64add: a value or operand of {} bytes (8 expected)",
                v.len()
            ))
        })?;
        Ok(u64::from_le_bytes(b))
    }
}

impl MergeOperator for U64Add {
    fn name(&self) -> &str {
        "u64add"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeError> {
        let mut sum = base.map_or(Ok(0), Self::decode)?;
        for op in operands {
            sum = sum.wrapping_add(Self::decode(op)?);
        }
        Ok(Self::encode(sum).to_vec())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let sum = Self::decode(older)
            .ok()?
            .wrapping_add(Self::decode(newer).ok()?);
        Some(Self::encode(sum).to_vec())
    }
}

/// Concatenation: each operand is appended to the value, with `separator`
/// between two parts (none before the first).
#[derive(Debug, Clone)]
pub struct Append {
    separator: Vec<u8>,
    /// What [`builtin`] reads back: `append`, `append:SEP` for a
    /// separator of printable ASCII other than `,`, else `append-hex:HEX`.
    name: String,
}

impl Append {
    /// Appends joined by `separator`.
    pub fn new(separator: impl Into<Vec<u8>>) -> Self {
        let separator = separator.into();
        let plain = separator.iter().all(|b| b.is_ascii_graphic() && *b != b',');
        let name = if separator.is_empty() {
            "append".to_string()
        } else if plain {
            format!("append:{}", String::from_utf8_lossy(&separator))
        } else {
            let hex: String = separator.iter().map(|b| format!("{b:02x}")).collect();
            format!("append-hex:{hex}")
        };
        Append { separator, name }
    }
}

impl Default for Append {
    fn default() -> Self {
        Append::new(Vec::new())
    }
}

impl MergeOperator for Append {
    fn name(&self) -> &str {
        &self.name
    }

    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeError> {
        let parts = base.into_iter().chain(operands.iter().copied());
        let mut out = Vec::new();
        for (i, p) in parts.enumerate() {
            if i > 0 {
                out.extend_from_slice(&self.separator);
            }
            out.extend_from_slice(p);
        }
        Ok(out)
    }

    fn partial_merge(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        self.full_merge(key, Some(older), &[newer]).ok()
    }
}

/// The bytewise largest of the value and the operands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Max;

impl MergeOperator for Max {
    fn name(&self) -> &str {
        "max"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeError> {
        let parts = base.into_iter().chain(operands.iter().copied());
        Ok(parts.max().unwrap_or_default().to_vec())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        Some(older.max(newer).to_vec())
    }
}

/// The built-in operator `spec` names: `u64add`, `max`, or `append`
/// (`append:SEP` appends with the separator `SEP`, `append-hex:HEX` with
/// the bytes `HEX` spells; plain `append` with none). `None` for any other
/// name.
pub fn builtin(spec: &str) -> Option<Arc<dyn MergeOperator>> {
    match spec.split_once(':') {
        Some(("append", sep)) => Some(Arc::new(Append::new(sep.as_bytes()))),
        Some(("append-hex", hex)) => {
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect::<Option<Vec<u8>>>()?;
            (hex.len() % 2 == 0).then(|| Arc::new(Append::new(bytes)) as Arc<dyn MergeOperator>)
        }
        Some(_) => None,
        None => match spec {
            "u64add" => Some(Arc::new(U64Add)),
            "max" => Some(Arc::new(Max)),
            "append" => Some(Arc::new(Append::default())),
            _ => None,
        },
    }
}

/// `operands` (oldest first) folded onto `base` by `op`: a read's fold.
/// `Error::Merge` without an operator or when it refuses.
pub(crate) fn fold(
    op: Option<&Arc<dyn MergeOperator>>,
    key: &[u8],
    base: Option<&[u8]>,
    operands: &[&[u8]],
) -> crate::error::Result<Vec<u8>> {
    let op = op.ok_or_else(|| {
        crate::Error::Merge("a merge operand was read, but no merge_operator is set".into())
    })?;
    op.full_merge(key, base, operands)
        .map_err(|e| crate::Error::Merge(e.to_string()))
}

/// The option `merge_operator`: no operator, or one (a built-in or the
/// caller's). Prints as the operator's name (`none` without one); reads
/// back the built-ins' names ([`builtin`]).
#[derive(Clone, Default)]
pub struct MergeOp(Option<Arc<dyn MergeOperator>>);

impl MergeOp {
    /// No operator: merges are refused.
    pub fn none() -> Self {
        MergeOp(None)
    }

    /// The operator `op`.
    pub fn new(op: impl MergeOperator + 'static) -> Self {
        MergeOp(Some(Arc::new(op)))
    }

    /// The operator, if one is set.
    pub fn get(&self) -> Option<&Arc<dyn MergeOperator>> {
        self.0.as_ref()
    }
}

impl From<Arc<dyn MergeOperator>> for MergeOp {
    fn from(op: Arc<dyn MergeOperator>) -> Self {
        MergeOp(Some(op))
    }
}

impl fmt::Debug for MergeOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_ref().map_or("none", |o| o.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `partial_merge` agrees with folding the operands one by one, for
    /// every split of `ops`.
    fn associative(op: &dyn MergeOperator, base: Option<&[u8]>, ops: &[&[u8]]) {
        let whole = op.full_merge(b"k", base, ops).unwrap();
        for i in 1..ops.len() {
            if let Some(p) = op.partial_merge(b"k", ops[i - 1], ops[i]) {
                let mut folded: Vec<&[u8]> = ops[..i - 1].to_vec();
                folded.push(&p);
                folded.extend_from_slice(&ops[i + 1..]);
                assert_eq!(op.full_merge(b"k", base, &folded).unwrap(), whole);
            }
        }
    }

    #[test]
    fn u64add_sums_little_endian_and_wraps() {
        let ops = [
            U64Add::encode(5),
            U64Add::encode(7),
            U64Add::encode(u64::MAX),
        ];
        let ops: Vec<&[u8]> = ops.iter().map(|o| o.as_slice()).collect();
        let base = U64Add::encode(1);
        let v = U64Add.full_merge(b"k", Some(&base), &ops).unwrap();
        assert_eq!(U64Add::decode(&v).unwrap(), 12);
        assert_eq!(
            U64Add::decode(&U64Add.full_merge(b"k", None, &ops[..2]).unwrap()).unwrap(),
            12
        );
        associative(&U64Add, Some(&base), &ops);
        let bad = U64Add.full_merge(b"k", Some(b"abc"), &ops).unwrap_err();
        assert!(bad.0.contains("3 bytes"), "{bad}");
        assert!(U64Add.partial_merge(b"k", b"abc", ops[0]).is_none());
    }

    #[test]
    fn append_keeps_write_order_and_separates_parts() {
        let op = Append::new(",");
        assert_eq!(op.full_merge(b"k", None, &[b"a", b"b"]).unwrap(), b"a,b");
        assert_eq!(op.full_merge(b"k", Some(b"x"), &[b"a"]).unwrap(), b"x,a");
        assert_eq!(op.full_merge(b"k", Some(b""), &[b"a"]).unwrap(), b",a");
        associative(&op, Some(b"x"), &[b"a", b"b", b"c"]);
        associative(&op, None, &[b"a", b"", b"c"]);
    }

    #[test]
    fn max_takes_the_bytewise_largest() {
        assert_eq!(
            Max.full_merge(b"k", Some(b"b"), &[b"a", b"c", b"bb"])
                .unwrap(),
            b"c"
        );
        assert_eq!(Max.full_merge(b"k", None, &[b"a"]).unwrap(), b"a");
        associative(&Max, Some(b"b"), &[b"a", b"c", b"bb"]);
    }

    #[test]
    fn builtins_are_found_by_name() {
        assert_eq!(builtin("u64add").unwrap().name(), "u64add");
        assert_eq!(builtin("max").unwrap().name(), "max");
        let app = builtin("append:|").unwrap();
        assert_eq!(app.full_merge(b"k", Some(b"a"), &[b"b"]).unwrap(), b"a|b");
        assert_eq!(
            builtin("append")
                .unwrap()
                .full_merge(b"k", Some(b"a"), &[b"b"])
                .unwrap(),
            b"ab"
        );
        assert_eq!(builtin("append:|").unwrap().name(), "append:|");
        assert_eq!(builtin("append").unwrap().name(), "append");
        for sep in [&b","[..], b" ", b"\x00\xff", b"::"] {
            let name = Append::new(sep).name().to_string();
            let back = builtin(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                back.full_merge(b"k", Some(b"a"), &[b"b"]).unwrap(),
                [b"a", sep, b"b"].concat()
            );
            assert!(!name.contains(','), "{name}");
        }
        assert!(builtin("append-hex:2").is_none());
        assert!(builtin("append-hex:zz").is_none());
        assert!(builtin("sum").is_none());
        assert!(builtin("max:x").is_none());
    }
}
