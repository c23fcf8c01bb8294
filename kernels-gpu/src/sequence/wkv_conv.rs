//! The sequence kernels that mix a window or a matrix state per head: RWKV-6 WKV and the causal
//! depthwise conv with a carried window (helpers and conventions: the parent module).

use super::{ROWS, load_or, quot, rem, store_if};
use crate::abi::{
    CONV_MAX_WIDTH, CONV_ROWS_MAX_WIDTH, CausalConvParams, CausalConvRowsParams, WKV_MAX_HEAD, WKV_ROWS,
    WKV_SMALL_HEAD, WKV_SPAN_OUTPUTS, WKV_SPAN_STATES, WKV_WHOLE, Wkv6Params, wkv_span_stride, wkv_spans,
};
use crate::intrinsics::{
    block_dim_x, block_idx_x, dynamic_shared_ptr, global_thread_x, grid_dim_x, grid_threads_x, sync_threads,
    thread_idx_x,
};
use crate::math;

/// RWKV-6 WKV (BlinkDL convention): per `(b, head)` and step t, with state `S` of
/// `head × head` indexed [key i, value j], `y[j] = Σᵢ r[i] (bonus[i] k[i] v[j] + S[i, j])`, then
/// `S[i, j] <- exp(-exp(w[i])) S[i, j] + k[i] v[j]`; the bonus is u, or `exp(u)` with `exp_bonus`.
///
/// With `p.span` the sequence runs in spans of that many steps, a block per `(b, head, span)`, in
/// three launches (`p.mode`): [`WKV_SPAN_STATES`] runs each span from a zero state and writes its
/// state change and the decay product of each key (the scratch passed as `final_state`);
/// `wkv6_pass_f32` chains them into each span's first state; [`WKV_SPAN_OUTPUTS`] runs each span
/// from its first state (passed as `state_in`) and writes y. Each launch has the parallelism of
/// the spans; the steps of a span stay sequential.
///
/// # Safety
/// r, k, v, w and y hold `batch * len * heads * head` f32; u `heads * head`; the states (when
/// non-null) `batch * heads * head * head`, or per mode as above (`batch * heads * spans` entries
/// of [`wkv_span_stride`]`(head)` or `head * head` f32). Overlaps as for [`selective_scan_f32`].
/// The launch has [`crate::abi::wkv_threads`]`(head)` threads per block and
/// [`crate::abi::wkv_shared_bytes`]`(head)` bytes of dynamic shared memory, and
/// `p.chunks == wkv_chunks(head)`.
///
/// # Parameters
/// `p`; inputs r, k, v, w, u; the state pointers (module doc); the output y.
///
/// # Thread mapping
/// A block per `(b, head, span)`, grid-striding over `batch * heads * spans`. Thread
/// `c * head + j` owns rows `c * WKV_ROWS ..` of column j of S in registers. Per step, threads
/// `< head` stage r, k and the decay in shared memory; each owner adds its rows' share of `y[j]`;
/// with more than one chunk the shares meet in shared memory and chunk 0 writes `y[j]`. Two
/// barriers per step.
///
/// Head sizes up to [`WKV_SMALL_HEAD`] (blocks of at most 128 threads, launch bounds that leave a
/// thread every register its 32 rows want); larger ones run [`wkv6_wide_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn wkv6_f32(
    p: Wkv6Params,
    r: *const f32,
    k: *const f32,
    v: *const f32,
    w: *const f32,
    u: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    if p.head > WKV_SMALL_HEAD {
        return;
    }
    // SAFETY: the kernel's contract.
    unsafe { wkv6(p, [r, k, v, w, u], state_in, state_out, final_state, y) }
}

/// [`wkv6_f32`] for head sizes above [`WKV_SMALL_HEAD`] (up to `WKV_MAX_HEAD`: blocks of up to 512
/// threads, so at most 128 registers a thread).
///
/// # Safety
/// As [`wkv6_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn wkv6_wide_f32(
    p: Wkv6Params,
    r: *const f32,
    k: *const f32,
    v: *const f32,
    w: *const f32,
    u: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    // SAFETY: the kernel's contract.
    unsafe { wkv6(p, [r, k, v, w, u], state_in, state_out, final_state, y) }
}

