//! ONNX LinearAttention (`linear_attention_f32`): a direct kernel, sequential over time and
//! parallel over (batch, kv head, value column). Every rule touches the state one value column at
//! a time (the delta rule's retrieval `S^T k` too), so each thread owns one column `S[:, m]` of
//! one head's state, kept in the `present_state` output, and the heads' outputs for that column.

use crate::abi::LinearAttentionParams;
use crate::intrinsics::{global_thread_x, grid_threads_x};
use crate::math;

/// ONNX LinearAttention ([`LinearAttentionParams`]): the outputs `y` and the final state
/// `present` from the initial state `past` (zero when null).
///
/// # Safety
/// `q`, `k`, `v` hold the `(batch, len, heads * size)` inputs; `decay` holds
/// `batch * len * decay_width` f32 (null when that is 0), `beta` `batch * len * beta_width` (null
/// when 0); `past` (or null) and `present` hold `batch * kv_heads * dk * dv` f32 (`present` may be
/// `past`: each element is read and written by one thread); `y` holds `batch * len * q_heads * dv`
/// f32 and overlaps nothing else.
///
/// # Parameters
/// `p`; inputs `q`, `k`, `v`, `past`, `decay`, `beta`; outputs `present` and `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `batch * kv_heads * dv` state
/// columns; each thread walks the time steps of its column.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn linear_attention_f32(
    p: LinearAttentionParams,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    past: *const f32,
    decay: *const f32,
    beta: *const f32,
    present: *mut f32,
    y: *mut f32,
) {
    if p.kv_heads == 0 || p.q_heads % p.kv_heads != 0 {
        return;
    }
    let (dk, dv) = (p.dk as usize, p.dv as usize);
    let (hq, hkv) = (p.q_heads as usize, p.kv_heads as usize);
    let group = hq / hkv;
    let (qw, kw, vw) = (hq * dk, hkv * dk, hkv * dv);
    let columns = p.batch as u64 * hkv as u64 * dv as u64;
    let (mut c, stride) = (global_thread_x(), grid_threads_x());
    while c < columns {
        let m = (c % dv as u64) as usize;
        let h = ((c / dv as u64) % hkv as u64) as usize;
        let b = (c / (dv as u64 * hkv as u64)) as usize;
        // Element d of this column of the state.
        let s = |d: usize| ((b * hkv + h) * dk + d) * dv + m;
        for d in 0..dk {
            // SAFETY: d < dk: inside the state (the contract).
            unsafe { *present.add(s(d)) = if past.is_null() { 0.0 } else { *past.add(s(d)) } };
        }
        for t in 0..p.len as usize {
            let row = b * p.len as usize + t;
            // SAFETY: every index below stays inside its tensor's row `row` and head `h` (the
            // contract); the state column is this thread's alone.
            unsafe {
                let kr = k.add(row * kw + h * dk);
                if p.decay_width != 0 {
                    let g = decay.add(row * p.decay_width as usize);
                    for d in 0..dk {
                        let gi = if p.decay_width as usize == hkv { h } else { h * dk + d };
                        *present.add(s(d)) *= math::exp(*g.add(gi));
                    }
                }
                let mut vm = *v.add(row * vw + h * dv + m);
                if p.beta_width != 0 {
                    let bv = *beta.add(row * p.beta_width as usize + if p.beta_width == 1 { 0 } else { h });
                    let mut retrieved = 0.0f32;
                    for d in 0..dk {
                        retrieved = math::fma(*present.add(s(d)), *kr.add(d), retrieved);
                    }
                    vm = bv * (vm - retrieved);
                }
                for d in 0..dk {
                    *present.add(s(d)) = math::fma(*kr.add(d), vm, *present.add(s(d)));
                }
                for j in h * group..(h + 1) * group {
                    let qr = q.add(row * qw + j * dk);
                    let mut o = 0.0f32;
                    for d in 0..dk {
                        o = math::fma(*qr.add(d), *present.add(s(d)), o);
                    }
                    *y.add((row * hq + j) * dv + m) = p.scale * o;
                }
            }
        }
        c += stride;
    }
}
