//! The element-indexed kernels (GatherElements, ScatterElements, Trilu) and the transposes through
//! strides (DepthToSpace, SpaceToDepth) through `Session` against the CPU reference: random shapes
//! and axes, i32 and i64 indices with negative values, every scatter reduction, Trilu with and
//! without `k` (a run-time input), both DepthToSpace modes. Also [`compare`], the check the other
//! op files share.

use host::selftest::Rng;
use host::tensor::TensorData;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{DType, Dim, Graph};

use crate::ctx;

pub fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Runs `g` on the GPU and on the reference and compares every output: integers and bools
/// exactly, floats within `rtol * (|want| + 1)` (0: bit for bit, NaN matching NaN). Returns the
/// plan's text (empty for a model run in stages, which has no single plan).
pub fn compare(what: &str, g: Graph, inputs: &[(String, HostTensor)], rtol: f64) -> String {
    let want = host::reference::eval(&g, inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let got = s.run(inputs).unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(&want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let exact = !matches!(g.data(), TensorData::F32(_) | TensorData::F64(_));
        for (i, (a, b)) in g.data().to_f64s().iter().zip(w.data().to_f64s()).enumerate() {
            let ok = if exact || rtol == 0.0 {
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
            } else {
                *a == b || (a - b).abs() <= rtol * (b.abs() + 1.0) || (a.is_nan() && b.is_nan())
            };
            assert!(ok, "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
    s.last_plan().map(|p| p.to_string()).unwrap_or_default()
}

pub fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[(rng.next_u64() % from.len() as u64) as usize]
}

/// A random shape of `rank` dims from `dims`.
pub fn shape_of(rng: &mut Rng, rank: usize, dims: &[usize]) -> Vec<usize> {
    (0..rank).map(|_| pick(rng, dims)).collect()
}

/// `n` random indices in `[-len, len)` as an i32 or i64 tensor of `shape`.
fn indices(rng: &mut Rng, shape: &[usize], len: usize, i32s: bool) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() % (2 * len as u64)) as i64 - len as i64).collect();
    if i32s {
        HostTensor::new(shape.to_vec(), v.into_iter().map(|x| x as i32).collect::<Vec<i32>>()).unwrap()
    } else {
        HostTensor::new(shape.to_vec(), v).unwrap()
    }
}

#[test]
fn gather_elements_matches_the_reference() {
    let mut rng = Rng::new(0x6e1e);
    for rank in 1..=4 {
        for _ in 0..4 {
            let data = shape_of(&mut rng, rank, &[1, 2, 3, 5, 33]);
            let axis = (rng.next_u64() % rank as u64) as i64
                - if rng.next_u64().is_multiple_of(2) { rank as i64 } else { 0 };
            let a = axis.rem_euclid(rank as i64) as usize;
            // Indices no larger than the data off the axis, any length along it.
            let idx: Vec<usize> = (0..rank)
                .map(|d| {
                    if d == a {
                        1 + (rng.next_u64() % 7) as usize
                    } else {
                        1 + (rng.next_u64() % data[d] as u64) as usize
                    }
                })
                .collect();
            let i32s = rng.next_u64().is_multiple_of(2);
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&data));
            let i = g.input("i", if i32s { DType::I32 } else { DType::I64 }, known(&idx));
            let y = g.op1(Op::GatherElements(op::GatherElements { axis }), &[x, i]);
            g.output(y);
            let inputs = vec![
                ("x".to_owned(), rng.tensor(&data, -1e3, 1e3)),
                ("i".to_owned(), indices(&mut rng, &idx, data[a], i32s)),
            ];
            let what = format!("GatherElements data {data:?} indices {idx:?} axis {axis}");
            let plan = compare(&what, g, &inputs, 0.0);
            assert!(plan.contains("gather_elements_b4"), "{what}:\n{plan}");
        }
    }
    // i64 data (8-byte elements).
    let mut g = Graph::new();
    let x = g.input("x", DType::I64, known(&[3, 4]));
    let i = g.input("i", DType::I64, known(&[2, 4]));
    let y = g.op1(Op::GatherElements(op::GatherElements { axis: 0 }), &[x, i]);
    g.output(y);
    let inputs = vec![
        ("x".to_owned(), HostTensor::new(vec![3, 4], (0..12i64).collect::<Vec<_>>()).unwrap()),
        ("i".to_owned(), HostTensor::new(vec![2, 4], vec![0i64, 1, 2, -1, -3, 2, 1, 0]).unwrap()),
    ];
    assert!(compare("GatherElements i64", g, &inputs, 0.0).contains("gather_elements_b8"));
}

