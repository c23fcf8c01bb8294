//! f32 sequence kernels, parallel over batch, channels and heads: the Mamba-1 selective scan, the
//! Mamba-2 SSD scan (recurrent form), RWKV-6 WKV and the causal depthwise conv with a carried
//! window (OPS.md), sequential over time; the first-order linear scan (RG-LRU, `LinearScan`) and
//! the selective scan for state sizes up to 32 (`selective_scan_chunked_f32`), chunked over time
//! as well; WKV in spans of the sequence run in parallel (`wkv6_f32`'s span modes and
//! `wkv6_pass_f32`: the steps of a span stay sequential); the SSD scan's chunked (matrix) form for
//! prefills (`ssd_chunk.rs`); and the conv in the channels-last layout, parallel over runs of
//! steps (`causal_conv_rows_f32`). The direct forms are the reference-faithful ones, and the step
//! (L = 1) kernels. The SSD scans and the channels-last
//! conv read their per-step operands through row views (`abi::RowView`), so an operand may be a
//! window of a wider tensor's columns (a Split's part, read where it lies).
//!
//! State pointers (see `abi::sequence`): `state_in` is read once at the start (null: zero state),
//! `state_out` and `final_state` are written once at the end (each skipped when null). Every state
//! element is read and written by the same thread, so `state_in == state_out` (a persistent state
//! updated in place) is sound.
//!
//! Per-thread state lives in fixed-size register arrays indexed only by loop counters of
//! compile-time trip counts (fully unrolled, so no local memory); the runtime sizes only guard the
//! unrolled slots. Every global access is guarded by the sizes in the parameter struct.

use crate::abi::{
    RESET_BOOL, RESET_F32, RglruParams, SCAN_MAX_CHUNKS, SCAN_MAX_SLOTS, SsdScanParams, WKV_ROWS,
};
use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, dynamic_shared_ptr, global_thread_x, grid_dim_x, grid_threads_x,
    lane_id, shfl_xor_f32, sync_threads, thread_idx_x, trap,
};
use crate::math;

const SLOTS: usize = SCAN_MAX_SLOTS as usize;
const ROWS: usize = WKV_ROWS as usize;
const _: () = assert!(
    SLOTS == 8 && ROWS == 32 && crate::abi::CONV_MAX_WIDTH == 16,
    "`unroll!` spells out these trip counts (TAPS: the conv width)"
);

