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
    RESET_BOOL, RESET_F32, RglruParams, RowView, SCAN_MAX_CHUNKS, SCAN_MAX_SLOTS, SelectiveScanParams,
    SsdScanParams, WKV_ROWS,
};
use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, dynamic_shared_ptr, global_thread_x, grid_dim_x, grid_threads_x,
    lane_id, shfl_idx_u32, shfl_xor_f32, sync_threads, thread_idx_x, trap,
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

/// Mamba-1 selective scan (`selective_scan_ref`): per channel `(b, d)` and step t,
/// `Δ = delta + delta_bias` (softplus if `delta_softplus`), `h[n] <- exp(Δ A[d,n]) h[n] +
/// Δ B[n,t] u`, `y = Σₙ C[n,t] h[n] + D[d] u`, then `y <- y silu(z)` when z is given.
///
/// # Safety
/// Shapes as [`SelectiveScanParams`] states, products fitting in u64: u, delta, y (and z when
/// non-null) hold `batch * channels * len` f32; A `channels * state`; Bm, Cm
/// `batch * groups * state * len`; D and delta_bias (when non-null) `channels`; `state_in`,
/// `state_out`, `final_state` (when non-null) `batch * channels * state`. `y` and `final_state`
/// overlap nothing else; `state_in` may equal `state_out`, otherwise nothing overlaps a written
/// buffer. `channels` is a multiple of `groups >= 1`.
///
/// # Parameters
/// `p`; inputs u, delta, A, Bm, Cm, then the optional D, z, delta_bias (null when absent); the
/// state pointers (module doc); the output y.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks whose size is a multiple of 32 ([`crate::abi::SEQUENCE_THREADS`]).
/// Groups of `p.lanes` lanes own one channel each and grid-stride over the channels; lane `s` of a
/// group owns state elements `n = s + k * lanes` (`k < SCAN_MAX_SLOTS`) in registers and the
/// group sums `C h` by shuffles. A launch whose `lanes` cannot hold `state` writes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn selective_scan_f32(
    p: SelectiveScanParams,
    u: *const f32,
    delta: *const f32,
    a: *const f32,
    bm: *const f32,
    cm: *const f32,
    dskip: *const f32,
    z: *const f32,
    delta_bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let (n, lanes) = (p.state, p.lanes);
    if !lanes_fit(lanes, n) || p.groups == 0 || p.channels % p.groups != 0 {
        return;
    }
    let (d_len, len, nn) = (p.channels as u64, p.len as u64, n as u64);
    let per_group = quot(d_len, p.groups as u64);
    each_channel(p.batch as u64 * d_len, lanes, |ch, active, sub| {
        let (b, d) = (quot(ch, d_len), rem(ch, d_len));
        let bc_row = (b * p.groups as u64 + quot(d, per_group)) * nn;
        let (mut h, mut av) = ([0.0f32; SLOTS], [0.0f32; SLOTS]);
        unroll!(k in SLOTS => {
            let i = sub as u64 + (k as u64) * lanes as u64;
            if active && i < nn {
                // SAFETY: ch < batch * channels and i < state: inside A and the states.
                unsafe {
                    h[k] = load_or(state_in, ch * nn + i, 0.0);
                    av[k] = *a.add((d * nn + i) as usize);
                }
            }
        });
        // SAFETY: d < channels (only read when active).
        let (dv, bias) = if active {
            unsafe { (load_or(dskip, d, 0.0), load_or(delta_bias, d, 0.0)) }
        } else {
            (0.0, 0.0)
        };
        let io = ch * len;
        let mut t = 0;
        while t < len {
            // SAFETY: io + t < batch * channels * len when active.
            let (uv, dl) = if active {
                unsafe { (*u.add((io + t) as usize), *delta.add((io + t) as usize)) }
            } else {
                (0.0, 0.0)
            };
            let mut dt = dl + bias;
            if p.delta_softplus != 0 {
                dt = math::softplus(dt);
            }
            let mut acc = 0.0f32;
            unroll!(k in SLOTS => {
                let i = sub as u64 + (k as u64) * lanes as u64;
                if active && i < nn {
                    let at = ((bc_row + i) * len + t) as usize;
                    // SAFETY: (b, group, i, t) lies inside Bm and Cm.
                    let (bv, cv) = unsafe { (*bm.add(at), *cm.add(at)) };
                    h[k] = math::fma(math::exp(dt * av[k]), h[k], dt * bv * uv);
                    acc = math::fma(cv, h[k], acc);
                }
            });
            let acc = group_sum(acc, lanes);
            if active && sub == 0 {
                let mut out = math::fma(dv, uv, acc);
                if !z.is_null() {
                    // SAFETY: as for u.
                    out *= math::silu(unsafe { *z.add((io + t) as usize) });
                }
                // SAFETY: as for u.
                unsafe { *y.add((io + t) as usize) = out };
            }
            t += 1;
        }
        unroll!(k in SLOTS => {
            let i = sub as u64 + (k as u64) * lanes as u64;
            if active && i < nn {
                // SAFETY: inside the states (as at the start).
                unsafe {
                    store_if(state_out, ch * nn + i, h[k]);
                    store_if(final_state, ch * nn + i, h[k]);
                }
            }
        });
    });
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

