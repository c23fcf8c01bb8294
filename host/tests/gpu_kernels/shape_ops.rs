//! The type-generic movement and logic kernels through `Session` against the CPU reference, bit for
//! bit: Slice (negative steps), Split, Concat, Expand, Tile, Pad (all four modes), GatherND (with
//! batch dims), Cast between every supported pair, comparisons and boolean logic, Where with
//! broadcasting — on f32, i64 and bool data; integer arithmetic, bitwise ops and shifts at every
//! integer width.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

pub(crate) fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Runs `g` on the GPU and the reference, demands identical outputs; returns the plan's text.
pub(crate) fn check(what: &str, g: Graph, inputs: Vec<(String, HostTensor)>) -> String {
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(&want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        assert!(same(g, w), "{what}: {gn} differs:\n gpu {:?}\n ref {:?}", g.data(), w.data());
    }
    s.last_plan().unwrap().to_string()
}

/// The same elements: equal, or (IEEE float types) NaN in both places. (Codes of the coded types
/// compare as codes.)
fn same(g: &HostTensor, w: &HostTensor) -> bool {
    if g.data() == w.data() {
        return true;
    }
    let float = matches!(w.dtype(), DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
    float && gv.len() == wv.len() && gv.iter().zip(&wv).all(|(a, b)| a == b || a.is_nan() && b.is_nan())
}

fn f32_input(rng: &mut Rng, shape: &[usize]) -> HostTensor {
    rng.tensor(shape, -4.0, 4.0)
}

pub(crate) fn i64_input(rng: &mut Rng, shape: &[usize], lo: i64, hi: i64) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n).map(|_| lo + (rng.next_u64() % (hi - lo) as u64) as i64).collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn bool_input(rng: &mut Rng, shape: &[usize]) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<bool> = (0..n).map(|_| rng.next_u64() % 2 == 1).collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn ints(g: &mut Graph, name: &str, v: &[i64]) -> ValueId {
    g.initializer(name, ConstTensor::from_i64(&[v.len()], v).unwrap())
}

#[test]
fn slices_with_any_steps_match_the_reference() {
    let mut rng = Rng::new(0x511ce);
    type Case<'a> = (&'a [usize], &'a [i64], &'a [i64], &'a [i64], &'a [i64]);
    let cases: [Case; 5] = [
        (&[10, 40], &[1, 3], &[9, 39], &[0, 1], &[1, 2]),
        (&[10, 40], &[-1], &[-11], &[1], &[-3]),
        (&[3, 33, 7], &[0, 32, 6], &[3, -100, -100], &[0, 1, 2], &[2, -1, -2]),
        (&[2, 3, 4, 5], &[1], &[i64::MAX], &[-1], &[1]),
        (&[1025], &[5], &[1000], &[0], &[7]),
    ];
    for (i, (shape, starts, ends, axes, steps)) in cases.into_iter().enumerate() {
        for dtype in [DType::F32, DType::I64] {
            let mut g = Graph::new();
            let x = g.input("x", dtype, known(shape));
            let (s, e, a, st) = (
                ints(&mut g, "s", starts),
                ints(&mut g, "e", ends),
                ints(&mut g, "a", axes),
                ints(&mut g, "t", steps),
            );
            let y = g.op1(Op::Slice(op::Slice::default()), &[x, s, e, a, st]);
            g.output(y);
            let input = if dtype == DType::F32 {
                f32_input(&mut rng, shape)
            } else {
                i64_input(&mut rng, shape, -99, 99)
            };
            let plan = check(&format!("slice case {i} {dtype}"), g, vec![("x".into(), input)]);
            assert!(plan.contains("strided_copy_b"), "{plan}");
        }
    }
}

