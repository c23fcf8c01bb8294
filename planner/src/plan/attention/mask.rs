//! Constant causal masks: an additive mask, a constant input of the score program, that hides
//! every key past a diagonal (GPT-2's `Where(causal, 0, f32::MIN)` folded to a constant, or a
//! matrix of `-inf` above the diagonal). With it the attention kernels may skip the hidden keys
//! ([`ATTN_CAUSAL_SKIP`](kernels_gpu::abi::ATTN_CAUSAL_SKIP)), as they do for the ONNX
//! `is_causal` flag.
//!
//! A key is skipped only where skipping gives the same probabilities: its mask value is `-inf`
//! or at most `f32::MIN / 2`, added last to a score computed without the mask, so its weight
//! `exp(s - max)` is exactly 0 next to any visible key (mask value `-1e30` or more), and every
//! row has a visible key.

use kernels_gpu::abi::{BinaryOp, EwInstr, ew_binary_code, ew_src};

use super::super::fuse::EwProgram;
use crate::constant::ConstTensor;
use crate::tensor_info::DType;

/// A mask value at or below this hides its key.
const HIDES: f32 = f32::MIN / 2.0;
/// A mask value at or above this (or NaN) leaves its key visible; values between the two bounds
/// are neither, and the mask is not taken.
const SHOWS: f32 = -1e30;

/// How many operands of instruction `i` read source `code` (unary ops, codes 16 and up, read
/// `a` only).
fn reads(i: &EwInstr, code: u32) -> u32 {
    (i.a == code) as u32 + (i.op < 16 && i.b == code) as u32
}

/// The offset `d` such that `mask`, input `slot` of the score `program` (over scores `q_len x
/// kv_len`, the mask's last two dims), hides key `j` from query row `i` whenever `j > i + d`;
/// `None` when it does not hide all of them in the way the module doc requires, or hides none.
pub(super) fn hidden_keys_offset(
    mask: &ConstTensor,
    program: &EwProgram,
    slot: u32,
    q_len: usize,
    kv_len: usize,
) -> Option<u32> {
    // The mask is read once, by the program's last instruction: an add that gives the result.
    let code = ew_src::INPUT0 + slot;
    let last = program.instrs.last()?;
    let uses: u32 = program.instrs.iter().map(|i| reads(i, code)).sum();
    if uses != 1
        || reads(last, code) != 1
        || last.op != ew_binary_code(BinaryOp::Add)
        || last.dst != program.out_reg
    {
        return None;
    }
    let r = mask.dims.len();
    if mask.dtype != DType::F32
        || r < 2
        || mask.dims[r - 2] != q_len
        || mask.dims[r - 1] != kv_len
        || kv_len == 0
    {
        return None;
    }
    let (values, _) = mask.bytes.as_chunks::<4>();
    let mut offset = 0usize;
    for (n, row) in values.chunks_exact(kv_len).enumerate() {
        let i = n % q_len;
        let mut last_visible = None;
        for (j, v) in row.iter().enumerate() {
            let v = f32::from_le_bytes(*v);
            // NaN is visible (the row is NaN either way).
            if v.is_nan() || v > HIDES {
                if v < SHOWS {
                    return None;
                }
                last_visible = Some(j);
            }
        }
        offset = offset.max(last_visible?.saturating_sub(i));
    }
    // Not taken when even the first row reads every key (nothing to skip).
    if offset + 1 >= kv_len {
        return None;
    }
    u32::try_from(offset).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels_gpu::abi::ew_src::{IMM, INPUT0};

    fn instr(op: BinaryOp, dst: u32, a: u32, b: u32) -> EwInstr {
        EwInstr { op: ew_binary_code(op), dst, a, b, imm: 0.125, aux: 0 }
    }

    /// GPT-2's score program: `x0 * imm + x1`.
    fn scaled_then_masked() -> EwProgram {
        EwProgram {
            instrs: vec![instr(BinaryOp::Mul, 0, INPUT0, IMM), instr(BinaryOp::Add, 0, 0, INPUT0 + 1)],
            out_reg: 0,
        }
    }

    /// `[1, 1, q, kv]`: `hidden` where `j > i + d`, else `shown`.
    fn mask(q: usize, kv: usize, d: usize, hidden: f32, shown: f32) -> ConstTensor {
        let v: Vec<f32> = (0..q * kv).map(|k| if k % kv > k / kv + d { hidden } else { shown }).collect();
        ConstTensor::from_f32(&[1, 1, q, kv], &v).unwrap()
    }

    #[test]
    fn causal_masks_of_minus_infinity_or_the_f32_minimum_hide_the_keys_past_the_diagonal() {
        let p = scaled_then_masked();
        assert_eq!(hidden_keys_offset(&mask(5, 5, 0, f32::NEG_INFINITY, 0.0), &p, 1, 5, 5), Some(0));
        assert_eq!(hidden_keys_offset(&mask(5, 5, 0, f32::MIN, 0.0), &p, 1, 5, 5), Some(0));
        // Bottom-right aligned (keys of a past before the queries), visible values not zero.
        assert_eq!(hidden_keys_offset(&mask(3, 7, 4, f32::MIN, -2.5), &p, 1, 3, 7), Some(4));
        // The mask as the add's first operand.
        let mut q = p.clone();
        (q.instrs[1].a, q.instrs[1].b) = (INPUT0 + 1, 0);
        assert_eq!(hidden_keys_offset(&mask(4, 4, 0, f32::MIN, 0.0), &q, 1, 4, 4), Some(0));
    }

    #[test]
    fn other_masks_and_programs_are_not_taken() {
        let p = scaled_then_masked();
        // A mask of -1e4: exp(-1e4 + s - max) is 0 for most scores, not for all.
        assert_eq!(hidden_keys_offset(&mask(4, 4, 0, -1e4, 0.0), &p, 1, 4, 4), None);
        // A row without a visible key (the unfused softmax spreads it over the hidden keys).
        let mut m = mask(4, 4, 0, f32::MIN, 0.0);
        m.bytes.make_mut()[..4].copy_from_slice(&f32::MIN.to_le_bytes());
        assert_eq!(hidden_keys_offset(&m, &p, 1, 4, 4), None);
        // Broadcast over rows (a padding mask), or the wrong input slot.
        let pad = ConstTensor::from_f32(&[1, 1, 1, 4], &[0.0, 0.0, 0.0, f32::MIN]).unwrap();
        assert_eq!(hidden_keys_offset(&pad, &p, 1, 4, 4), None);
        assert_eq!(hidden_keys_offset(&mask(4, 4, 0, f32::MIN, 0.0), &p, 2, 4, 4), None);
        // The mask scaled after it is added, or read twice.
        let mut scaled = p.clone();
        scaled.instrs.push(instr(BinaryOp::Mul, 0, 0, IMM));
        assert_eq!(hidden_keys_offset(&mask(4, 4, 0, f32::MIN, 0.0), &scaled, 1, 4, 4), None);
        let twice = EwProgram {
            instrs: vec![
                instr(BinaryOp::Mul, 1, INPUT0 + 1, IMM),
                instr(BinaryOp::Add, 0, INPUT0, INPUT0 + 1),
            ],
            out_reg: 0,
        };
        assert_eq!(hidden_keys_offset(&mask(4, 4, 0, f32::MIN, 0.0), &twice, 1, 4, 4), None);
    }
}
