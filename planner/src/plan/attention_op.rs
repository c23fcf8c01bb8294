//! The ONNX `Attention` operator (opsets 23/24) as one `attention_f32` launch.
//!
//! Semantics follow the CPU reference (`host::reference::nn::attention`): per query row,
//! `score = softcap(scale · Q Kᵀ) + attn_mask`, then the causal mask (`j > i`, top-left aligned
//! when there is no past), softmax over the keys, `· V`; query head `h` reads K/V head
//! `h / (q_heads / kv_heads)`. The scale, soft cap and additive mask become the kernel's score
//! program (input 0 the raw `Q·K` dot product, input 1 the mask), in exactly that order; the causal
//! mask is the kernel's own (applied after the program, as the reference adds it with the mask).
//!
//! Lowered: f32 Q/K/V/Y, 4-D `(B, H, S, D)` or 3-D `(B, S, H·D)` (read and written in place
//! through strided views), any scale, `softcap`, `is_causal`, a float mask broadcastable to
//! `(B, Hq, Sq, Skv)` whose last dim is the key length, grouped-query heads, a value head size
//! different from the key's. A bool mask, a mask narrower than the keys (the reference pads it
//! with `-inf`) and `nonpad_kv_seqlen` reach this lowering already rewritten into an additive f32
//! mask (`decompose`); the `qk_matmul_output` output is a launch of its own ([`scores`]). Refused
//! (the node stays unsupported): other dtypes. A KV cache (`past_key` /
//! `past_value`, 4-D) is concatenated with K / V into the `present_key` / `present_value` outputs
//! (required then) by strided copies before the launch, which reads them, its causal mask aligned
//! bottom-right (`j > i + past`). `softmax_precision` is ignored: the kernel
//! accumulates in f32, as it does for the f32 inputs it takes.

use super::PlanOptions;
use kernels_gpu::abi::{
    ATTN_CAUSAL_MASK, ATTN_CAUSAL_SKIP, ATTN_MAX_DV, ATTN_ROWS, AttentionParams, AttnView, BinaryOp,
    EW_MAX_INPUTS, EW_MAX_INSTRS, EwInstr, KernelId, RowParams, UnaryOp, attention_fits, ew_binary_code,
    ew_src, ew_unary_code,
};

use super::lower::{Lowered, bytes_of, dims, f32_only};
use super::movement::contiguous_u64;
use super::{Arg, PlannedValue, Step};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Attention;
use crate::tensor_info::DType;

/// One of Q, K, V or Y as `(batch, heads, seq, head size)` and its kernel view.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Heads {
    batch: usize,
    heads: usize,
    seq: usize,
    size: usize,
    view: AttnView,
}

/// `d` (4-D `(B, H, S, D)` or 3-D `(B, S, H·D)` with `num_heads` heads) as [`Heads`], both
/// contiguous in their own layout.
fn heads(d: &[usize], num_heads: Option<usize>, what: &str) -> Result<Heads, String> {
    match (d, num_heads) {
        (&[batch, heads, seq, size], _) => {
            let s = contiguous_u64(d);
            Ok(Heads {
                batch,
                heads,
                seq,
                size,
                view: AttnView { offset: 0, strides: [s[0], s[1], s[2], s[3]] },
            })
        }
        (&[batch, seq, hidden], Some(heads)) if heads > 0 && hidden % heads == 0 => {
            let size = hidden / heads;
            let strides = [(seq * hidden) as u64, size as u64, hidden as u64, 1];
            Ok(Heads { batch, heads, seq, size, view: AttnView { offset: 0, strides } })
        }
        (&[_, _, _], Some(h)) => Err(format!("3-D {what} {d:?} does not split into {h} heads")),
        (&[_, _, _], None) => Err(format!("3-D {what} needs its num_heads attribute")),
        _ => Err(format!("{what} must be 3-D or 4-D, got {d:?}")),
    }
}