#[test]
fn split_and_concat_round_trip_on_every_axis() {
    let mut rng = Rng::new(0x5917);
    for (shape, axis, sizes) in [
        (vec![6, 33], 1, vec![1, 31, 1]),
        (vec![9, 4, 5], 0, vec![3, 3, 3]),
        (vec![2, 3, 1025], -1, vec![1000, 25]),
    ] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let sz = ints(&mut g, "sizes", &sizes);
        let parts =
            g.push(Op::Split(op::Split { axis, split: None, num_outputs: None }), &[x, sz], sizes.len());
        // Concatenate in reverse, plus each part as its own output.
        let rev: Vec<ValueId> = parts.iter().rev().copied().collect();
        let c = g.op1(Op::Concat(op::Concat { axis }), &rev);
        g.output(c);
        for &p in &parts {
            g.output(p);
        }
        let plan = check(
            &format!("split/concat {shape:?} axis {axis}"),
            g,
            vec![("x".into(), f32_input(&mut rng, &shape))],
        );
        assert!(plan.contains("Split strided_copy_b") && plan.contains("Concat strided_copy_b"), "{plan}");
    }
    // i64 and bool concatenation.
    for dtype in [DType::I64, DType::Bool] {
        let mut g = Graph::new();
        let a = g.input("a", dtype, known(&[3, 2]));
        let b = g.input("b", dtype, known(&[3, 5]));
        let c = g.op1(Op::Concat(op::Concat { axis: 1 }), &[a, b]);
        g.output(c);
        let (ta, tb) = if dtype == DType::I64 {
            (i64_input(&mut rng, &[3, 2], -5, 5), i64_input(&mut rng, &[3, 5], -5, 5))
        } else {
            (bool_input(&mut rng, &[3, 2]), bool_input(&mut rng, &[3, 5]))
        };
        check(&format!("concat {dtype}"), g, vec![("a".into(), ta), ("b".into(), tb)]);
    }
}

#[test]
fn expand_and_tile_broadcast_by_zero_strides() {
    let mut rng = Rng::new(0xe4a);
    for (shape, to) in [(vec![3, 1], vec![2, 3, 33]), (vec![1], vec![1025]), (vec![4, 1, 6], vec![4, 5, 6])] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let t: Vec<i64> = to.iter().map(|&d| d as i64).collect();
        let s = ints(&mut g, "shape", &t);
        let y = g.op1(Op::Expand, &[x, s]);
        g.output(y);
        check(&format!("expand {shape:?} -> {to:?}"), g, vec![("x".into(), f32_input(&mut rng, &shape))]);
    }
    for (shape, reps) in [(vec![2, 3], vec![3, 2]), (vec![5], vec![7]), (vec![2, 1, 33], vec![1, 4, 2])] {
        let mut g = Graph::new();
        let x = g.input("x", DType::I64, known(&shape));
        let r = ints(&mut g, "reps", &reps);
        let y = g.op1(Op::Tile, &[x, r]);
        g.output(y);
        check(
            &format!("tile {shape:?} x {reps:?}"),
            g,
            vec![("x".into(), i64_input(&mut rng, &shape, -9, 9))],
        );
    }
}

#[test]
fn pad_matches_the_reference_in_every_mode() {
    let mut rng = Rng::new(0x9ad);
    let modes = [op::PadMode::Constant, op::PadMode::Reflect, op::PadMode::Edge, op::PadMode::Wrap];
    for mode in modes {
        for (shape, pads) in [
            (vec![4, 5], vec![1, 2, 3, 1]),
            (vec![2, 3, 7], vec![0, 1, 2, 1, 0, 3]),
            (vec![3, 33], vec![0, -1, 0, 2]),
        ] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&shape));
            let p = ints(&mut g, "pads", &pads);
            let v = g.initializer("v", ConstTensor::scalar_f32(1.5));
            let y = g.op1(Op::Pad(op::Pad { mode, pads: None, value: None }), &[x, p, v]);
            g.output(y);
            let plan = check(
                &format!("pad {mode:?} {shape:?} {pads:?}"),
                g,
                vec![("x".into(), f32_input(&mut rng, &shape))],
            );
            assert!(plan.contains("pad_b4"), "{plan}");
        }
    }
    // The constant given at run time (a graph input the kernel reads), f32 and i64.
    for (dtype, shape, pads) in
        [(DType::F32, vec![3, 4], vec![1, 0, 2, 3]), (DType::I64, vec![5], vec![2, 1])]
    {
        let mut g = Graph::new();
        let x = g.input("x", dtype, known(&shape));
        let p = ints(&mut g, "pads", &pads);
        let v = g.input("v", dtype, known(&[]));
        let y = g.op1(Op::Pad(op::Pad { mode: op::PadMode::Constant, pads: None, value: None }), &[x, p, v]);
        g.output(y);
        let (xv, vv) = if dtype == DType::F32 {
            (f32_input(&mut rng, &shape), HostTensor::new(vec![], vec![-7.25f32]).unwrap())
        } else {
            (i64_input(&mut rng, &shape, -9, 9), HostTensor::new(vec![], vec![123i64]).unwrap())
        };
        let plan = check(&format!("pad run-time value {dtype}"), g, vec![("x".into(), xv), ("v".into(), vv)]);
        assert!(plan.contains("pad_b"), "{plan}");
    }
}

