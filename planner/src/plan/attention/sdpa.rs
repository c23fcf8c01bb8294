//! PyTorch's exported scaled-dot-product attention, as the fusion absorbs it: the NaN guard
//! `Where(IsNaN(p), 0, p)` after the softmax (the kernels' `ATTN_NAN_ROWS_ZERO` bit) and the scalar
//! scales of Q and Kᵀ before the first MatMul (moved into the score program, so that Q and K are
//! traced to the projection they are views of).

use kernels_gpu::abi::{EW_MAX_INSTRS, ew_src};

use super::Ctx;
use crate::graph::ValueId;
use crate::op::Op;
use crate::plan::fuse::{EwProgram, scalar_f32};

/// The NaN guard `Where(IsNaN(p), 0, p)` that PyTorch's exported scaled-dot-product attention
/// writes after its softmax, when `w` is its output: `p` and the guard's two nodes (IsNaN, Where),
/// with `p` read by those two only.
pub(super) fn nan_guard(c: &Ctx, w: ValueId) -> Option<(ValueId, [usize; 2])> {
    let (wn, _) = c.defs[w.index()]?;
    let where_node = &c.g.nodes[wn];
    let (Op::Where, [Some(cond), Some(zero), Some(p)]) = (&where_node.op, where_node.inputs.as_slice())
    else {
        return None;
    };
    let (isnan, _) = c.defs[cond.index()]?;
    let is_zero = scalar_f32(c.g, *zero) == Some(0.0);
    let guard_of_p = c.g.nodes[isnan].op == Op::IsNaN && c.g.nodes[isnan].inputs.as_slice() == [Some(*p)];
    (is_zero && guard_of_p && c.private(*cond, 1) && c.private(*p, 2)).then_some((*p, [isnan, wn]))
}

/// `v` as `x * s` with `s` a scalar f32 constant (either operand of a Mul whose output only the
/// scores' MatMul reads): `x`, `s` and the Mul node; else `v` itself, 1 and no node. PyTorch's
/// exported scaled-dot-product attention scales Q and Kᵀ each by `1 / sqrt(sqrt(d))` this way.
pub(super) fn peel_scale(c: &Ctx, v: ValueId) -> (ValueId, f32, Option<usize>) {
    let own = (v, 1.0, None);
    let Some((n, 0)) = c.defs[v.index()] else { return own };
    let node = &c.g.nodes[n];
    let (Op::Mul, [Some(a), Some(b)]) = (&node.op, node.inputs.as_slice()) else { return own };
    let (x, s) = match (scalar_f32(c.g, *a), scalar_f32(c.g, *b)) {
        (None, Some(s)) => (*a, s),
        (Some(s), None) => (*b, s),
        _ => return own,
    };
    if !c.private(v, 1) || c.f32_dims(x).is_none() || c.f32_dims(x) != c.f32_dims(v) {
        return own;
    }
    (x, s, Some(n))
}

/// `program` (input 0 the raw scores) preceded by `scores * scale`: the scale goes into a leading
/// `x0 * imm` when the program starts with one and reads the scores nowhere else, else a new first
/// instruction writes the scaled scores to a register the program does not use and every read of
/// input 0 reads it instead. `None` when no register is free or the program is full.
pub(super) fn scaled_program(program: &EwProgram, scale: f32) -> Option<EwProgram> {
    use kernels_gpu::abi::{BinaryOp, EW_REGS, EwInstr, ew_binary_code};
    let (mul, x0, imm) = (ew_binary_code(BinaryOp::Mul), ew_src::INPUT0, ew_src::IMM);
    let mut p = program.clone();
    // (Only when no later instruction, nor the result, reads the raw scores too.)
    let later_reads = p.instrs.iter().skip(1).any(|i| i.a == x0 || i.b == x0) || p.out_reg == x0;
    if let Some(first) = p.instrs.first_mut()
        && first.op == mul
        && first.a == x0
        && first.b == imm
        && !later_reads
    {
        first.imm *= scale;
        return Some(p);
    }
    let used = |r: u32| p.out_reg == r || p.instrs.iter().any(|i| i.dst == r || i.a == r || i.b == r);
    let reg = (0..EW_REGS).find(|&r| !used(r))?;
    if p.instrs.len() >= EW_MAX_INSTRS {
        return None;
    }
    let swap = |code: u32| if code == x0 { reg } else { code };
    let mut instrs = vec![EwInstr { op: mul, dst: reg, a: x0, b: imm, imm: scale, aux: 0 }];
    instrs.extend(p.instrs.iter().map(|i| EwInstr { a: swap(i.a), b: swap(i.b), ..*i }));
    Some(EwProgram { instrs, out_reg: swap(p.out_reg) })
}