/// The score program: `x0` the raw dot product, `x1` the mask (when `masked`). Returns the
/// instructions and the result's source.
fn score_program(scale: f32, softcap: f32, masked: bool) -> (Vec<EwInstr>, u32) {
    let mut instrs = Vec::new();
    let mut cur = ew_src::INPUT0;
    let mut push = |op: u32, a: u32, b: u32, imm: f32| {
        instrs.push(EwInstr { op, dst: 0, a, b, imm, aux: 0 });
        0
    };
    if scale != 1.0 {
        cur = push(ew_binary_code(BinaryOp::Mul), cur, ew_src::IMM, scale);
    }
    // As the reference: capped only for a positive softcap.
    if softcap > 0.0 {
        cur = push(ew_binary_code(BinaryOp::Div), cur, ew_src::IMM, softcap);
        cur = push(ew_unary_code(UnaryOp::Tanh), cur, cur, 0.0);
        cur = push(ew_binary_code(BinaryOp::Mul), cur, ew_src::IMM, softcap);
    }
    if masked {
        cur = push(ew_binary_code(BinaryOp::Add), cur, ew_src::INPUT0 + 1, 0.0);
    }
    (instrs, cur)
}

/// The shapes and dtypes the lowering decides on (`None`: the operand is absent).
pub(super) struct Operands<'a> {
    pub q: &'a [usize],
    pub k: &'a [usize],
    pub v: &'a [usize],
    pub y: &'a [usize],
    /// The mask's dims and dtype.
    pub mask: Option<(&'a [usize], DType)>,
    /// Cached keys before K (the KV cache's length; 0 without one): the keys are the cache's and
    /// then K's, and the causal mask is aligned bottom-right.
    pub past: usize,
}

/// The launch parameters of `Attention` with attributes `a` over `ops`, or why it does not lower.
/// Q, K, V and Y are f32 (checked by the caller).
pub(super) fn attention_params(a: &Attention, ops: &Operands) -> Result<AttentionParams, String> {
    let rank = ops.q.len();
    if ops.k.len() != rank || ops.v.len() != rank {
        return Err(format!("Q {:?}, K {:?}, V {:?} differ in rank", ops.q, ops.k, ops.v));
    }
    let q = heads(ops.q, a.q_num_heads, "Q")?;
    let k = heads(ops.k, a.kv_num_heads, "K")?;
    let v = heads(ops.v, a.kv_num_heads, "V")?;
    if q.batch != k.batch || k.batch != v.batch || q.size != k.size || k.heads != v.heads || k.seq != v.seq {
        return Err(format!("Q {:?}, K {:?}, V {:?} disagree", ops.q, ops.k, ops.v));
    }
    if k.heads == 0 || q.heads % k.heads != 0 {
        return Err(format!("{} query heads are not a multiple of {} kv heads", q.heads, k.heads));
    }
    let (batch, hq, sq, skv, dk, dv) = (q.batch, q.heads, q.seq, k.seq + ops.past, q.size, v.size);
    let want_y = if rank == 3 { vec![batch, sq, hq * dv] } else { vec![batch, hq, sq, dv] };
    if ops.y != want_y.as_slice() {
        return Err(format!("Y {:?} is not the expected {want_y:?}", ops.y));
    }
    let y = heads(ops.y, Some(hq), "Y")?;
    let fits = |n: usize| n > 0 && n <= u32::MAX as usize;
    if ![batch, hq, sq, skv, dk, dv].into_iter().all(fits) {
        return Err("an empty or oversized extent".into());
    }
    if dv > ATTN_MAX_DV as usize || !attention_fits(dk as u32, dv as u32) {
        return Err(format!("head sizes {dk} / {dv} exceed the attention kernel's shared memory"));
    }
    if (batch * hq) as u64 * sq.div_ceil(ATTN_ROWS as usize) as u64 > i32::MAX as u64 {
        return Err("too many query blocks".into());
    }
    let mut extra = [AttnView::default(); EW_MAX_INPUTS - 1];
    if let Some((md, dtype)) = ops.mask {
        if dtype == DType::Bool {
            return Err("a bool attn_mask: the score program reads f32 masks only".into());
        }
        if dtype != DType::F32 {
            return Err(format!("attn_mask is {dtype}; the GPU kernels take f32 so far"));
        }
        if md.is_empty() || md.len() > 4 {
            return Err(format!("attn_mask {md:?} must be 1-D to 4-D"));
        }
        if md[md.len() - 1] != skv {
            // The reference pads a narrower mask with -inf (and rejects a wider one).
            return Err(format!("attn_mask {md:?}: its last dim is not the {skv} keys"));
        }
        let mut full = [1usize; 4];
        full[4 - md.len()..].copy_from_slice(md);
        let ms = contiguous_u64(&full);
        let mut strides = [0u64; 4];
        for (d, want) in [batch, hq, sq, skv].into_iter().enumerate() {
            if full[d] == want {
                strides[d] = if want == 1 { 0 } else { ms[d] };
            } else if full[d] != 1 {
                return Err(format!("attn_mask {md:?} does not broadcast to ({batch}, {hq}, {sq}, {skv})"));
            }
        }
        extra[0] = AttnView { offset: 0, strides };
    }
    let scale = a.scale.unwrap_or((1.0 / (dk as f64).sqrt()) as f32);
    let (program, out_reg) = score_program(scale, a.softcap, ops.mask.is_some());
    let mut instrs = [EwInstr::default(); EW_MAX_INSTRS];
    instrs[..program.len()].copy_from_slice(&program);
    Ok(AttentionParams {
        batch: batch as u32,
        heads: hq as u32,
        q_len: sq as u32,
        kv_len: skv as u32,
        dk: dk as u32,
        dv: dv as u32,
        kv_group: (hq / k.heads) as u32,
        causal: if a.is_causal { ATTN_CAUSAL_MASK | ATTN_CAUSAL_SKIP } else { 0 },
        // The reference masks j > i + past (top-left aligned without a past, also for Sq != Skv).
        causal_offset: ops.past as u32,
        n_instr: program.len() as u32,
        n_inputs: 1 + ops.mask.is_some() as u32,
        out_reg,
        q: q.view,
        k: k.view,
        v: v.view,
        y: y.view,
        extra,
        instrs,
    })
}

