//! Clip with bounds read at run time (graph inputs, not constants), lowered to an elementwise
//! program whose bounds are broadcast inputs, against the CPU reference bit for bit: both bounds,
//! either one, `min > max`, NaN in the data and in a bound, `-0.0` against a `0.0` bound, bounds of
//! shape `[]` and `[1]`, a scalar and a large input; fused with its neighbours into one program and
//! into a GEMM's epilogue (against the same graph with that fusion off, bit for bit).

use host::selftest::Rng;
use host::{HostTensor, SessionOptions};
use planner::op::{self, Op};
use planner::{DType, Graph, ValueId};

use crate::indexing::{compare, known};

/// A bound of a test case: absent, or a graph input of this shape and value.
type Bound = Option<(&'static [usize], f32)>;

/// `Clip(x, lo, hi)` with the bounds given as graph inputs; returns the graph and its feeds.
fn clip_graph(x: HostTensor, lo: Bound, hi: Bound) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let xv = g.input("x", DType::F32, known(x.shape()));
    let mut feeds = vec![("x".to_owned(), x)];
    let mut bound = |g: &mut Graph, name: &str, b: Bound| -> Option<ValueId> {
        let (shape, v) = b?;
        feeds.push((name.to_owned(), HostTensor::new(shape.to_vec(), vec![v]).unwrap()));
        Some(g.input(name, DType::F32, known(shape)))
    };
    let (lo, hi) = (bound(&mut g, "lo", lo), bound(&mut g, "hi", hi));
    let y = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(xv), lo, hi], 1)[0];
    g.output(y);
    (g, feeds)
}

/// Random data in `[-3, 3)` with infinities, signed zeros, the bound values and (`nan`) a NaN
/// planted.
fn data(rng: &mut Rng, shape: &[usize], nan: bool) -> HostTensor {
    let mut v = rng.tensor(shape, -3.0, 3.0).f32s("x").unwrap().to_vec();
    let first = if nan { f32::NAN } else { 2.0 };
    let planted = [first, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, -1.0, 1.0, 0.5];
    for (slot, p) in v.iter_mut().step_by(7).zip(planted) {
        *slot = p;
    }
    HostTensor::new(shape.to_vec(), v).unwrap()
}

#[test]
fn clip_with_run_time_bounds_matches_the_reference() {
    let mut rng = Rng::new(0xc11f);
    const S: &[usize] = &[];
    const ONE: &[usize] = &[1];
    let bounds: [(&str, Bound, Bound); 9] = [
        ("both", Some((S, -1.0)), Some((S, 1.0))),
        ("both [1]", Some((ONE, -0.5)), Some((ONE, 2.0))),
        ("min only", Some((S, -1.0)), None),
        ("max only", None, Some((ONE, 1.0))),
        ("min > max", Some((S, 2.0)), Some((S, 1.0))),
        ("ties at zero", Some((S, 0.0)), Some((S, 0.0))),
        ("-0.0 bounds", Some((S, -0.0)), Some((S, -0.0))),
        ("NaN min", Some((S, f32::NAN)), Some((S, 1.0))),
        ("NaN max", Some((S, -1.0)), Some((S, f32::NAN))),
    ];
    for shape in [&[3, 4, 5][..], &[3], &[33, 1025], &[]] {
        for (name, lo, hi) in bounds {
            let (g, feeds) = clip_graph(data(&mut rng, shape, true), lo, hi);
            let what = format!("Clip {name} over {shape:?}");
            let plan = compare(&what, g, &feeds, 0.0);
            assert!(plan.contains("ew_program_f32"), "{what}:\n{plan}");
        }
    }
}

/// Relu -> Clip(run-time bounds) -> Neg: one program of three inputs, the same bits as the three
/// launches unfused (no NaN: `fused_matches_unfused` compares with the reference by tolerance).
#[test]
fn clip_with_run_time_bounds_fuses_with_its_neighbours() {
    let mut rng = Rng::new(0xc120);
    for (lo, hi) in [(-1.0f32, 0.5f32), (0.5, -1.0), (0.0, 0.0)] {
        let shape = [7, 129];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let l = g.input("lo", DType::F32, known(&[]));
        let h = g.input("hi", DType::F32, known(&[1]));
        let r = g.relu(x);
        let c = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(r), Some(l), Some(h)], 1)[0];
        let y = g.op1(Op::Neg, &[c]);
        g.output(y);
        let feeds = vec![
            ("x".to_owned(), data(&mut rng, &shape, false)),
            ("lo".to_owned(), HostTensor::new(vec![], vec![lo]).unwrap()),
            ("hi".to_owned(), HostTensor::new(vec![1], vec![hi]).unwrap()),
        ];
        let what = format!("Relu, Clip({lo}, {hi}), Neg");
        let unfused = SessionOptions { fuse_elementwise: false, ..SessionOptions::default() };
        let plan = crate::programs::fused_matches_unfused(&what, g, &feeds, unfused, 0.0);
        assert_eq!(plan.lines().filter(|l| l.contains("ew_program_f32")).count(), 1, "{what}:\n{plan}");
    }
}

/// MatMul -> Clip(run-time bounds): the Clip runs in the GEMM's epilogue program (GEMV and tiled
/// paths, CUDA cores and tensor cores).
#[test]
fn clip_with_run_time_bounds_runs_in_a_gemm_epilogue() {
    let mut rng = Rng::new(0xc121);
    for (m, k, n) in [(1, 256, 300), (70, 50, 90)] {
        for tensor_core_gemm in [false, true] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&[m, k]));
            let w = g.input("w", DType::F32, known(&[k, n]));
            let l = g.input("lo", DType::F32, known(&[]));
            let h = g.input("hi", DType::F32, known(&[]));
            let y = g.matmul(x, w);
            let c = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(y), Some(l), Some(h)], 1)[0];
            g.output(c);
            let feeds = vec![
                ("x".to_owned(), rng.tensor(&[m, k], -1.0, 1.0)),
                ("w".to_owned(), rng.tensor(&[k, n], -1.0, 1.0)),
                ("lo".to_owned(), HostTensor::new(vec![], vec![-0.5f32]).unwrap()),
                ("hi".to_owned(), HostTensor::new(vec![], vec![0.75f32]).unwrap()),
            ];
            let what = format!("MatMul [{m}, {k}] x [{k}, {n}], Clip, tensor cores {tensor_core_gemm}");
            let fused = SessionOptions { tensor_core_gemm, ..SessionOptions::default() };
            let unfused = SessionOptions { fuse_gemm_programs: false, ..fused };
            let plan = crate::programs::fused_matches_unfused_with(&what, g, &feeds, fused, unfused, 1e-4);
            assert!(plan.contains("MatMul+Clip"), "{what}:\n{plan}");
        }
    }
}
