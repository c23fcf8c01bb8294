//! Every ONNX dtype but strings through the GPU's type-generic kernels against the CPU reference,
//! bit for bit: Cast between f32 / f16 / integers of every width and the coded types (float8 in
//! its five formats, float4, int4 / uint4 / int2 / uint2), with and without saturation and in
//! E8M0's rounding modes; comparisons at every width; QuantizeLinear / DequantizeLinear to and
//! from 16-bit and coded types; BitCast; and an integer divisor of 0 found on the device, reported
//! as an error naming the node, the session usable after it.

use host::selftest::Rng;
use host::{HostError, HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{Coded, ConstTensor, DType, Graph, RoundMode};

use crate::ctx;
use crate::shape_ops::{check, i64_input, int_as, known};

/// f32 values that exercise every format: each format's codes' values, halfway between, past the
/// largest finite ones, tiny, signed zeros, infinities and NaN.
fn probe_values(rng: &mut Rng) -> Vec<f32> {
    let mut v = vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-30, -1e-30, 1e30, -1e30];
    for c in Coded::ALL {
        for code in 0..(1u16 << c.bits()) {
            let x = c.decode(code as u8) as f32;
            if x.is_finite() {
                v.extend([x, -x, x * 1.0625, x * 0.96875, x * 1.5, x * 2.5]);
            }
        }
    }
    v.extend((0..4000).map(|_| {
        let m = (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0;
        m * 2f32.powi((rng.next_u64() % 60) as i32 - 30)
    }));
    v
}

#[test]
fn casts_to_and_from_every_coded_type_match_the_reference_bit_for_bit() {
    let mut rng = Rng::new(0xc0de);
    let values = probe_values(&mut rng);
    let n = values.len();
    let x = HostTensor::new(vec![n], values).unwrap();
    for c in Coded::ALL {
        let modes: &[RoundMode] = if c == Coded::F8E8M0 {
            &[RoundMode::Up, RoundMode::Down, RoundMode::Nearest]
        } else {
            &[RoundMode::Up]
        };
        for &round_mode in modes {
            for saturate in [true, false] {
                // f32 -> coded -> f32 and -> f16, and the codes themselves.
                let mut g = Graph::new();
                let xi = g.input("x", DType::F32, known(&[n]));
                let codes = g.op1(Op::Cast(op::Cast { to: DType::Coded(c), saturate, round_mode }), &[xi]);
                let back = g.op1(Op::Cast(op::Cast::to(DType::F32)), &[codes]);
                let half = g.op1(Op::Cast(op::Cast::to(DType::F16)), &[codes]);
                let wide = g.op1(Op::Cast(op::Cast::to(DType::I32)), &[codes]);
                g.output(codes);
                g.output(back);
                g.output(half);
                g.output(wide);
                let what = format!("{c} saturate {saturate} {round_mode:?}");
                let plan = check(&what, g, vec![("x".into(), x.clone())]);
                assert!(plan.contains("cast"), "{plan}");
            }
        }
        // Integers into the coded integer types wrap; every code back out.
        let mut g = Graph::new();
        let ii = g.input("i", DType::I32, known(&[512]));
        let codes = g.op1(Op::Cast(op::Cast::to(DType::Coded(c))), &[ii]);
        let back = g.op1(Op::Cast(op::Cast::to(DType::I64)), &[codes]);
        let eq = g.op1(Op::Equal, &[codes, codes]);
        g.output(back);
        g.output(eq);
        let ints =
            int_as(&HostTensor::new(vec![512], (-256..256).collect::<Vec<i64>>()).unwrap(), DType::I32);
        check(&format!("int32 -> {c}"), g, vec![("i".into(), ints)]);
    }
}

#[test]
fn casts_and_comparisons_at_every_integer_width_match_the_reference() {
    let mut rng = Rng::new(0x1d7);
    let widths =
        [DType::I16, DType::U16, DType::U32, DType::U64, DType::I64, DType::I32, DType::I8, DType::U8];
    let compares = [Op::Equal, Op::Less, Op::Greater, Op::LessOrEqual, Op::GreaterOrEqual];
    for from in widths {
        let a = int_as(&i64_input(&mut rng, &[7, 9], -(1 << 40), 1 << 40), from);
        let b = int_as(&i64_input(&mut rng, &[9], -(1 << 40), 1 << 40), from);
        for to in widths.iter().copied().chain([DType::F32, DType::F64, DType::F16, DType::Bool]) {
            let mut g = Graph::new();
            let ai = g.input("a", from, known(&[7, 9]));
            let y = g.op1(Op::Cast(op::Cast::to(to)), &[ai]);
            g.output(y);
            check(&format!("{from} -> {to}"), g, vec![("a".into(), a.clone())]);
        }
        // Floats into the width: truncated toward zero and saturated, NaN to 0.
        let mut g = Graph::new();
        let fi = g.input("f", DType::F32, known(&[8]));
        let y = g.op1(Op::Cast(op::Cast::to(from)), &[fi]);
        g.output(y);
        let f = HostTensor::new(vec![8], vec![1e20f32, -1e20, 3.9, -3.9, f32::NAN, 65535.5, -32768.5, 4e9])
            .unwrap();
        check(&format!("f32 -> {from}"), g, vec![("f".into(), f)]);
        for op in &compares {
            let mut g = Graph::new();
            let ai = g.input("a", from, known(&[7, 9]));
            let bi = g.input("b", from, known(&[9]));
            let y = g.op1(op.clone(), &[ai, bi]);
            let same = g.op1(op.clone(), &[ai, ai]);
            g.output(y);
            g.output(same);
            let plan = check(
                &format!("{} {from}", op.name()),
                g,
                vec![("a".into(), a.clone()), ("b".into(), b.clone())],
            );
            assert!(plan.contains("compare"), "{plan}");
        }
    }
}

#[test]
fn quantize_and_dequantize_to_16_bit_and_coded_types_match_the_reference() {
    let mut rng = Rng::new(0x9a);
    let x = rng.tensor(&[4, 6], -300.0, 300.0);
    let targets = [
        DType::I16,
        DType::U16,
        DType::Coded(Coded::I4),
        DType::Coded(Coded::U4),
        DType::Coded(Coded::I2),
        DType::Coded(Coded::U2),
        DType::Coded(Coded::F8E4M3FN),
        DType::Coded(Coded::F8E4M3FNUZ),
        DType::Coded(Coded::F8E5M2),
        DType::Coded(Coded::F8E5M2FNUZ),
        DType::Coded(Coded::F4E2M1),
    ];
    for to in targets {
        for per_axis in [false, true] {
            for saturate in [true, false] {
                let mut g = Graph::new();
                let xi = g.input("x", DType::F32, known(&[4, 6]));
                let scales: Vec<f32> =
                    if per_axis { vec![0.5, 2.0, 7.0, 0.125, 1.0, 3.0] } else { vec![1.5] };
                let s = g.initializer("s", ConstTensor::from_f32(&[scales.len()], &scales).unwrap());
                let zeros = HostTensor::new(vec![scales.len()], vec![0.0f32; scales.len()]).unwrap();
                let z = g.initializer(
                    "z",
                    host::reference::lanes::cast(&zeros, to, true, RoundMode::Up).unwrap().to_const(),
                );
                let attrs = op::Quantize { axis: 1, block_size: 0, output_dtype: None, saturate };
                let q = g.op1(Op::QuantizeLinear(attrs.clone()), &[xi, s, z]);
                let dq = g.op1(Op::DequantizeLinear(attrs), &[q, s, z]);
                g.output(q);
                g.output(dq);
                check(
                    &format!("quantize to {to} per axis {per_axis} saturate {saturate}"),
                    g,
                    vec![("x".into(), x.clone())],
                );
            }
        }
    }
}

#[test]
fn bitcast_moves_the_bytes_as_the_reference_reads_them() {
    let mut rng = Rng::new(0xb1c);
    let pairs = [
        (DType::F32, DType::I32),
        (DType::I32, DType::U32),
        (DType::U16, DType::I16),
        (DType::I64, DType::U64),
    ];
    for (from, to) in pairs {
        let mut g = Graph::new();
        let xi = g.input("x", from, known(&[5, 3]));
        let y = g.op1(Op::BitCast(op::BitCast { to }), &[xi]);
        g.output(y);
        let x = match from {
            DType::F32 => rng.tensor(&[5, 3], -4.0, 4.0),
            d => int_as(&i64_input(&mut rng, &[5, 3], -(1 << 30), 1 << 30), d),
        };
        check(&format!("BitCast {from} -> {to}"), g, vec![("x".into(), x)]);
    }
}

#[test]
fn an_integer_divisor_of_zero_is_an_error_naming_the_node_and_the_session_runs_after_it() {
    for op in [Op::Div, Op::Mod(op::Mod { fmod: false })] {
        let mut s = Session::new(ctx(), divides(&op), SessionOptions::default()).unwrap();
        let av = HostTensor::new(vec![6], vec![7i32, -9, 12, 5, 100, -1]).unwrap();
        let good = HostTensor::new(vec![6], vec![2i32, 4, -5, 1, 7, 3]).unwrap();
        let zero = HostTensor::new(vec![6], vec![2i32, 4, 0, 1, 7, 3]).unwrap();
        let run =
            |s: &mut Session, b: &HostTensor| s.run(&[("a".into(), av.clone()), ("b".into(), b.clone())]);
        assert!(run(&mut s, &good).is_ok());
        match run(&mut s, &zero) {
            Err(e @ HostError::Data { .. }) => {
                let text = e.to_string();
                assert!(text.contains(op.name()) && text.contains("division by zero"), "{text}");
            }
            other => panic!("{}: a zero divisor gave {other:?}", op.name()),
        }
        // The word is cleared before each run: correct input runs again, also replayed.
        for _ in 0..2 {
            let out = run(&mut s, &good).expect("a good divisor runs after the error");
            let want =
                host::reference::eval(&divides(&op), &[("a".into(), av.clone()), ("b".into(), good.clone())])
                    .unwrap();
            assert!(out[0].1.data() == want[0].1.data());
        }
    }
}

/// `op(a, b)` of two int32 inputs of 6 elements.
fn divides(op: &Op) -> Graph {
    let mut g = Graph::new();
    let a = g.input("a", DType::I32, known(&[6]));
    let b = g.input("b", DType::I32, known(&[6]));
    let y = g.op1(op.clone(), &[a, b]);
    g.output(y);
    g
}