#[test]
fn scatter_elements_matches_the_reference_for_every_reduction() {
    use op::ScatterReduction as R;
    let mut rng = Rng::new(0x5ca7);
    for reduction in [R::None, R::Add, R::Mul, R::Max, R::Min] {
        for rank in 1..=3 {
            let data = shape_of(&mut rng, rank, &[2, 3, 7, 33]);
            let axis = (rng.next_u64() % rank as u64) as i64;
            let a = axis as usize;
            let idx: Vec<usize> = (0..rank).map(|d| 1 + (rng.next_u64() % data[d] as u64) as usize).collect();
            let n: usize = idx.iter().product();
            // Reduction none: distinct indices along the axis (a permutation prefix per line), so
            // the result does not depend on which duplicate wins. Others: any indices.
            let index_tensor = if reduction == R::None {
                let mut v = vec![0i64; n];
                let inner: usize = idx[a + 1..].iter().product();
                let outer: usize = idx[..a].iter().product();
                for o in 0..outer {
                    for k in 0..inner {
                        let mut perm: Vec<i64> = (0..data[a] as i64).collect();
                        for j in (1..perm.len()).rev() {
                            perm.swap(j, (rng.next_u64() % (j as u64 + 1)) as usize);
                        }
                        for j in 0..idx[a] {
                            v[(o * idx[a] + j) * inner + k] =
                                perm[j] - if j % 2 == 0 { data[a] as i64 } else { 0 };
                        }
                    }
                }
                HostTensor::new(idx.clone(), v).unwrap()
            } else {
                indices(&mut rng, &idx, data[a], false)
            };
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&data));
            let i = g.input("i", DType::I64, known(&idx));
            let u = g.input("u", DType::F32, known(&idx));
            let y = g.op1(Op::ScatterElements(op::ScatterElements { axis, reduction }), &[x, i, u]);
            g.output(y);
            let inputs = vec![
                ("x".to_owned(), rng.tensor(&data, -2.0, 2.0)),
                ("i".to_owned(), index_tensor),
                ("u".to_owned(), rng.tensor(&idx, -2.0, 2.0)),
            ];
            let what = format!("ScatterElements {reduction:?} data {data:?} indices {idx:?} axis {axis}");
            // Duplicates under add / mul combine in f32 in arrival order.
            let plan = compare(&what, g, &inputs, 1e-5);
            assert!(plan.contains("scatter_elements_f32"), "{what}:\n{plan}");
        }
    }
}

#[test]
fn trilu_matches_the_reference() {
    let mut rng = Rng::new(0x7e11);
    for upper in [true, false] {
        for k in [None, Some(0i64), Some(2), Some(-1), Some(-40), Some(40)] {
            for (shape, dtype) in
                [(vec![5, 7], DType::F32), (vec![3, 33, 4], DType::I64), (vec![2, 1, 9, 1], DType::F32)]
            {
                let mut g = Graph::new();
                let x = g.input("x", dtype, known(&shape));
                let mut ins = vec![x];
                let mut inputs = vec![(
                    "x".to_owned(),
                    if dtype == DType::F32 {
                        rng.tensor(&shape, -1e3, 1e3)
                    } else {
                        let n: usize = shape.iter().product();
                        HostTensor::new(shape.clone(), (0..n as i64).collect::<Vec<_>>()).unwrap()
                    },
                )];
                if let Some(k) = k {
                    ins.push(g.input("k", DType::I64, known(&[])));
                    inputs.push(("k".to_owned(), HostTensor::new(vec![], vec![k]).unwrap()));
                }
                let y = g.op1(Op::Trilu(op::Trilu { upper }), &ins);
                g.output(y);
                let what = format!("Trilu upper {upper} k {k:?} {shape:?} {dtype}");
                let plan = compare(&what, g, &inputs, 0.0);
                assert!(plan.contains("trilu_b"), "{what}:\n{plan}");
            }
        }
    }
}

#[test]
fn depth_to_space_and_space_to_depth_match_the_reference() {
    let mut rng = Rng::new(0xd250);
    for b in [1usize, 2, 3] {
        for mode in [op::DepthToSpaceMode::Dcr, op::DepthToSpaceMode::Crd] {
            let shape = [2, 2 * b * b, 3, 5];
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&shape));
            let y = g.op1(Op::DepthToSpace(op::DepthToSpace { blocksize: b, mode }), &[x]);
            g.output(y);
            let inputs = vec![("x".to_owned(), rng.tensor(&shape, -1e3, 1e3))];
            let what = format!("DepthToSpace b {b} {mode:?} {shape:?}");
            compare(&what, g, &inputs, 0.0);
        }
        let shape = [2, 3, 4 * b, 2 * b];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let y = g.op1(Op::SpaceToDepth(op::SpaceToDepth { blocksize: b }), &[x]);
        g.output(y);
        let inputs = vec![("x".to_owned(), rng.tensor(&shape, -1e3, 1e3))];
        compare(&format!("SpaceToDepth b {b} {shape:?}"), g, &inputs, 0.0);
    }
}

