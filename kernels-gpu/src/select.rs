//! Selection. ONNX NonZero in two launches over the same blocks: the first counts the non-zero
//! elements of each block's chunk; the host reads the partial counts back (the output length),
//! places the output, and the second writes the coordinates, each block from the sum of the
//! partials before it, in element order (a block-wide scan of warp ballots per tile). ONNX TopK:
//! a block per row sorts the row's keys in shared memory (bitonic) and writes the first `k`.

use crate::abi::{
    MAX_RANK, NON_ZERO_THREADS, NonZeroParams, TOP_K_I64_MAX_LEN, TOP_K_MAX_LEN, TOP_K_THREADS, TopKParams,
    scalar,
};
use crate::group::Group;
use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, dynamic_shared_ptr, grid_dim_x, lane_id, sync_threads, thread_idx_x,
    trap, vote_ballot,
};
use crate::movement::{at, unravel};

/// Whether element `i` of `x` is non-zero.
///
/// # Safety
/// `i < p.elems`, and `x` holds `p.elems` elements of `p.elem_bytes` bytes.
#[inline(always)]
unsafe fn non_zero_at(p: &NonZeroParams, x: *const u8, i: u64) -> bool {
    let i = i as usize;
    // SAFETY: the contract.
    let bits = unsafe {
        match p.elem_bytes {
            1 => *x.add(i) as u64,
            2 => *x.cast::<u16>().add(i) as u64,
            4 => *x.cast::<u32>().add(i) as u64,
            _ => *x.cast::<u64>().add(i),
        }
    };
    bits & p.mask != 0
}

/// The elements `[start, end)` of block `b`'s chunk.
#[inline(always)]
fn chunk(p: &NonZeroParams, b: u64) -> (u64, u64) {
    let start = b.saturating_mul(p.chunk).min(p.elems);
    (start, start.saturating_add(p.chunk).min(p.elems))
}

/// Traps on parameters the kernels cannot honour (a wrong block size or element size, a rank
/// above `MAX_RANK`).
#[inline(always)]
fn check(p: &NonZeroParams) {
    let sizes_ok = matches!(p.elem_bytes, 1 | 2 | 4 | 8);
    if block_dim_x() != NON_ZERO_THREADS || !sizes_ok || p.rank as usize > MAX_RANK {
        trap();
    }
}

/// ONNX NonZero, first launch: `partials[b]` = the non-zero elements of block `b`'s chunk.
///
/// # Safety
/// `x` holds `p.elems` elements of `p.elem_bytes` bytes; `partials` holds one u64 per block.
///
/// # Parameters
/// `p` ([`NonZeroParams`]; `count` unused); input `x`; output `partials`.
///
/// # Thread mapping
/// 1-D grid of `NON_ZERO_THREADS`-thread blocks with `NON_ZERO_SHARED_BYTES` of dynamic shared
/// memory; block `b` strides over its chunk and reduces its count over the block.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn non_zero_count(p: NonZeroParams, x: *const u8, partials: *mut u64) {
    check(&p);
    let (b, t) = (block_idx_x() as u64, thread_idx_x() as u64);
    let (start, end) = chunk(&p, b);
    let mut n = 0u64;
    let mut i = start + t;
    while i < end {
        // SAFETY: i < end <= elems.
        n += unsafe { non_zero_at(&p, x, i) } as u64;
        i += NON_ZERO_THREADS as u64;
    }
    let total = Group { t, size: NON_ZERO_THREADS as u64 }.reduce(n, |a, b| a + b);
    if t == 0 {
        // SAFETY: one partial per block.
        unsafe { *partials.add(b as usize) = total };
    }
}

