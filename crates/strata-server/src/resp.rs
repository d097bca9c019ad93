//! RESP2: an incremental request parser (multibulk and inline) with limits,
//! and reply encoding.

use std::fmt;

/// Limits on what one client may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string ($len), as Redis' `proto-max-bulk-len`.
    pub max_bulk_len: usize,
    /// Most elements of one multibulk request.
    pub max_multibulk_len: usize,
    /// Longest inline command line.
    pub max_inline_len: usize,
}

/// A request the client can never complete: reply with `-ERR Protocol
/// error: ...` and close the connection (as Redis does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| p + from)
}

fn parse_int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// A parsed request and its length in bytes, or None if incomplete.
pub type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, ProtocolError>;

/// Parses one request from the front of `buf`. `Ok(None)`: incomplete, read
/// more. `Ok(Some((args, used)))`: a request of `used` bytes (an empty
/// `args` is an empty line to skip).
pub fn parse(buf: &[u8], lim: &Limits) -> Parsed {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] != b'*' {
        return parse_inline(buf, lim);
    }
    let Some(eol) = find_crlf(buf, 1) else {
        if buf.len() > 64 * 1024 {
            return Err(ProtocolError("too big mbulk count string".into()));
        }
        return Ok(None);
    };
    let n = parse_int(&buf[1..eol])
        .filter(|n| *n <= lim.max_multibulk_len as i64)
        .ok_or_else(|| ProtocolError("invalid multibulk length".into()))?;
    let mut pos = eol + 2;
    if n <= 0 {
        return Ok(Some((Vec::new(), pos)));
    }
    // Never trust the count for an allocation.
    let mut args = Vec::with_capacity((n as usize).min(1024));
    for _ in 0..n {
        if pos >= buf.len() {
            return Ok(None);
        }
        if buf[pos] != b'$' {
            return Err(ProtocolError(format!(
                "expected '$', got '{}'",
                char::from(buf[pos]).escape_default()
            )));
        }
        let Some(eol) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > 64 * 1024 {
                return Err(ProtocolError("too big bulk count string".into()));
            }
            return Ok(None);
        };
        let len = parse_int(&buf[pos + 1..eol])
            .filter(|l| *l >= 0 && *l as u64 <= lim.max_bulk_len as u64)
            .ok_or_else(|| ProtocolError("invalid bulk length".into()))? as usize;
        let start = eol + 2;
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError("bulk string not terminated by CRLF".into()));
        }
        args.push(buf[start..end].to_vec());
        pos = end + 2;
    }
    Ok(Some((args, pos)))
}

/// Bytes the parser needs buffered at most to finish the request at the
/// front of `buf` is bounded by the limits; this is the cap a connection
/// enforces on its input buffer.
pub fn max_request_bytes(lim: &Limits) -> usize {
    lim.max_bulk_len
        .saturating_add(64 * 1024)
        .max(lim.max_inline_len)
}

fn parse_inline(buf: &[u8], lim: &Limits) -> Parsed {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > lim.max_inline_len {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    if nl > lim.max_inline_len {
        return Err(ProtocolError("too big inline request".into()));
    }
    let mut line = &buf[..nl];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    let args =
        split_args(line).ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))?;
    Ok(Some((args, nl + 1)))
}

/// Splits an inline command like Redis' `sdssplitargs`: blanks separate
/// arguments; "double quotes" (with \n \r \t \\ \" \xHH escapes) and
/// 'single quotes' group them.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let mut cur = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    let c = *line.get(i)?;
                    i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let e = *line.get(i)?;
                            i += 1;
                            match e {
                                b'n' => cur.push(b'\n'),
                                b'r' => cur.push(b'\r'),
                                b't' => cur.push(b'\t'),
                                b'a' => cur.push(7),
                                b'b' => cur.push(8),
                                b'x' => {
                                    let h = line.get(i..i + 2)?;
                                    let v = std::str::from_utf8(h)
                                        .ok()
                                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                                    match v {
                                        Some(v) => {
                                            cur.push(v);
                                            i += 2;
                                        }
                                        None => cur.push(b'x'),
                                    }
                                }
                                other => cur.push(other),
                            }
                        }
                        other => cur.push(other),
                    }
                }
                if i < line.len() && !line[i].is_ascii_whitespace() {
                    return None;
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let c = *line.get(i)?;
                    i += 1;
                    match c {
                        b'\'' => break,
                        b'\\' if line.get(i) == Some(&b'\'') => {
                            cur.push(b'\'');
                            i += 1;
                        }
                        other => cur.push(other),
                    }
                }
                if i < line.len() && !line[i].is_ascii_whitespace() {
                    return None;
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    cur.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(cur);
    }
    Some(args)
}

/// A reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(&'static str),
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    NilArray,
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple("OK")
    }
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
    pub fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(b.into())
    }
    pub fn opt(b: Option<Vec<u8>>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Reply::Bulk(b) => {
                line(out, b'$', b.len().to_string().as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for i in items {
                    i.encode(out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    // Simple strings and errors must not contain CR or LF.
    out.extend(
        body.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits {
        max_bulk_len: 16,
        max_multibulk_len: 4,
        max_inline_len: 32,
    };

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_incremental() {
        let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for cut in 0..req.len() {
            assert_eq!(parse(&req[..cut], &LIM), Ok(None), "cut {cut}");
        }
        assert_eq!(parse(req, &LIM), Ok(Some((args(&["GET", "k"]), req.len()))));
    }

    #[test]
    fn limits_and_garbage() {
        assert!(parse(b"*5\r\n", &LIM).is_err());
        assert!(parse(b"*x\r\n", &LIM).is_err());
        assert!(parse(b"*1\r\n$17\r\n", &LIM).is_err());
        assert!(parse(b"*1\r\n$-3\r\n", &LIM).is_err());
        assert!(parse(b"*1\r\n:3\r\n", &LIM).is_err());
        assert!(parse(b"*1\r\n$1\r\nabc", &LIM).is_err());
        assert!(parse(&[b'a'; 40], &LIM).is_err());
        assert_eq!(parse(b"*0\r\n", &LIM), Ok(Some((vec![], 4))));
    }

    #[test]
    fn inline() {
        assert_eq!(
            parse(b"set k \"a b\\x41\" 'c d'\r\nrest", &LIM),
            Ok(Some((args(&["set", "k", "a bA", "c d"]), 23)))
        );
        assert_eq!(parse(b"\r\n", &LIM), Ok(Some((vec![], 2))));
        assert!(parse(b"get \"k\n", &LIM).is_err());
    }

    #[test]
    fn encode() {
        let mut out = Vec::new();
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Nil,
            Reply::bulk("x"),
            Reply::err("ERR a\nb"),
        ])
        .encode(&mut out);
        assert_eq!(out, b"*4\r\n:1\r\n$-1\r\n$1\r\nx\r\n-ERR a b\r\n");
    }
}