#[test]
fn one_hot_matches_the_reference() {
    let mut rng = Rng::new(0x0e07);
    for axis in [-1i64, 0, 1, -2] {
        for float_indices in [false, true] {
            let (shape, depth) = ([3usize, 5], 7i64);
            let n: usize = shape.iter().product();
            // Indices in [-depth - 2, depth + 2): negatives wrap, the outermost are out of range.
            let raw: Vec<i64> =
                (0..n).map(|_| (rng.next_u64() % (2 * depth as u64 + 4)) as i64 - depth - 2).collect();
            let mut g = Graph::new();
            let i = g.input("i", if float_indices { DType::F32 } else { DType::I64 }, known(&shape));
            let d = g.initializer("d", planner::ConstTensor::from_i64(&[], &[depth]).unwrap());
            let v = g.input("v", DType::F32, known(&[2]));
            let y = g.op1(Op::OneHot(op::OneHot { axis }), &[i, d, v]);
            g.output(y);
            let indices = if float_indices {
                HostTensor::new(shape.to_vec(), raw.iter().map(|&k| k as f32 + 0.25).collect::<Vec<f32>>())
                    .unwrap()
            } else {
                HostTensor::new(shape.to_vec(), raw).unwrap()
            };
            let inputs = vec![
                ("i".to_owned(), indices),
                ("v".to_owned(), HostTensor::new(vec![2], vec![-1.5f32, 4.0]).unwrap()),
            ];
            let what = format!("OneHot axis {axis} float indices {float_indices}");
            let plan = compare(&what, g, &inputs, 0.0);
            assert!(plan.contains("one_hot"), "{what}:\n{plan}");
        }
    }
}

#[test]
fn scatter_nd_matches_the_reference_for_every_reduction() {
    use planner::op::ScatterReduction as R;
    let mut rng = Rng::new(0x5c4d);
    for reduction in [R::None, R::Add, R::Mul, R::Max, R::Min] {
        // The last three add whole 16-byte lanes (slices of 8, 4 and 64 elements: the kernel's
        // vector path for reduction add; a GNN's index_add of message rows is the third).
        for (data_dims, k, tuples) in [
            (vec![4, 5, 6], 1usize, 3usize),
            (vec![4, 5, 6], 2, 7),
            (vec![3, 8], 2, 5),
            (vec![9], 1, 4),
            (vec![6, 8], 1, 10),
            (vec![5, 3, 4], 2, 9),
            (vec![50, 64], 1, 400),
        ] {
            // Reduction none takes distinct tuples: at most as many as there are.
            let distinct: usize = data_dims[..k].iter().product();
            let tuples = if reduction == R::None { tuples.min(distinct) } else { tuples };
            // The data a graph input (copied to the output first) or a value computed here, which
            // the scatter then updates in place (no copy).
            for computed in [false, true] {
                let mut g = Graph::new();
                let x = g.input("x", DType::F32, known(&data_dims));
                let data = if computed { g.op1(Op::Neg, &[x]) } else { x };
                // Distinct tuples for reduction none (duplicates are undefined there); repeats
                // otherwise. Every other index negative.
                let mut picks: Vec<Vec<i64>> = Vec::new();
                while picks.len() < tuples {
                    let t: Vec<i64> = data_dims[..k]
                        .iter()
                        .enumerate()
                        .map(|(d, &n)| {
                            let i = (rng.next_u64() % n as u64) as i64;
                            if (picks.len() + d) % 2 == 1 { i - n as i64 } else { i }
                        })
                        .collect();
                    let norm = |t: &Vec<i64>| {
                        t.iter().zip(&data_dims).map(|(&i, &n)| i.rem_euclid(n as i64)).collect::<Vec<_>>()
                    };
                    if reduction != R::None || !picks.iter().any(|p| norm(p) == norm(&t)) {
                        picks.push(t);
                    }
                }
                let idx = HostTensor::new(vec![tuples, k], picks.concat()).unwrap();
                let mut ud = vec![tuples];
                ud.extend_from_slice(&data_dims[k..]);
                let i = g.input("i", DType::I64, known(&[tuples, k]));
                let u = g.input("u", DType::F32, known(&ud));
                let y = g.op1(Op::ScatterNd(op::ScatterNd { reduction }), &[data, i, u]);
                // (A graph output has no arena buffer to share: the computed case reads it on.)
                let y = if computed { g.op1(Op::Neg, &[y]) } else { y };
                g.output(y);
                // Small integers: sums and products of repeats are exact in any order.
                let ints = |rng: &mut Rng, d: &[usize]| {
                    let v: Vec<f32> =
                        (0..d.iter().product()).map(|_| (rng.next_u64() % 5) as f32 - 2.0).collect();
                    HostTensor::new(d.to_vec(), v).unwrap()
                };
                let inputs = vec![
                    ("x".into(), ints(&mut rng, &data_dims)),
                    ("i".into(), idx),
                    ("u".into(), ints(&mut rng, &ud)),
                ];
                let what = format!("ScatterND {reduction:?} {data_dims:?} k {k} computed {computed}");
                let plan = compare(&what, g, &inputs, 0.0);
                assert!(plan.contains("scatter_nd_f32"), "{plan}");
                assert_eq!(plan.contains(" copy "), !computed, "{what}:\n{plan}");
            }
        }
    }
}

