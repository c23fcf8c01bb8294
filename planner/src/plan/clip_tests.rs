//! Tests of Clip lowered to elementwise programs: bounds read at run time become program inputs
//! (broadcast from their one element), constant ones immediates; the program is `Max` by the lower
//! bound then `Min` by the upper, evaluated here on the host with the device's functions
//! (`kernels_gpu::math::ew_op`) against numpy's `clip`; fusion with neighbours; dtypes without a
//! program kernel named in the error.

use kernels_gpu::abi::{BinaryOp, EW_REGS, KernelId, ew_binary_code, ew_src};

use super::fuse::{EwProgram, compile_program};
use super::{Arg, PlanOptions, Step, compile};
use crate::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Graph, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{Binding, DType, Dim};

fn known(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Known(d)).collect()
}

/// `program` on the host for one element whose inputs are `inputs`, with the device's functions.
pub(super) fn eval(program: &EwProgram, inputs: &[f32]) -> f32 {
    let mut regs = [0f32; EW_REGS as usize];
    let src = |regs: &[f32], s: u32, imm: f32| match s {
        s if s < ew_src::INPUT0 => regs[s as usize],
        s if s < ew_src::IMM => inputs[(s - ew_src::INPUT0) as usize],
        _ => imm,
    };
    for i in &program.instrs {
        regs[i.dst as usize] = kernels_gpu::math::ew_instr(i, src(&regs, i.a, i.imm), src(&regs, i.b, i.imm));
    }
    src(&regs, program.out_reg, 0.0)
}

/// numpy's `clip(x, lo, hi)` for f32 (NaN if any operand is NaN, the bound on a tie), absent
/// bounds skipped.
fn np_clip(x: f32, lo: Option<f32>, hi: Option<f32>) -> f32 {
    let max = |a: f32, b: f32| {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else if a > b {
            a
        } else {
            b
        }
    };
    let min = |a: f32, b: f32| {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else if a < b {
            a
        } else {
            b
        }
    };
    let x = lo.map_or(x, |l| max(x, l));
    hi.map_or(x, |h| min(x, h))
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

const POINTS: [f32; 9] = [f32::NAN, f32::NEG_INFINITY, -3.0, -1.0, -0.0, 0.0, 0.5, 2.0, f32::INFINITY];

/// `Clip(x, lo, hi)` with x `[3, 4, 5]`; each bound absent, a graph input (`Some(None)`) or a
/// scalar constant (`Some(Some(v))`).
fn clip_graph(lo: Option<Option<f32>>, hi: Option<Option<f32>>) -> (Graph, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[3, 4, 5]));
    let mut bound = |name: &str, b: Option<Option<f32>>| match b {
        None => None,
        Some(None) => Some(g.input(name, DType::F32, known(&[]))),
        Some(Some(v)) => Some(g.initializer(name, ConstTensor::scalar_f32(v))),
    };
    let (lo, hi) = (bound("lo", lo), bound("hi", hi));
    let y = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(x), lo, hi], 1)[0];
    g.output(y);
    (g, y)
}

fn plan(g: &Graph) -> super::Plan {
    let p = compile(g, &Binding::new(), &PlanOptions::default()).unwrap();
    p.validate().unwrap();
    p
}

/// The kernel and value args of each kernel step, as value names (`None`: an unused input slot).
fn kernel_values(p: &super::Plan) -> Vec<(KernelId, Vec<Option<String>>)> {
    let name = |v: &ValueId| p.values[v.index()].name.clone();
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, args, .. } => Some((
                *kernel,
                (args.iter())
                    .filter_map(|a| match a {
                        Arg::Value(v) => Some(Some(name(v))),
                        Arg::Null => Some(None),
                        _ => None,
                    })
                    .collect(),
            )),
            Step::Copy { .. } => None,
        })
        .collect()
}

#[test]
fn clip_with_run_time_bounds_is_max_then_min_of_program_inputs() {
    let (max, min) = (ew_binary_code(BinaryOp::Max), ew_binary_code(BinaryOp::Min));
    let (g, _) = clip_graph(Some(None), Some(None));
    let (program, inputs) = compile_program(&g, &[0]).unwrap();
    assert_eq!(inputs, g.nodes[0].inputs.iter().flatten().copied().collect::<Vec<_>>());
    let ops: Vec<(u32, u32, u32)> = program.instrs.iter().map(|i| (i.op, i.a, i.b)).collect();
    let r = program.out_reg;
    assert_eq!(ops, [(max, ew_src::INPUT0, ew_src::INPUT0 + 1), (min, r, ew_src::INPUT0 + 2)]);
    // min > max gives max; a NaN anywhere gives NaN; -0.0 against a 0.0 bound gives the bound.
    for x in POINTS {
        for lo in POINTS {
            for hi in POINTS {
                let (got, want) = (eval(&program, &[x, lo, hi]), np_clip(x, Some(lo), Some(hi)));
                assert!(same(got, want), "clip({x}, {lo}, {hi}): program {got}, numpy {want}");
            }
        }
    }
}