#[test]
fn gather_nd_and_generic_gather_match_the_reference() {
    let mut rng = Rng::new(0x6a7d);
    // batch_dims 0: [4, 5, 6] data, indices [3, 2] -> [3, 6]; batch_dims 1: [2, 5, 6], indices [2, 3, 1].
    // Rows of whole 16-byte vectors (16 or 4 f32, 6 i64) move as vectors (`gather_nd_b16`): a
    // GNN's `x[edge_index]`, and with batch dims.
    for (data, idx, batch_dims, hi) in [
        (vec![4, 5, 6], vec![3, 2], 0usize, 4i64),
        (vec![2, 5, 6], vec![2, 3, 1], 1, 5),
        (vec![7, 3], vec![4, 2], 0, 3),
        (vec![50, 16], vec![40, 1], 0, 50),
        (vec![3, 8, 4], vec![3, 5, 1], 1, 8),
    ] {
        for dtype in [DType::F32, DType::I64, DType::Bool] {
            let mut g = Graph::new();
            let x = g.input("x", dtype, known(&data));
            let i = g.input("i", DType::I64, known(&idx));
            let y = g.op1(Op::GatherNd(op::GatherNd { batch_dims }), &[x, i]);
            g.output(y);
            let xt = match dtype {
                DType::F32 => f32_input(&mut rng, &data),
                DType::I64 => i64_input(&mut rng, &data, -50, 50),
                _ => bool_input(&mut rng, &data),
            };
            check(
                &format!("gathernd {dtype} {data:?} {idx:?}"),
                g,
                vec![("x".into(), xt), ("i".into(), i64_input(&mut rng, &idx, -hi, hi))],
            );
        }
    }
    for dtype in [DType::I64, DType::Bool] {
        let mut g = Graph::new();
        let x = g.input("x", dtype, known(&[6, 4]));
        let i = g.input("i", DType::I64, known(&[3]));
        let y = g.gather(x, i, 0);
        g.output(y);
        let xt = if dtype == DType::I64 {
            i64_input(&mut rng, &[6, 4], -9, 9)
        } else {
            bool_input(&mut rng, &[6, 4])
        };
        check(
            &format!("gather {dtype}"),
            g,
            vec![("x".into(), xt), ("i".into(), i64_input(&mut rng, &[3], -6, 6))],
        );
    }
}

#[test]
fn casts_between_every_supported_type_match_the_reference() {
    let types = [
        DType::F32,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
        DType::F16,
        DType::BF16,
    ];
    // Values every type represents, including halfway cases for the 16-bit floats and negatives.
    let base: Vec<f32> = vec![
        0.0,
        1.0,
        -1.0,
        2.5,
        -2.5,
        100.0,
        0.1,
        1.0 + 1.0 / 256.0,
        1.0 + 1.0 / 2048.0,
        3.0,
        7.0,
        65.0,
        -0.0,
    ];
    for &from in &types {
        for &to in &types {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&[base.len()]));
            let a = g.cast(x, from);
            let y = g.cast(a, to);
            g.output(y);
            let vals: Vec<f32> = if matches!(from, DType::U8 | DType::Bool) || matches!(to, DType::U8) {
                base.iter().map(|v| v.abs()).collect()
            } else {
                base.clone()
            };
            let t = HostTensor::new(vec![vals.len()], vals).unwrap();
            let plan = check(&format!("cast {from} -> {to}"), g, vec![("x".into(), t)]);
            // f32 -> f32 -> f32 changes nothing: the plan copies the input.
            let nothing = from == DType::F32 && to == DType::F32;
            assert!(plan.contains("cast") != nothing, "{from} -> {to}: {plan}");
        }
    }
}