/// The body of [`wkv6_f32`] and [`wkv6_wide_f32`] (inputs r, k, v, w, u).
///
/// # Safety
/// As [`wkv6_f32`].
#[inline(always)]
unsafe fn wkv6(
    p: Wkv6Params,
    [r, k, v, w, u]: [*const f32; 5],
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let n = p.head;
    let chunks = p.chunks;
    if n == 0 || n > WKV_MAX_HEAD || chunks != n.div_ceil(WKV_ROWS) || block_dim_x() < chunks * n {
        return;
    }
    let (len, heads, nn) = (p.len as u64, p.heads as u64, n as u64);
    // A whole-sequence launch is one span whatever `p.span` says (each span of it would start
    // from `state_in`).
    let spans = if p.mode == WKV_WHOLE { 1 } else { wkv_spans(p.len, p.span) as u64 };
    let span = if spans == 1 { len } else { p.span as u64 };
    let (outputs, spans_states) = (p.mode != WKV_SPAN_STATES, p.mode == WKV_SPAN_STATES);
    let stride = wkv_span_stride(n) as u64;
    let tid = thread_idx_x();
    let (j, chunk) = (rem(tid as u64, nn), quot(tid as u64, nn) as u32);
    let owner = chunk < chunks;
    let shared = dynamic_shared_ptr().cast::<f32>();
    // Shared layout (f32): r[n], k[n], decay[n], bonus[n], partial[chunks * n].
    let (r_sh, k_sh, decay_sh, bonus_sh, part_sh) = (0, nn, 2 * nn, 3 * nn, 4 * nn);
    // SAFETY (all shared accesses below): indices are below 4 n + chunks n f32, the launch's
    // `wkv_shared_bytes(n)`.
    let sh = |i: u64| unsafe { shared.add(i as usize) };
    let mut item = block_idx_x() as u64;
    while item < p.batch as u64 * heads * spans {
        let (bh, sp) = (quot(item, spans), rem(item, spans));
        let (b, h) = (quot(bh, heads), rem(bh, heads));
        if (tid as u64) < nn {
            let i = tid as u64;
            // SAFETY: h * n + i < heads * n.
            let uv = unsafe { *u.add((h * nn + i) as usize) };
            // SAFETY: shared index below 4 n.
            unsafe { *sh(bonus_sh + i) = if p.exp_bonus != 0 { math::exp(uv) } else { uv } };
        }
        // The state's first element: per (b, head), or per span's first state.
        let first = if p.mode == WKV_SPAN_OUTPUTS { item } else { bh } * nn * nn;
        let mut s = [0.0f32; ROWS];
        unroll!(q in ROWS => {
            let i = chunk as u64 * ROWS as u64 + q as u64;
            if owner && i < nn && !spans_states {
                // SAFETY: (b, h, i, j) lies inside the states.
                s[q] = unsafe { load_or(state_in, first + i * nn + j, 0.0) };
            }
        });
        // The span's decay product of key `tid` (threads `< head`, states pass only).
        let mut decays = 1.0f32;
        let (mut t, end) = (sp * span, if (sp + 1) * span < len { (sp + 1) * span } else { len });
        while t < end {
            let off = if p.layout_bhtn != 0 { (bh * len + t) * nn } else { ((b * len + t) * heads + h) * nn };
            if (tid as u64) < nn {
                let i = tid as u64;
                // SAFETY: off + i < batch * len * heads * n; shared indices below 3 n.
                unsafe {
                    let decay = math::exp(-math::exp(*w.add((off + i) as usize)));
                    decays *= decay;
                    *sh(r_sh + i) = *r.add((off + i) as usize);
                    *sh(k_sh + i) = *k.add((off + i) as usize);
                    *sh(decay_sh + i) = decay;
                }
            }
            sync_threads();
            // SAFETY: off + j < batch * len * heads * n (j < n).
            let vj = if owner { unsafe { *v.add((off + j) as usize) } } else { 0.0 };
            let mut part = 0.0f32;
            unroll!(q in ROWS => {
                let i = chunk as u64 * ROWS as u64 + q as u64;
                if owner && i < nn {
                    // SAFETY: shared indices below 4 n.
                    let (ri, ki, di, ui) = unsafe {
                        (*sh(r_sh + i), *sh(k_sh + i), *sh(decay_sh + i), *sh(bonus_sh + i))
                    };
                    part = math::fma(ri, math::fma(ui * ki, vj, s[q]), part);
                    s[q] = math::fma(di, s[q], ki * vj);
                }
            });
            if outputs && chunks == 1 {
                if owner {
                    // SAFETY: as for v.
                    unsafe { *y.add((off + j) as usize) = part };
                }
            } else if outputs {
                if owner {
                    // SAFETY: chunk * n + j < chunks * n.
                    unsafe { *sh(part_sh + chunk as u64 * nn + j) = part };
                }
                sync_threads();
                if owner && chunk == 0 {
                    let mut sum = 0.0f32;
                    let mut c = 0;
                    while c < chunks as u64 {
                        // SAFETY: c * n + j < chunks * n.
                        sum += unsafe { *sh(part_sh + c * nn + j) };
                        c += 1;
                    }
                    // SAFETY: as for v.
                    unsafe { *y.add((off + j) as usize) = sum };
                }
            }
            // The next step restages r, k, decay (and the partials) only after every thread is done.
            sync_threads();
            t += 1;
        }
        // Where the item's state ends: its span's scratch entry (the states pass, with the
        // decays after the change), the (b, head) state (whole sequences), nowhere (the outputs
        // pass). Null destinations are skipped.
        let (dst, also, at) = match p.mode {
            WKV_SPAN_STATES => (final_state, core::ptr::null_mut(), item * stride),
            WKV_WHOLE => (state_out, final_state, bh * nn * nn),
            _ => (core::ptr::null_mut(), core::ptr::null_mut(), 0),
        };
        unroll!(q in ROWS => {
            let i = chunk as u64 * ROWS as u64 + q as u64;
            if owner && i < nn {
                // SAFETY: inside the states, or the scratch's entry (i, j < n).
                unsafe {
                    store_if(dst, at + i * nn + j, s[q]);
                    store_if(also, at + i * nn + j, s[q]);
                }
            }
        });
        if spans_states && (tid as u64) < nn {
            // SAFETY: the entry's last n f32.
            unsafe { store_if(final_state, at + nn * nn + tid as u64, decays) };
        }
        // The next item restages the bonus only after every thread has used this one.
        sync_threads();
        item += grid_dim_x() as u64;
    }
}

