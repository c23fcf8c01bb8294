//! ONNX recurrent cells, f32: the LSTM, GRU and RNN recurrences over time.
//!
//! The input projection `XW = X Wᵀ + Wb` of every time step is one GEMM that runs before these
//! kernels (see [`RecurrentParams`]); what is left is inherently sequential: a block owns one
//! (batch row, direction) pair and walks its time steps. The hidden state lives in dynamic shared
//! memory, double-buffered (step `k` reads one buffer and writes the other, so one barrier per step
//! suffices); the LSTM cell state and the GRU's `z` and `r ⊙ h` vectors live there too
//! ([`recurrent_shared_vectors`](crate::abi::recurrent_shared_vectors)). `R` is read from global memory every step (it stays in L2).
//!
//! Inside a block a warp owns one hidden unit `j` at a time (`j = warp, warp + warps, ...`, the
//! same units every step): its lanes split the `hidden` columns of the unit's gate rows of `R`
//! (coalesced), a butterfly sum gives every lane the dot products, and lane 0 applies the cell.
//! A unit's cell state is only ever touched by the warp that owns it. Sums are f32.
//!
//! Every access stays inside the extents of [`RecurrentParams`]: time `t < seq` (sequence lengths
//! are clamped to `0..=seq`), unit `j < hidden`, batch row `b < batch`, direction `d < dirs`.

use crate::abi::{
    ActivationSpec, CellActivation, CellActivations, RECURRENT_INPUT_FORGET, RECURRENT_LENS_I64,
    RECURRENT_LINEAR_BEFORE_RESET, RecurrentParams,
};
use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, block_idx_y, dynamic_shared_ptr, sync_threads, thread_idx_x,
    warp_sum_f32,
};
use crate::math;

/// One block's share of the work: its (direction, batch row), sequence and threads.
#[derive(Clone, Copy)]
struct Walk {
    /// Direction.
    d: u64,
    /// Batch row.
    b: u64,
    /// Steps to run (`sequence_lens[b]`, clamped to `0..=seq`).
    len: u64,
    /// Runs from `t = len - 1` down to 0.
    reverse: bool,
    /// Hidden size.
    hidden: u64,
    /// This direction's activations.
    acts: CellActivations,
    /// This thread's warp and lane, and the block's warp count.
    warp: u64,
    lane: u64,
    warps: u64,
    /// Offset of this (direction, batch row)'s states (`initial_h`, `Y_h`, ...).
    state: u64,
}

impl Walk {
    /// The time index of step `k < len`.
    #[inline(always)]
    fn t(&self, k: u64) -> u64 {
        if self.reverse { self.len - 1 - k } else { k }
    }
}

/// This block's walk, or `None` for a block outside `batch x dirs`.
///
/// # Safety
/// `lens` is null or holds `p.batch` i32 (i64 with `RECURRENT_LENS_I64`).
#[inline(always)]
unsafe fn walk(p: &RecurrentParams, lens: *const u8) -> Option<Walk> {
    let (b, d) = (block_idx_x(), block_idx_y());
    if b >= p.batch || d >= p.dirs || d >= 2 || p.hidden == 0 {
        return None;
    }
    let seq = p.seq as i64;
    let len = if lens.is_null() {
        seq
    } else if p.flags & RECURRENT_LENS_I64 != 0 {
        // SAFETY: b < batch (the launch contract).
        unsafe { *lens.cast::<i64>().add(b as usize) }
    } else {
        // SAFETY: as above.
        unsafe { *lens.cast::<i32>().add(b as usize) as i64 }
    };
    let acts = if d == 0 { p.acts[0] } else { p.acts[1] };
    let (tid, threads) = (thread_idx_x() as u64, block_dim_x() as u64);
    let (d, b) = (d as u64, b as u64);
    Some(Walk {
        d,
        b,
        len: len.max(0).min(seq) as u64,
        reverse: (p.reverse_dirs >> d) & 1 != 0,
        hidden: p.hidden as u64,
        acts,
        warp: tid / WARP_SIZE as u64,
        lane: tid % WARP_SIZE as u64,
        warps: (threads / WARP_SIZE as u64).max(1),
        state: d * p.state_d + b * p.state_b,
    })
}

#[inline(always)]
fn act(s: ActivationSpec, x: f32) -> f32 {
    math::activate_cell(CellActivation::from_code(s.code), x, s.alpha, s.beta)
}

/// `x` clamped to `[-c, c]` (`c` is never negative; NaN stays NaN).
#[inline(always)]
fn clip(x: f32, c: f32) -> f32 {
    if x < -c {
        -c
    } else if x > c {
        c
    } else {
        x
    }
}