#[test]
fn comparisons_and_logic_broadcast_like_numpy() {
    let mut rng = Rng::new(0xc0de);
    let cmp = [Op::Equal, Op::Less, Op::Greater, Op::LessOrEqual, Op::GreaterOrEqual];
    for op in cmp {
        for dtype in [DType::F32, DType::I64] {
            let mut g = Graph::new();
            let a = g.input("a", dtype, known(&[3, 1, 33]));
            let b = g.input("b", dtype, known(&[4, 1]));
            let y = g.op1(op.clone(), &[a, b]);
            g.output(y);
            let (ta, tb) = if dtype == DType::F32 {
                // Coarse values so that equality happens.
                let q = |t: HostTensor| {
                    let v: Vec<f32> = t.f32s("q").unwrap().iter().map(|x| x.round()).collect();
                    HostTensor::new(t.shape().to_vec(), v).unwrap()
                };
                (q(f32_input(&mut rng, &[3, 1, 33])), q(f32_input(&mut rng, &[4, 1])))
            } else {
                (i64_input(&mut rng, &[3, 1, 33], -3, 3), i64_input(&mut rng, &[4, 1], -3, 3))
            };
            let plan = check(&format!("{} {dtype}", op.name()), g, vec![("a".into(), ta), ("b".into(), tb)]);
            assert!(plan.contains("compare"), "{plan}");
        }
    }
    for op in [Op::And, Op::Or, Op::Xor] {
        let mut g = Graph::new();
        let a = g.input("a", DType::Bool, known(&[5, 31]));
        let b = g.input("b", DType::Bool, known(&[31]));
        let y = g.op1(op.clone(), &[a, b]);
        let n = g.op1(Op::Not, &[y]);
        g.output(y);
        g.output(n);
        check(
            op.name(),
            g,
            vec![("a".into(), bool_input(&mut rng, &[5, 31])), ("b".into(), bool_input(&mut rng, &[31]))],
        );
    }
}

#[test]
fn where_broadcasts_three_ways() {
    let mut rng = Rng::new(0x3e7e);
    for (c, a, b) in [
        (vec![2, 3, 4], vec![2, 3, 4], vec![2, 3, 4]),
        (vec![1, 33], vec![5, 1], vec![]),
        (vec![4, 1, 1], vec![1, 3, 1], vec![1, 1, 1025]),
    ] {
        for dtype in [DType::F32, DType::I64, DType::Bool] {
            let mut g = Graph::new();
            let cv = g.input("c", DType::Bool, known(&c));
            let av = g.input("a", dtype, known(&a));
            let bv = g.input("b", dtype, known(&b));
            let y = g.op1(Op::Where, &[cv, av, bv]);
            g.output(y);
            let mk = |rng: &mut Rng, s: &[usize]| match dtype {
                DType::F32 => f32_input(rng, s),
                DType::I64 => i64_input(rng, s, -100, 100),
                _ => bool_input(rng, s),
            };
            let (ta, tb) = (mk(&mut rng, &a), mk(&mut rng, &b));
            let plan = check(
                &format!("where {dtype} {c:?} {a:?} {b:?}"),
                g,
                vec![("c".into(), bool_input(&mut rng, &c)), ("a".into(), ta), ("b".into(), tb)],
            );
            assert!(plan.contains("where_b"), "{plan}");
        }
    }
}

#[test]
fn logic_truth_tables() {
    // Every op on the four input pairs, same shapes and broadcast, bool and i64 operands.
    let tables: [(Op, [bool; 4]); 3] = [
        (Op::And, [false, false, false, true]),
        (Op::Or, [false, true, true, true]),
        (Op::Xor, [false, true, true, false]),
    ];
    for (op, want) in tables {
        let mut g = Graph::new();
        let a = g.input("a", DType::Bool, known(&[4]));
        let b = g.input("b", DType::Bool, known(&[4]));
        let y = g.op1(op.clone(), &[a, b]);
        g.output(y);
        let ta = HostTensor::new(vec![4], vec![false, false, true, true]).unwrap();
        let tb = HostTensor::new(vec![4], vec![false, true, false, true]).unwrap();
        let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
        let got = s.run(&[("a".into(), ta), ("b".into(), tb)]).unwrap();
        let want = HostTensor::new(vec![4], want.to_vec()).unwrap();
        assert!(got[0].1.data() == want.data(), "{}: gpu {:?}", op.name(), got[0].1.data());
    }
}