/// The first state of every span of a WKV6 run in spans ([`wkv6_f32`]): per `(b, head)` and state
/// element `(i, j)`, from `state_in` (zero when null), `start[span] = S`, then `S <- decays[span][i]
/// S + delta[span][i, j]` in span order; the last S is the final state (`state_out`,
/// `final_state`, each when non-null).
///
/// # Safety
/// `spans` (the [`WKV_SPAN_STATES`] scratch) holds `batch * heads * spans` entries of
/// [`wkv_span_stride`]`(head)` f32, `starts` as many of `head * head`; the states (when non-null)
/// `batch * heads * head * head`. `state_in` may equal `state_out`.
///
/// # Parameters
/// `p` (its `span` and sizes); the spans' scratch; the state pointers (module doc); the spans'
/// first states.
///
/// # Thread mapping
/// A thread per `(b, head, i, j)`, grid-striding (consecutive threads, consecutive j).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn wkv6_pass_f32(
    p: Wkv6Params,
    spans_in: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    starts: *mut f32,
) {
    let nn = p.head as u64;
    let spans = wkv_spans(p.len, p.span) as u64;
    let stride = wkv_span_stride(p.head) as u64;
    let total = p.batch as u64 * p.heads as u64 * nn * nn;
    let mut e = global_thread_x();
    while e < total {
        let (bh, ij) = (quot(e, nn * nn), rem(e, nn * nn));
        let i = quot(ij, nn);
        // SAFETY: e < batch * heads * n * n; the entries below lie inside spans_in and starts.
        unsafe {
            let mut s = load_or(state_in, e, 0.0);
            let mut sp = 0;
            while sp < spans {
                let item = bh * spans + sp;
                *starts.add((item * nn * nn + ij) as usize) = s;
                let entry = item * stride;
                s = math::fma(
                    *spans_in.add((entry + nn * nn + i) as usize),
                    s,
                    *spans_in.add((entry + ij) as usize),
                );
                sp += 1;
            }
            store_if(state_out, e, s);
            store_if(final_state, e, s);
        }
        e += grid_threads_x();
    }
}