#[test]
fn clip_bounds_mix_inputs_constants_and_absent_ones() {
    let max = ew_binary_code(BinaryOp::Max);
    let cases = [
        (Some(None), None),
        (None, Some(None)),
        (Some(Some(-1.5)), Some(None)),
        (Some(None), Some(Some(0.25))),
        (Some(Some(1.0)), Some(Some(-1.0))),
        (None, None),
    ];
    for (lo, hi) in cases {
        let (g, _) = clip_graph(lo, hi);
        let (program, inputs) = compile_program(&g, &[0]).unwrap();
        let run_time = usize::from(lo == Some(None)) + usize::from(hi == Some(None));
        assert_eq!(inputs.len(), 1 + run_time, "{lo:?} {hi:?}");
        let steps = usize::from(lo.is_some()) + usize::from(hi.is_some());
        assert_eq!(program.instrs.len(), steps.max(1), "{lo:?} {hi:?}");
        if steps == 0 {
            // No bounds: Max(x, -inf), a copy that keeps NaN.
            assert_eq!((program.instrs[0].op, program.instrs[0].imm), (max, f32::NEG_INFINITY));
        }
        // The run-time bounds are the inputs after x, in order; evaluate with 0.75 and -0.75.
        let run_time_values: Vec<f32> =
            [(lo, -0.75), (hi, 0.75)].iter().filter(|(b, _)| *b == Some(None)).map(|&(_, v)| v).collect();
        let value = |b: Option<Option<f32>>, run: f32| b.map(|c| c.unwrap_or(run));
        for x in POINTS {
            let mut ins = vec![x];
            ins.extend(&run_time_values);
            let (got, want) = (eval(&program, &ins), np_clip(x, value(lo, -0.75), value(hi, 0.75)));
            assert!(same(got, want), "{lo:?} {hi:?} x {x}: program {got}, numpy {want}");
        }
    }
}

#[test]
fn a_clip_with_run_time_bounds_lowers_to_one_program_launch() {
    for (lo, hi) in [(Some(None), Some(None)), (Some(None), None), (None, Some(None))] {
        let (g, y) = clip_graph(lo, hi);
        let p = plan(&g);
        let steps = kernel_values(&p);
        assert_eq!(steps.len(), 1, "{p}");
        let (kernel, values) = &steps[0];
        assert_eq!(*kernel, KernelId::EwProgramF32, "{p}");
        // x, then the bounds given, then unused input slots, then the output.
        let name = |v: &ValueId| Some(g.values[v.index()].name.clone());
        let given: Vec<Option<String>> = g.nodes[0].inputs.iter().flatten().map(name).collect();
        assert_eq!(values[..given.len()], given[..], "{p}");
        assert!(values[given.len()..values.len() - 1].iter().all(Option::is_none), "{p}");
        assert_eq!(values.last(), Some(&name(&y)), "{p}");
    }
}

/// Bounds of more dims than x (one element each: `[1]` on a scalar, `[1, 1]` on a vector)
/// broadcast through their trailing dims.
#[test]
fn bounds_of_higher_rank_than_x_broadcast() {
    for (x_dims, bound_dims) in [(&[][..], &[1][..]), (&[5], &[1, 1]), (&[], &[1, 1, 1])] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(x_dims));
        let lo = g.input("lo", DType::F32, known(bound_dims));
        let hi = g.input("hi", DType::F32, known(&[]));
        let y = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(x), Some(lo), Some(hi)], 1)[0];
        g.output(y);
        let p = plan(&g);
        assert_eq!(kernel_values(&p).len(), 1, "{x_dims:?} {bound_dims:?}: {p}");
    }
}

/// Relu -> Clip(lo, hi read at run time) -> Neg: one program of three inputs.
#[test]
fn a_clip_with_run_time_bounds_fuses_with_its_neighbours() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[8, 16]));
    let lo = g.input("lo", DType::F32, known(&[1]));
    let hi = g.input("hi", DType::F32, known(&[]));
    let r = g.relu(x);
    let c = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(r), Some(lo), Some(hi)], 1)[0];
    let y = g.op1(Op::Neg, &[c]);
    g.output(y);
    let p = plan(&g);
    let steps = kernel_values(&p);
    assert_eq!(steps.len(), 1, "{p}");
    assert_eq!(steps[0].0, KernelId::EwProgramF32, "{p}");
    assert!(p.to_string().contains("[4 ops]"), "{p}");
    // The Clip's absent bound does not keep it out of a program either.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[8, 16]));
    let hi = g.input("hi", DType::F32, known(&[]));
    let r = g.relu(x);
    let c = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(r), None, Some(hi)], 1)[0];
    let y = g.op1(Op::Neg, &[c]);
    g.output(y);
    let p = plan(&g);
    assert_eq!(kernel_values(&p).len(), 1, "{p}");
}