/// `t` (i64 data) as integer `dtype`, wrapped as the reference's casts do (uint64 kept below
/// 2^62, so that sums stay where the reference computes).
pub(crate) fn int_as(t: &HostTensor, dtype: DType) -> HostTensor {
    let v: Vec<i64> = t.data().to_f64s().iter().map(|&x| x as i64).collect();
    let shape = t.shape().to_vec();
    match dtype {
        DType::I64 => HostTensor::new(shape, v),
        DType::I32 => HostTensor::new(shape, v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        DType::I16 => HostTensor::new(shape, v.iter().map(|&x| x as i16).collect::<Vec<_>>()),
        DType::I8 => HostTensor::new(shape, v.iter().map(|&x| x as i8).collect::<Vec<_>>()),
        DType::U64 => {
            HostTensor::new(shape, v.iter().map(|&x| x as u64 & ((1 << 62) - 1)).collect::<Vec<_>>())
        }
        DType::U32 => HostTensor::new(shape, v.iter().map(|&x| x as u32).collect::<Vec<_>>()),
        DType::U16 => HostTensor::new(shape, v.iter().map(|&x| x as u16).collect::<Vec<_>>()),
        _ => HostTensor::new(shape, v.iter().map(|&x| x as u8).collect::<Vec<_>>()),
    }
    .unwrap()
}

#[test]
fn integer_arithmetic_bitwise_ops_and_shifts_wrap_like_the_reference_at_every_width() {
    let mut rng = Rng::new(0x1a7);
    let binary = [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Max,
        Op::Min,
        Op::Pow,
        Op::Div,
        Op::Mod(op::Mod { fmod: false }),
        Op::Mod(op::Mod { fmod: true }),
        Op::Bitwise(op::Bitwise::And),
        Op::Bitwise(op::Bitwise::Or),
        Op::Bitwise(op::Bitwise::Xor),
        Op::BitShift(op::BitShift { direction: op::ShiftDirection::Left }),
        Op::BitShift(op::BitShift { direction: op::ShiftDirection::Right }),
    ];
    let widths =
        [DType::I64, DType::I32, DType::I16, DType::I8, DType::U64, DType::U32, DType::U16, DType::U8];
    for dtype in widths {
        let unsigned = matches!(dtype, DType::U64 | DType::U32 | DType::U16 | DType::U8);
        for op in &binary {
            let shifts = matches!(op, Op::BitShift(_));
            if shifts && !unsigned {
                continue; // ONNX shifts unsigned integers only
            }
            let divides = matches!(op, Op::Div | Op::Mod(_));
            // A divisor without zeros, as a constant and as a run-time input (checked on the
            // device); the other ops broadcast a second input.
            for constant in if divides { vec![true, false] } else { vec![false] } {
                let mut g = Graph::new();
                let a = g.input("a", dtype, known(&[3, 1, 33]));
                let divisor = int_as(&HostTensor::new(vec![4, 1], vec![-3i64, 7, 2, -128]).unwrap(), dtype);
                let b = if constant {
                    g.initializer("b", divisor.to_const())
                } else {
                    g.input("b", dtype, known(&[4, 1]))
                };
                let y = g.op1(op.clone(), &[a, b]);
                g.output(y);
                if !unsigned {
                    let n = g.op1(Op::Neg, &[y]);
                    let abs = g.op1(Op::Abs, &[n]);
                    g.output(abs);
                }
                if dtype != DType::U64 {
                    // (The reference reads no uint64 past 2^63 - 1, which a wrapped y may be.)
                    let not = g.op1(Op::BitwiseNot, &[y]);
                    g.output(not);
                }
                // Large magnitudes, so that products and powers wrap; shifts past the width.
                let (lo, hi) = match op {
                    Op::Pow => (-5, 40),
                    Op::BitShift(_) => (0, 70),
                    _ => (-(1 << 40), 1 << 40),
                };
                let mut inputs = vec![(
                    "a".to_string(),
                    int_as(&i64_input(&mut rng, &[3, 1, 33], -(1 << 40), 1 << 40), dtype),
                )];
                if divides && !constant {
                    inputs.push(("b".into(), divisor));
                } else if !divides {
                    inputs.push(("b".into(), int_as(&i64_input(&mut rng, &[4, 1], lo, hi), dtype)));
                }
                let what = format!("{} {dtype}{}", op.name(), if constant { " by a constant" } else { "" });
                let plan = check(&what, g, inputs);
                assert!(plan.contains("int_arith"), "{plan}");
            }
        }
    }
}

#[test]
fn center_crop_pad_and_the_dropout_mask_match_the_reference() {
    let mut rng = Rng::new(0xcc9);
    // (input, target sizes, axes): crop, pad, both, odd differences, listed and negative axes.
    type Case = (&'static [usize], &'static [i64], Option<Vec<i64>>);
    let cases: [Case; 4] = [
        (&[5, 7], &[3, 10], None),
        (&[2, 6, 9, 4], &[4, 4], Some(vec![1, 2])),
        (&[8, 3, 5], &[5, 2], Some(vec![-3, -1])),
        (&[4, 4, 4], &[7, 1, 4], None),
    ];
    for (shape, target, axes) in cases {
        for dtype in [DType::F32, DType::I64] {
            let mut g = Graph::new();
            let x = g.input("x", dtype, known(shape));
            let t = ints(&mut g, "target", target);
            let y = g.op1(Op::CenterCropPad(op::CenterCropPad { axes: axes.clone() }), &[x, t]);
            g.output(y);
            let data = if dtype == DType::F32 {
                f32_input(&mut rng, shape)
            } else {
                i64_input(&mut rng, shape, -9, 9)
            };
            let plan = check(
                &format!("CenterCropPad {shape:?} -> {target:?} axes {axes:?} {dtype}"),
                g,
                vec![("x".into(), data)],
            );
            assert!(plan.contains("pad_b"), "{plan}");
        }
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[3, 17]));
    let outs = g.push(Op::Dropout(op::Dropout::default()), &[x], 2);
    g.output(outs[0]);
    g.output(outs[1]);
    let plan = check("Dropout mask", g, vec![("x".into(), f32_input(&mut rng, &[3, 17]))]);
    assert!(plan.contains("compare"), "{plan}");
}

