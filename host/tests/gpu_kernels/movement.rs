//! The data-movement kernels (Transpose, Gather) through `Session` against the CPU reference, bit
//! for bit: random shapes of rank 1 to 5 with dims 1, 2, 3, 31, 33 and 1025, random permutations
//! (and the default reversed one, and rank 8), Gather along the first, second and last axis with
//! negative indices and scalar, 1-D and 2-D index tensors; and a Gather fused with the elementwise
//! program that reads it (`gather_program_f32`).

use host::selftest::Rng;
use host::tensor::TensorData;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{DType, Dim, Graph};

use crate::ctx;

const DIMS: [usize; 6] = [1, 2, 3, 31, 33, 1025];
const MAX_ELEMS: usize = 1 << 20;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Equal names, shapes, dtypes and f32 bits.
fn assert_bits(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let (TensorData::F32(gv), TensorData::F32(wv)) = (g.data(), w.data()) else {
            panic!("{what}: not f32")
        };
        for (i, (a, b)) in gv.iter().zip(wv).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
}

/// Runs `g` on the GPU and the reference; returns the plan's text.
fn check(what: &str, g: Graph, inputs: Vec<(String, HostTensor)>) -> String {
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    assert_bits(what, &s.run(&inputs).unwrap(), &want);
    s.last_plan().unwrap().to_string()
}

fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[(rng.next_u64() % from.len() as u64) as usize]
}

/// A random shape of `rank` dims from [`DIMS`] with at most [`MAX_ELEMS`] elements.
fn random_shape(rng: &mut Rng, rank: usize) -> Vec<usize> {
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        let left = MAX_ELEMS / shape.iter().product::<usize>().max(1);
        let fits: Vec<usize> = DIMS.iter().copied().filter(|&d| d <= left).collect();
        shape.push(pick(rng, &fits));
    }
    shape
}

fn random_perm(rng: &mut Rng, rank: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        p.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    p
}

fn transpose_graph(shape: &[usize], perm: Option<Vec<usize>>) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let y = g.op1(Op::Transpose(op::Transpose { perm }), &[x]);
    g.output(y);
    g
}

#[test]
fn transpose_matches_the_reference_bit_for_bit() {
    let mut rng = Rng::new(0x7a05);
    let mut cases: Vec<(Vec<usize>, Option<Vec<usize>>)> = Vec::new();
    for rank in 1..=5 {
        for _ in 0..6 {
            let shape = random_shape(&mut rng, rank);
            let perm = random_perm(&mut rng, rank);
            cases.push((shape, Some(perm)));
        }
        cases.push((random_shape(&mut rng, rank), None));
    }
    // Fixed shapes: a large 2-D transpose, size-1 dims between moved ones, rank 8, a scalar.
    cases.push((vec![1025, 33], Some(vec![1, 0])));
    cases.push((vec![31, 1, 33, 1, 2], Some(vec![4, 1, 2, 3, 0])));
    cases.push((vec![2, 3, 2, 3, 2, 3, 2, 3], Some(vec![7, 0, 6, 1, 5, 2, 4, 3])));
    cases.push((vec![], None));
    for (shape, perm) in cases {
        let what = format!("transpose {shape:?} perm {perm:?}");
        let inputs = vec![("x".to_owned(), rng.tensor(&shape, -1e3, 1e3))];
        // A transpose that moves only axes of extent 1 keeps every element in place: the
        // planner makes it a reshape (`canon.rs`), a copy to the output here.
        let p: Vec<usize> = perm.clone().unwrap_or_else(|| (0..shape.len()).rev().collect());
        let moved: Vec<usize> = p.iter().copied().filter(|&a| shape[a] != 1).collect();
        let identity = p.iter().enumerate().all(|(i, &a)| i == a);
        let kernel = if moved.is_sorted() && !identity { " copy " } else { "transpose_f32" };
        let plan = check(&what, transpose_graph(&shape, perm), inputs);
        assert!(plan.contains(kernel), "{what}:\n{plan}");
    }
}

