//! The memory budget: how many bytes one run may hold, by default a fraction of the machine's
//! memory, and the `--max-memory` spelling of a size.
//!
//! The CPU reference checks it before computing each node's output and after storing it
//! ([`crate::reference::Limits::max_total_bytes`]); a GPU session checks every device allocation
//! it makes against it ([`crate::SessionOptions::max_memory`]).

use std::sync::OnceLock;

/// Share of the machine's memory a run may use by default: three quarters, leaving room for the
/// process itself, the model as loaded, and whatever else runs beside it.
const DEFAULT_SHARE: (u64, u64) = (3, 4);

/// The budget when the machine's memory cannot be read: 32 GiB.
const FALLBACK: u64 = 32 << 30;

/// The default budget: three quarters of [`physical_memory`] (or of the container's limit, when
/// lower), 32 GiB where neither can be read. Read once per process.
pub fn default_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| physical_memory().map_or(FALLBACK, |m| m / DEFAULT_SHARE.1 * DEFAULT_SHARE.0))
}

/// The memory this process can have: the machine's (`MemTotal` of `/proc/meminfo`), or the
/// cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when that is lower. `None` off
/// Linux or when neither can be read.
pub fn physical_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| meminfo_total(&s));
    let cgroup = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok()));
    match (total, cgroup) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, c) => t.or(c),
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// A size as users write it: bytes (`1048576`), or a number with a binary unit `K`, `M`, `G`,
/// `T` (optionally `KiB`, `MB`, ...; every unit is a power of 1024), fractions allowed (`1.5G`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        other => return Err(format!("`{text}`: unknown unit `{other}` (use K, M, G or T)")),
    };
    let value: f64 = num.parse().map_err(|_| format!("`{text}` is not a size (e.g. 512M, 8G)"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}`: a size must be at least one byte and below 16 EiB"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size(" 2 KB "), Ok(2048));
        for bad in ["", "G", "-1G", "0", "12Q", "1e3", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn meminfo_reads_the_total() {
        let text = "MemTotal:       24683664 kB\nMemFree:        18000000 kB\n";
        assert_eq!(meminfo_total(text), Some(24683664 * 1024));
        assert_eq!(meminfo_total("nothing"), None);
    }

    #[test]
    fn the_default_is_a_share_of_the_machine() {
        let budget = default_budget();
        match physical_memory() {
            Some(m) => assert!(budget < m && budget >= m / 2, "{budget} of {m}"),
            None => assert_eq!(budget, FALLBACK),
        }
    }
}