/// `v[i]`, or 0 when `v` is null (an absent optional operand).
///
/// # Safety
/// `v` is null or valid at `i`.
#[inline(always)]
unsafe fn at_or_zero(v: *const f32, i: u64) -> f32 {
    // SAFETY: the caller's contract.
    if v.is_null() { 0.0 } else { unsafe { *v.add(i as usize) } }
}

/// Dot products of `h` (shared, `hidden` long) with rows `g * hidden + j` (`g < G`) of `r`
/// (`[G * hidden, hidden]` row-major), summed over the warp: every lane gets all `G` sums.
/// Warp-collective.
///
/// # Safety
/// `j < hidden`; `r` holds `G * hidden * hidden` f32 and `h` `hidden` f32.
#[inline(always)]
unsafe fn gate_dots<const G: usize>(
    r: *const f32,
    j: u64,
    h: *const f32,
    hidden: u64,
    lane: u64,
) -> [f32; G] {
    let mut acc = [0.0f32; G];
    let mut k = lane;
    while k < hidden {
        // SAFETY: k < hidden.
        let hk = unsafe { *h.add(k as usize) };
        for (g, a) in acc.iter_mut().enumerate() {
            let row = g as u64 * hidden + j;
            // SAFETY: row < G * hidden and k < hidden.
            *a = math::fma(unsafe { *r.add((row * hidden + k) as usize) }, hk, *a);
        }
        k += WARP_SIZE as u64;
    }
    for a in acc.iter_mut() {
        *a = warp_sum_f32(*a);
    }
    acc
}

/// Fills `dst[0..hidden]` (shared) with the state at `src + offset`, or zeros when `src` is null.
/// Block-collective (no barrier).
///
/// # Safety
/// `dst` holds `hidden` f32; `src` is null or holds `offset + hidden` f32.
#[inline(always)]
unsafe fn load_state(dst: *mut f32, src: *const f32, offset: u64, hidden: u64) {
    let mut j = thread_idx_x() as u64;
    while j < hidden {
        // SAFETY: j < hidden.
        unsafe { *dst.add(j as usize) = at_or_zero(src, offset + j) };
        j += block_dim_x() as u64;
    }
}

/// Copies the shared `src[0..hidden]` to `dst + offset` when `dst` is not null. Block-collective.
///
/// # Safety
/// As [`load_state`], with the roles swapped.
#[inline(always)]
unsafe fn store_state(dst: *mut f32, src: *const f32, offset: u64, hidden: u64) {
    if dst.is_null() {
        return;
    }
    let mut j = thread_idx_x() as u64;
    while j < hidden {
        // SAFETY: j < hidden.
        unsafe { *dst.add((offset + j) as usize) = *src.add(j as usize) };
        j += block_dim_x() as u64;
    }
}

/// After the last step: zeros `Y` at the time steps past this row's length (`len..seq`) and writes
/// the final hidden state `h` to `Y_h`. Block-collective; call after a barrier.
///
/// # Safety
/// The launch contract; `h` is the shared hidden state.
#[inline(always)]
unsafe fn finish(p: &RecurrentParams, w: &Walk, y: *mut f32, y_h: *mut f32, h: *const f32) {
    if !y.is_null() {
        let pad = (p.seq as u64 - w.len) * w.hidden;
        let mut i = thread_idx_x() as u64;
        while i < pad {
            let (t, j) = (w.len + i / w.hidden, i % w.hidden);
            // SAFETY: len <= t < seq, j < hidden.
            unsafe { *y.add((t * p.y_t + w.d * p.y_d + w.b * p.y_b + j) as usize) = 0.0 };
            i += block_dim_x() as u64;
        }
    }
    // SAFETY: the launch contract.
    unsafe { store_state(y_h, h, w.state, w.hidden) };
}

/// Writes `Y[t, d, b, j] = v` when `Y` is not omitted.
///
/// # Safety
/// `t < seq`, `j < hidden` (the launch contract).
#[inline(always)]
unsafe fn store_y(p: &RecurrentParams, w: &Walk, y: *mut f32, t: u64, j: u64, v: f32) {
    if !y.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *y.add((t * p.y_t + w.d * p.y_d + w.b * p.y_b + j) as usize) = v };
    }
}

