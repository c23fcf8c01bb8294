//! ONNX Attention's `qk_matmul_output`: the scores of every (batch, head, query row, key), which
//! the fused attention kernels never store. A thread per score forms its `Q·K` dot product through
//! the same strided views as `attention_f32`, runs the same score program (the planner cuts it
//! where the output mode stops: after the scale, the soft cap, or the mask) and applies the causal
//! mask when asked; a softmax row launch after it gives mode 3.

use crate::abi::{AttentionParams, EW_MAX_INPUTS, EW_MAX_INSTRS};
use crate::attention::at;
use crate::intrinsics::{fma_rn, global_thread_x, grid_threads_x};
use crate::program::EwState;

/// The scores `s[b, h, i, j] = program(Q[b, h, i, :] · K[b, h / kv_group, j, :], extra inputs at
/// (b, h, i, j))`, `-inf` added where `p.causal` has `ATTN_CAUSAL_MASK` and `j > i +
/// p.causal_offset`, written contiguously over `(batch, heads, q_len, kv_len)` (every key:
/// `ATTN_CAUSAL_SKIP` is not used). `p.v`, `p.y` and `p.dv` are not read.
///
/// # Safety
/// As `attention_f32` for `q`, `k` and the program inputs; `s` holds `batch * heads * q_len *
/// kv_len` f32 and overlaps no input.
///
/// # Parameters
/// `p`: extents, views, causal mask and the score program; `q`, `k`: the operands; `x1`..`x3`:
/// the score program's inputs 1..3; `s`: the scores.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the scores, a thread per score.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn attention_scores_f32(
    p: AttentionParams,
    q: *const f32,
    k: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    s: *mut f32,
) {
    if p.kv_group == 0 || p.n_instr as usize > EW_MAX_INSTRS || p.n_inputs as usize > EW_MAX_INPUTS {
        return;
    }
    let (kv, rows, heads) = (p.kv_len as u64, p.q_len as u64, p.heads as u64);
    let total = p.batch as u64 * heads * rows * kv;
    let (mut e, stride) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (j, i, h, b) = (e % kv, (e / kv) % rows, (e / (kv * rows)) % heads, e / (kv * rows * heads));
        let hk = h / p.kv_group as u64;
        let mut dot = 0.0f32;
        for c in 0..p.dk as u64 {
            // SAFETY: (b, h, i, c) and (b, hk, j, c) inside the extents: inside Q and K (the contract).
            dot = unsafe {
                fma_rn(*q.add(at(&p.q, b, h, i, c) as usize), *k.add(at(&p.k, b, hk, j, c) as usize), dot)
            };
        }
        let mut st = EwState::default();
        st.x0 = dot;
        let extra = |n: usize, x: *const f32| {
            // SAFETY: (b, h, i, j) inside the extents: inside each used input (the contract).
            unsafe { *x.add(at(&p.extra[n], b, h, i, j) as usize) }
        };
        if p.n_inputs > 1 {
            st.x1 = extra(0, x1);
        }
        if p.n_inputs > 2 {
            st.x2 = extra(1, x2);
        }
        if p.n_inputs > 3 {
            st.x3 = extra(2, x3);
        }
        let mut v = st.run(&p.instrs, p.n_instr, p.out_reg);
        if crate::attention::causal_masked(&p, i, j) {
            v += f32::NEG_INFINITY;
        }
        // SAFETY: e < total: inside the scores.
        unsafe { *s.add(e as usize) = v };
        e += stride;
    }
}
