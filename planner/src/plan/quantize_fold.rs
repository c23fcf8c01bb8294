//! Spelled-out 8-bit quantizations in elementwise programs folded into one instruction
//! ([`fold_quantize`]), as `fuse::compile_program` finishes each program.

use kernels_gpu::abi::{BinaryOp as B, EwInstr, ew_binary_code as code, ew_extra, ew_src, quantize_aux};

/// `instrs` (a program whose result is in `out_reg`) with every spelled-out 8-bit quantization
/// as one [`ew_extra::QUANTIZE`] instruction: the six a QDQ model's QuantizeLinear expands to
/// (`decompose::quant`: divide by the scale, round, add the zero point, clip to the type's range,
/// take the zero point off; without a zero point four), each reading the one before, the zero
/// point and the range immediates. A quantized activation then costs two instructions (with its
/// dequantization's scale) instead of seven, so a fake-quantized chain fits one program and
/// each element runs a third of the instructions. The registers the folded ones wrote must not
/// be read afterwards (their values were the sequence's own). Same bits
/// ([`kernels_gpu::math::quantize_centred`] applies the ops in their order).
pub(super) fn fold_quantize(instrs: Vec<EwInstr>, out_reg: u32) -> Vec<EwInstr> {
    let mut out = Vec::with_capacity(instrs.len());
    let mut k = 0;
    while k < instrs.len() {
        match quantize_at(&instrs, k, out_reg) {
            Some((n, q)) => {
                out.push(q);
                k += n;
            }
            None => {
                out.push(instrs[k]);
                k += 1;
            }
        }
    }
    out
}

/// The quantization spelled out from instruction `k` on ([`fold_quantize`]): how many
/// instructions it takes and the one that replaces them.
fn quantize_at(ins: &[EwInstr], k: usize, out_reg: u32) -> Option<(usize, EwInstr)> {
    let imm = |i: &EwInstr| (i.b == ew_src::IMM).then_some(i.imm);
    // The instruction at `at` if it is `op` reading the previous one's result.
    let next = |at: usize, op: u32| ins.get(at).filter(|i| i.op == op && i.a == ins[at - 1].dst);
    let div = ins.get(k).filter(|i| i.op == code(B::Div))?;
    next(k + 1, ew_extra::ROUND)?;
    let mut at = k + 2;
    let z = next(at, code(B::Add)).and_then(imm);
    if z.is_some() {
        at += 1;
    }
    let lo = next(at, code(B::Max)).and_then(imm)?;
    let hi = next(at + 1, code(B::Min)).and_then(imm)?;
    at += 2;
    let unsigned = match (lo, hi) {
        (-128.0, 127.0) => false,
        (0.0, 255.0) => true,
        _ => return None,
    };
    if let Some(z) = z {
        next(at, code(B::Sub)).and_then(imm).filter(|&w| w.to_bits() == z.to_bits())?;
        at += 1;
    }
    let z16 = match z {
        Some(z) if z.fract() == 0.0 && (-32768.0..=32767.0).contains(&z) => z as i16,
        Some(_) => return None,
        None => 0,
    };
    let last = ins[at - 1].dst;
    // A register an earlier instruction of the sequence wrote, read later before it is written
    // again, would lose its value.
    let read_later = |r: u32| {
        for i in &ins[at..] {
            if i.a == r || i.b == r {
                return true;
            }
            if i.dst == r {
                return false;
            }
        }
        out_reg == r
    };
    if ins[k..at - 1].iter().any(|i| i.dst != last && read_later(i.dst)) {
        return None;
    }
    let aux = quantize_aux(z16, unsigned, z.is_some());
    Some((at - k, EwInstr { op: ew_extra::QUANTIZE, dst: last, a: div.a, b: div.b, imm: div.imm, aux }))
}