// Recurrent launch contract, shared by the three kernels below.
//
// # Safety
// `p` describes the operands (see [`RecurrentParams`]): `xw` holds the projection of every
// (d, t, b) row at its strides, `r` is `[dirs, gates * hidden, hidden]`, `bias` null or
// `[dirs, 2 * gates * hidden]`, `lens` null or `batch` i32 (i64 with `RECURRENT_LENS_I64`), the
// states null or `[dirs, batch, hidden]` at the state strides, `y` null or `[seq, dirs, batch,
// hidden]` at the Y strides; outputs overlap no input nor each other. Block size a multiple of 32,
// at most 1024; `recurrent_shared_vectors(kernel) * hidden * 4` bytes of dynamic shared memory.
//
// # Thread mapping
// Grid (batch, dirs): block (b, d) runs direction d of batch row b over its sequence. Warp w of W
// owns hidden units w, w + W, ...; its lanes split each dot product's columns, lane 0 applies the
// cell. One barrier per step (two for a GRU without `linear_before_reset`).

/// ONNX LSTM: gates (i, o, f, c) per step: `i = f(xw_i + R_i h + Rb_i + Pi ⊙ C)`, forget `f` alike
/// (or `1 - i` with `input_forget`), `c̃ = g(xw_c + R_c h + Rb_c)`, `C' = f ⊙ C + i ⊙ c̃`,
/// `o = f(xw_o + R_o h + Rb_o + Po ⊙ C')`, `h' = o ⊙ h(C')`; gate pre-activations are clipped.
///
/// # Safety
/// The recurrent launch contract above (3 shared vectors: h twice, C).
///
/// # Parameters
/// `p` ([`RecurrentParams`], gates = 4); reads `xw`, `r`, `bias` (Rb half), `lens`, `h0`, `c0`,
/// `peep` (`[dirs, 3 * hidden]`: Pi, Po, Pf; or null); writes `y`, `y_h`, `y_c` (each may be null).
///
/// # Thread mapping
/// See the recurrent launch contract above.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn lstm_f32(
    p: RecurrentParams,
    xw: *const f32,
    r: *const f32,
    bias: *const f32,
    lens: *const u8,
    h0: *const f32,
    c0: *const f32,
    peep: *const f32,
    y: *mut f32,
    y_h: *mut f32,
    y_c: *mut f32,
) {
    // SAFETY: the launch contract.
    let Some(w) = (unsafe { walk(&p, lens) }) else { return };
    let hid = w.hidden;
    let gh = 4 * hid;
    let smem = dynamic_shared_ptr().cast::<f32>();
    // SAFETY: three vectors of `hidden` f32 fit the shared memory the launch provides; the operand
    // offsets below are inside their tensors for d < dirs.
    let (ha, hb, cs, rd, rb, pd) = unsafe {
        (
            smem,
            smem.add(hid as usize),
            smem.add(2 * hid as usize),
            r.add((w.d * gh * hid) as usize),
            if bias.is_null() { bias } else { bias.add((w.d * 2 * gh + gh) as usize) },
            if peep.is_null() { peep } else { peep.add((w.d * 3 * hid) as usize) },
        )
    };
    // SAFETY: the launch contract.
    unsafe {
        load_state(ha, h0, w.state, hid);
        load_state(cs, c0, w.state, hid);
    }
    sync_threads();
    let (fa, ga, ha_act) = (w.acts.f, w.acts.g, w.acts.h);
    let input_forget = p.flags & RECURRENT_INPUT_FORGET != 0;
    for k in 0..w.len {
        let t = w.t(k);
        let (h, hn) = if k % 2 == 0 { (ha, hb) } else { (hb, ha) };
        // SAFETY: t < seq, b < batch, d < dirs: the row is inside `xw`.
        let x = unsafe { xw.add((w.d * p.xw_d + t * p.xw_t + w.b * p.xw_b) as usize) };
        let mut j = w.warp;
        while j < hid {
            // SAFETY: j < hidden; rd is direction d's [4 * hidden, hidden] block.
            let [ai, ao, af, ac] = unsafe { gate_dots::<4>(rd, j, h, hid, w.lane) };
            if w.lane == 0 {
                // SAFETY: g * hidden + j < 4 * hidden inside x's row, rb's half and pd's block;
                // j < hidden inside the shared vectors; t < seq.
                unsafe {
                    let pre =
                        |g: u64, a: f32| *x.add((g * hid + j) as usize) + a + at_or_zero(rb, g * hid + j);
                    let c_old = *cs.add(j as usize);
                    let i = act(fa, clip(pre(0, ai) + at_or_zero(pd, j) * c_old, p.clip));
                    let f = if input_forget {
                        1.0 - i
                    } else {
                        act(fa, clip(pre(2, af) + at_or_zero(pd, 2 * hid + j) * c_old, p.clip))
                    };
                    let cand = act(ga, clip(pre(3, ac), p.clip));
                    let c_new = f * c_old + i * cand;
                    let o = act(fa, clip(pre(1, ao) + at_or_zero(pd, hid + j) * c_new, p.clip));
                    let h_new = o * act(ha_act, c_new);
                    *cs.add(j as usize) = c_new;
                    *hn.add(j as usize) = h_new;
                    store_y(&p, &w, y, t, j, h_new);
                }
            }
            j += w.warps;
        }
        sync_threads();
    }
    let h_final = if w.len % 2 == 0 { ha } else { hb };
    // SAFETY: the launch contract; every shared write happened before the last barrier.
    unsafe {
        finish(&p, &w, y, y_h, h_final);
        store_state(y_c, cs, w.state, hid);
    }
}