#[test]
fn reverse_sequence_matches_the_reference() {
    let mut rng = Rng::new(0x5e9);
    for (shape, batch_axis, time_axis, dtype) in [
        (vec![4, 3, 5], 1, 0, DType::F32),
        (vec![3, 6], 0, 1, DType::I64),
        (vec![5, 2, 2, 3], 1, 0, DType::I64),
    ] {
        let (batch, time) = (shape[batch_axis], shape[time_axis]);
        let mut g = Graph::new();
        let x = g.input("x", dtype, known(&shape));
        let l = g.input("lens", DType::I64, known(&[batch]));
        let attrs = op::ReverseSequence { batch_axis, time_axis };
        let y = g.op1(Op::ReverseSequence(attrs), &[x, l]);
        g.output(y);
        let lens: Vec<i64> = (0..batch).map(|b| ((b * 7 + 1) % (time + 1)) as i64).collect();
        let data = if dtype == DType::F32 {
            f32_input(&mut rng, &shape)
        } else {
            i64_input(&mut rng, &shape, -50, 50)
        };
        let inputs = vec![("x".into(), data), ("lens".into(), HostTensor::new(vec![batch], lens).unwrap())];
        let plan = check(&format!("ReverseSequence {shape:?} batch axis {batch_axis} {dtype}"), g, inputs);
        assert!(plan.contains("reverse_sequence_b"), "{plan}");
    }
}

/// Copies whose inner runs are whole 16-byte vectors move as vectors (`strided_copy_b16`), the
/// same bytes from and to aligned buffers and, word by word, from and to unaligned ones; a
/// Concat of such parts plans on it and matches the reference.
#[test]
fn vector_copies_move_whole_vectors_aligned_or_not() {
    for (rows, cols, xw, yw) in [(5, 3, 0, 0), (7, 2, 1, 0), (3, 4, 0, 3), (1000, 33, 2, 2)] {
        host::selftest::check_vector_copy(ctx(), rows, cols, xw, yw).unwrap();
    }
    let mut rng = Rng::new(0x16b);
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, known(&[300, 64]));
    let b = g.input("b", DType::F32, known(&[300, 32]));
    let c = g.op1(Op::Concat(op::Concat { axis: 1 }), &[a, b]);
    g.output(c);
    let inputs =
        vec![("a".into(), f32_input(&mut rng, &[300, 64])), ("b".into(), f32_input(&mut rng, &[300, 32]))];
    let plan = check("concat of whole vectors", g, inputs);
    assert_eq!(plan.matches("strided_copy_b16").count(), 2, "{plan}");
}