/// Mamba-1 selective scan, chunked over time (prefill): the same recurrence and outputs as
/// [`selective_scan_f32`], for state sizes `N <= 32`. Each state element `(b, d, n)` is a
/// first-order linear scan `h <- a h + x` with `a = exp(Δ A[d,n])` and `x = Δ B[n,t] u`, so the
/// steps of a window are scanned in parallel as `rglru_f32` scans its channels.
///
/// # Safety
/// As [`selective_scan_f32`]. The launch has `32 * p.chunks` threads per block (`1 <= chunks <=
/// SCAN_MAX_CHUNKS`; anything else traps) and [`crate::abi::linear_scan_shared_bytes`]`(chunks)`
/// bytes of dynamic shared memory; `p.lanes` is [`crate::abi::scan_lanes`]`(state)` with
/// `state <= 32` (otherwise the launch writes nothing).
///
/// # Parameters
/// As [`selective_scan_f32`].
///
/// # Thread mapping
/// A block per warp task of `32 / lanes` channels (grid-striding), one warp per time chunk: the
/// sequence is walked in windows of `chunks * SLOTS` steps, and warp c takes steps `c * SLOTS ..`
/// of each window. Lane `s` of a channel's group owns state element `n = s`. Each thread loads its
/// `SLOTS` steps at once (u, Δ, B, C: no load waits for the scan), scans them from zero in
/// registers keeping the running products; the chunk's product and end value meet in shared
/// memory, where every thread folds the chunks before its own onto the window's carry-in and all
/// of them onto the next window's. Then `h = h_local + prod * h_in`, the group sums `C h` for all
/// its steps by interleaved shuffles, and lane `s` writes the steps `k ≡ s (mod lanes)`. Two
/// barriers per window.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn selective_scan_chunked_f32(
    p: SelectiveScanParams,
    u: *const f32,
    delta: *const f32,
    a: *const f32,
    bm: *const f32,
    cm: *const f32,
    dskip: *const f32,
    z: *const f32,
    delta_bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let chunks = p.chunks;
    if chunks == 0 || chunks > SCAN_MAX_CHUNKS || block_dim_x() != WARP_SIZE * chunks {
        trap();
    }
    let (n, lanes) = (p.state, p.lanes);
    // A lane per state element: `lanes >= n` (at most a warp, as `lanes_fit` requires).
    if lanes < n || !lanes_fit(lanes, n) || p.groups == 0 || p.channels % p.groups != 0 {
        return;
    }
    let (d_len, len, nn) = (p.channels as u64, p.len as u64, n as u64);
    let per_group = quot(d_len, p.groups as u64);
    let channels = p.batch as u64 * d_len;
    let per_warp = quot(WARP_SIZE as u64, lanes as u64);
    let tasks = quot(channels + per_warp - 1, per_warp);
    let (lane, chunk) = ((thread_idx_x() % WARP_SIZE) as u64, (thread_idx_x() / WARP_SIZE) as u64);
    let (sub, group) = (rem(lane, lanes as u64), quot(lane, lanes as u64));
    let shared = dynamic_shared_ptr().cast::<f32>();
    let window = chunks as u64 * SLOTS as u64;
    let mut task = block_idx_x() as u64;
    while task < tasks {
        let ch = task * per_warp + group;
        // `owner`: the lane's group has a channel (its lanes write y); `active`: the lane also
        // has a state element (lanes past `state` only take part in the sums).
        let owner = ch < channels;
        let active = owner && sub < nn;
        let (b, d) = (quot(ch, d_len), rem(ch, d_len));
        let io = ch * len;
        let bc = ((b * p.groups as u64 + quot(d, per_group)) * nn + sub) * len;
        // SAFETY: d < channels when owner, sub < state when active. Every thread of the element
        // reads the state before the first barrier; the one that writes it (chunk 0) does so
        // after the last.
        let (dv, bias) =
            if owner { unsafe { (load_or(dskip, d, 0.0), load_or(delta_bias, d, 0.0)) } } else { (0.0, 0.0) };
        let (av, mut carry) = if active {
            unsafe { (*a.add((d * nn + sub) as usize), load_or(state_in, ch * nn + sub, 0.0)) }
        } else {
            (0.0, 0.0)
        };
        let mut t0 = 0;
        while t0 < len {
            let first = t0 + chunk * SLOTS as u64;
            // This thread's steps: (a, x) per slot, identity (1, 0) past the end; C and u kept
            // for the readout.
            let (mut ak, mut xk) = ([1.0f32; SLOTS], [0.0f32; SLOTS]);
            let (mut ck, mut uk) = ([0.0f32; SLOTS], [0.0f32; SLOTS]);
            unroll!(k in SLOTS => {
                let t = first + k as u64;
                if owner && t < len {
                    // SAFETY: io + t < batch * channels * len.
                    uk[k] = unsafe { *u.add((io + t) as usize) };
                }
                if active && t < len {
                    // SAFETY: as for u; bc + t inside Bm and Cm.
                    let (dl, bv, cv) = unsafe {
                        (*delta.add((io + t) as usize), *bm.add((bc + t) as usize), *cm.add((bc + t) as usize))
                    };
                    let mut dt = dl + bias;
                    if p.delta_softplus != 0 {
                        dt = math::softplus(dt);
                    }
                    ak[k] = math::exp(dt * av);
                    xk[k] = dt * bv * uk[k];
                    ck[k] = cv;
                }
            });
            // Local scan from zero: xk becomes the local values, ak the running products.
            unroll!(k in SLOTS => {
                if k > 0 {
                    xk[k] = math::fma(ak[k], xk[k - 1], xk[k]);
                    ak[k] *= ak[k - 1];
                }
            });
            // SAFETY: the launch's shared memory (kernel contract).
            let h_in = unsafe {
                fold_chunks(shared, chunks, chunk, lane, (ak[SLOTS - 1], xk[SLOTS - 1]), &mut carry)
            };
            // C h per step, summed over the group's lanes (inactive lanes add zeros).
            let mut acc = [0.0f32; SLOTS];
            unroll!(k in SLOTS => {
                acc[k] = ck[k] * math::fma(ak[k], h_in, xk[k]);
            });
            group_sums::<SLOTS>(&mut acc, lanes);
            unroll!(k in SLOTS => {
                let t = first + k as u64;
                if owner && t < len && (k as u64) % lanes as u64 == sub {
                    let mut out = math::fma(dv, uk[k], acc[k]);
                    if !z.is_null() {
                        // SAFETY: as for u.
                        out *= math::silu(unsafe { *z.add((io + t) as usize) });
                    }
                    // SAFETY: as for u.
                    unsafe { *y.add((io + t) as usize) = out };
                }
            });
            // The next window restages the chunk totals only after every thread has read them.
            sync_threads();
            t0 += window;
        }
        if active && chunk == 0 {
            // SAFETY: inside the states.
            unsafe {
                store_if(state_out, ch * nn + sub, carry);
                store_if(final_state, ch * nn + sub, carry);
            }
        }
        task += grid_dim_x() as u64;
    }
}