/// ONNX GRU: gates (z, r, h) per step: `z = f(xw_z + R_z h + Rb_z)`, `r = f(xw_r + R_r h + Rb_r)`,
/// `h̃ = g(xw_h + R_h (r ⊙ h) + Rb_h)`, or with `linear_before_reset`
/// `h̃ = g(xw_h + r ⊙ (R_h h + Rb_h))`; `h' = (1 - z) ⊙ h̃ + z ⊙ h`. Pre-activations are clipped.
///
/// # Safety
/// The recurrent launch contract above (4 shared vectors: h twice, z, r ⊙ h).
///
/// # Parameters
/// `p` ([`RecurrentParams`], gates = 3); reads `xw`, `r`, `bias` (Rb half), `lens`, `h0`; writes
/// `y`, `y_h` (each may be null).
///
/// # Thread mapping
/// See the recurrent launch contract above. Without `linear_before_reset` each step has two
/// phases (z and r ⊙ h for every unit, a barrier, then the candidate).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gru_f32(
    p: RecurrentParams,
    xw: *const f32,
    r: *const f32,
    bias: *const f32,
    lens: *const u8,
    h0: *const f32,
    y: *mut f32,
    y_h: *mut f32,
) {
    // SAFETY: the launch contract.
    let Some(w) = (unsafe { walk(&p, lens) }) else { return };
    let hid = w.hidden;
    let gh = 3 * hid;
    let smem = dynamic_shared_ptr().cast::<f32>();
    // SAFETY: four vectors of `hidden` f32 fit the shared memory the launch provides; the operand
    // offsets are inside their tensors for d < dirs.
    let (ha, hb, zs, rhs, rd, rb) = unsafe {
        (
            smem,
            smem.add(hid as usize),
            smem.add(2 * hid as usize),
            smem.add(3 * hid as usize),
            r.add((w.d * gh * hid) as usize),
            if bias.is_null() { bias } else { bias.add((w.d * 2 * gh + gh) as usize) },
        )
    };
    // SAFETY: the launch contract.
    unsafe { load_state(ha, h0, w.state, hid) };
    sync_threads();
    let (fa, ga) = (w.acts.f, w.acts.g);
    let lbr = p.flags & RECURRENT_LINEAR_BEFORE_RESET != 0;
    // SAFETY: the h gate's rows start at 2 * hidden rows into direction d's block.
    let rh_rows = unsafe { rd.add((2 * hid * hid) as usize) };
    for k in 0..w.len {
        let t = w.t(k);
        let (h, hn) = if k % 2 == 0 { (ha, hb) } else { (hb, ha) };
        // SAFETY: t < seq, b < batch, d < dirs: the row is inside `xw`.
        let x = unsafe { xw.add((w.d * p.xw_d + t * p.xw_t + w.b * p.xw_b) as usize) };
        // SAFETY (both closures): g * hidden + j < 3 * hidden inside x's row and rb's half.
        let pre = |g: u64, j: u64| unsafe { *x.add((g * hid + j) as usize) + at_or_zero(rb, g * hid + j) };
        let mut j = w.warp;
        if lbr {
            while j < hid {
                // SAFETY: j < hidden; rd is direction d's [3 * hidden, hidden] block.
                let [az, ar, ah] = unsafe { gate_dots::<3>(rd, j, h, hid, w.lane) };
                if w.lane == 0 {
                    let z = act(fa, clip(pre(0, j) + az, p.clip));
                    let rr = act(fa, clip(pre(1, j) + ar, p.clip));
                    // SAFETY: as for `pre`.
                    let xh = unsafe { *x.add((2 * hid + j) as usize) };
                    let cand = act(ga, clip(xh + rr * (ah + unsafe { at_or_zero(rb, 2 * hid + j) }), p.clip));
                    // SAFETY: j < hidden inside the shared vectors; t < seq.
                    unsafe {
                        let h_new = (1.0 - z) * cand + z * *h.add(j as usize);
                        *hn.add(j as usize) = h_new;
                        store_y(&p, &w, y, t, j, h_new);
                    }
                }
                j += w.warps;
            }
        } else {
            while j < hid {
                // SAFETY: as above.
                let [az, ar] = unsafe { gate_dots::<2>(rd, j, h, hid, w.lane) };
                if w.lane == 0 {
                    let z = act(fa, clip(pre(0, j) + az, p.clip));
                    let rr = act(fa, clip(pre(1, j) + ar, p.clip));
                    // SAFETY: j < hidden inside the shared vectors.
                    unsafe {
                        *zs.add(j as usize) = z;
                        *rhs.add(j as usize) = rr * *h.add(j as usize);
                    }
                }
                j += w.warps;
            }
            sync_threads();
            j = w.warp;
            while j < hid {
                // SAFETY: j < hidden; rh_rows is the h gate's [hidden, hidden] block.
                let [ah] = unsafe { gate_dots::<1>(rh_rows, j, rhs, hid, w.lane) };
                if w.lane == 0 {
                    let cand = act(ga, clip(pre(2, j) + ah, p.clip));
                    // SAFETY: j < hidden inside the shared vectors; t < seq.
                    unsafe {
                        let z = *zs.add(j as usize);
                        let h_new = (1.0 - z) * cand + z * *h.add(j as usize);
                        *hn.add(j as usize) = h_new;
                        store_y(&p, &w, y, t, j, h_new);
                    }
                }
                j += w.warps;
            }
        }
        sync_threads();
    }
    let h_final = if w.len % 2 == 0 { ha } else { hb };
    // SAFETY: the launch contract; every shared write happened before the last barrier.
    unsafe { finish(&p, &w, y, y_h, h_final) };
}

