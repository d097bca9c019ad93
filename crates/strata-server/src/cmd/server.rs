//! Connection and administration commands: PING, AUTH, HELLO, COMMAND,
//! CONFIG, INFO, DBSIZE, FLUSHDB and their kin.

use super::{find, int, upper, wrong_args, Data, Out, Session, COMMANDS, SYNTAX};
use crate::keys;
use crate::resp::Reply;
use std::sync::atomic::Ordering;
use strata::{ScanRange, WriteBatch};

impl Data {
    pub(super) fn ping(&self, _: &mut Session, name: &str, a: &[Vec<u8>]) -> Out {
        match a.len() {
            1 => Ok(Reply::Simple("PONG")),
            2 => Ok(Reply::bulk(a[1].clone())),
            _ => Err(wrong_args(name)),
        }
    }

    pub(super) fn echo(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        Ok(Reply::bulk(a[1].clone()))
    }

    pub(super) fn quit(&self, s: &mut Session, _: &str, _: &[Vec<u8>]) -> Out {
        s.quit = true;
        Ok(Reply::ok())
    }

    pub(super) fn auth(&self, s: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        self.login(s, &a[1..])
    }

    pub(super) fn select(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        match int(&a[1]) {
            Ok(0) => Ok(Reply::ok()),
            Ok(_) => Err(Reply::err("ERR DB index is out of range")),
            Err(e) => Err(e),
        }
    }

    pub(super) fn dbsize(&self, _: &mut Session, _: &str, _: &[Vec<u8>]) -> Out {
        let mut n = 0;
        self.each_meta(|_, _| n += 1)?;
        Ok(Reply::Int(n))
    }

    /// Checks AUTH's arguments (`[password]` or `[user, password]`).
    fn login(&self, s: &mut Session, a: &[Vec<u8>]) -> Out {
        let pass = match a {
            [p] => p,
            [user, p] if user.as_slice() == b"default" => p,
            [_, _] => {
                return Err(Reply::err(
                    "WRONGPASS invalid username-password pair or user is disabled.",
                ))
            }
            _ => return Err(Reply::err(SYNTAX)),
        };
        match &self.requirepass {
            None => Err(Reply::err(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            )),
            Some(p) if p.as_bytes() == pass.as_slice() => {
                s.authenticated = true;
                Ok(Reply::ok())
            }
            Some(_) => Err(Reply::err(
                "WRONGPASS invalid username-password pair or user is disabled.",
            )),
        }
    }

    pub(super) fn hello(&self, s: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let mut i = 1;
        if a.len() > 1 {
            match int(&a[1]) {
                Ok(2) => {}
                Ok(_) => return Err(Reply::err("NOPROTO unsupported protocol version")),
                Err(_) => {
                    return Err(Reply::err(
                        "ERR Protocol version is not an integer or out of range",
                    ))
                }
            }
            i = 2;
        }
        while i < a.len() {
            match upper(&a[i]).as_str() {
                "AUTH" if i + 2 < a.len() => {
                    self.login(s, &a[i + 1..i + 3])?;
                    i += 3;
                }
                "SETNAME" if i + 1 < a.len() => i += 2,
                _ => return Err(Reply::err(SYNTAX)),
            }
        }
        if !s.authenticated {
            return Err(Reply::err(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            ));
        }
        let kv = |k: &str, v: Reply| [Reply::bulk(k), v];
        let mut out = Vec::new();
        out.extend(kv("server", Reply::bulk("redis")));
        out.extend(kv("version", Reply::bulk(crate::REDIS_VERSION)));
        out.extend(kv("proto", Reply::Int(2)));
        out.extend(kv(
            "id",
            Reply::Int(self.connections.load(Ordering::Relaxed) as i64),
        ));
        out.extend(kv("mode", Reply::bulk("standalone")));
        out.extend(kv("role", Reply::bulk("master")));
        out.extend(kv("modules", Reply::Array(vec![])));
        Ok(Reply::Array(out))
    }

