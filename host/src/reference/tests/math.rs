//! Elementwise arithmetic, unary math, activations and Cast.

use half::{bf16, f16};
use planner::op::{self, ShiftDirection};
use planner::{DType, Op};

use super::{assert_op_err, f32s, i64s, run_op, run1, t};
use crate::tensor::TensorData;

#[test]
fn binary_ops_broadcast_both_ways() {
    let a = t(&[2, 1], vec![1f32, 2.0]);
    let b = t(&[3], vec![10f32, 20.0, 30.0]);
    assert_eq!(f32s(&run1(Op::Add, &[&a, &b]).unwrap()), [11., 21., 31., 12., 22., 32.]);
    assert_eq!(run1(Op::Sub, &[&a, &b]).unwrap().shape(), [2, 3]);
    assert_eq!(f32s(&run1(Op::Mul, &[&b, &t(&[], vec![2f32])]).unwrap()), [20., 40., 60.]);
    assert_eq!(f32s(&run1(Op::Div, &[&b, &t(&[1], vec![4f32])]).unwrap()), [2.5, 5., 7.5]);
    let empty = t(&[0, 3], Vec::<f32>::new());
    assert_eq!(run1(Op::Add, &[&empty, &b]).unwrap().shape(), [0, 3]);
    assert_op_err(run1(Op::Add, &[&a, &t(&[2], vec![1i64, 2])]), "dtype");
}

#[test]
fn integer_arithmetic_wraps_and_truncates() {
    let a = t(&[4], vec![7i32, -7, 7, -7]);
    let b = t(&[4], vec![2i32, 2, -2, -2]);
    let div = run1(Op::Div, &[&a, &b]).unwrap();
    assert_eq!(div.data(), &TensorData::I32(vec![3, -3, -3, 3]));
    let m = run1(Op::Mod(op::Mod { fmod: false }), &[&a, &b]).unwrap();
    assert_eq!(m.data(), &TensorData::I32(vec![1, 1, -1, -1]));
    let f = run1(Op::Mod(op::Mod { fmod: true }), &[&a, &b]).unwrap();
    assert_eq!(f.data(), &TensorData::I32(vec![1, -1, 1, -1]));
    let big = t(&[2], vec![100i8, -128]);
    let sum = run1(Op::Add, &[&big, &t(&[2], vec![100i8, -1])]).unwrap();
    assert_eq!(sum.data(), &TensorData::I8(vec![-56, 127]));
    assert_op_err(run1(Op::Div, &[&a, &t(&[1], vec![0i32])]), "division by zero");
    assert_op_err(
        run1(Op::Mod(op::Mod { fmod: false }), &[&t(&[1], vec![1f32]), &t(&[1], vec![1f32])]),
        "fmod",
    );
}

