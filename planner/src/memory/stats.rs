//! Memory statistics of a plan, as `inspect --memory` and the session report them.

use serde::{Deserialize, Serialize};

use super::assign::Buffer;
use super::lifetime::LifetimeAnalysis;

/// How good a memory plan is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Arena size.
    pub arena_bytes: u64,
    /// Maximum over steps of the (aligned) bytes of buffers live at that step: no placement of
    /// these buffers can use less.
    pub lower_bound_bytes: u64,
    /// One (aligned) buffer per value, no reuse at all.
    pub naive_bytes: u64,
    /// `1 - lower_bound / arena`: the share of the arena lost to placement.
    pub fragmentation: f64,
    /// Largest contiguous free block of the arena at the peak step.
    pub largest_free_block_bytes: u64,
    /// Step at which the live bytes peak.
    pub peak_step: usize,
    /// Buffers placed (at least partly) in memory a buffer that died earlier had used.
    pub reuse_count: usize,
    /// Values written in place over a dying input.
    pub in_place_count: usize,
    /// Values planned in the arena.
    pub arena_values: usize,
    /// Values of data-dependent size (dynamic region).
    pub dynamic_values: usize,
}

pub(super) fn compute(
    buffers: &[Buffer],
    offsets: &[u64],
    arena: u64,
    life: &LifetimeAnalysis,
    alignment: u64,
) -> MemoryStats {
    let steps = life.order.len();
    let mut live = vec![0u64; steps.max(1)];
    for b in buffers {
        let last = b.life.last_step.min(steps.saturating_sub(1));
        for bytes in live.iter_mut().take(last + 1).skip(b.life.first_step) {
            *bytes += b.bytes;
        }
    }
    let (peak_step, lower) =
        live.iter().copied().enumerate().max_by_key(|&(s, v)| (v, std::cmp::Reverse(s))).unwrap_or((0, 0));
    let naive: u64 = life
        .bytes
        .iter()
        .zip(&life.lifetimes)
        .filter(|(_, l)| l.is_some())
        .filter_map(|(b, _)| *b)
        .map(|b| super::assign::align_up(b.max(1), alignment))
        .sum();
    let mut busy: Vec<(u64, u64)> = buffers
        .iter()
        .zip(offsets)
        .filter(|(b, _)| b.life.first_step <= peak_step && peak_step <= b.life.last_step)
        .map(|(b, &o)| (o, o + b.bytes))
        .collect();
    busy.sort_unstable();
    let (mut cursor, mut largest) = (0u64, 0u64);
    for (s, e) in busy {
        largest = largest.max(s.saturating_sub(cursor));
        cursor = cursor.max(e);
    }
    largest = largest.max(arena.saturating_sub(cursor));
    let reuse_count = buffers
        .iter()
        .zip(offsets)
        .filter(|&(b, &o)| {
            buffers
                .iter()
                .zip(offsets)
                .any(|(a, &p)| a.life.last_step < b.life.first_step && p < o + b.bytes && o < p + a.bytes)
        })
        .count();
    MemoryStats {
        arena_bytes: arena,
        lower_bound_bytes: lower,
        naive_bytes: naive,
        fragmentation: if arena == 0 { 0.0 } else { 1.0 - lower as f64 / arena as f64 },
        largest_free_block_bytes: largest,
        peak_step,
        reuse_count,
        in_place_count: life.in_place.len(),
        arena_values: life.lifetimes.iter().filter(|l| l.is_some()).count(),
        dynamic_values: life.dynamic.len(),
    }
}