    pub(super) fn command(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        let sub = a.get(1).map(|s| upper(s)).unwrap_or_default();
        match sub.as_str() {
            "COUNT" => Ok(Reply::Int(COMMANDS.len() as i64)),
            // redis-cli asks for the docs for its hints; none is fine.
            "DOCS" => Ok(Reply::Array(vec![])),
            "" | "INFO" => {
                let names: Vec<String> = if a.len() > 2 {
                    a[2..].iter().map(|n| upper(n)).collect()
                } else {
                    COMMANDS.iter().map(|c| c.name.to_string()).collect()
                };
                Ok(Reply::Array(
                    names
                        .iter()
                        .map(|n| match find(n) {
                            Some(c) => Reply::Array(vec![
                                Reply::bulk(c.name.to_ascii_lowercase()),
                                Reply::Int(i64::from(c.arity)),
                                Reply::Array(vec![]),
                                Reply::Int(i64::from(!c.admin)),
                                Reply::Int(-1),
                                Reply::Int(1),
                            ]),
                            None => Reply::Nil,
                        })
                        .collect(),
                ))
            }
            _ => Err(Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try COMMAND HELP.",
                String::from_utf8_lossy(&a[1])
            ))),
        }
    }

    pub(super) fn config(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        match a.get(1).map(|s| upper(s)).as_deref() {
            Some("GET") if a.len() >= 3 => {
                let known: [(&str, String); 6] = [
                    ("port", self.port.to_string()),
                    ("databases", "1".into()),
                    ("save", String::new()),
                    ("appendonly", "no".into()),
                    ("maxmemory", "0".into()),
                    ("proto-max-bulk-len", crate::DEFAULT_MAX_BULK.to_string()),
                ];
                let mut out = Vec::new();
                for (k, v) in &known {
                    if a[2..]
                        .iter()
                        .any(|p| keys::glob_match(&p.to_ascii_lowercase(), k.as_bytes()))
                    {
                        out.push(Reply::bulk(*k));
                        out.push(Reply::bulk(v.clone()));
                    }
                }
                Ok(Reply::Array(out))
            }
            Some("SET") | Some("RESETSTAT") | Some("REWRITE") => Ok(Reply::ok()),
            _ => Err(Reply::err(SYNTAX)),
        }
    }

    pub(super) fn info(&self, _: &mut Session, _: &str, _: &[Vec<u8>]) -> Out {
        let (mut keys_n, mut expires) = (0u64, 0u64);
        self.each_meta(|_, m| {
            keys_n += 1;
            expires += u64::from(m.expire_at != 0);
        })?;
        let stats = self.store.stats();
        let mut s = String::new();
        s.push_str("# Server\r\n");
        s.push_str(&format!("redis_version:{}\r\n", crate::REDIS_VERSION));
        s.push_str(&format!("strata_version:{}\r\n", env!("CARGO_PKG_VERSION")));
        s.push_str("redis_mode:standalone\r\n");
        s.push_str(&format!("process_id:{}\r\n", std::process::id()));
        s.push_str(&format!("tcp_port:{}\r\n", self.port));
        s.push_str(&format!(
            "uptime_in_seconds:{}\r\n",
            self.started.elapsed().as_secs()
        ));
        s.push_str(&format!("engine:{}\r\n", self.store.name()));
        s.push_str("\r\n# Clients\r\n");
        s.push_str(&format!(
            "connected_clients:{}\r\n",
            self.connected.load(Ordering::Relaxed)
        ));
        s.push_str("\r\n# Stats\r\n");
        s.push_str(&format!(
            "total_connections_received:{}\r\n",
            self.connections.load(Ordering::Relaxed)
        ));
        s.push_str(&format!(
            "total_commands_processed:{}\r\n",
            self.commands.load(Ordering::Relaxed)
        ));
        s.push_str("\r\n# Keyspace\r\n");
        if keys_n > 0 {
            s.push_str(&format!(
                "db0:keys={keys_n},expires={expires},avg_ttl=0\r\n"
            ));
        }
        s.push_str("\r\n# Strata\r\n");
        s.push_str(&format!(
            "strata_stats:{}\r\n",
            stats.to_json().replace(['\r', '\n'], " ")
        ));
        Ok(Reply::Bulk(s.into_bytes()))
    }

    pub(super) fn flushdb(&self, _: &mut Session, _: &str, a: &[Vec<u8>]) -> Out {
        if a.len() > 2
            || a.get(1)
                .is_some_and(|m| !matches!(upper(m).as_str(), "ASYNC" | "SYNC"))
        {
            return Err(Reply::err(SYNTAX));
        }
        loop {
            let page = self.store.scan(ScanRange::all().limit(4096))?;
            if page.is_empty() {
                break;
            }
            let mut b = WriteBatch::new();
            for (k, _) in page {
                b.delete(k);
            }
            self.write(b)?;
        }
        self.cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(Reply::ok())
    }
}