#[test]
fn float_mod_and_pow() {
    // ONNX Mod example (fmod = 1): x = [-4.3, 7.2, 5.0, 4.3, -7.2, 8.0], y = [2.1, -3.4, 8.0, -2.1, 3.4, 5.0].
    let x = t(&[6], vec![-4.3f64, 7.2, 5.0, 4.3, -7.2, 8.0]);
    let y = t(&[6], vec![2.1f64, -3.4, 8.0, -2.1, 3.4, 5.0]);
    let r = run1(Op::Mod(op::Mod { fmod: true }), &[&x, &y]).unwrap();
    let TensorData::F64(v) = r.data() else { panic!("f64 expected") };
    let want = [-0.1, 0.4, 5.0, 0.1, -0.4, 3.0];
    assert!(v.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{v:?}");
    let p = run1(Op::Pow, &[&t(&[3], vec![1f32, 2.0, 3.0]), &t(&[1], vec![2i64])]).unwrap();
    assert_eq!(f32s(&p), [1., 4., 9.]);
    let ip = run1(Op::Pow, &[&t(&[3], vec![2i64, -3, 5]), &t(&[3], vec![10i64, 3, -1])]).unwrap();
    assert_eq!(i64s(&ip), [1024, -27, 0]);
}

#[test]
fn bit_shift_on_u8() {
    let x = t(&[3], vec![16u8, 4, 1]);
    let s = t(&[3], vec![1u8, 2, 8]);
    let r = run1(Op::BitShift(op::BitShift { direction: ShiftDirection::Right }), &[&x, &s]).unwrap();
    assert_eq!(r.data(), &TensorData::U8(vec![8, 1, 0]));
    let l = run1(
        Op::BitShift(op::BitShift { direction: ShiftDirection::Left }),
        &[&t(&[2], vec![255u8, 1]), &t(&[1], vec![1u8])],
    )
    .unwrap();
    assert_eq!(l.data(), &TensorData::U8(vec![254, 2]));
}

#[test]
fn variadic_ops() {
    let a = t(&[3], vec![3f32, 2.0, 1.0]);
    let b = t(&[3], vec![1f32, 4.0, 4.0]);
    let c = t(&[1], vec![2f32]);
    assert_eq!(f32s(&run1(Op::Max, &[&a, &b, &c]).unwrap()), [3., 4., 4.]);
    assert_eq!(f32s(&run1(Op::Min, &[&a, &b, &c]).unwrap()), [1., 2., 1.]);
    assert_eq!(f32s(&run1(Op::Sum, &[&a, &b, &c]).unwrap()), [6., 8., 7.]);
    assert_eq!(f32s(&run1(Op::Mean, &[&a, &b, &c]).unwrap()), [2., 8. / 3., 7. / 3.]);
    assert_eq!(f32s(&run1(Op::Max, &[&a]).unwrap()), [3., 2., 1.]);
    let nan = t(&[1], vec![f32::NAN]);
    assert!(f32s(&run1(Op::Max, &[&a, &nan]).unwrap()).iter().all(|v| v.is_nan()));
    let i = run1(Op::Max, &[&t(&[2], vec![-5i64, 9]), &t(&[], vec![0i64])]).unwrap();
    assert_eq!(i64s(&i), [0, 9]);
}

#[test]
fn unary_math_and_activations() {
    let x = t(&[4], vec![-2f32, -0.5, 0.5, 2.5]);
    assert_eq!(f32s(&run1(Op::Round, &[&x]).unwrap()), [-2., -0., 0., 2.]);
    assert_eq!(f32s(&run1(Op::Floor, &[&x]).unwrap()), [-2., -1., 0., 2.]);
    assert_eq!(f32s(&run1(Op::Sign, &[&x]).unwrap()), [-1., -1., 1., 1.]);
    assert_eq!(f32s(&run1(Op::Relu, &[&x]).unwrap()), [0., 0., 0.5, 2.5]);
    assert_eq!(
        f32s(&run1(Op::LeakyRelu(op::LeakyRelu { alpha: 0.1 }), &[&x]).unwrap()),
        [-0.2, -0.05, 0.5, 2.5]
    );
    assert_eq!(
        f32s(&run1(Op::ThresholdedRelu(op::ThresholdedRelu { alpha: 1.0 }), &[&x]).unwrap()),
        [0., 0., 0., 2.5]
    );
    close(&run1(Op::HardSigmoid(op::HardSigmoid::default()), &[&x]).unwrap(), &[0.1, 0.4, 0.6, 1.0]);
    close(&run1(Op::HardSwish, &[&x]).unwrap(), &[-1. / 3., -5. / 24., 7. / 24., 2.5 * (2.5 / 6. + 0.5)]);
    let s = f32s(&run1(Op::Sigmoid, &[&t(&[1], vec![0f32])]).unwrap());
    assert_eq!(s, [0.5]);
    let gelu = f32s(&run1(Op::Gelu(op::Gelu::default()), &[&t(&[1], vec![1f32])]).unwrap());
    assert!((gelu[0] - 0.841_344_7).abs() < 1e-6);
    let sp = f32s(&run1(Op::Softplus, &[&t(&[2], vec![0f32, 100.0])]).unwrap());
    assert_eq!(sp, [std::f32::consts::LN_2, 100.0]);
    close(
        &run1(Op::Elu(op::Elu::default()), &[&t(&[2], vec![-1f32, 3.0])]).unwrap(),
        &[(-1f64).exp() - 1.0, 3.0],
    );
    close(
        &run1(Op::Selu(op::Selu::default()), &[&t(&[2], vec![-1f32, 3.0])]).unwrap(),
        &[1.050_701 * 1.673_263_2 * ((-1f64).exp() - 1.0), 1.050_701 * 3.0],
    );
    close(
        &run1(Op::Celu(op::Celu { alpha: 2.0 }), &[&t(&[2], vec![-1f32, 3.0])]).unwrap(),
        &[2.0 * ((-0.5f64).exp() - 1.0), 3.0],
    );
    close(&run1(Op::Mish, &[&t(&[1], vec![1f32])]).unwrap(), &[(1f64.exp().ln_1p()).tanh()]);
    close(&run1(Op::Softsign, &[&t(&[1], vec![-3f32])]).unwrap(), &[-0.75]);
    let tanh_gelu = Op::Gelu(op::Gelu { approximate: op::GeluApproximation::Tanh });
    close(&run1(tanh_gelu, &[&t(&[1], vec![1f32])]).unwrap(), &[0.841_191_990_608_276_8]);
    let p =
        run1(Op::PRelu, &[&t(&[2, 2], vec![-1f32, 2.0, -3.0, 4.0]), &t(&[2], vec![0.5f32, 0.25])]).unwrap();
    assert_eq!(f32s(&p), [-0.5, 2.0, -1.5, 4.0]);
    assert_op_err(run1(Op::Exp, &[&t(&[1], vec![1i64])]), "floating-point");
    let ai = run1(Op::Abs, &[&t(&[3], vec![-3i8, 4, -128])]).unwrap();
    assert_eq!(ai.data(), &TensorData::I8(vec![3, 4, -128]));
}

/// Asserts f32 outputs within 1e-6 relative of f64 expectations.
fn close(got: &crate::tensor::HostTensor, want: &[f64]) {
    let got = f32s(got);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0), "{got:?} vs {want:?}");
    }
}