#[test]
fn gather_matches_the_reference_bit_for_bit() {
    let mut rng = Rng::new(0x6a7e);
    for rank in 1..=4 {
        for axis in [0i64, 1, -1] {
            if axis == 1 && rank < 2 {
                continue;
            }
            for idx_shape in [&[][..], &[5][..], &[2, 3][..]] {
                let shape = random_shape(&mut rng, rank);
                let a = if axis < 0 { rank - 1 } else { axis as usize };
                let len = shape[a] as i64;
                let n: usize = idx_shape.iter().product();
                // Indices in [-len, len): negatives count from the end.
                let idx: Vec<i64> =
                    (0..n).map(|_| (rng.next_u64() % (2 * len as u64)) as i64 - len).collect();
                // int64 and int32 indices in turn.
                let i32s = rng.next_u64().is_multiple_of(2);
                let mut g = Graph::new();
                let x = g.input("x", DType::F32, known(&shape));
                let i = g.input("i", if i32s { DType::I32 } else { DType::I64 }, known(idx_shape));
                let y = g.gather(x, i, axis);
                g.output(y);
                let what = format!("gather {shape:?} axis {axis} indices {idx:?} (int32: {i32s})");
                let indices = if i32s {
                    HostTensor::new(idx_shape.to_vec(), idx.iter().map(|&v| v as i32).collect::<Vec<_>>())
                } else {
                    HostTensor::new(idx_shape.to_vec(), idx)
                };
                let inputs =
                    vec![("x".to_owned(), rng.tensor(&shape, -1e3, 1e3)), ("i".to_owned(), indices.unwrap())];
                let plan = check(&what, g, inputs);
                assert!(plan.contains("gather_f32"), "{what}:\n{plan}");
            }
        }
    }
}

#[test]
fn gather_writes_nan_for_an_out_of_range_index() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[3, 4]));
    let i = g.input("i", DType::I64, known(&[4]));
    let y = g.gather(x, i, 0);
    g.output(y);
    let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let inputs = vec![
        ("x".to_owned(), HostTensor::new(vec![3, 4], data).unwrap()),
        ("i".to_owned(), HostTensor::new(vec![4], vec![-1i64, 3, -4, 1]).unwrap()),
    ];
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let out = s.run(&inputs).unwrap();
    let TensorData::F32(v) = out[0].1.data() else { panic!("not f32") };
    assert_eq!(&v[..4], &[8.0, 9.0, 10.0, 11.0]);
    assert!(v[4..12].iter().all(|x| x.is_nan()), "{v:?}");
    assert_eq!(&v[12..], &[4.0, 5.0, 6.0, 7.0]);
}

#[test]
fn a_gather_and_the_program_reading_it_run_as_one_launch() {
    // Embedding lookups: the gathered rows plus a position table (same shape), times a broadcast
    // row, a three-op chain, along axis 0 and axis 1, with negative indices; fused
    // (`gather_program_f32`) against unfused bit for bit and the reference.
    let mut rng = Rng::new(0x9a7);
    let unfused = SessionOptions { fuse_gemm_programs: false, ..SessionOptions::default() };
    for (shape, axis, idx_shape) in [(vec![50, 64], 0i64, vec![1, 16]), (vec![3, 40, 33], 1, vec![7])] {
        let a = axis as usize;
        let mut out = shape[..a].to_vec();
        out.extend(&idx_shape);
        out.extend(&shape[a + 1..]);
        let row = vec![*shape.last().unwrap()];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let i = g.input("i", DType::I64, known(&idx_shape));
        let pos = g.input("pos", DType::F32, known(&out));
        let scale = g.input("scale", DType::F32, known(&row));
        let e = g.gather(x, i, axis);
        let s = g.add(e, pos);
        let m = g.mul(s, scale);
        let y = g.op1(Op::Tanh, &[m]);
        g.output(y);
        let len = shape[a] as u64;
        let n: usize = idx_shape.iter().product();
        let idx: Vec<i64> = (0..n).map(|_| (rng.next_u64() % (2 * len)) as i64 - len as i64).collect();
        let inputs = vec![
            ("x".to_owned(), rng.tensor(&shape, -2.0, 2.0)),
            ("i".to_owned(), HostTensor::new(idx_shape.clone(), idx).unwrap()),
            ("pos".to_owned(), rng.tensor(&out, -1.0, 1.0)),
            ("scale".to_owned(), rng.tensor(&row, -1.0, 1.0)),
        ];
        let what = format!("gather {shape:?} axis {axis} + program");
        let plan = crate::programs::fused_matches_unfused(&what, g, &inputs, unfused, 1e-6);
        assert!(plan.contains("gather_program_f32") && !plan.contains("ew_program_f32"), "{what}:\n{plan}");
    }
    // An index out of range gathers NaN, and the program sees it.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[3, 4]));
    let i = g.input("i", DType::I64, known(&[2]));
    let b = g.input("b", DType::F32, known(&[2, 4]));
    let e = g.gather(x, i, 0);
    let y = g.add(e, b);
    g.output(y);
    let inputs = vec![
        ("x".to_owned(), rng.tensor(&[3, 4], -1.0, 1.0)),
        ("i".to_owned(), HostTensor::new(vec![2], vec![1i64, 7]).unwrap()),
        ("b".to_owned(), rng.tensor(&[2, 4], -1.0, 1.0)),
    ];
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let out = s.run(&inputs).unwrap();
    assert!(s.last_plan().unwrap().to_string().contains("gather_program_f32"));
    let TensorData::F32(v) = out[0].1.data() else { panic!("not f32") };
    assert!(v[..4].iter().all(|x| x.is_finite()) && v[4..].iter().all(|x| x.is_nan()), "{v:?}");
}