/// A bound computed inside the program sits in a register its Clip reads after writing its
/// result: the result must not take that register (scalars throughout, so every value has the
/// group's shape).
#[test]
fn a_clip_result_never_overwrites_a_bound_it_still_reads() {
    for order in [false, true] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[]));
        let lo = g.input("lo", DType::F32, known(&[]));
        let h = g.input("h", DType::F32, known(&[]));
        // The bound first or the clipped value first: both register orders.
        let (a, hi) = if order {
            let hi = g.op1(Op::Abs, &[h]);
            (g.op1(Op::Neg, &[x]), hi)
        } else {
            let a = g.op1(Op::Neg, &[x]);
            (a, g.op1(Op::Abs, &[h]))
        };
        g.push_opt(Op::Clip(op::Clip::default()), vec![Some(a), Some(lo), Some(hi)], 1);
        let (program, inputs) = compile_program(&g, &[0, 1, 2]).unwrap();
        let slot = |v: ValueId| inputs.iter().position(|&i| i == v).unwrap();
        for (xv, lov, hv) in [(-5.0f32, -1.0f32, -2.0f32), (1.0, -4.0, 3.0), (-3.0, 1.0, 2.0)] {
            let mut ins = vec![0.0; inputs.len()];
            (ins[slot(x)], ins[slot(lo)], ins[slot(h)]) = (xv, lov, hv);
            let want = np_clip(-xv, Some(lov), Some(hv.abs()));
            let got = eval(&program, &ins);
            assert!(same(got, want), "order {order}: clip(-{xv}, {lov}, |{hv}|): program {got}, want {want}");
        }
    }
}

#[test]
fn a_clip_of_integers_is_max_and_min_and_of_another_dtype_names_the_node_and_dtype() {
    for dtype in [DType::I8, DType::F16, DType::I32] {
        let mut g = Graph::new();
        let x = g.input("x", dtype, known(&[3, 4]));
        let lo = g.input("lo", dtype, known(&[]));
        let hi = g.input("hi", dtype, known(&[]));
        let y = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(x), Some(lo), Some(hi)], 1)[0];
        g.output(y);
        // (f16 not widened to f32, so that the Clip kernel's own dtype check shows.)
        let native = PlanOptions { widen_narrow_floats: false, ..PlanOptions::default() };
        match (dtype, compile(&g, &Binding::new(), &native)) {
            (DType::F16, Err(PlanError::NoKernel { nodes })) => {
                let [(node, op, why)] = nodes.as_slice() else { panic!("{nodes:?}") };
                assert_eq!((node.as_str(), *op), (g.nodes[0].name.as_str(), "Clip"));
                assert!(why.contains(&dtype.to_string()) && why.contains("f32"), "{why}");
            }
            (DType::I8 | DType::I32, Ok(p)) => {
                let labels: Vec<String> = (p.steps.iter())
                    .filter_map(|s| match s {
                        Step::Kernel { kernel: KernelId::IntArith, label, .. } => Some(label.clone()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(labels, ["Max", "Min"], "{p}");
            }
            (_, other) => panic!("{dtype}: got {other:?}"),
        }
    }
}

/// MatMul -> Clip(bounds read at run time): the GEMM applies the Clip in its epilogue program,
/// the bounds its extra inputs.
#[test]
fn a_clip_with_run_time_bounds_runs_in_a_gemm_epilogue() {
    for m in [4, 64] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[m, 64]));
        let data: Vec<f32> = (0..64 * 96).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
        let w = g.initializer("w", ConstTensor::from_f32(&[64, 96], &data).unwrap());
        let lo = g.input("lo", DType::F32, known(&[]));
        let hi = g.input("hi", DType::F32, known(&[]));
        let h = g.matmul(x, w);
        let y = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(h), Some(lo), Some(hi)], 1)[0];
        g.output(y);
        let p = plan(&g);
        let steps = kernel_values(&p);
        assert_eq!(steps.len(), 1, "{p}");
        assert!(p.to_string().contains("MatMul+Clip"), "{p}");
        let (lo, hi) = (Some("lo".to_string()), Some("hi".to_string()));
        assert!(steps[0].1.contains(&lo) && steps[0].1.contains(&hi), "{p}");
    }
}