/// Depthwise causal conv1d with a carried window: per channel `(b, d)`, the input is prefixed with
/// the `width - 1` carried values (zeros when `state_in` is null), `y[t] = bias[d] +
/// Σₖ weight[d, k] xp[t + k]` (then `silu` when `p.silu`), and the new state is the last
/// `width - 1` values of the prefixed input.
///
/// # Safety
/// x and y hold `batch * channels * len` f32; weight `channels * width`; bias (when non-null)
/// `channels`; the states (when non-null) `batch * channels * (width - 1)`. Overlaps as for
/// [`selective_scan_f32`].
///
/// # Parameters
/// `p`; inputs x, weight, the optional bias (null when absent); the state pointers (module doc);
/// the output y.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks of at least `width - 1` threads: a block per channel, grid-striding over
/// `batch * channels`; its threads stride over the time steps (consecutive steps, consecutive
/// threads: coalesced), each output reading its `width` inputs (the carried ones from
/// `state_in`). The block's threads read the new state's values, wait for every read of the
/// channel's `state_in` (a barrier: `state_out` may be `state_in`), then the first `width - 1`
/// write it. A launch with `width` outside `1..=CONV_MAX_WIDTH`, or fewer threads, writes nothing.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn causal_conv_f32(
    p: CausalConvParams,
    x: *const f32,
    weight: *const f32,
    bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let kw = p.width as usize;
    let threads = block_dim_x() as u64;
    if kw == 0 || kw > CONV_MAX_WIDTH as usize || threads < (kw - 1) as u64 {
        return;
    }
    let (len, d_len, carried) = (p.len as u64, p.channels as u64, (kw - 1) as u64);
    let channels = p.batch as u64 * d_len;
    let tid = thread_idx_x() as u64;
    let mut ch = block_idx_x() as u64;
    while ch < channels {
        let d = rem(ch, d_len);
        // Tap m (0 = the current input, m = the m-th previous) has weight `weight[d, kw - 1 - m]`.
        let mut wt = [0.0f32; CONV_MAX_WIDTH as usize];
        for (m, w) in wt.iter_mut().enumerate() {
            if m < kw {
                // SAFETY: d < channels, kw - 1 - m < width.
                *w = unsafe { *weight.add((d * kw as u64 + (kw - 1 - m) as u64) as usize) };
            }
        }
        // SAFETY: d < channels.
        let bv = unsafe { load_or(bias, d, 0.0) };
        let (io, st) = (ch * len, ch * carried);
        // Input at time `tau` of the prefixed sequence (negative: a carried value, the oldest
        // at `-carried`).
        // SAFETY: io + tau < batch * channels * len for 0 <= tau < len; a carried value's index
        // st + carried + tau is inside the channel's state.
        let input = |tau: i64| unsafe {
            if tau >= 0 {
                *x.add((io + tau as u64) as usize)
            } else {
                load_or(state_in, (st as i64 + carried as i64 + tau) as u64, 0.0)
            }
        };
        let mut t = tid;
        while t < len {
            let mut acc = bv;
            for (m, &w) in wt.iter().enumerate() {
                if m < kw {
                    acc = math::fma(w, input(t as i64 - m as i64), acc);
                }
            }
            let out = if p.silu != 0 { math::silu(acc) } else { acc };
            // SAFETY: as for x.
            unsafe { *y.add((io + t) as usize) = out };
            t += threads;
        }
        // The new state: the last `carried` inputs of the prefixed sequence.
        let kept = if tid < carried { input(len as i64 - carried as i64 + tid as i64) } else { 0.0 };
        sync_threads();
        if tid < carried {
            // SAFETY: inside the states.
            unsafe {
                store_if(state_out, st + tid, kept);
                store_if(final_state, st + tid, kept);
            }
        }
        ch += grid_dim_x() as u64;
    }
}

/// [`causal_conv_f32`]'s conv in the channels-last layout: x `(batch, len, channels)` read through
/// `p.x` (a window of a wider tensor's columns or dense), y `(batch, len, channels)` dense; the
/// weight, bias and states as there.
///
/// # Safety
/// x holds every element its row view reaches (`channels` values at each of `batch * len`
/// steps), not overlapping y; y `batch * len * channels` f32; weight `channels * width`; bias
/// (when non-null) `channels`; the states (when non-null) `batch * channels * (width - 1)`.
/// `state_in == state_out` is sound (below). A launch with `width` outside
/// `1..=CONV_ROWS_MAX_WIDTH` or `steps == 0` writes nothing.
///
/// # Parameters
/// As [`causal_conv_f32`].
///
/// # Thread mapping
/// 1-D grid-stride over `(b, run, d)` items, `d` fastest (a warp reads 32 neighbouring channels of
/// one step: coalesced): an item computes `p.steps` consecutive steps of channel `(b, d)`, its
/// window of the last `width - 1` inputs in registers, reading each input once after the
/// `width - 1` before its first step. Only the item of the first run reads `state_in`, and it
/// alone writes the channel's new state (the last `width - 1` inputs, read again after every read
/// of `state_in`), so a state updated in place is read before it is written.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn causal_conv_rows_f32(
    p: CausalConvRowsParams,
    x: *const f32,
    weight: *const f32,
    bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    let kw = p.width as usize;
    if kw == 0 || kw > CONV_ROWS_MAX_WIDTH as usize || p.steps == 0 {
        return;
    }
    let io = ConvIo { x, weight, bias, state_in, state_out, final_state, y };
    // SAFETY: the kernel's contract, passed on; the window holds `kw <= W` taps.
    unsafe {
        if kw <= 4 { conv_rows::<4>(&p, &io) } else { conv_rows::<{ CONV_ROWS_MAX_WIDTH as usize }>(&p, &io) }
    }
}

