//! The Mamba-1 selective scan: direct (sequential over time, a lane group per channel) and, for
//! state sizes up to 32, chunked over time (helpers and conventions: the parent module).

use super::{
    SLOTS, each_channel, group_sum, group_sums, lanes_fit, load_or, quot, rem, scan_chunk, store_if,
};
use crate::abi::{SCAN_MAX_CHUNKS, SelectiveScanParams};
use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, dynamic_shared_ptr, grid_dim_x, sync_threads, thread_idx_x, trap,
};
use crate::math;

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
            // SAFETY: the launch's shared memory (kernel contract).
            let h_in = unsafe { scan_chunk(shared, chunks, chunk, lane, &mut ak, &mut xk, &mut carry) };
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