/// The launch of ONNX `Attention` node `id` (see the module doc), or why it has none.
pub(super) fn lower(
    g: &Graph,
    id: NodeId,
    a: &Attention,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let n = &g.nodes[id.index()];
    let input = |k: usize| n.inputs.get(k).copied().flatten();
    let (Some(q), Some(k), Some(v)) = (input(0), input(1), input(2)) else {
        return Err("Q, K and V are required".into());
    };
    if input(6).is_some() {
        return Err("nonpad_kv_seqlen is not lowered yet".into());
    }
    let y = n.output(0).ok_or("the output Y is omitted")?;
    f32_only(values, &[q, k, v, y])?;
    let mask = input(3);
    let mask_dims = match mask {
        Some(m) => Some(dims(values, m)?),
        None => None,
    };
    let (past_k, past_v) = (input(4), input(5));
    let past = match (past_k, past_v) {
        (Some(pk), Some(_)) => match dims(values, pk)?.0 {
            &[_, _, p, _] => p,
            other => return Err(format!("past_key {other:?} must be 4-D")),
        },
        (None, None) => 0,
        _ => return Err("past_key and past_value must be given together".into()),
    };
    let ops = Operands {
        q: dims(values, q)?.0,
        k: dims(values, k)?.0,
        v: dims(values, v)?.0,
        y: dims(values, y)?.0,
        mask: mask_dims,
        past,
    };
    let mut p = attention_params(a, &ops)?;
    let label = n.op.name();
    // The present cache: the past's rows, then K's (V's) as (B, H, S, D) rows; the kernel reads
    // it when there is a past.
    let mut steps = Vec::new();
    let mut kv = [k, v];
    for (slot, (new, past_in)) in [(k, past_k), (v, past_v)].into_iter().enumerate() {
        let Some(present) = n.output(1 + slot) else {
            if past_in.is_some() {
                return Err("a KV cache needs the present_key and present_value outputs".into());
            }
            continue;
        };
        let ((nd, dtype), (pd, _)) = (dims(values, new)?, dims(values, present)?);
        let view = if slot == 0 { p.k } else { p.v };
        let &[batch, heads, total, size] = pd else {
            return Err(format!("present {pd:?} must be 4-D"));
        };
        let seq = nd.iter().product::<usize>() / (batch * heads * size).max(1);
        if total != past + seq {
            return Err(format!("present {pd:?} does not hold the {past} cached and {seq} new rows"));
        }
        let ps = super::movement::contiguous(pd);
        if let Some(pin) = past_in {
            f32_only(values, &[pin, present])?;
            let pin_dims = dims(values, pin)?.0;
            if pin_dims != [batch, heads, past, size] {
                return Err(format!("past {pin_dims:?} does not fit present {pd:?}"));
            }
            let cs = super::movement::contiguous(pin_dims);
            steps.extend(super::movement::strided_copy(
                id,
                label,
                (pin, 0, &cs),
                (present, 0, &ps),
                pin_dims,
                dtype,
                o,
            )?);
        }
        let ks: Vec<i64> = view.strides.iter().map(|&s| s as i64).collect();
        let at = (past * size) as i64;
        steps.extend(super::movement::strided_copy(
            id,
            label,
            (new, 0, &ks),
            (present, at, &ps),
            &[batch, heads, seq, size],
            dtype,
            o,
        )?);
        if past > 0 {
            kv[slot] = present;
            let view = AttnView { offset: 0, strides: std::array::from_fn(|d| ps[d] as u64) };
            if slot == 0 { p.k = view } else { p.v = view }
        }
    }
    let mut args = vec![Arg::Value(q), Arg::Value(kv[0]), Arg::Value(kv[1])];
    args.push(mask.map_or(Arg::Null, Arg::Value));
    args.extend([Arg::Null, Arg::Null]);
    args.push(Arg::Value(y));
    steps.extend(super::attention::launch(id, &p, args, o)?);
    if let Some(qk) = n.output(3) {
        steps.extend(scores(id, a, &p, [q, kv[0], qk], mask, values, o)?);
    }
    Ok(steps)
}