/// Expands `$body` once per index of a register array with `$k` bound to the literal index: the
/// unrolling LLVM may decline for long bodies is done here, so the arrays never need local memory.
macro_rules! unroll {
    ($k:ident in SLOTS => $body:block) => {
        unroll!(@ $k $body 0 1 2 3 4 5 6 7)
    };
    ($k:ident in TAPS => $body:block) => {
        unroll!(@ $k $body 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    ($k:ident in ROWS => $body:block) => {
        unroll!(@ $k $body 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (@ $k:ident $body:block $($i:literal)*) => {
        $({
            let $k: usize = $i;
            $body
        })*
    };
}

/// `a / b`, 0 when `b == 0` (never panics; callers only divide by sizes they know are nonzero
/// when the result is used).
#[inline(always)]
fn quot(a: u64, b: u64) -> u64 {
    a.checked_div(b).unwrap_or(0)
}

/// `a % b`, 0 when `b == 0`.
#[inline(always)]
fn rem(a: u64, b: u64) -> u64 {
    a.checked_rem(b).unwrap_or(0)
}

/// Whether `lanes` lanes per channel can hold a state of `n` elements in `SCAN_MAX_SLOTS` slots.
#[inline(always)]
fn lanes_fit(lanes: u32, n: u32) -> bool {
    lanes.is_power_of_two() && lanes <= WARP_SIZE && n >= 1 && n <= lanes * SCAN_MAX_SLOTS
}

/// Calls `f(channel, active, sub)` for every channel this lane's group serves: groups of `lanes`
/// lanes (a power of two) split each warp, and the warps grid-stride over `ceil(channels /
/// (32 / lanes))` warp tasks. `active` is false for a group past the last channel (it must still
/// take part in the warp's shuffles); `sub` is the lane's index in its group. The loop is uniform
/// over a warp. Requires a block size that is a multiple of 32.
#[inline(always)]
fn each_channel(channels: u64, lanes: u32, mut f: impl FnMut(u64, bool, u32)) {
    let lanes = lanes as u64;
    let per_warp = quot(WARP_SIZE as u64, lanes);
    let warps = grid_threads_x() / WARP_SIZE as u64;
    let tasks = quot(channels + per_warp - 1, per_warp);
    let lane = lane_id() as u64;
    let (group, sub) = (quot(lane, lanes), rem(lane, lanes) as u32);
    let mut task = global_thread_x() / WARP_SIZE as u64;
    while task < tasks {
        let ch = task * per_warp + group;
        f(ch, ch < channels, sub);
        task += warps;
    }
}

/// Sum over the `lanes` lanes of this lane's group (butterfly; every lane gets the same bits).
/// Warp-collective: every lane calls it with the same `lanes`.
#[inline(always)]
fn group_sum(mut v: f32, lanes: u32) -> f32 {
    let mut off = lanes >> 1;
    while off > 0 {
        v += shfl_xor_f32(v, off);
        off >>= 1;
    }
    v
}

/// Reads `p[i]` when `p` is non-null, else `zero`.
///
/// # Safety
/// A non-null `p` holds more than `i` elements.
#[inline(always)]
unsafe fn load_or<T: Copy>(p: *const T, i: u64, zero: T) -> T {
    // SAFETY: the caller's contract.
    if p.is_null() { zero } else { unsafe { *p.add(i as usize) } }
}

/// Writes `v` to `p[i]` when `p` is non-null.
///
/// # Safety
/// A non-null `p` holds more than `i` elements.
#[inline(always)]
unsafe fn store_if(p: *mut f32, i: u64, v: f32) {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i as usize) = v };
    }
}

/// One window of a scan chunked over time, its chunks in warps: stages this thread's chunk
/// (`(product, end)`: the chunk's running product and its end value from zero) in shared memory,
/// waits for the block, and folds every chunk of the window onto `carry` in order. Returns this
/// chunk's carry-in and leaves `carry` at the window's end (the same in every thread of a lane).
/// Block-collective: one barrier; the caller must barrier again before the next window's call.
///
/// # Safety
/// `shared` holds [`crate::abi::linear_scan_shared_bytes`]`(chunks)` bytes; `chunk < chunks` and
/// `lane < 32`.
#[inline(always)]
unsafe fn fold_chunks(
    shared: *mut f32,
    chunks: u32,
    chunk: u64,
    lane: u64,
    (product, end): (f32, f32),
    carry: &mut f32,
) -> f32 {
    // Shared layout (f32): each chunk's product, then each chunk's end value, `chunks * 32` each.
    let ends = chunks as u64 * WARP_SIZE as u64;
    // SAFETY (all shared accesses below): indices are below 2 * chunks * 32 f32.
    let sh = |i: u64| unsafe { shared.add(i as usize) };
    unsafe {
        *sh(chunk * WARP_SIZE as u64 + lane) = product;
        *sh(ends + chunk * WARP_SIZE as u64 + lane) = end;
    }
    sync_threads();
    let mut h_in = *carry;
    let mut c = 0;
    while c < chunks as u64 {
        if c == chunk {
            h_in = *carry;
        }
        // SAFETY: c * 32 + lane < chunks * 32.
        let (pc, ec) = unsafe { (*sh(c * WARP_SIZE as u64 + lane), *sh(ends + c * WARP_SIZE as u64 + lane)) };
        *carry = math::fma(pc, *carry, ec);
        c += 1;
    }
    h_in
}

/// This thread's chunk of a window scanned from zero in registers (`x` becomes the local values,
/// `a` the running products), then [`fold_chunks`] over the window's chunks: returns the chunk's
/// carry-in. Block-collective, as [`fold_chunks`].
///
/// # Safety
/// As [`fold_chunks`].
#[inline(always)]
unsafe fn scan_chunk(
    shared: *mut f32,
    chunks: u32,
    chunk: u64,
    lane: u64,
    a: &mut [f32; SLOTS],
    x: &mut [f32; SLOTS],
    carry: &mut f32,
) -> f32 {
    unroll!(k in SLOTS => {
        if k > 0 {
            x[k] = math::fma(a[k], x[k - 1], x[k]);
            a[k] *= a[k - 1];
        }
    });
    // SAFETY: the caller's contract.
    unsafe { fold_chunks(shared, chunks, chunk, lane, (a[SLOTS - 1], x[SLOTS - 1]), carry) }
}

/// The pointers of [`ssd_scan_f32`] a row reads and writes.
struct SsdOperands {
    x: *const f32,
    a: *const f32,
    dt: *const f32,
    bm: *const f32,
    cm: *const f32,
    dskip: *const f32,
    z: *const f32,
    dt_bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
}

/// dt as the SSD recurrence takes it: `raw + bias`, softplus when asked, clamped to
/// `[dt_min, dt_max]`.
#[inline(always)]
fn ssd_dt(p: &SsdScanParams, raw: f32, bias: f32) -> f32 {
    let mut d = raw + bias;
    if p.dt_softplus != 0 {
        d = math::softplus(d);
    }
    if d < p.dt_min {
        d = p.dt_min;
    }
    if d > p.dt_max {
        d = p.dt_max;
    }
    d
}

/// [`group_sum`] of `U` values at once, their shuffles interleaved.
#[inline(always)]
fn group_sums<const U: usize>(v: &mut [f32; U], lanes: u32) {
    let mut off = lanes >> 1;
    while off > 0 {
        unroll!(u in SLOTS => {
            if u < U {
                v[u] += shfl_xor_f32(v[u], off);
            }
        });
        off >>= 1;
    }
}

/// First-order linear scan over time, chunked: per channel `(b, w)`, `h <- a' h + b` with
/// `(a', b) = (a, sqrt(1 - a²) x)` for the RG-LRU (`p.normalized`; `1 - a²` with one rounding,
/// clamped at 0) or `(a, x)` for `LinearScan`; where the reset mask is set, `(a', b) = (0, x)`;
/// `y = h`.
///
/// # Safety
/// x, a and y hold `batch * len * width` f32; the reset mask (unless `reset == RESET_NONE`)
/// `batch * len` f32 or bytes; the states (when non-null) `batch * width` f32. Overlaps as for
/// [`selective_scan_f32`]. The launch has `32 * p.chunks` threads per block (`1 <= chunks <=
/// SCAN_MAX_CHUNKS`; anything else traps) and [`crate::abi::linear_scan_shared_bytes`]`(chunks)`
/// bytes of dynamic shared memory.
///
/// # Parameters
/// `p`; inputs x, a, the reset mask (null when absent; bytes or f32 per `p.reset`); the state
/// pointers (module doc); the output y.
///
/// # Thread mapping
/// A block per 32 consecutive channels (grid-striding), one warp per time chunk: the sequence is
/// walked in windows of `chunks * SLOTS` steps, and warp c takes steps `c * SLOTS ..` of each
/// window, lane l channel l of the block (a warp's loads of one step are coalesced). Each thread
/// loads its `SLOTS` steps at once, scans them from zero in registers and keeps the running
/// products; the chunk's total product and end value meet in shared memory, where every thread
/// folds the chunks before its own onto the window's carry-in (`h_in`) and all of them onto the
/// next window's; then `y = h_local + prod * h_in`. Two barriers per window.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn rglru_f32(
    p: RglruParams,
    x: *const f32,
    a: *const f32,
    reset: *const u8,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let chunks = p.chunks;
    if chunks == 0 || chunks > SCAN_MAX_CHUNKS || block_dim_x() != WARP_SIZE * chunks {
        trap();
    }
    let (len, width) = (p.len as u64, p.width as u64);
    let channels = p.batch as u64 * width;
    let (lane, chunk) = ((thread_idx_x() % WARP_SIZE) as u64, (thread_idx_x() / WARP_SIZE) as u64);
    let shared = dynamic_shared_ptr().cast::<f32>();
    let window = chunks as u64 * SLOTS as u64;
    let mut group = block_idx_x() as u64;
    while group * (WARP_SIZE as u64) < channels {
        let ch = group * WARP_SIZE as u64 + lane;
        let active = ch < channels;
        let (b, w) = (quot(ch, width), rem(ch, width));
        // SAFETY: ch < batch * width. Every thread of the channel reads the state before the
        // first barrier; the one that writes it (chunk 0) does so after the last.
        let mut carry = if active { unsafe { load_or(state_in, ch, 0.0) } } else { 0.0 };
        let mut t0 = 0;
        while t0 < len {
            let first = t0 + chunk * SLOTS as u64;
            // This thread's steps: (a', b) per slot, identity (1, 0) past the end.
            let mut ak = [1.0f32; SLOTS];
            let mut bk = [0.0f32; SLOTS];
            unroll!(k in SLOTS => {
                let t = first + k as u64;
                if active && t < len {
                    let o = ((b * len + t) * width + w) as usize;
                    let m = (b * len + t) as usize;
                    // SAFETY: o < batch * len * width; m < batch * len (the mask's elements).
                    let (xv, av, r) = unsafe {
                        let r = match p.reset {
                            RESET_F32 if !reset.is_null() => *reset.cast::<f32>().add(m) != 0.0,
                            RESET_BOOL if !reset.is_null() => *reset.add(m) != 0,
                            _ => false,
                        };
                        (*x.add(o), *a.add(o), r)
                    };
                    (ak[k], bk[k]) = if r {
                        (0.0, xv)
                    } else if p.normalized != 0 {
                        let keep = math::fma(-av, av, 1.0);
                        (av, math::sqrt(if keep > 0.0 { keep } else { 0.0 }) * xv)
                    } else {
                        (av, xv)
                    };
                }
            });
            // SAFETY: the launch's shared memory (kernel contract).
            let h_in = unsafe { scan_chunk(shared, chunks, chunk, lane, &mut ak, &mut bk, &mut carry) };
            unroll!(k in SLOTS => {
                let t = first + k as u64;
                if active && t < len {
                    let o = ((b * len + t) * width + w) as usize;
                    // SAFETY: as for x.
                    unsafe { *y.add(o) = math::fma(ak[k], h_in, bk[k]) };
                }
            });
            // The next window restages the chunk totals only after every thread has read them.
            sync_threads();
            t0 += window;
        }
        if active && chunk == 0 {
            // SAFETY: ch < batch * width.
            unsafe {
                store_if(state_out, ch, carry);
                store_if(final_state, ch, carry);
            }
        }
        group += grid_dim_x() as u64;
    }
}

// After `unroll!` and the helpers above, which it uses (macros are scoped textually).
mod selective;
mod ssd;
mod ssd_chunk;
mod wkv_conv;

mod scan_program;