/// The pointers of [`causal_conv_rows_f32`].
struct ConvIo {
    x: *const f32,
    weight: *const f32,
    bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
}

/// Every item of [`causal_conv_rows_f32`], with a window of `W >= width` registers.
///
/// # Safety
/// As [`causal_conv_rows_f32`], whose checks passed; `p.width <= W`.
#[inline(always)]
unsafe fn conv_rows<const W: usize>(p: &CausalConvRowsParams, o: &ConvIo) {
    let kw = p.width as usize;
    let (d_len, len, steps, carried) = (p.channels as u64, p.len as u64, p.steps as u64, (kw - 1) as u64);
    let runs = len.div_ceil(steps);
    let items = p.batch as u64 * runs * d_len;
    let (x_off, x_row) = (p.x.offset as u64, p.x.row as u64);
    let mut item = (block_idx_x() as u64) * block_dim_x() as u64 + thread_idx_x() as u64;
    let stride = grid_dim_x() as u64 * block_dim_x() as u64;
    while item < items {
        let (d, run, b) = (rem(item, d_len), rem(quot(item, d_len), runs), quot(item, d_len * runs));
        let st = (b * d_len + d) * carried;
        // Input at step `tau` of the prefixed sequence (negative: a carried value, the oldest at
        // `-carried`).
        // SAFETY: for 0 <= tau < len, (b, tau, d) lies inside x through its view; a carried
        // value's index st + carried + tau lies inside the channel's state.
        let input = |tau: i64| unsafe {
            if tau >= 0 {
                *o.x.add((x_off + (b * len + tau as u64) * x_row + d) as usize)
            } else {
                load_or(o.state_in, (st as i64 + carried as i64 + tau) as u64, 0.0)
            }
        };
        // Tap m (0 = the current input, m = the m-th previous) has weight `weight[d, kw - 1 - m]`.
        let mut wt = [0.0f32; W];
        // The window: win[m] is the input m steps before the current one.
        let mut win = [0.0f32; W];
        let t0 = run * steps;
        unroll!(m in TAPS => {
            if m < W && m < kw {
                // SAFETY: d < channels, kw - 1 - m < width.
                wt[m] = unsafe { *o.weight.add((d * kw as u64 + (kw - 1 - m) as u64) as usize) };
                if m > 0 {
                    win[m - 1] = input(t0 as i64 - m as i64);
                }
            }
        });
        // SAFETY: d < channels.
        let bv = unsafe { load_or(o.bias, d, 0.0) };
        let end = if t0 + steps < len { t0 + steps } else { len };
        let mut t = t0;
        while t < end {
            // Shift the window by one step (highest tap first), then the current input.
            unroll!(j in TAPS => {
                let m = 15 - j;
                if m > 0 && m < W {
                    win[m] = win[m - 1];
                }
            });
            win[0] = input(t as i64);
            let mut acc = bv;
            unroll!(m in TAPS => {
                if m < W && m < kw {
                    acc = math::fma(wt[m], win[m], acc);
                }
            });
            let out = if p.silu != 0 { math::silu(acc) } else { acc };
            // SAFETY: (b, t, d) lies inside y.
            unsafe { *o.y.add(((b * len + t) * d_len + d) as usize) = out };
            t += 1;
        }
        if run == 0 && carried > 0 {
            // The new state: the last `carried` inputs of the prefixed sequence, every one read
            // before any is written (in place, they may be the old state's).
            let mut kept = [0.0f32; W];
            unroll!(j in TAPS => {
                if j < W && (j as u64) < carried {
                    kept[j] = input(len as i64 - carried as i64 + j as i64);
                }
            });
            unroll!(j in TAPS => {
                if j < W && (j as u64) < carried {
                    // SAFETY: inside the channel's state.
                    unsafe {
                        store_if(o.state_out, st + j as u64, kept[j]);
                        store_if(o.final_state, st + j as u64, kept[j]);
                    }
                }
            });
        }
        item += stride;
    }
}