/// ONNX NonZero, second launch: the coordinates of every non-zero element, in element order, into
/// the `[rank, p.count]` i64 output `y` (row `d` holds the coordinates along dim `d`).
///
/// # Safety
/// `x` holds `p.elems` elements of `p.elem_bytes` bytes and did not change since the count launch,
/// whose grid and `p` (but `count`) this launch repeats; `partials` holds that launch's counts and
/// `p.count` is their sum; `y` holds `p.rank * p.count` i64. (A position past `p.count`, possible
/// only if these are broken, is not written.)
///
/// # Parameters
/// `p` ([`NonZeroParams`]); input `x`; the count launch's `partials`; output `y`.
///
/// # Thread mapping
/// As [`non_zero_count`]. Each block starts at the sum of the partials before it, then walks its
/// chunk in tiles of one element per thread: a warp ballot ranks the non-zero elements within the
/// warp, one count per warp in shared memory ranks the warps.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn non_zero_write(
    p: NonZeroParams,
    x: *const u8,
    partials: *const u64,
    y: *mut i64,
) {
    check(&p);
    let (b, t) = (block_idx_x() as u64, thread_idx_x() as u64);
    let block = Group { t, size: NON_ZERO_THREADS as u64 };
    let mut before = 0u64;
    let mut j = t;
    while j < b {
        // SAFETY: j < b, a block of the count launch.
        before += unsafe { *partials.add(j as usize) };
        j += NON_ZERO_THREADS as u64;
    }
    let mut base = block.reduce(before, |a, b| a + b);
    let warp_counts = dynamic_shared_ptr().cast::<u64>();
    let (warp, lane) = (t / WARP_SIZE as u64, lane_id());
    let warps = (NON_ZERO_THREADS / WARP_SIZE) as u64;
    let (start, end) = chunk(&p, b);
    let first = MAX_RANK - p.rank as usize;
    let mut tile = start;
    while tile < end {
        let i = tile + t;
        // SAFETY: i < end <= elems.
        let hit = i < end && unsafe { non_zero_at(&p, x, i) };
        let ballot = vote_ballot(hit);
        if lane == 0 {
            // SAFETY: warp < warps <= 32 u64 of shared memory (the launch contract).
            unsafe { *warp_counts.add(warp as usize) = ballot.count_ones() as u64 };
        }
        sync_threads();
        let (mut earlier, mut all) = (0u64, 0u64);
        for w in 0..warps {
            // SAFETY: w < warps; written before the barrier.
            let c = unsafe { *warp_counts.add(w as usize) };
            earlier += if w < warp { c } else { 0 };
            all += c;
        }
        let pos = base + earlier + (ballot & ((1u32 << lane) - 1)).count_ones() as u64;
        if hit && pos < p.count {
            unravel(
                i,
                p.rank,
                |d| at(&p.shape, d),
                |d, c| {
                    // SAFETY: d - first < rank and pos < count: inside the [rank, count] output.
                    unsafe { *y.add(((d - first) as u64 * p.count + pos) as usize) = c as i64 };
                },
            );
        }
        sync_threads();
        base += all;
        tile += NON_ZERO_THREADS as u64;
    }
}

/// The f32 with bits `bits` as an unsigned key in the reference's order: -0.0 equal to 0.0, every
/// NaN equal and above +inf.
#[inline(always)]
pub(crate) fn ordered_f32(bits: u32) -> u32 {
    let f = f32::from_bits(bits);
    let canonical = if f.is_nan() {
        0x7fc0_0000
    } else if f == 0.0 {
        0
    } else {
        bits
    };
    if canonical >> 31 == 1 { !canonical } else { canonical | 0x8000_0000 }
}

/// The sort key of element `j` of a row with value bits `bits` (f32 or i32): ascending keys put the
/// wanted elements first, ties in index order. Floats map to their total order with every NaN
/// above +inf and -0.0 equal to 0.0; `largest` inverts the value part.
#[inline(always)]
pub(crate) fn top_k_key(p: &TopKParams, bits: u32, j: u32) -> u64 {
    let ordered = if p.dtype == scalar::I32 { bits ^ 0x8000_0000 } else { ordered_f32(bits) };
    let value = if p.largest != 0 { !ordered } else { ordered };
    (value as u64) << 32 | j as u64
}

/// The sort key of element `j` of an i64 row: the value's order as unsigned bits above the index
/// (ascending keys put the wanted elements first, ties in index order).
#[inline(always)]
fn top_k_key_i64(p: &TopKParams, bits: u64, j: u32) -> u128 {
    let ordered = bits ^ (1 << 63);
    let value = if p.largest != 0 { !ordered } else { ordered };
    (value as u128) << 32 | j as u128
}

/// Sorts the `padded` keys at `keys` (shared memory, `padded` a power of two) ascending: a bitonic
/// network, each of the block's `threads` threads comparing and swapping pairs, a barrier between
/// passes. Block-collective; starts after the keys are written (the caller's barrier) and ends
/// with a barrier.
///
/// # Safety
/// `keys` holds `padded` keys that no other code touches meanwhile; the block has `threads`
/// threads.
#[inline(always)]
pub(crate) unsafe fn bitonic_sort<K: Copy + PartialOrd>(keys: *mut K, padded: u64, threads: u64) {
    // SAFETY: forwarded.
    unsafe { bitonic_sort_by(keys, padded, threads, |a, b| a > b) }
}

/// [`bitonic_sort`] with the order `greater(a, b)` (a strict total order on the keys present).
///
/// # Safety
/// As [`bitonic_sort`].
#[inline(always)]
pub(crate) unsafe fn bitonic_sort_by<K: Copy>(
    keys: *mut K,
    padded: u64,
    threads: u64,
    greater: impl Fn(K, K) -> bool,
) {
    let t = thread_idx_x() as u64;
    let mut size = 2u64;
    while size <= padded {
        let mut stride = size / 2;
        while stride > 0 {
            let mut q = t;
            while q < padded / 2 {
                // The pair (lo, lo + stride): `q`'s place among the pairs of its stride block.
                let lo = (q / stride) * 2 * stride + q % stride;
                let hi = lo + stride;
                let ascending = lo & size == 0;
                // SAFETY: lo < hi < padded, inside the shared keys; each pair has one owner.
                unsafe {
                    let (a, b) = (*keys.add(lo as usize), *keys.add(hi as usize));
                    if greater(a, b) == ascending {
                        *keys.add(lo as usize) = b;
                        *keys.add(hi as usize) = a;
                    }
                }
                q += threads;
            }
            sync_threads();
            stride /= 2;
        }
        size *= 2;
    }
}