/// Mamba-2 SSD scan, recurrent form (`Mamba2.step`): per `(b, head h)` and step t, with group
/// `g = h / (heads / groups)`: `dt <- dt + dt_bias[h]` (softplus if `dt_softplus`, then clamped to
/// `[dt_min, dt_max]`), `S <- exp(dt A[h]) S + dt (x ⊗ B_g)` with `S` of `head_dim × state`,
/// `y = S C_g + D x`, then `y <- y silu(z)` when z is given.
///
/// # Safety
/// Shapes as [`SsdScanParams`] states, products fitting in u64: y holds
/// `batch * len * heads * head_dim` f32; x, dt, Bm, Cm and z (when non-null) hold every element
/// their [`crate::abi::SsdRows`] views reach (`heads * head_dim`, `heads`, `groups * state`,
/// `groups * state` and `heads * head_dim` values at each of `batch * len` steps), none of them
/// overlapping y; A and dt_bias (when non-null) `heads`; D (when non-null) `heads` or, with
/// `d_per_channel`, `heads * head_dim`; the states (when non-null)
/// `batch * heads * head_dim * state`. Overlaps as for [`selective_scan_f32`]; `heads` is a
/// multiple of `groups >= 1`.
///
/// # Parameters
/// `p`; inputs x, dt, A, Bm, Cm, then the optional D, z, dt_bias (null when absent); the state
/// pointers (module doc); the output y.
///
/// # Thread mapping
/// As [`selective_scan_f32`], with one channel per state row `(b, h, p)`: a group of `p.lanes`
/// lanes owns the row's `state` elements; the groups of one warp serve neighbouring rows of the
/// same head, so they read the same B and C.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ssd_scan_f32(
    p: SsdScanParams,
    x: *const f32,
    dt: *const f32,
    a: *const f32,
    bm: *const f32,
    cm: *const f32,
    dskip: *const f32,
    z: *const f32,
    dt_bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let (n, lanes) = (p.state, p.lanes);
    if !lanes_fit(lanes, n) || p.groups == 0 || p.heads % p.groups != 0 {
        return;
    }
    let ops = SsdOperands { x, a, dt, bm, cm, dskip, z, dt_bias, state_in, state_out, final_state, y };
    // Slots a lane holds (uniform over the grid): the rows' loop is specialized on them, so that
    // a step's operands take 3 + 2·slots registers and `U` steps' fit twice over.
    // SAFETY: the kernel's contract, passed on.
    unsafe {
        match n.div_ceil(lanes) {
            1 => ssd_rows::<1, 8>(&p, &ops),
            2 => ssd_rows::<2, 8>(&p, &ops),
            3 | 4 => ssd_rows::<4, 4>(&p, &ops),
            _ => ssd_rows::<8, 2>(&p, &ops),
        }
    }
}

