//! Harnesses for the server's decoders of untrusted bytes: RESP requests
//! (multibulk and inline), glob patterns, and the metadata records it
//! stores. Shared by the fuzz targets (`fuzz/`) and the seed replay
//! (`tests/fuzz_corpus.rs`). Each must return and never panic; the
//! properties they check fail with `assert!` (a fuzzer's crash report), in
//! release builds too. Each returns how many items it decoded.

use crate::keys::{glob_match, Meta};
use crate::resp::{parse, Limits};

/// Limits small enough that a fuzzer meets them, large enough that any
/// inline request within them re-encodes as a multibulk one within them.
const LIMITS: Limits = Limits {
    max_bulk_len: 1 << 16,
    max_multibulk_len: 1 << 16,
    max_inline_len: 1 << 16,
};

/// `args` as a multibulk request.
fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Parses `data` as a stream of requests until it ends, is incomplete or
/// is refused. Every request takes at least one byte and no more than are
/// left, and re-encoded as a multibulk request it parses back whole to the
/// same arguments.
pub fn resp(data: &[u8]) -> usize {
    let mut rest = data;
    let mut n = 0;
    while let Ok(Some((args, used))) = parse(rest, &LIMITS) {
        assert!(
            used > 0 && used <= rest.len(),
            "a request of {used} bytes in {} left",
            rest.len()
        );
        let again = multibulk(&args);
        match parse(&again, &LIMITS) {
            Ok(Some((back, u))) => {
                assert_eq!(back, args, "a request does not re-encode to itself");
                assert_eq!(u, again.len());
            }
            other => panic!("a re-encoded request does not parse: {other:?}"),
        }
        rest = &rest[used..];
        n += 1;
    }
    n
}

/// Splits `data` at its first zero byte into a pattern and a subject and
/// matches them. Every subject matches `*` and itself with every byte
/// escaped.
pub fn glob(data: &[u8]) -> usize {
    let (pat, subject) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let matched = glob_match(pat, subject);
    assert!(glob_match(b"*", subject), "`*` does not match a subject");
    let escaped: Vec<u8> = subject.iter().flat_map(|&b| [b'\\', b]).collect();
    assert!(
        glob_match(&escaped, subject),
        "an escaped subject does not match itself"
    );
    usize::from(matched)
}

/// Decodes `data` as a key's metadata record; one that decodes encodes back
/// to the same bytes.
pub fn meta(data: &[u8]) -> usize {
    match Meta::decode(data) {
        Some(m) => {
            assert_eq!(m.encode(), data, "a metadata record does not re-encode");
            1
        }
        None => 0,
    }
}