/// The `qk_matmul_output` of Attention node `id` (launched as `p`): an `attention_scores_f32`
/// launch with the score program cut where mode `a.qk_matmul_output_mode` stops (0 after the
/// scale, 1 after the soft cap, 2 after the masks), and for mode 3 a softmax over its rows.
fn scores(
    id: NodeId,
    a: &Attention,
    p: &AttentionParams,
    [q, k, qk]: [ValueId; 3],
    mask: Option<ValueId>,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    f32_only(values, &[qk])?;
    let want = [p.batch, p.heads, p.q_len, p.kv_len].map(|d| d as usize);
    let got = dims(values, qk)?.0;
    if got != want {
        return Err(format!("qk_matmul_output {got:?} is not the expected {want:?}"));
    }
    let scale = a.scale.unwrap_or((1.0 / (p.dk as f64).sqrt()) as f32);
    let (scaled, capped) = ((scale != 1.0) as u32, if a.softcap > 0.0 { 3 } else { 0 });
    let mut sp = *p;
    match a.qk_matmul_output_mode {
        0 | 1 => {
            sp.n_instr = if a.qk_matmul_output_mode == 0 { scaled } else { scaled + capped };
            (sp.n_inputs, sp.causal) = (1, 0);
        }
        2 | 3 => {}
        m => return Err(format!("qk_matmul_output_mode {m} (0 to 3 are defined)")),
    }
    if sp.n_instr == 0 {
        sp.out_reg = ew_src::INPUT0;
    }
    let elems = want.iter().product::<usize>() as u64;
    let label = "Attention qk_matmul_output".to_string();
    let mut args = vec![Arg::Params(bytes_of(&sp)), Arg::Value(q), Arg::Value(k)];
    args.push(if sp.n_inputs > 1 { mask.map_or(Arg::Null, Arg::Value) } else { Arg::Null });
    args.extend([Arg::Null, Arg::Null, Arg::Value(qk)]);
    let mut steps = vec![Step::Kernel {
        nodes: vec![id],
        label: label.clone(),
        kernel: KernelId::AttentionScoresF32,
        grid: super::capped_grid(o.sm_count, elems.div_ceil(256)),
        block: [256, 1, 1],
        shared_bytes: 0,
        args,
    }];
    if a.qk_matmul_output_mode == 3 {
        let rows = elems / p.kv_len as u64;
        let (tpr, grid, block, shared_bytes) = super::rows::launch(rows, p.kv_len as u64, 1, o);
        let rp = RowParams {
            outer: rows,
            len: p.kv_len as u64,
            inner: 1,
            threads_per_row: tpr,
            ..RowParams::default()
        };
        steps.push(Step::Kernel {
            nodes: vec![id],
            label,
            kernel: KernelId::SoftmaxF32,
            grid,
            block,
            shared_bytes,
            args: vec![Arg::Params(bytes_of(&rp)), Arg::Value(qk), Arg::Value(qk)],
        });
    }
    Ok(steps)
}

#[cfg(test)]
#[path = "attention_op_tests.rs"]
mod tests;
