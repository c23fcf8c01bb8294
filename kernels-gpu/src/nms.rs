//! ONNX NonMaxSuppression in two launches, which the session runs between the stages of a graph
//! (its output length depends on the data): `nms_select` keeps each (batch, class)'s boxes and
//! counts them; the session reads the counts back, places the output, and `nms_write` lays out its
//! `(batch, class, box)` rows.

use crate::abi::{NMS_MAX_BOXES, NMS_THREADS, NmsParams, TopKParams, scalar};
use crate::intrinsics::{
    block_dim_x, block_idx_x, dynamic_shared_ptr, grid_dim_x, sync_threads, sync_threads_or, thread_idx_x,
    trap,
};
use crate::select::{bitonic_sort, top_k_key};

/// Box `i` of batch entry `b` as `(y1, x1, y2, x2)` with `y1 <= y2`, `x1 <= x2` (the reference's
/// corner form).
///
/// # Safety
/// `boxes` holds `(batch, n, 4)` f32 and `(b, i)` is inside.
#[inline(always)]
unsafe fn corners(p: &NmsParams, boxes: *const f32, b: u64, i: u64) -> [f32; 4] {
    // SAFETY: the caller's contract.
    let v = unsafe { core::array::from_fn::<f32, 4, _>(|k| *boxes.add(((b * p.n + i) * 4) as usize + k)) };
    if p.center_point_box != 0 {
        let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
        [v[1] - hh, v[0] - hw, v[1] + hh, v[0] + hw]
    } else {
        [v[0].min(v[2]), v[1].min(v[3]), v[0].max(v[2]), v[1].max(v[3])]
    }
}

/// Intersection over union of two corner-form boxes (0 for degenerate ones), as the reference.
#[inline(always)]
fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let h = a[2].min(b[2]) - a[0].max(b[0]);
    let w = a[3].min(b[3]) - a[1].max(b[1]);
    if h <= 0.0 || w <= 0.0 {
        return 0.0;
    }
    let inter = h * w;
    let area = |c: [f32; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let union = area(a) + area(b) - inter;
    if area(a) <= 0.0 || area(b) <= 0.0 || union <= 0.0 { 0.0 } else { inter / union }
}