#[test]
fn cumsum_and_cumprod_match_the_reference_for_every_dtype_axis_and_flag() {
    let mut rng = Rng::new(0xc5);
    // Lines of whole 16-element chunks and a rest (the kernel loads a chunk before summing it).
    let long: [&[usize]; 4] = [&[64], &[5, 17], &[16, 3], &[2, 100, 3]];
    for case in 0..28 {
        let rank = 1 + (rng.next_u64() % 3) as usize;
        let mut shape: Vec<usize> = (0..rank).map(|_| 1 + (rng.next_u64() % 40) as usize).collect();
        let mut axis = (rng.next_u64() % rank as u64) as i64 - if case % 2 == 0 { 0 } else { rank as i64 };
        if case >= 24 {
            shape = long[case - 24].to_vec();
            axis = (0..shape.len()).max_by_key(|&a| shape[a]).unwrap_or(0) as i64;
        }
        let dtype = [DType::F32, DType::F64, DType::I32, DType::I64][case % 4];
        let (exclusive, reverse) = (case % 3 == 1, case % 5 >= 3);
        let n: usize = shape.iter().product();
        let vals: Vec<f64> = (0..n).map(|_| rng.uniform(-4.0, 4.0).round() as f64 + 0.25).collect();
        let x = match dtype {
            DType::F32 => HostTensor::new(shape.clone(), vals.iter().map(|&v| v as f32).collect::<Vec<_>>()),
            DType::F64 => HostTensor::new(shape.clone(), vals.clone()),
            DType::I32 => HostTensor::new(shape.clone(), vals.iter().map(|&v| v as i32).collect::<Vec<_>>()),
            _ => HostTensor::new(shape.clone(), vals.iter().map(|&v| v as i64).collect::<Vec<_>>()),
        }
        .unwrap();
        let mut g = Graph::new();
        let xv = g.input("x", dtype, known(&shape));
        // The axis as a constant, or (every third case) as a graph input the session specializes on.
        let a = if case % 3 == 0 {
            g.input("axis", DType::I64, known(&[]))
        } else {
            g.initializer("axis", planner::ConstTensor::from_i64s_as(DType::I64, &[], &[axis]).unwrap())
        };
        // Products on every other case (CumProd runs on the same kernels).
        let attrs = op::CumSum { exclusive, reverse };
        let product = case % 2 == 1;
        let y = g.op1(if product { Op::CumProd(attrs) } else { Op::CumSum(attrs) }, &[xv, a]);
        g.output(y);
        let mut inputs = vec![("x".to_string(), x)];
        if case % 3 == 0 {
            inputs.push(("axis".into(), HostTensor::new(vec![], vec![axis]).unwrap()));
        }
        let what = format!(
            "cum (product {product}) {dtype} {shape:?} axis {axis} exclusive {exclusive} reverse {reverse}"
        );
        let plan = compare(&what, g, &inputs, 0.0);
        assert!(plan.contains("cumsum_"), "{what}: {plan}");
    }
}

#[test]
fn a_gather_with_its_program_takes_int64_and_int32_indices() {
    let mut rng = Rng::new(0x9a7e);
    for i32s in [false, true] {
        let mut g = Graph::new();
        let table = g.input("table", DType::F32, known(&[50, 24]));
        let ids = g.input("ids", if i32s { DType::I32 } else { DType::I64 }, known(&[3, 7]));
        let pos = g.input("pos", DType::F32, known(&[7, 24]));
        let e = g.gather(table, ids, 0);
        let y = g.add(e, pos);
        let y = g.relu(y);
        g.output(y);
        let inputs = vec![
            ("table".to_owned(), rng.tensor(&[50, 24], -1.0, 1.0)),
            ("ids".to_owned(), indices(&mut rng, &[3, 7], 50, i32s)),
            ("pos".to_owned(), rng.tensor(&[7, 24], -1.0, 1.0)),
        ];
        let what = format!("embedding with int32 ids {i32s}");
        let plan = compare(&what, g, &inputs, 1e-6);
        assert!(plan.contains("gather_program_f32"), "{what}:\n{plan}");
    }
}
