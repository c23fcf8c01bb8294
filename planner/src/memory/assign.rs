//! Offset assignment: greedy by an ordering, each buffer at the best-fitting gap among the buffers
//! already placed whose lifetimes overlap its own (their intervals merged first), or past their end.

use super::lifetime::{Lifetime, LifetimeAnalysis};
use crate::graph::ValueId;

/// A buffer to place: one in-place group, its size rounded up to the alignment.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Buffer {
    pub members: Vec<ValueId>,
    pub bytes: u64,
    pub life: Lifetime,
}

pub(super) fn align_up(x: u64, alignment: u64) -> u64 {
    x.div_ceil(alignment) * alignment
}

pub(super) fn buffers(life: &LifetimeAnalysis, alignment: u64) -> Vec<Buffer> {
    life.groups
        .iter()
        .map(|g| Buffer {
            members: g.members.clone(),
            bytes: align_up(g.bytes.max(1), alignment),
            life: g.life,
        })
        .collect()
}

/// Places the buffers in `order`, returning the arena size and each buffer's offset. The buffers
/// already placed are indexed by the steps they live at, so each buffer looks only at those whose
/// lifetime overlaps its own (not at every buffer placed before it).
fn place(buffers: &[Buffer], order: &[usize]) -> (u64, Vec<u64>) {
    let mut offsets = vec![0u64; buffers.len()];
    let steps = buffers.iter().map(|b| b.life.last_step + 1).max().unwrap_or(0);
    let mut live_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
    // `seen[j] == i + 1`: buffer j was already collected for buffer i.
    let mut seen = vec![0usize; buffers.len()];
    let mut busy: Vec<(u64, u64)> = Vec::new();
    let mut arena = 0u64;
    for &i in order {
        let b = &buffers[i];
        busy.clear();
        for bucket in &live_at[b.life.first_step..=b.life.last_step] {
            for &j in bucket {
                if seen[j] != i + 1 {
                    seen[j] = i + 1;
                    busy.push((offsets[j], offsets[j] + buffers[j].bytes));
                }
            }
        }
        busy.sort_unstable();
        // Walk the merged busy intervals; every gap between them is a candidate.
        let (mut best, mut cursor) = (None::<(u64, u64)>, 0u64);
        for &(start, end) in &busy {
            if start > cursor {
                let gap = start - cursor;
                if gap >= b.bytes && best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, cursor));
                }
            }
            cursor = cursor.max(end);
        }
        let offset = best.map_or(cursor, |(_, at)| at);
        offsets[i] = offset;
        arena = arena.max(offset + b.bytes);
        for bucket in &mut live_at[b.life.first_step..=b.life.last_step] {
            bucket.push(i);
        }
    }
    (arena, offsets)
}

/// Tries the orderings by decreasing size, by decreasing lifetime length and by first use, and
/// keeps the smallest arena (XLA's heap simulator does the same).
pub(super) fn best_of_orderings(buffers: &[Buffer]) -> (u64, Vec<u64>) {
    let idx: Vec<usize> = (0..buffers.len()).collect();
    let len = |b: &Buffer| b.life.last_step - b.life.first_step;
    let mut by_size = idx.clone();
    by_size.sort_by_key(|&i| (std::cmp::Reverse(buffers[i].bytes), buffers[i].life.first_step));
    let mut by_life = idx.clone();
    by_life.sort_by_key(|&i| (std::cmp::Reverse(len(&buffers[i])), std::cmp::Reverse(buffers[i].bytes)));
    let mut by_first = idx;
    by_first.sort_by_key(|&i| (buffers[i].life.first_step, std::cmp::Reverse(buffers[i].bytes)));
    [by_size, by_life, by_first]
        .iter()
        .map(|o| place(buffers, o))
        .min_by_key(|(arena, _)| *arena)
        .unwrap_or((0, vec![0; buffers.len()]))
}