/// The kept boxes of each (batch, class): candidates (score above `score_threshold` when given)
/// in descending score order (ties: lower index first) are kept unless a box already kept
/// overlaps them with IoU above `iou_threshold` (0 when not given), up to
/// `max_output_boxes_per_class` (0 when not given). Box indices to `slots[(b, c), k]` (u32, `n` per
/// (batch, class)), counts to `counts[(b, c)]` (i64).
///
/// # Safety
/// `boxes` holds `(batch, n, 4)` f32, `scores` `(batch, classes, n)` f32; `max_out` (i64),
/// `iou_threshold` and `score_threshold` (f32) are null or hold one value; `slots` holds
/// `batch * classes * n` u32 and `counts` `batch * classes` i64. `p.n <= p.padded <=
/// NMS_MAX_BOXES`, `p.padded` a power of two; `12 * p.padded` bytes of dynamic shared memory.
///
/// # Parameters
/// `p`; the boxes, the scores, the three optional scalars; outputs `slots` and `counts`.
///
/// # Thread mapping
/// 1-D grid of `NMS_THREADS`-thread blocks, any count: each block strides over the (batch, class)
/// pairs; it sorts the scores' keys in shared memory (bitonic), then walks the candidates in
/// order, its threads testing the candidate against the kept boxes in parallel (one barrier that
/// ORs their verdicts per candidate).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn nms_select(
    p: NmsParams,
    boxes: *const f32,
    scores: *const f32,
    max_out: *const i64,
    iou_threshold: *const f32,
    score_threshold: *const f32,
    slots: *mut u32,
    counts: *mut i64,
) {
    let padded = p.padded as u64;
    if block_dim_x() != NMS_THREADS || !padded.is_power_of_two() || padded > NMS_MAX_BOXES || p.n > padded {
        trap();
    }
    // SAFETY: the scalars are null or hold one value (the contract).
    let (limit, iou_max, floor) = unsafe {
        (
            if max_out.is_null() { 0 } else { (*max_out).clamp(0, p.n as i64) as u64 },
            if iou_threshold.is_null() { 0.0 } else { *iou_threshold },
            if score_threshold.is_null() { None } else { Some(*score_threshold) },
        )
    };
    let keys = dynamic_shared_ptr().cast::<u64>();
    // SAFETY: the shared memory holds `padded` keys, then `padded` u32 of kept indices.
    let kept = unsafe { keys.add(padded as usize) }.cast::<u32>();
    let order = TopKParams { largest: 1, dtype: scalar::F32, ..TopKParams::default() };
    let t = thread_idx_x() as u64;
    let mut bc = block_idx_x() as u64;
    while bc < p.batch * p.classes {
        let b = bc / p.classes;
        let mut j = t;
        while j < padded {
            let key = if j < p.n {
                // SAFETY: (b, c, j) inside the scores.
                let s = unsafe { *scores.add((bc * p.n + j) as usize) };
                if floor.is_none_or(|f| s > f) { top_k_key(&order, s.to_bits(), j as u32) } else { u64::MAX }
            } else {
                u64::MAX
            };
            // SAFETY: j < padded: inside the keys.
            unsafe { *keys.add(j as usize) = key };
            j += NMS_THREADS as u64;
        }
        sync_threads();
        // SAFETY: `padded` keys, a power of two.
        unsafe { bitonic_sort(keys, padded, NMS_THREADS as u64) };
        let mut count = 0u64;
        let mut r = 0u64;
        while r < padded && count < limit {
            // SAFETY: r < padded: inside the keys (sorted; read only from here on).
            let key = unsafe { *keys.add(r as usize) };
            if key == u64::MAX {
                break;
            }
            let i = key & 0xffff_ffff;
            // SAFETY: i < n: a box of batch entry b.
            let candidate = unsafe { corners(&p, boxes, b, i) };
            let mut overlaps = false;
            let mut k = t;
            while k < count {
                // SAFETY: k < count: a kept index written before an earlier barrier; a box of b.
                let other = unsafe { corners(&p, boxes, b, *kept.add(k as usize) as u64) };
                overlaps |= iou(candidate, other) > iou_max;
                k += NMS_THREADS as u64;
            }
            if !sync_threads_or(overlaps) {
                if t == 0 {
                    // SAFETY: count < limit <= n <= padded: inside the kept list.
                    unsafe { *kept.add(count as usize) = i as u32 };
                }
                count += 1;
                // The new entry is read by every thread in the next round.
                sync_threads();
            }
            r += 1;
        }
        let mut k = t;
        while k < count {
            // SAFETY: k < count <= n: a kept index; inside (b, c)'s slots.
            unsafe { *slots.add((bc * p.n + k) as usize) = *kept.add(k as usize) };
            k += NMS_THREADS as u64;
        }
        if t == 0 {
            // SAFETY: bc < batch * classes: inside the counts.
            unsafe { *counts.add(bc as usize) = count as i64 };
        }
        sync_threads();
        bc += grid_dim_x() as u64;
    }
}

/// The output rows `(batch, class, box)` (i64), (batch, class) pairs in order, each pair's kept
/// boxes in the order they were kept: row `offset(b, c) + k` for the `k`-th, `offset` the counts
/// of the pairs before it.
///
/// # Safety
/// `slots` and `counts` as `nms_select` wrote them; `y` holds `3 * sum(counts)` i64.
///
/// # Parameters
/// `p`; `slots`, `counts`; the output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a block per (batch, class) pair (grid-stride); every thread
/// adds up the earlier pairs' counts, then the block's threads write the pair's rows.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn nms_write(
    p: NmsParams,
    slots: *const u32,
    counts: *const i64,
    y: *mut i64,
) {
    let t = thread_idx_x() as u64;
    let mut bc = block_idx_x() as u64;
    while bc < p.batch * p.classes {
        let mut offset = 0u64;
        for e in 0..bc {
            // SAFETY: e < batch * classes: inside the counts.
            offset += unsafe { *counts.add(e as usize) } as u64;
        }
        // SAFETY: as above.
        let count = unsafe { *counts.add(bc as usize) } as u64;
        let mut k = t;
        while k < count {
            let row = (offset + k) as usize * 3;
            // SAFETY: row < 3 * sum(counts): inside y; k < count: a kept slot of (b, c).
            unsafe {
                *y.add(row) = (bc / p.classes) as i64;
                *y.add(row + 1) = (bc % p.classes) as i64;
                *y.add(row + 2) = *slots.add((bc * p.n + k) as usize) as i64;
            }
            k += block_dim_x() as u64;
        }
        bc += grid_dim_x() as u64;
    }
}