#[test]
fn half_precision_rounds_once_from_f64() {
    let a = t(&[1], vec![f16::from_f32(1.0)]);
    let b = t(&[1], vec![f16::from_f32(0.000_488_281_25)]); // 2^-11: exactly half an ulp of 1.0
    let sum = run1(Op::Add, &[&a, &b]).unwrap();
    assert_eq!(sum.data(), &TensorData::F16(vec![f16::from_f32(1.0)])); // ties to even
    let x = t(&[1], vec![bf16::from_f32(2.0)]);
    let r = run1(Op::Sqrt, &[&x]).unwrap();
    assert_eq!(r.data(), &TensorData::BF16(vec![bf16::from_f64(std::f64::consts::SQRT_2)]));
}

#[test]
fn clip_with_inputs_attributes_and_ints() {
    let x = t(&[5], vec![-2f32, -1.0, 0.0, 1.0, 2.0]);
    let lo = t(&[], vec![-1f32]);
    let hi = t(&[], vec![1f32]);
    let r = run_op(Op::Clip(op::Clip::default()), &[Some(&x), Some(&lo), Some(&hi)], 1).unwrap();
    assert_eq!(f32s(&r[0]), [-1., -1., 0., 1., 1.]);
    let r = run_op(Op::Clip(op::Clip::default()), &[Some(&x), None, Some(&hi)], 1).unwrap();
    assert_eq!(f32s(&r[0]), [-2., -1., 0., 1., 1.]);
    let r = run1(Op::Clip(op::Clip { min: Some(0.5), max: None }), &[&x]).unwrap();
    assert_eq!(f32s(&r), [0.5, 0.5, 0.5, 1., 2.]);
    let xi = t(&[3], vec![i64::MIN, 5, i64::MAX]);
    let r = run_op(
        Op::Clip(op::Clip::default()),
        &[Some(&xi), Some(&t(&[], vec![0i64])), Some(&t(&[], vec![i64::MAX - 1]))],
        1,
    )
    .unwrap();
    assert_eq!(i64s(&r[0]), [0, 5, i64::MAX - 1]);
}

#[test]
fn clip_propagates_nan_and_gives_the_bound_on_ties_as_numpy() {
    let x = t(&[5], vec![f32::NAN, -2.0, -0.0, 0.5, 3.0]);
    let clip = |lo: f32, hi: f32| {
        let (lo, hi) = (t(&[], vec![lo]), t(&[], vec![hi]));
        let r = run_op(Op::Clip(op::Clip::default()), &[Some(&x), Some(&lo), Some(&hi)], 1).unwrap();
        f32s(&r[0]).to_vec()
    };
    // Bit for bit (the sign of zero included), NaN matching NaN.
    let same = |got: Vec<f32>, want: [f32; 5]| {
        let ok = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
        assert!(ok, "got {got:?}, want {want:?}");
    };
    // np.clip(x, 0.0, 1.0): a NaN x stays NaN; -0.0 ties with the bound 0.0 and gives +0.0.
    same(clip(0.0, 1.0), [f32::NAN, 0.0, 0.0, 0.5, 1.0]);
    // min > max gives max (NaN stays NaN).
    same(clip(2.0, 1.0), [f32::NAN, 1.0, 1.0, 1.0, 1.0]);
    // A NaN bound makes every element NaN (np.clip, which the ONNX reference implementation runs).
    same(clip(f32::NAN, 1.0), [f32::NAN; 5]);
    same(clip(-1.0, f32::NAN), [f32::NAN; 5]);
}

