//! How much memory this process may use: physical memory, capped by the
//! memory cgroup it runs in.

/// Physical memory, capped by the cgroup (v2 `memory.max`, v1
/// `memory.limit_in_bytes`) this process runs in; `None` when unknown.
pub fn memory_limit() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())?
        .checked_mul(1024)?;
    Some(cgroup_limit().map_or(total, |c| c.min(total)))
}

fn cgroup_limit() -> Option<u64> {
    // Inside a cgroup namespace the process's own cgroup is the root of
    // the mounted hierarchy.
    let at_root = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
    .min();
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own: Option<u64> = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let file = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        } else {
            return None;
        };
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    });
    match (own, at_root) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
