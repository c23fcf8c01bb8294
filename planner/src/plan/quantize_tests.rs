//! Spelled-out 8-bit quantizations folded into one program instruction (`quantize_fold`):
//! the same bits as the instructions they replace, and only where the sequence's registers are
//! its own.

use super::fuse::{EwProgram, compile_program};
use super::quantize_fold::fold_quantize;
use crate::op::{self, Op};
use crate::tensor_info::{DType, Dim};
use crate::{ConstTensor, Graph};
use kernels_gpu::abi::{BinaryOp as B, EwInstr, ew_binary_code as code, ew_extra, ew_src};

/// The program of `instrs` (result in `out_reg`) on the host for one element `x` (input 0).
fn eval(instrs: &[EwInstr], out_reg: u32, x: f32) -> f32 {
    super::clip_tests::eval(&EwProgram { instrs: instrs.to_vec(), out_reg }, &[x])
}

fn instr(op: u32, dst: u32, a: u32, b: u32, imm: f32) -> EwInstr {
    EwInstr { op, dst, a, b, imm, aux: 0 }
}

/// `(clip(round(x / s) + z, lo, hi) - z) * s` as the decomposition spells it, in register 0.
fn spelled(s: f32, z: Option<f32>, (lo, hi): (f32, f32)) -> Vec<EwInstr> {
    let (x, imm) = (ew_src::INPUT0, ew_src::IMM);
    let mut v = vec![instr(code(B::Div), 0, x, imm, s), instr(ew_extra::ROUND, 0, 0, imm, 0.0)];
    if let Some(z) = z {
        v.push(instr(code(B::Add), 0, 0, imm, z));
    }
    v.push(instr(code(B::Max), 0, 0, imm, lo));
    v.push(instr(code(B::Min), 0, 0, imm, hi));
    if let Some(z) = z {
        v.push(instr(code(B::Sub), 0, 0, imm, z));
    }
    v.push(instr(code(B::Mul), 0, 0, imm, s));
    v
}

#[test]
fn folded_quantizations_give_the_bits_of_the_spelled_out_ops() {
    let mut xs: Vec<f32> = (-3000..=3000).map(|i| i as f32 * 0.0173).collect();
    // Ties of x / s (to even), the range's edges and beyond, signed zeros, NaN and infinities.
    for k in -300..=300 {
        xs.push((k as f32 + 0.5) * 0.02);
    }
    xs.extend([
        0.0,
        -0.0,
        -1e-30,
        1e30,
        -1e30,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
    ]);
    for (s, z, range) in [
        (0.02f32, Some(128.0f32), (0.0f32, 255.0f32)),
        (0.02, Some(-3.0), (-128.0, 127.0)),
        (0.0371, None, (-128.0, 127.0)),
        (0.0371, None, (0.0, 255.0)),
    ] {
        let long = spelled(s, z, range);
        let short = fold_quantize(long.clone(), 0);
        assert_eq!(short.len(), 2, "{short:?}");
        assert_eq!(short[0].op, ew_extra::QUANTIZE);
        for &x in &xs {
            let (a, b) = (eval(&long, 0, x), eval(&short, 0, x));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "s {s} z {z:?} x {x}: {a} vs {b}"
            );
        }
    }
    // Another range (a clip, not a quantization), a fractional zero point, a register of the
    // sequence read later: left as they are.
    let mut other = spelled(0.02, Some(1.0), (-1.0, 1.0));
    assert_eq!(fold_quantize(other.clone(), 0).len(), other.len());
    let frac = spelled(0.02, Some(0.5), (0.0, 255.0));
    assert_eq!(fold_quantize(frac.clone(), 0).len(), frac.len());
    other = spelled(0.02, Some(128.0), (0.0, 255.0));
    other[1].dst = 1; // the rounding in register 1, which the added instruction reads
    for i in &mut other[2..] {
        i.a = if i.a == 0 { 1 } else { i.a };
    }
    other.insert(other.len() - 1, instr(code(B::Add), 2, 1, 1, 0.0));
    let short = fold_quantize(other.clone(), 0);
    assert_eq!(short.len(), other.len(), "{short:?}");
}

/// The nodes a QuantizeLinear → DequantizeLinear pair expands to compile to two instructions.
#[test]
fn a_fake_quantized_value_compiles_to_two_instructions() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(64)]);
    let c =
        |g: &mut Graph, name: &str, v: f32| g.initializer(name, ConstTensor::from_f32(&[], &[v]).unwrap());
    let (s, z, lo, hi) =
        (c(&mut g, "s", 0.05), c(&mut g, "z", 128.0), c(&mut g, "lo", 0.0), c(&mut g, "hi", 255.0));
    let q = g.op1(Op::Div, &[x, s]);
    let r = g.op1(Op::Round, &[q]);
    let a = g.op1(Op::Add, &[r, z]);
    let cl = g.op1(Op::Clip(op::Clip::default()), &[a, lo, hi]);
    let centred = g.op1(Op::Sub, &[cl, z]);
    let y = g.op1(Op::Mul, &[centred, s]);
    g.output(y);
    let members: Vec<usize> = (0..g.nodes.len()).collect();
    let (p, inputs) = compile_program(&g, &members).unwrap();
    assert_eq!(inputs, [x]);
    let ops: Vec<u32> = p.instrs.iter().map(|i| i.op).collect();
    assert_eq!(ops, [ew_extra::QUANTIZE, code(B::Mul)], "{:?}", p.instrs);
    for x in [-1.0f32, 0.0, 0.025, 0.075, 3.3, 7.0, -7.0] {
        let want = ((x / 0.05).round_ties_even() + 128.0).clamp(0.0, 255.0) - 128.0;
        assert_eq!(eval(&p.instrs, p.out_reg, x), want * 0.05, "{x}");
    }
}