/// The body of the TopK kernels: for each row, its keys (`key(value, j)`, `K::MAX` past the row)
/// sorted bitonically in `keys` (shared memory of `p.padded` keys), then the first `k` written
/// (the index is a key's low 32 bits).
///
/// # Safety
/// As [`top_k`], for elements of type `T` and `size_of::<K>() * p.padded` bytes of shared memory.
#[inline(always)]
unsafe fn top_k_rows<T: Copy, K: Copy + PartialOrd>(
    p: &TopKParams,
    x: *const T,
    y: *mut T,
    indices: *mut i64,
    key: impl Fn(T, u32) -> K,
    (pad_key, low): (K, impl Fn(K) -> u64),
) {
    let padded = p.padded as u64;
    let fits = padded.is_power_of_two() && padded <= TOP_K_MAX_LEN && p.len <= padded && p.k <= p.len;
    if block_dim_x() != TOP_K_THREADS || !fits {
        trap();
    }
    let keys = dynamic_shared_ptr().cast::<K>();
    let t = thread_idx_x() as u64;
    let rows = p.outer * p.inner;
    let mut row = block_idx_x() as u64;
    while row < rows {
        let (o, i) = (row / p.inner, row % p.inner);
        let at = |j: u64| ((o * p.len + j) * p.inner + i) as usize;
        let mut j = t;
        while j < padded {
            // SAFETY: j < len indexes the row inside `x`; j < padded <= the shared keys.
            let k = if j < p.len { key(unsafe { *x.add(at(j)) }, j as u32) } else { pad_key };
            unsafe { *keys.add(j as usize) = k };
            j += TOP_K_THREADS as u64;
        }
        sync_threads();
        // SAFETY: `padded` keys in shared memory, a power of two (checked above).
        unsafe { bitonic_sort(keys, padded, TOP_K_THREADS as u64) };
        let mut r = t;
        while r < p.k {
            // SAFETY: r < k <= len: a real key (padding sorts after every one), whose low half is
            // its index j < len; the outputs hold `k` per row.
            unsafe {
                let j = low(*keys.add(r as usize));
                let out = ((o * p.k + r) * p.inner + i) as usize;
                *y.add(out) = *x.add(at(j));
                *indices.add(out) = j as i64;
            }
            r += TOP_K_THREADS as u64;
        }
        sync_threads();
        row += grid_dim_x() as u64;
    }
}

/// ONNX TopK along the middle axis of `[outer, len, inner]` ([`TopKParams`]): the first `k`
/// elements of each row in the wanted order, values to `y` and positions (i64) to `indices`.
///
/// # Safety
/// `x` holds `outer * len * inner` elements of 4 bytes (f32 or i32, `p.dtype`); `y` holds
/// `outer * k * inner` of them and `indices` as many i64; `p.k <= p.len <= p.padded <=
/// TOP_K_MAX_LEN`, `p.padded` a power of two; `8 * p.padded` bytes of dynamic shared memory.
///
/// # Parameters
/// `p`; input `x`; outputs `y` (values) and `indices`.
///
/// # Thread mapping
/// 1-D grid of `TOP_K_THREADS`-thread blocks, any count: each block strides over the rows
/// (`outer * inner`), loads a row's keys into shared memory (padding keys sort last), sorts them
/// bitonically (each thread compares and swaps pairs, a barrier between passes) and writes the
/// first `k`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn top_k(p: TopKParams, x: *const u32, y: *mut u32, indices: *mut i64) {
    // SAFETY: forwarded (the contract; 8-byte keys).
    unsafe { top_k_rows(&p, x, y, indices, |v, j| top_k_key(&p, v, j), (u64::MAX, |k: u64| k & 0xffff_ffff)) }
}

/// [`top_k`] of i64 elements (`p.dtype` not read): 16-byte keys (the value's 64 bits above the
/// index), rows of at most [`TOP_K_I64_MAX_LEN`].
///
/// # Safety
/// As [`top_k`] with 8-byte elements, `p.padded <= TOP_K_I64_MAX_LEN` and `16 * p.padded` bytes
/// of dynamic shared memory.
///
/// # Parameters
/// As [`top_k`].
///
/// # Thread mapping
/// As [`top_k`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn top_k_i64(p: TopKParams, x: *const u64, y: *mut u64, indices: *mut i64) {
    if p.padded as u64 > TOP_K_I64_MAX_LEN {
        trap();
    }
    let low = |k: u128| (k & 0xffff_ffff) as u64;
    // SAFETY: forwarded (the contract; 16-byte keys).
    unsafe { top_k_rows(&p, x, y, indices, |v, j| top_k_key_i64(&p, v, j), (u128::MAX, low)) }
}