#[test]
fn cast_follows_onnx_rules() {
    let x = t(&[5], vec![-1.7f32, 2.5, 300.0, f32::NAN, 0.0]);
    let to = |dtype| run1(Op::Cast(op::Cast::to(dtype)), &[&x]).unwrap();
    assert_eq!(to(DType::I32).data(), &TensorData::I32(vec![-1, 2, 300, 0, 0]));
    assert_eq!(to(DType::Bool).data(), &TensorData::Bool(vec![true, true, true, true, false]));
    let TensorData::F16(h) = to(DType::F16).into_data() else { panic!("f16 expected") };
    let bits: Vec<u16> = h.iter().map(|v| v.to_bits()).collect();
    let want: Vec<u16> =
        [-1.7f32, 2.5, 300.0, f32::NAN, 0.0].iter().map(|&v| f16::from_f32(v).to_bits()).collect();
    assert_eq!(bits, want);
    let i = t(&[3], vec![300i64, -1, 16_777_217]);
    let u = run1(Op::Cast(op::Cast::to(DType::U8)), &[&i]).unwrap();
    assert_eq!(u.data(), &TensorData::U8(vec![44, 255, 1]));
    let f = run1(Op::Cast(op::Cast::to(DType::F32)), &[&i]).unwrap();
    assert_eq!(f32s(&f), [300., -1., 16_777_216.]);
    let like = run1(
        Op::CastLike(op::CastLike::default()),
        &[&t(&[2], vec![true, false]), &t(&[0], Vec::<f64>::new())],
    )
    .unwrap();
    assert_eq!(like.data(), &TensorData::F64(vec![1.0, 0.0]));
}

/// The 16-bit, unsigned and coded narrow dtypes compute in the lanes and write back at their
/// width; Cast's `saturate` decides float8 overflow; uint64 past i64::MAX is refused by node.
#[test]
fn narrow_and_unsigned_dtypes_compute_at_their_width() {
    let a = t(&[3], vec![65535u16, 1, 7]);
    let sum = run1(Op::Add, &[&a, &t(&[1], vec![2u16])]).unwrap();
    assert_eq!(sum.data(), &TensorData::U16(vec![1, 3, 9]));
    let d = run1(Op::Div, &[&t(&[2], vec![4_000_000_000u32, 9]), &t(&[1], vec![2u32])]).unwrap();
    assert_eq!(d.data(), &TensorData::U32(vec![2_000_000_000, 4]));
    let shl =
        run1(Op::BitShift(op::BitShift { direction: ShiftDirection::Left }), &[&a, &t(&[1], vec![1u16])])
            .unwrap();
    assert_eq!(shl.data(), &TensorData::U16(vec![65534, 2, 14]));
    let m = run1(Op::Max, &[&t(&[2], vec![-300i16, 5]), &t(&[2], vec![-2i16, -9])]).unwrap();
    assert_eq!(m.data(), &TensorData::I16(vec![-2, 5]));
    // float8: saturating by default, NaN / infinity without saturation.
    let x = t(&[3], vec![1e6f32, -0.3, f32::INFINITY]);
    let e4 = planner::DType::Coded(planner::Coded::F8E4M3FN);
    let sat = run1(Op::Cast(op::Cast::to(e4)), &[&x]).unwrap();
    let back = |v: &crate::HostTensor| run1(Op::Cast(op::Cast::to(DType::F32)), &[v]).unwrap();
    assert_eq!(f32s(&back(&sat)), [448.0, -0.3125, 448.0]);
    let no_sat = op::Cast { saturate: false, ..op::Cast::to(e4) };
    let wild = f32s(&back(&run1(Op::Cast(no_sat.clone()), &[&x]).unwrap()));
    assert!(wild[0].is_nan() && wild[1] == -0.3125 && wild[2].is_nan(), "{wild:?}");
    // Integer sources follow Cast's float8 rules too; E8M0 rounds as round_mode says.
    let from_int = run1(Op::Cast(no_sat.clone()), &[&t(&[1], vec![1000i32])]).unwrap();
    assert!(f32s(&back(&from_int))[0].is_nan());
    let e8 = DType::Coded(planner::Coded::F8E8M0);
    let down = op::Cast { round_mode: planner::RoundMode::Down, ..op::Cast::to(e8) };
    assert_eq!(f32s(&back(&run1(Op::Cast(down), &[&t(&[1], vec![3i64])]).unwrap())), [2.0]);
    // BitCast needs equal bit widths: a byte of uint8 is no int4.
    let i4_of_u8 =
        run1(Op::BitCast(op::BitCast { to: DType::Coded(planner::Coded::I4) }), &[&t(&[1], vec![7u8])]);
    assert!(i4_of_u8.is_err(), "{i4_of_u8:?}");
    // int4: integers wrap to four bits.
    let i4 = run1(Op::Cast(op::Cast::to(DType::Coded(planner::Coded::I4))), &[&t(&[3], vec![-9i64, 8, 7])])
        .unwrap();
    assert_eq!(i64s(&run1(Op::Cast(op::Cast::to(DType::I64)), &[&i4]).unwrap()), [7, -8, 7]);
    let huge = t(&[1], vec![u64::MAX]);
    let refused = run1(Op::Add, &[&huge, &huge]);
    assert!(
        matches!(&refused, Err(crate::HostError::Unsupported { op: "Add", detail, .. }) if detail.contains("past 2^63")),
        "{refused:?}"
    );
    // Moving such values is exact, and allowed.
    assert_eq!(run1(Op::Identity, &[&huge]).unwrap().data(), &TensorData::U64(vec![u64::MAX]));
}
