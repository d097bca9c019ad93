//! Every command the server knows, in one table: its name, its Redis
//! arity, whether it touches data, and the method that runs it.

use super::{Data, Out, Session};

/// Runs a command: the server's data, the connection's session, the
/// command's name as listed, and every argument (`a[0]` the name as sent).
pub(super) type Handler = fn(&Data, &mut Session, &str, &[Vec<u8>]) -> Out;

/// One row of the table.
pub(super) struct Command {
    pub(super) name: &'static str,
    /// Redis arity: `n` exactly `n` arguments (the name included), `-n` at
    /// least `n`.
    pub(super) arity: i32,
    /// Touches no data (COMMAND INFO reports it so).
    pub(super) admin: bool,
    pub(super) run: Handler,
}

/// A row that touches no data.
const ADMIN: bool = true;
/// A row that reads or writes keys.
const DATA: bool = false;

const fn row(name: &'static str, arity: i32, admin: bool, run: Handler) -> Command {
    Command {
        name,
        arity,
        admin,
        run,
    }
}

/// Every command, in the order COMMAND lists them.
pub(super) const COMMANDS: &[Command] = &[
    row("PING", -1, ADMIN, Data::ping),
    row("ECHO", 2, ADMIN, Data::echo),
    row("AUTH", -2, ADMIN, Data::auth),
    row("SELECT", 2, ADMIN, Data::select),
    row("QUIT", -1, ADMIN, Data::quit),
    row("HELLO", -1, ADMIN, Data::hello),
    row("COMMAND", -1, ADMIN, Data::command),
    row("CONFIG", -2, ADMIN, Data::config),
    row("INFO", -1, ADMIN, Data::info),
    row("DBSIZE", 1, ADMIN, Data::dbsize),
    row("FLUSHDB", -1, ADMIN, Data::flushdb),
    row("FLUSHALL", -1, ADMIN, Data::flushdb),
    row("GET", 2, DATA, Data::get),
    row("SET", -3, DATA, Data::set),
    row("SETNX", 3, DATA, Data::setnx),
    row("GETSET", 3, DATA, Data::getset),
    row("MGET", -2, DATA, Data::mget),
    row("MSET", -3, DATA, Data::mset),
    row("DEL", -2, DATA, Data::del),
    row("UNLINK", -2, DATA, Data::del),
    row("EXISTS", -2, DATA, Data::exists),
    row("TYPE", 2, DATA, Data::type_of),
    row("INCR", 2, DATA, Data::incr),
    row("DECR", 2, DATA, Data::decr),
    row("INCRBY", 3, DATA, Data::incrby),
    row("DECRBY", 3, DATA, Data::decrby),
    row("APPEND", 3, DATA, Data::append),
    row("STRLEN", 2, DATA, Data::strlen),
    row("EXPIRE", -3, DATA, Data::expire),
    row("PEXPIRE", -3, DATA, Data::expire),
    row("TTL", 2, DATA, Data::ttl),
    row("PTTL", 2, DATA, Data::ttl),
    row("PERSIST", 2, DATA, Data::persist),
    row("SCAN", -2, DATA, Data::scan),
    row("HSET", -4, DATA, Data::hset),
    row("HMSET", -4, DATA, Data::hset),
    row("HGET", 3, DATA, Data::hget),
    row("HMGET", -3, DATA, Data::hmget),
    row("HGETALL", 2, DATA, Data::hgetall),
    row("HDEL", -3, DATA, Data::hdel),
    row("HLEN", 2, DATA, Data::hlen),
    row("HEXISTS", 3, DATA, Data::hexists),
    row("ZADD", -4, DATA, Data::zadd),
    row("ZREM", -3, DATA, Data::zrem),
    row("ZSCORE", 3, DATA, Data::zscore),
    row("ZCARD", 2, DATA, Data::zcard),
    row("ZRANGE", -4, DATA, Data::zrange),
    row("ZRANGEBYSCORE", -4, DATA, Data::zrangebyscore),
    row("ZREMRANGEBYSCORE", 4, DATA, Data::zremrangebyscore),
];

/// The command named `name` (upper case).
pub(super) fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}