/// Every row of [`ssd_scan_f32`], `S` slots a lane, `U` steps at a time.
///
/// # Safety
/// As [`ssd_scan_f32`]; `S * lanes >= state`.
#[inline(always)]
unsafe fn ssd_rows<const S: usize, const U: usize>(p: &SsdScanParams, o: &SsdOperands) {
    let (heads, pd) = (p.heads as u64, p.head_dim as u64);
    let per_group = quot(heads, p.groups as u64);
    let rows = p.batch as u64 * heads * pd;
    each_channel(rows, p.lanes, |ch, active, sub| {
        let pi = rem(ch, pd);
        let h = rem(quot(ch, pd), heads);
        let (av, bias, dv) = if active {
            let di = if p.d_per_channel != 0 { h * pd + pi } else { h };
            // SAFETY: h < heads and h * head_dim + pi < heads * head_dim (only read when active).
            unsafe { (*o.a.add(h as usize), load_or(o.dt_bias, h, 0.0), load_or(o.dskip, di, 0.0)) }
        } else {
            (0.0, 0.0, 0.0)
        };
        let b = quot(ch, pd * heads);
        let row = SsdRow { ch, b, h, g: quot(h, per_group), pi, active, sub, av, bias, dv };
        // SAFETY: as this function's.
        unsafe { ssd_row::<S, U>(p, o, &row) }
    });
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

/// One state row `(b, h, pi)` of [`ssd_scan_f32`] as a lane group serves it.
struct SsdRow {
    ch: u64,
    b: u64,
    h: u64,
    g: u64,
    pi: u64,
    active: bool,
    sub: u32,
    /// `A[h]`, `dt_bias[h]` (0 when absent) and the row's `D` (0 when absent).
    av: f32,
    bias: f32,
    dv: f32,
}

/// What a lane of [`SsdRow`] reads for one step: x, dt, z (0 when absent) and its `S` slots of B
/// and C (0 past the state or the sequence).
#[derive(Clone, Copy)]
struct SsdStep<const S: usize> {
    x: f32,
    dt: f32,
    z: f32,
    b: [f32; S],
    c: [f32; S],
}

/// The recurrence of [`ssd_scan_f32`] over one row, `U` steps at a time: the next `U` steps'
/// operands are loaded before the current ones are computed, the state chain is one FMA a slot
/// and step, and the `U` outputs' lane sums shuffle together, so a step costs a fraction of a
/// load's latency instead of a load and a reduction in sequence. Offsets advance by each
/// operand's stride a step (x / y / z `heads · head_dim`, dt `heads`, B / C `groups · state`):
/// no index is unravelled in the loop.
///
/// # Safety
/// As [`ssd_scan_f32`]; `S * lanes >= state` (the slots hold the row's state).
#[inline(always)]
unsafe fn ssd_row<const S: usize, const U: usize>(p: &SsdScanParams, o: &SsdOperands, r: &SsdRow) {
    let (len, heads, pd, nn) = (p.len as u64, p.heads as u64, p.head_dim as u64, p.state as u64);
    let lanes = p.lanes as u64;
    let slot = |k: usize| r.sub as u64 + k as u64 * lanes;
    // Each operand's offset at step 0 and its step (`p.rows`); y is dense.
    let first = |v: RowView, inner: u64| (v.offset as u64 + r.b * len * v.row as u64 + inner, v.row as u64);
    let rows = &p.rows;
    let ((x0, xs), (z0, zs)) = (first(rows.x, r.h * pd + r.pi), first(rows.z, r.h * pd + r.pi));
    let ((dt0, dts), (b0, bs), (c0, cs)) =
        (first(rows.dt, r.h), first(rows.bm, r.g * nn), first(rows.cm, r.g * nn));
    let (y0, ys) = ((r.b * len * heads + r.h) * pd + r.pi, heads * pd);
    let zero = SsdStep { x: 0.0, dt: 0.0, z: 0.0, b: [0.0; S], c: [0.0; S] };
    // Steps `t0 .. t0 + U` (0 past the sequence).
    let load = |t0: u64| -> [SsdStep<S>; U] {
        let mut steps = [zero; U];
        if !r.active {
            return steps;
        }
        unroll!(u in SLOTS => {
            let t = t0 + u as u64;
            if u < U && t < len {
                let st = &mut steps[u];
                let (bo, co) = (b0 + t * bs, c0 + t * cs);
                // SAFETY: (b, t, h, pi) lies inside x, z and dt; (b, t, g, i < state) inside Bm,
                // Cm, each through its row view.
                unsafe {
                    st.x = *o.x.add((x0 + t * xs) as usize);
                    st.dt = *o.dt.add((dt0 + t * dts) as usize);
                    st.z = load_or(o.z, z0 + t * zs, 0.0);
                    unroll!(k in SLOTS => {
                        if k < S && slot(k) < nn {
                            st.b[k] = *o.bm.add((bo + slot(k)) as usize);
                            st.c[k] = *o.cm.add((co + slot(k)) as usize);
                        }
                    });
                }
            }
        });
        steps
    };
    let mut s = [0.0f32; S];
    unroll!(k in SLOTS => {
        if k < S && r.active && slot(k) < nn {
            // SAFETY: ch < batch * heads * head_dim, slot < state: inside the states.
            s[k] = unsafe { load_or(o.state_in, r.ch * nn + slot(k), 0.0) };
        }
    });
    let transform = |raw: f32| ssd_dt(p, raw, r.bias);
    let shared = lanes >= U as u64;
    let first_lane = lane_id() - r.sub;
    let mut cur = load(0);
    let mut t = 0;
    while t < len {
        let next = load(t + U as u64);
        // With at least `U` lanes a row, lane `sub` transforms step `sub % U`'s dt and takes its
        // decay (a softplus and an exp a lane and block, not a step), and the row's lanes read
        // them from there.
        let (mut d_mine, mut decay_mine) = (0.0f32, 1.0f32);
        if shared {
            let mine = r.sub as usize % U;
            let mut raw = 0.0f32;
            unroll!(u in SLOTS => {
                if u < U && mine == u {
                    raw = cur[u].dt;
                }
            });
            d_mine = transform(raw);
            decay_mine = math::exp(d_mine * r.av);
        }
        let mut acc = [0.0f32; U];
        unroll!(u in SLOTS => {
            // (Past the sequence the state is left as it is; the test is uniform over the warp.)
            if u < U && t + (u as u64) < len {
                let st = &cur[u];
                let (d, decay) = if shared {
                    let from = first_lane + u as u32;
                    (f32::from_bits(shfl_idx_u32(d_mine.to_bits(), from)),
                     f32::from_bits(shfl_idx_u32(decay_mine.to_bits(), from)))
                } else {
                    let d = transform(st.dt);
                    (d, math::exp(d * r.av))
                };
                let dx = d * st.x;
                unroll!(k in SLOTS => {
                    if k < S {
                        s[k] = math::fma(decay, s[k], dx * st.b[k]);
                        acc[u] = math::fma(s[k], st.c[k], acc[u]);
                    }
                });
            }
        });
        group_sums(&mut acc, p.lanes);
        if r.active && r.sub == 0 {
            let yb = y0 + t * ys;
            unroll!(u in SLOTS => {
                if u < U && t + (u as u64) < len {
                    let st = &cur[u];
                    let mut out = math::fma(r.dv, st.x, acc[u]);
                    if !o.z.is_null() {
                        out *= math::silu(st.z);
                    }
                    // SAFETY: y holds batch * len * heads * head_dim values.
                    unsafe { *o.y.add((yb + u as u64 * ys) as usize) = out };
                }
            });
        }
        cur = next;
        t += U as u64;
    }
    unroll!(k in SLOTS => {
        if k < S && r.active && slot(k) < nn {
            // SAFETY: inside the states.
            unsafe {
                store_if(o.state_out, r.ch * nn + slot(k), s[k]);
                store_if(o.final_state, r.ch * nn + slot(k), s[k]);
            }
        }
    });
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
            // Local scan from zero: bk becomes the local values, ak the running products.
            unroll!(k in SLOTS => {
                if k > 0 {
                    bk[k] = math::fma(ak[k], bk[k - 1], bk[k]);
                    ak[k] *= ak[k - 1];
                }
            });
            // SAFETY: the launch's shared memory (kernel contract).
            let h_in = unsafe {
                fold_chunks(shared, chunks, chunk, lane, (ak[SLOTS - 1], bk[SLOTS - 1]), &mut carry)
            };
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
mod ssd_chunk;
mod wkv_conv;

mod scan_program;
