//! The elementwise ops lowered to hand-built programs or the compare kernel, through `Session`
//! against the CPU reference: variadic Sum / Mean / Max / Min (one to nine inputs, broadcasting,
//! NaN), PRelu (broadcast slopes), Shrink, IsInf (every detect combination) and IsNaN, and the
//! row ops Hardmax (every row launch shape, ties and NaN) and LpNormalization (p 1 and 2, a zero
//! row).

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{self, Op};
use planner::{DType, Graph};

use crate::indexing::{compare, known};

#[test]
fn variadic_sum_mean_max_min_match_the_reference() {
    let mut rng = Rng::new(0x5a11);
    let shapes: [&[usize]; 5] = [&[33, 5], &[5], &[1, 5], &[33, 1], &[]];
    // Sum and Mean accumulate in f32 (the reference in f64): inputs that cancel leave a few
    // f32 roundings of the larger terms, so 1e-5 of the result's magnitude (+1).
    for (o, rtol) in [(Op::Sum, 1e-5), (Op::Mean, 1e-5), (Op::Max, 0.0), (Op::Min, 0.0)] {
        for n in [1usize, 2, 3, 4, 5, 9] {
            let mut g = Graph::new();
            let mut ins = Vec::new();
            let mut inputs = Vec::new();
            for k in 0..n {
                // The first input has the full shape, so every count broadcasts to [33, 5].
                let shape = if k == 0 { shapes[0] } else { shapes[(rng.next_u64() % 5) as usize] };
                let name = format!("x{k}");
                ins.push(g.input(&name, DType::F32, known(shape)));
                let mut t = rng.tensor(shape, -100.0, 100.0);
                if k == 2 && !shape.is_empty() {
                    let mut v = t.f32s("x").unwrap().to_vec();
                    v[0] = f32::NAN;
                    t = HostTensor::new(shape.to_vec(), v).unwrap();
                }
                inputs.push((name, t));
            }
            let y = g.op1(o.clone(), &ins);
            g.output(y);
            let what = format!("{} of {n} inputs", o.name());
            compare(&what, g, &inputs, rtol);
        }
    }
}

#[test]
fn prelu_and_shrink_match_the_reference() {
    let mut rng = Rng::new(0x94e1);
    for slope in [&[3, 1, 1][..], &[1], &[2, 3, 4, 5], &[5], &[]] {
        let shape = [2, 3, 4, 5];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let s = g.input("s", DType::F32, known(slope));
        let y = g.op1(Op::PRelu, &[x, s]);
        g.output(y);
        let inputs = vec![
            ("x".to_owned(), rng.tensor(&shape, -10.0, 10.0)),
            ("s".to_owned(), rng.tensor(slope, -2.0, 2.0)),
        ];
        compare(&format!("PRelu slope {slope:?}"), g, &inputs, 0.0);
    }
    for (lambd, bias) in [(0.5, 0.0), (1.5, 1.5), (0.0, -2.0), (3.0, 0.25)] {
        let shape = [7, 129];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let y = g.op1(Op::Shrink(op::Shrink { lambd, bias }), &[x]);
        g.output(y);
        let inputs = vec![("x".to_owned(), rng.tensor(&shape, -5.0, 5.0))];
        compare(&format!("Shrink lambd {lambd} bias {bias}"), g, &inputs, 0.0);
    }
}

#[test]
fn is_inf_and_is_nan_match_the_reference() {
    let v = vec![1.0f32, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -0.0, f32::MAX, -3.5, f32::MIN_POSITIVE];
    for (pos, neg) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[2, 4]));
        let y = g.op1(Op::IsInf(op::IsInf { detect_positive: pos, detect_negative: neg }), &[x]);
        g.output(y);
        let inputs = vec![("x".to_owned(), HostTensor::new(vec![2, 4], v.clone()).unwrap())];
        let plan = compare(&format!("IsInf +{pos} -{neg}"), g, &inputs, 0.0);
        assert!(plan.contains("compare"), "{plan}");
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[8]));
    let y = g.op1(Op::IsNaN, &[x]);
    g.output(y);
    let inputs = vec![("x".to_owned(), HostTensor::new(vec![8], v).unwrap())];
    compare("IsNaN", g, &inputs, 0.0);
}

#[test]
fn hardmax_matches_the_reference() {
    let mut rng = Rng::new(0x4a2d);
    // Last axis: a warp per row (len <= 1024), a block per row (longer); inner axis: a thread
    // per row.
    // (Rank 0 is not a Hardmax input: the reference refuses it.)
    let cases: [(&[usize], i64); 6] =
        [(&[5, 1], -1), (&[7, 33], -1), (&[3, 1025], 1), (&[2, 5000], -1), (&[4, 6, 9], 1), (&[33, 2], 0)];
    for (shape, axis) in cases {
        for ties in [false, true] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(shape));
            let y = g.op1(Op::Hardmax(op::Softmax { axis }), &[x]);
            g.output(y);
            // Ties: values from a few integers, so rows repeat their maximum; some NaNs.
            let t = if ties {
                let n: usize = shape.iter().product();
                let v: Vec<f32> = (0..n)
                    .map(|i| if i % 17 == 3 { f32::NAN } else { (rng.next_u64() % 4) as f32 })
                    .collect();
                HostTensor::new(shape.to_vec(), v).unwrap()
            } else {
                rng.tensor(shape, -10.0, 10.0)
            };
            let inputs = vec![("x".to_owned(), t)];
            let what = format!("Hardmax {shape:?} axis {axis} ties {ties}");
            let plan = compare(&what, g, &inputs, 0.0);
            assert!(plan.contains("hardmax_f32"), "{what}:\n{plan}");
        }
    }
}

#[test]
fn lp_normalization_matches_the_reference() {
    let mut rng = Rng::new(0x1b2a);
    let cases: [(&[usize], i64); 5] =
        [(&[5, 33], -1), (&[3, 2000], 1), (&[4, 6, 9], 1), (&[33, 2], 0), (&[2, 3], -1)];
    for (shape, axis) in cases {
        for p in [1u32, 2] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(shape));
            let y = g.op1(Op::LpNormalization(op::LpNormalization { axis, p }), &[x]);
            g.output(y);
            let n: usize = shape.iter().product();
            // The last case has a row of zeros.
            let t = if n == 6 {
                HostTensor::new(shape.to_vec(), vec![0.0f32, 0.0, 0.0, 1.0, -2.0, 3.0]).unwrap()
            } else {
                rng.tensor(shape, -10.0, 10.0)
            };
            let what = format!("LpNormalization p {p} {shape:?} axis {axis}");
            let plan = compare(&what, g, &[("x".to_owned(), t)], 1e-5);
            assert!(plan.contains(if p == 1 { "lp_norm1_f32" } else { "lp_norm2_f32" }), "{what}:\n{plan}");
        }
    }
}