/// ONNX RNN: `h' = f(xw + R h + Rb)` per step, the pre-activation clipped.
///
/// # Safety
/// The recurrent launch contract above (2 shared vectors: h twice).
///
/// # Parameters
/// `p` ([`RecurrentParams`], gates = 1); reads `xw`, `r`, `bias` (Rb half), `lens`, `h0`; writes
/// `y`, `y_h` (each may be null).
///
/// # Thread mapping
/// See the recurrent launch contract above.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn rnn_f32(
    p: RecurrentParams,
    xw: *const f32,
    r: *const f32,
    bias: *const f32,
    lens: *const u8,
    h0: *const f32,
    y: *mut f32,
    y_h: *mut f32,
) {
    // SAFETY: the launch contract.
    let Some(w) = (unsafe { walk(&p, lens) }) else { return };
    let hid = w.hidden;
    let smem = dynamic_shared_ptr().cast::<f32>();
    // SAFETY: two vectors of `hidden` f32 fit the shared memory the launch provides; the operand
    // offsets are inside their tensors for d < dirs.
    let (ha, hb, rd, rb) = unsafe {
        (
            smem,
            smem.add(hid as usize),
            r.add((w.d * hid * hid) as usize),
            if bias.is_null() { bias } else { bias.add((w.d * 2 * hid + hid) as usize) },
        )
    };
    // SAFETY: the launch contract.
    unsafe { load_state(ha, h0, w.state, hid) };
    sync_threads();
    for k in 0..w.len {
        let t = w.t(k);
        let (h, hn) = if k % 2 == 0 { (ha, hb) } else { (hb, ha) };
        // SAFETY: t < seq, b < batch, d < dirs: the row is inside `xw`.
        let x = unsafe { xw.add((w.d * p.xw_d + t * p.xw_t + w.b * p.xw_b) as usize) };
        let mut j = w.warp;
        while j < hid {
            // SAFETY: j < hidden; rd is direction d's [hidden, hidden] block.
            let [a] = unsafe { gate_dots::<1>(rd, j, h, hid, w.lane) };
            if w.lane == 0 {
                // SAFETY: j < hidden inside x's row, rb, the shared vectors; t < seq.
                unsafe {
                    let h_new = act(w.acts.f, clip(*x.add(j as usize) + a + at_or_zero(rb, j), p.clip));
                    *hn.add(j as usize) = h_new;
                    store_y(&p, &w, y, t, j, h_new);
                }
            }
            j += w.warps;
        }
        sync_threads();
    }
    let h_final = if w.len % 2 == 0 { ha } else { hb };
    // SAFETY: the launch contract; every shared write happened before the last barrier.
    unsafe { finish(&p, &w, y, y_h, h_final) };
}
