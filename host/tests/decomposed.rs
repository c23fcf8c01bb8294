//! The planner's decompositions of operators without a GPU kernel of their own
//! (`planner::plan::decomposed`), checked on the CPU: the reference runs the original graph and
//! the decomposed one, and they must agree, and the GPU plan of the original must compile.
//! Einsum: batched and broadcast matrix products, the five contractions of transformers' Mamba2
//! export, ellipses of different ranks, implicit outputs, three operands, reductions, transposes
//! and outer products; a diagonal (not covered) stays an Einsum. Summed broadcast products
//! (`ReduceSum(Mul(a, b))`, as transformers' reference Mamba2 scan spells its contractions)
//! become Einsums, hence MatMuls. Unrolled linear recurrences (both write-back spellings, any
//! axis) become `LinearScan`s; partial or leaking ones stay as they are. RMS normalizations spelled
//! out (four spellings) become `RMSNormalization`s. GatherNDs of their output's coordinate grid
//! (dynamo's broadcast padding mask) become a Reshape and an Expand.

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{Einsum, Reduce};
use planner::{DType, Dim, Graph, Op};

/// `Einsum(equation)` of inputs of `shapes`, and random feeds for them.
fn einsum(equation: &str, shapes: &[&[usize]], rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let ins: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = format!("x{i}");
            feeds.push((name.clone(), rng.tensor(s, -1.0, 1.0)));
            g.input(&name, DType::F32, s.iter().map(|&d| Dim::Known(d)))
        })
        .collect();
    let y = g.op1(Op::Einsum(Einsum { equation: equation.into() }), &ins);
    g.output(y);
    (g, feeds)
}

#[test]
fn einsum_decomposes_into_matmuls_that_compute_what_the_reference_does() {
    let mut rng = Rng::new(0xe1);
    let cases: &[(&str, &[&[usize]])] = &[
        ("bij,bjk->bik", &[&[2, 3, 4], &[2, 4, 5]]),
        ("ij,jk", &[&[3, 4], &[4, 5]]),
        ("bhld,bhmd->bhlm", &[&[2, 3, 5, 4], &[2, 3, 6, 4]]),
        ("...ij,...jk->...ik", &[&[2, 3, 4, 5], &[3, 5, 2]]),
        ("i,i->", &[&[7], &[7]]),
        ("ij->ji", &[&[3, 4]]),
        ("ij->", &[&[3, 4]]),
        ("bclhn,bcshn->bclhs", &[&[2, 3, 4, 2, 5], &[2, 3, 4, 2, 5]]),
        ("bcshn,bcshp->bchpn", &[&[2, 3, 4, 2, 5], &[2, 3, 4, 2, 6]]),
        ("abc,cd,de->abe", &[&[2, 3, 4], &[4, 5], &[5, 6]]),
        ("...ij,...jk->...ik", &[&[1, 3, 4], &[2, 4, 5]]),
        ("i,j->ij", &[&[3], &[4]]),
        ("bi,bi->b", &[&[5, 8], &[5, 8]]),
        // The five of transformers' Mamba2 (chunked SSD), as its dynamo export writes them.
        ("bclhn,bcshn->bclsh", &[&[2, 3, 4, 2, 5], &[2, 3, 4, 2, 5]]),
        ("bclsh,bcshp->bclhp", &[&[2, 3, 4, 4, 2], &[2, 3, 4, 2, 6]]),
        ("bclhn,bclhp->bchpn", &[&[2, 3, 4, 2, 5], &[2, 3, 4, 2, 6]]),
        ("bzch,bzhpn->bchpn", &[&[2, 3, 3, 2], &[2, 3, 2, 6, 5]]),
        ("bclhn,bchpn->bclhp", &[&[2, 3, 4, 2, 5], &[2, 3, 2, 6, 5]]),
    ];
    for (equation, shapes) in cases {
        let (g, feeds) = einsum(equation, shapes, &mut rng);
        let d = planner::plan::decomposed(&g).unwrap();
        assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::Einsum(_))), "{equation}: {:?}", d.nodes);
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap_or_else(|e| panic!("{equation}: {e}"));
        assert_eq!(got[0].1.shape(), want[0].1.shape(), "{equation}");
        let (gv, wv) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{equation} [{i}]: decomposed {a}, reference {b}"
            );
        }
        // And the GPU plan compiles: every node of the expansion has a kernel.
        let options = planner::plan::PlanOptions::default();
        planner::plan::compile(&g, &planner::Binding::new(), &options)
            .unwrap_or_else(|e| panic!("{equation}: {e}"));
    }
}

/// An einsum whose operands are computed (not graph inputs) reads them through the strides of
/// the transposes its decomposition writes, and writes its result through the strides of the
/// transpose that reads it: transformers' Mamba2 contractions (batch dims `[b, c]` outside and
/// the heads inside the rows: two batch levels) compile to their GEMMs with no transpose step.
#[test]
fn an_einsums_transposes_fold_into_its_gemms() {
    let cases: &[(&str, &[&[usize]], bool)] = &[
        ("bclhn,bcshn->bclsh", &[&[2, 4, 16, 2, 64], &[2, 4, 16, 2, 64]], true),
        ("bclsh,bcshp->bclhp", &[&[2, 4, 16, 16, 2], &[2, 4, 16, 2, 32]], true),
        ("bclhn,bclhp->bchpn", &[&[2, 4, 16, 2, 64], &[2, 4, 16, 2, 32]], true),
        ("bzch,bzhpn->bchpn", &[&[2, 5, 5, 2], &[2, 5, 2, 32, 64]], true),
        ("bclhn,bchpn->bclhp", &[&[2, 4, 16, 2, 64], &[2, 4, 2, 32, 64]], true),
        ("bhld,bhmd->bhlm", &[&[2, 4, 16, 64], &[2, 4, 16, 64]], true),
        // Three batch dims interleaved with the rows: not two levels; the transposes stay.
        ("abcij,cbajk->acbik", &[&[2, 3, 5, 7, 9], &[5, 3, 2, 9, 6]], false),
    ];
    for &(equation, shapes, folds) in cases {
        let mut g = Graph::new();
        let ins: Vec<_> = (shapes.iter().enumerate())
            .map(|(i, s)| {
                let x = g.input(&format!("x{i}"), DType::F32, s.iter().map(|&d| Dim::Known(d)));
                g.op1(Op::Neg, &[x])
            })
            .collect();
        let y = g.op1(Op::Einsum(Einsum { equation: equation.into() }), &ins);
        let y = g.op1(Op::Neg, &[y]);
        g.output(y);
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{equation}: {e}"))
                .to_string();
        assert_eq!(!plan.contains("transpose_f32"), folds, "{equation}:\n{plan}");
        assert!(plan.contains("gemm"), "{equation}: no GEMM in\n{plan}");
    }
}

#[test]
fn a_diagonal_einsum_is_left_for_the_planner_to_refuse() {
    let (g, _) = einsum("ii->i", &[&[3, 3]], &mut Rng::new(1));
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(d.nodes.iter().any(|n| matches!(n.op, Op::Einsum(_))));
}

/// `ReduceSum(Mul(a, b), axes)` of inputs of shapes `a` and `b` (`axes` as input 1 when
/// `keepdims`, as opset 13 writes it, else as the legacy attribute), and random feeds.
fn summed_product(
    (a, b): (&[usize], &[usize]),
    axes: &[i64],
    keepdims: bool,
    rng: &mut Rng,
) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let feeds =
        vec![("a".to_string(), rng.tensor(a, -1.0, 1.0)), ("b".to_string(), rng.tensor(b, -1.0, 1.0))];
    let x = g.input("a", DType::F32, a.iter().map(|&d| Dim::Known(d)));
    let w = g.input("b", DType::F32, b.iter().map(|&d| Dim::Known(d)));
    let m = g.op1(Op::Mul, &[x, w]);
    let y = if keepdims {
        let ax = g.const_i64("axes", &[axes.len()], axes);
        g.op1(Op::ReduceSum(Reduce { axes: None, keepdims, ..Reduce::default() }), &[m, ax])
    } else {
        g.op1(Op::ReduceSum(Reduce { axes: Some(axes.to_vec()), keepdims, ..Reduce::default() }), &[m])
    };
    g.output(y);
    (g, feeds)
}

#[test]
fn summed_broadcast_products_become_matmuls_that_compute_what_the_reference_does() {
    let mut rng = Rng::new(0x5e5);
    // (a's shape, b's shape, axes, keepdims).
    type Case<'a> = (&'a [usize], &'a [usize], &'a [i64], bool);
    let cases: &[Case] = &[
        // Mamba2's `(C[:, :, :, None] * B[:, :, None]).sum(-1)`, `(M[..., None] *
        // x[:, :, None]).sum(3)` and `(B_decay[..., None, :] * x[..., None]).sum(2)`.
        (&[1, 2, 16, 1, 3, 8], &[1, 2, 1, 16, 3, 8], &[-1], false),
        (&[2, 2, 16, 16, 3, 1], &[2, 2, 1, 16, 3, 5], &[3], false),
        (&[1, 2, 16, 3, 1, 8], &[1, 2, 16, 3, 5, 1], &[2], true),
        // A lower-rank operand, several axes, negative and positive.
        (&[6, 1, 7], &[5, 7], &[0, -1], true),
        (&[4, 1, 9], &[1, 6, 9], &[2], false),
    ];
    for &(a, b, axes, keepdims) in cases {
        let what = format!("{a:?} * {b:?} summed over {axes:?} (keepdims {keepdims})");
        let (g, feeds) = summed_product((a, b), axes, keepdims, &mut rng);
        let d = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&Op> = d.nodes.iter().map(|n| &n.op).collect();
        assert!(ops.iter().any(|o| matches!(o, Op::MatMul)), "{what}: {ops:?}");
        assert!(!ops.iter().any(|o| matches!(o, Op::Mul | Op::Einsum(_))), "{what}: {ops:?}");
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got[0].1.shape(), want[0].1.shape(), "{what}");
        let (gv, wv) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
        for (i, (x, w)) in gv.iter().zip(&wv).enumerate() {
            assert!((x - w).abs() <= 1e-5 * (1.0 + w.abs()), "{what} [{i}]: contracted {x}, reference {w}");
        }
        let options = planner::plan::PlanOptions::default();
        planner::plan::compile(&g, &planner::Binding::new(), &options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    // A same-shape product summed (a row-wise dot product) is not a broadcast: it stays.
    let (g, _) = summed_product((&[8, 32], &[8, 32]), &[1], false, &mut rng);
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(d.nodes.iter().any(|n| matches!(n.op, Op::Mul)), "{:?}", d.nodes);
    // A sum over size-1 axes only (Mamba2's `(G[..., None] * L[..., None]).sum(-1)`) is a
    // reshape of the product.
    let (g, feeds) = summed_product((&[3, 4, 1], &[3, 4, 1]), &[-1], false, &mut rng);
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::ReduceSum(_))), "{:?}", d.nodes);
    let (want, got) =
        (host::reference::eval(&g, &feeds).unwrap(), host::reference::eval(&d, &feeds).unwrap());
    assert_eq!(
        (got[0].1.shape(), got[0].1.data().to_f64s()),
        (want[0].1.shape(), want[0].1.data().to_f64s())
    );
    // A sum over an empty axis is zeros, not a reshape: it stays.
    let (g, _) = summed_product((&[2, 0, 4], &[2, 0, 4]), &[1], true, &mut rng);
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(d.nodes.iter().any(|n| matches!(n.op, Op::ReduceSum(_))), "{:?}", d.nodes);
}

/// `got` equals `want` within f32 rounding, output by output.
fn assert_agree(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((name, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(g.shape(), w.shape(), "{what}: `{name}`");
        for (i, (a, b)) in g.data().to_f64s().iter().zip(&w.data().to_f64s()).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{what}: `{name}`[{i}]: lifted {a}, reference {b}"
            );
        }
    }
}

#[test]
fn unrolled_recurrences_are_lifted_to_scans_that_compute_what_the_reference_does() {
    use host::selftest::{Writeback, random_inputs, unrolled_scan_graph};
    let mut rng = Rng::new(0x5ca7);
    // (dims, axis, write-back, initial state as an input, swapped operands and negative indices):
    // RecurrentGemma's spelling, its stacked form, other axes and ranks.
    let cases: &[(&[usize], usize, Writeback, bool, bool)] = &[
        (&[2, 9, 5], 1, Writeback::Scatter, false, false),
        (&[2, 9, 5], 1, Writeback::Concat, true, true),
        (&[3, 2, 6, 4], 2, Writeback::Scatter, true, true),
        (&[7, 3], 0, Writeback::Concat, false, false),
        (&[4, 2], 1, Writeback::Scatter, false, true),
    ];
    for &(dims, axis, wb, h0, swapped) in cases {
        let what = format!("{dims:?} axis {axis} {wb:?} h0 {h0} swapped {swapped}");
        let g = unrolled_scan_graph(dims, axis, wb, h0, swapped);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let d = planner::plan::decomposed(&g).unwrap();
        let scans = d.nodes.iter().filter(|n| matches!(n.op, Op::LinearScan)).count();
        assert_eq!(scans, 1, "{what}: {:?}", d.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
        assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::Gather(_) | Op::Add)), "{what}: steps left");
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_agree(&what, &got, &want);
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(plan.lifted.len(), 1, "{what}");
        assert!(plan.to_string().contains("rglru_f32"), "{what}: {plan}");
    }
}

#[test]
fn recurrences_that_do_not_cover_the_axis_stay_unrolled() {
    use host::selftest::{Writeback, unrolled_scan_graph};
    let lifted = |g: &Graph| {
        planner::plan::decomposed(g).unwrap().nodes.iter().any(|n| matches!(n.op, Op::LinearScan))
    };
    assert!(lifted(&unrolled_scan_graph(&[2, 4, 3], 1, Writeback::Scatter, false, false)));
    // A step index that skips one: the second step reads the third.
    let mut g = unrolled_scan_graph(&[2, 4, 3], 1, Writeback::Scatter, false, false);
    let t1 =
        g.nodes.iter().filter(|n| matches!(n.op, Op::Gather(_))).nth(2).and_then(|n| n.input(1)).unwrap();
    g.initializers.insert(t1, planner::ConstTensor::scalar_i64(2));
    assert!(!lifted(&g));
    // A single step: nothing to lift.
    assert!(!lifted(&unrolled_scan_graph(&[2, 1, 3], 1, Writeback::Concat, false, false)));
}

#[test]
fn steps_read_elsewhere_are_read_from_the_lifted_scan() {
    use host::selftest::{Writeback, random_inputs, unrolled_scan_graph};
    let mut rng = Rng::new(0x1eaf);
    // A middle step also a graph output, beside the write-back.
    let mut g = unrolled_scan_graph(&[2, 4, 3], 1, Writeback::Concat, false, false);
    let mid = g.nodes.iter().filter(|n| matches!(n.op, Op::Add)).nth(1).and_then(|n| n.output(0)).unwrap();
    g.output(mid);
    let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
    let d = planner::plan::decomposed(&g).unwrap();
    assert_eq!(d.nodes.iter().filter(|n| matches!(n.op, Op::LinearScan)).count(), 1);
    assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::Add)), "steps left: {:?}", d.nodes);
    let want = host::reference::eval(&g, &feeds).unwrap();
    assert_agree("a step read as an output", &host::reference::eval(&d, &feeds).unwrap(), &want);
}

#[test]
fn an_unrolled_selective_scan_lifts_to_a_scan_and_one_batched_readout() {
    use host::selftest::{random_inputs, unrolled_selective_scan_graph};
    let mut rng = Rng::new(0x3a3ba);
    for (b, d, l, n) in [(2, 5, 7, 4), (1, 3, 2, 16), (3, 1, 9, 1)] {
        let what = format!("b {b} d {d} l {l} n {n}");
        let g = unrolled_selective_scan_graph(b, d, l, n);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let lifted = planner::plan::decomposed(&g).unwrap();
        let count = |f: fn(&Op) -> bool| lifted.nodes.iter().filter(|n| f(&n.op)).count();
        assert_eq!(count(|o| matches!(o, Op::LinearScan)), 1, "{what}");
        assert_eq!(count(|o| matches!(o, Op::MatMul)), 1, "{what}: {:?}", lifted.nodes);
        assert!(!lifted.nodes.iter().any(|n| matches!(n.op, Op::Concat(_) | Op::Add)), "{what}: steps left");
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&lifted, &feeds).unwrap(), &want);
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(plan.lifted.iter().any(|l| l.contains("LinearScan")), "{what}: {:?}", plan.lifted);
        assert!(plan.lifted.iter().any(|l| l.contains("rolled")), "{what}: {:?}", plan.lifted);
        // One line per step, numbered as the steps (the profiles name their times by them; the
        // lifted lines head only the plan's Display).
        let lines = plan.step_lines();
        assert_eq!(lines.len(), plan.steps.len(), "{what}");
        assert!(lines.iter().enumerate().all(|(i, l)| l.starts_with(&format!("#{i} "))), "{lines:?}");
        assert!(plan.to_string().starts_with("lifted "), "{plan}");
    }
}

#[test]
fn transformers_mamba_recurrence_lifts_to_one_selective_scan() {
    use host::selftest::{mamba_inputs, unrolled_mamba_graph};
    let mut rng = Rng::new(0x3a3bb);
    for (b, d, l, n, swapped) in [(2, 5, 7, 4, false), (1, 3, 2, 16, true), (3, 1, 9, 1, false)] {
        let what = format!("b {b} d {d} l {l} n {n} swapped {swapped}");
        let g = unrolled_mamba_graph(b, d, l, n, swapped);
        let feeds = mamba_inputs(&mut rng, &g);
        let lifted = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&str> = lifted.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops.iter().filter(|o| **o == "SelectiveScan").count(), 1, "{what}: {ops:?}");
        assert!(
            !ops.iter().any(|o| matches!(*o, "MatMul" | "Exp" | "LinearScan" | "Concat")),
            "{what}: {ops:?}"
        );
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&lifted, &feeds).unwrap(), &want);
    }
    // A state also read elsewhere: the generic lift (a LinearScan and the rolled readout).
    let mut g = unrolled_mamba_graph(2, 3, 4, 2, false);
    let mid = g.nodes.iter().filter(|n| matches!(n.op, Op::Add)).nth(1).and_then(|n| n.output(0)).unwrap();
    g.output(mid);
    let lifted = planner::plan::decomposed(&g).unwrap();
    assert!(lifted.nodes.iter().any(|n| matches!(n.op, Op::LinearScan)), "{:?}", lifted.nodes);
    assert!(!lifted.nodes.iter().any(|n| matches!(n.op, Op::SelectiveScan(_))));
}

#[test]
fn unrolled_maps_roll_up_into_one_computation_over_the_axis() {
    use host::selftest::{random_inputs, unrolled_map_graph};
    let mut rng = Rng::new(0x7011);
    for (b, l, m, negative) in [(2, 5, 3, false), (1, 2, 8, true), (3, 4, 1, false)] {
        let what = format!("b {b} l {l} m {m} negative {negative}");
        let g = unrolled_map_graph(b, l, m, negative);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let rolled = planner::plan::decomposed(&g).unwrap();
        let softmaxes = rolled.nodes.iter().filter(|n| matches!(n.op, Op::Softmax(_))).count();
        assert_eq!(softmaxes, 1, "{what}: {:?}", rolled.nodes);
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&rolled, &feeds).unwrap(), &want);
    }
}

#[test]
fn maps_whose_steps_differ_stay_unrolled() {
    use host::selftest::unrolled_map_graph;
    let rolled = |g: &Graph| {
        planner::plan::decomposed(g).unwrap().nodes.iter().filter(|n| matches!(n.op, Op::Softmax(_))).count()
            == 1
    };
    assert!(rolled(&unrolled_map_graph(2, 4, 3, false)));
    // A step that reads another step's slot.
    let mut g = unrolled_map_graph(2, 4, 3, false);
    let t1 = g.nodes.iter().find(|n| matches!(n.op, Op::Gather(_))).and_then(|n| n.input(1)).unwrap();
    g.initializers.insert(t1, planner::ConstTensor::scalar_i64(2));
    assert!(!rolled(&g));
    // A step with another attribute (its Softmax along the other axis).
    let mut g = unrolled_map_graph(2, 4, 3, false);
    let s = g.nodes.iter().rposition(|n| matches!(n.op, Op::Softmax(_))).unwrap();
    g.nodes[s].op = Op::Softmax(planner::op::Softmax { axis: 1 });
    assert!(!rolled(&g));
    // Steps that are not every slot of the axis (a Concat of three of four).
    let mut g = unrolled_map_graph(2, 4, 3, false);
    let c = g.nodes.len() - 1;
    g.nodes[c].inputs.pop();
    assert!(!rolled(&g));
}

#[test]
fn spelled_out_rms_norms_become_rms_normalizations_that_compute_what_the_reference_does() {
    use host::selftest::{RmsSpelling, random_inputs, spelled_rms_norm_graph};
    let mut rng = Rng::new(0x4a5);
    for (spelling, dims, absorbed) in [
        (RmsSpelling::ReciprocalSqrt, &[2, 5, 16][..], true),
        (RmsSpelling::PowHalf, &[3, 7][..], true),
        (RmsSpelling::DivSqrt, &[4, 9][..], false),
        (RmsSpelling::DivOne, &[2, 3, 4, 6][..], true),
    ] {
        let what = format!("{spelling:?} {dims:?}");
        let g = spelled_rms_norm_graph(dims, spelling);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let d = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&str> = d.nodes.iter().map(|n| n.op.name()).collect();
        let want_ops: &[&str] = if absorbed { &["RMSNormalization"] } else { &["RMSNormalization", "Mul"] };
        assert_eq!(ops, want_ops, "{what}");
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_agree(&what, &got, &want);
    }
    // Not an RMS norm: the mean is over a leading axis, or the square is of another tensor.
    let mut g = spelled_rms_norm_graph(&[4, 8], RmsSpelling::ReciprocalSqrt);
    let axes = g.nodes.iter().find(|n| matches!(n.op, Op::ReduceMean(_))).and_then(|n| n.input(1)).unwrap();
    g.initializers.insert(axes, planner::ConstTensor::from_i64(&[1], &[0]).unwrap());
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::RmsNormalization(_))));
}

#[test]
fn grouped_rms_norms_of_one_group_absorb_their_scale_through_the_view_back() {
    use host::selftest::{grouped_rms_norm_graph, random_inputs};
    let mut rng = Rng::new(0x6a7);
    for (b, l, d, groups) in [(1, 5, 16, 1), (2, 3, 8, 1), (2, 3, 8, 2)] {
        let what = format!("b {b} l {l} d {d} groups {groups}");
        let g = grouped_rms_norm_graph(b, l, d, groups);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let lifted = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&str> = lifted.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops.iter().filter(|o| **o == "RMSNormalization").count(), 1, "{what}: {ops:?}");
        // One group: the rows are the viewed-back rows, so the weight is the norm's scale.
        // Several: the weight spans the groups and stays a Mul.
        assert_eq!(ops.contains(&"Mul"), groups > 1, "{what}: {ops:?}");
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&lifted, &feeds).unwrap(), &want);
    }
}

#[test]
fn transformers_rwkv_wkv_loop_lifts_to_one_scan_that_computes_what_the_reference_does() {
    use host::selftest::{random_inputs, unrolled_wkv_graph};
    let mut rng = Rng::new(0x3c4f);
    for (b, l, d, scatter, views, state) in
        [(2, 7, 5, true, false, false), (1, 3, 4, false, true, true), (3, 16, 2, true, true, true)]
    {
        let what = format!("b {b} l {l} d {d} scatter {scatter} views {views} state {state}");
        let g = unrolled_wkv_graph(b, l, d, scatter, views, state);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let lifted = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&str> = lifted.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops.iter().filter(|o| **o == "Scan").count(), 1, "{what}: {ops:?}");
        assert!(
            !ops.iter().any(|o| matches!(*o, "Exp" | "Max" | "ScatterElements" | "Concat")),
            "{what}: {ops:?}"
        );
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&lifted, &feeds).unwrap(), &want);
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(plan.lifted.iter().any(|s| s.contains("3 carried states")), "{what}: {:?}", plan.lifted);
        // Returned states are the Scan's final states: no step of the loop is left.
        assert_eq!(
            plan.lifted.iter().any(|s| s.contains("3 final states returned")),
            state,
            "{:?}",
            plan.lifted
        );
        // The program computes RWKV-4's WKV: its own kernel.
        assert_eq!(plan.to_string().matches("wkv4_f32").count(), 1, "{what}: {plan}");
        // Another recurrence of the same shape (every exponential a sigmoid): the program kernel.
        let mut g = unrolled_wkv_graph(b, l, d, scatter, views, state);
        for n in &mut g.nodes {
            if matches!(n.op, Op::Exp) {
                n.op = Op::Sigmoid;
            }
        }
        let lifted = planner::plan::decomposed(&g).unwrap();
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&lifted, &feeds).unwrap(), &want);
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        let text = plan.to_string();
        assert!(text.contains("scan_program_f32") && !text.contains("wkv4_f32"), "{what}: {text}");
    }
}

#[test]
fn recurrences_read_elsewhere_or_with_other_ops_stay_unrolled() {
    use host::selftest::unrolled_wkv_graph;
    let scans = |g: &Graph| {
        planner::plan::decomposed(g).unwrap().nodes.iter().filter(|n| matches!(n.op, Op::Scan(_))).count()
    };
    assert_eq!(scans(&unrolled_wkv_graph(1, 5, 3, true, false, false)), 1);
    // A state read as an output too: its steps must stay.
    let mut g = unrolled_wkv_graph(1, 5, 3, true, false, false);
    let state = g.nodes.iter().filter(|n| matches!(n.op, Op::Max)).nth(3).and_then(|n| n.output(0)).unwrap();
    g.output(state);
    assert_eq!(scans(&g), 0);
    // A step whose exponential is another op: the steps differ.
    let mut g = unrolled_wkv_graph(1, 5, 3, true, false, false);
    let third =
        g.nodes.iter().enumerate().filter(|(_, n)| matches!(n.op, Op::Exp)).nth(5).map(|(i, _)| i).unwrap();
    g.nodes[third].op = Op::Sigmoid;
    assert_eq!(scans(&g), 0);
    // Two steps: too short to tell a state from its update.
    assert_eq!(scans(&unrolled_wkv_graph(1, 2, 3, false, false, false)), 0);
}

#[test]
fn deep_step_bodies_stay_unrolled_without_exhausting_the_stack() {
    use planner::op::{self, Gather, Unsqueeze};
    // Three steps of `h = neg^3000(h + x_t)`, stacked: deeper than the lockstep walks go (they
    // recurse), so neither the recurrence lift nor the rolling of maps takes it; it stays as it is.
    let mut g = Graph::new();
    let x = g.input("x", planner::DType::F32, [3usize, 4]);
    let zero = g.initializer("zero", planner::ConstTensor::scalar_f32(0.0));
    let shape = g.const_i64("shape", &[1], &[4]);
    let mut h = g.op1(Op::Expand, &[zero, shape]);
    let axes = g.const_i64("axes", &[1], &[0]);
    let mut steps = Vec::new();
    for t in 0..3 {
        let ti = g.const_i64(&format!("t{t}"), &[], &[t]);
        let xt = g.op1(Op::Gather(Gather { axis: 0 }), &[x, ti]);
        h = g.op1(Op::Add, &[h, xt]);
        for _ in 0..3000 {
            h = g.op1(Op::Neg, &[h]);
        }
        steps.push(g.op1(Op::Unsqueeze(Unsqueeze::default()), &[h, axes]));
    }
    let y = g.op1(Op::Concat(op::Concat { axis: 0 }), &steps);
    g.output(y);
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(d.nodes.iter().any(|n| matches!(n.op, Op::Concat(_))), "the steps stay");
    assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::Scan(_))));
}

/// A message-passing layer's `cat([x[src], x[dst]], -1)` (GatherND, as torch.export writes
/// `x[index]`, and Gather) becomes one gather of the stacked indices that computes what the
/// reference does, negative indices included.
#[test]
fn concatenated_gathers_of_one_table_become_one_gather() {
    let mut rng = Rng::new(0x9a7);
    for nd in [true, false] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [50, 16].map(Dim::Known));
        let shape: &[usize] = if nd { &[70, 1] } else { &[70] };
        let ids: Vec<_> = (0..2)
            .map(|j| g.input(&format!("i{j}"), DType::I64, shape.iter().map(|&d| Dim::Known(d))))
            .collect();
        let gather = |g: &mut Graph, i| {
            let op = if nd {
                Op::GatherNd(planner::op::GatherNd::default())
            } else {
                Op::Gather(planner::op::Gather { axis: 0 })
            };
            g.op1(op, &[x, i])
        };
        let (a, b) = (gather(&mut g, ids[0]), gather(&mut g, ids[1]));
        let y = g.op1(Op::Concat(planner::op::Concat { axis: -1 }), &[a, b]);
        g.output(y);
        let index = |rng: &mut Rng| {
            let v: Vec<i64> = (0..70).map(|_| (rng.next_u64() % 100) as i64 - 50).collect();
            HostTensor::new(shape.to_vec(), v).unwrap()
        };
        let feeds = vec![
            ("x".to_string(), rng.tensor(&[50, 16], -1.0, 1.0)),
            ("i0".into(), index(&mut rng)),
            ("i1".into(), index(&mut rng)),
        ];
        let d = planner::plan::decomposed(&g).unwrap();
        let gathers = d.nodes.iter().filter(|n| matches!(n.op, Op::Gather(_) | Op::GatherNd(_))).count();
        assert_eq!(gathers, 1, "nd {nd}: {:?}", d.nodes);
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap();
        assert_eq!(got[0].1, want[0].1, "nd {nd}");
    }
}

/// An f16 (and a bf16) transformer-style block (`selftest::narrow_float_block`) widened to f32
/// for the GPU computes what the reference computes in the narrow dtypes, within their rounding,
/// and keeps the declared input and output dtypes; its GPU plan compiles and says so.
#[test]
fn f16_and_bf16_graphs_widened_to_f32_compute_what_the_reference_does() {
    let mut rng = Rng::new(0xf16);
    for (dtype, tol) in [(DType::F16, 4e-3), (DType::BF16, 3e-2)] {
        let (g, feeds) = host::selftest::narrow_float_block(dtype, &mut rng);
        let d = planner::plan::decomposed(&g).unwrap();
        let casts = d.nodes.iter().filter(|n| matches!(n.op, Op::Cast(_))).count();
        // Cast up and cast down; the model's own cast to bf16 rounds an f16 block's values (kept,
        // read back up: two casts) and changes nothing in a bf16 one (f32 to f32: it goes).
        assert_eq!(casts, if dtype == DType::F16 { 4 } else { 2 }, "{dtype}");
        let want = host::reference::eval(&g, &feeds).unwrap();
        let got = host::reference::eval(&d, &feeds).unwrap();
        assert_eq!(got[0].1.dtype(), DType::BF16, "{dtype}");
        let (w, gt) = (want[0].1.data().to_f64s(), got[0].1.data().to_f64s());
        for (i, (a, b)) in gt.iter().zip(&w).enumerate() {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{dtype}[{i}]: widened {a}, reference {b}");
        }
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default())
                .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        assert!(plan.lifted[0].contains("computed in float32"), "{:?}", plan.lifted);
    }
}

/// QDQ as `onnxruntime.quantization` writes it (`selftest::qdq_matmul_graph`: per-tensor uint8
/// activations quantized and dequantized in pairs, per-channel int8 weights dequantized, a
/// QuantizeLinear that is a graph output) becomes f32 arithmetic that computes exactly what the
/// reference does (the pairs composed without their integer, the MatMul of the integers scaled
/// after); the GPU plan compiles.
#[test]
fn quantize_dequantize_become_the_arithmetic_that_defines_them() {
    let mut rng = Rng::new(0x9d9);
    let (g, feeds) = host::selftest::qdq_matmul_graph(&mut rng);
    quantize_dequantize_case(&g, &feeds, "QDQ MatMul");
    let (g, feeds) = host::selftest::qdq_gemm_graph(&mut rng);
    quantize_dequantize_case(&g, &feeds, "QDQ Gemm");
    let (g, feeds) = host::selftest::qdq_gemm_per_channel_graph(&mut rng);
    quantize_dequantize_case(&g, &feeds, "QDQ Gemm, per-channel transposed weight");
}

/// A quantize / dequantize pair after a data-movement op, of the scale and zero point its input
/// was dequantized with (`selftest::qdq_views_graph`: after a Reshape and after a Transpose, the
/// constants repeated under other names), gives its input back and is dropped; a pair of another
/// scale stays, bit for bit the reference's. The MatMul reading the moved values still
/// multiplies integers (the same moves of them) and scales after, within f32 rounding of the
/// reference.
#[test]
fn quantize_dequantize_pairs_that_give_back_their_input_are_dropped() {
    let mut rng = Rng::new(0x9da);
    let (g, feeds) = host::selftest::qdq_views_graph(&mut rng);
    let d = planner::plan::decomposed(&g).unwrap();
    // Of the four activation pairs, the input's and the other scale's are computed (each one
    // Round); the two after the views are gone.
    let rounds = d.nodes.iter().filter(|n| matches!(n.op, Op::Round)).count();
    assert_eq!(rounds, 2, "{:?}", d.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
    let want = host::reference::eval(&g, &feeds).unwrap();
    let got = host::reference::eval(&d, &feeds).unwrap();
    assert_eq!(got[0], want[0], "the requantized values");
    assert_agree("QDQ views", &got[1..], &want[1..]);
    // The MatMul's operand: a Transpose and a Reshape of the integers (a Sub), no dequantizing Mul.
    let defs = d.definitions();
    let matmul = d.nodes.iter().find(|n| matches!(n.op, Op::MatMul | Op::Gemm(_))).expect("a MatMul");
    let mut v = matmul.input(0).unwrap();
    let mut chain = Vec::new();
    while let Some(planner::graph::Definition::Node { node, .. }) = defs[v.index()] {
        let n = &d.nodes[node.index()];
        chain.push(n.op.name());
        if !matches!(n.op, Op::Transpose(_) | Op::Reshape(_)) {
            break;
        }
        v = n.input(0).unwrap();
    }
    assert_eq!(chain, ["Transpose", "Reshape", "Sub"], "the MatMul's operand");
    planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default()).unwrap();
}

/// A pair after a move is kept where its scale gives no integer back (zero here: `x / 0`).
#[test]
fn quantize_dequantize_pairs_of_a_zero_scale_stay() {
    use planner::op::Quantize;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3].map(planner::Dim::Known));
    let s = g.initializer("s", planner::ConstTensor::from_f32(&[], &[0.0]).unwrap());
    let z = g.initializer("z", planner::ConstTensor::from_i64s_as(DType::U8, &[], &[3]).unwrap());
    let pair = |g: &mut Graph, v| {
        let q = g.op1(Op::QuantizeLinear(Quantize::default()), &[v, s, z]);
        g.op1(Op::DequantizeLinear(Quantize::default()), &[q, s, z])
    };
    let a = pair(&mut g, x);
    let shape = g.const_i64("shape", &[1], &[6]);
    let r = g.op1(Op::Reshape(Default::default()), &[a, shape]);
    let y = pair(&mut g, r);
    g.output(y);
    let d = planner::plan::decomposed(&g).unwrap();
    let rounds = d.nodes.iter().filter(|n| matches!(n.op, Op::Round)).count();
    assert_eq!(rounds, 2, "{:?}", d.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
}

fn quantize_dequantize_case(g: &Graph, feeds: &[(String, HostTensor)], what: &str) {
    let (g, feeds) = (g.clone(), feeds.to_vec());
    let d = planner::plan::decomposed(&g).unwrap();
    let left =
        d.nodes.iter().filter(|n| matches!(n.op, Op::QuantizeLinear(_) | Op::DequantizeLinear(_))).count();
    assert_eq!(left, 0, "{:?}", d.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
    // The activation pair is composed: no integer value between them is left.
    let ints = planner::shape_infer::infer(&d).unwrap().iter().filter(|i| i.dtype == DType::U8).count();
    assert_eq!(ints, 1, "only the zero point stays uint8");
    // The MatMul multiplies the integers less their zero points (a Sub, and the weight's Cast)
    // and scales its result after (`quant::scale_out`): no dequantizing Mul feeds it.
    let defs = d.definitions();
    let matmul = d.nodes.iter().find(|n| matches!(n.op, Op::MatMul | Op::Gemm(_))).expect("a MatMul");
    for v in matmul.inputs.iter().flatten() {
        let Some(planner::graph::Definition::Node { node, .. }) = defs[v.index()] else { panic!("{v:?}") };
        let op = &d.nodes[node.index()].op;
        assert!(matches!(op, Op::Sub | Op::Cast(_)), "{what}: the product reads a {}", op.name());
    }
    let want = host::reference::eval(&g, &feeds).unwrap();
    let got = host::reference::eval(&d, &feeds).unwrap();
    assert_eq!(got[0].1, want[0].1, "{what}");
    assert_agree(what, &got[1..], &want[1..]);
    planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default()).unwrap();
}

/// The kernels of `plan`'s steps with the values each reads and writes, and whether it is hoisted.
fn kernel_steps(
    plan: &planner::plan::Plan,
) -> Vec<(kernels_gpu::abi::KernelId, Vec<planner::ValueId>, Vec<planner::ValueId>, bool)> {
    (plan.steps.iter().enumerate())
        .filter_map(|(i, st)| match st {
            planner::plan::Step::Kernel { kernel, .. } => {
                let (r, w) = st.reads_writes()?;
                Some((*kernel, r, w, i < plan.hoisted))
            }
            _ => None,
        })
        .collect()
}

/// Weights the model dequantizes (`selftest::dequantized_gemms_graph`, `dequantized_conv_graph`)
/// are packed for the tensor cores on the device, in a hoisted step right after the one that
/// dequantizes them: the `wgmma` GEMMs (m 4096) and convolution, and the small-m tensor-core
/// GEMMs (m 64) read the packed values, never the dequantized ones, which die at
/// the packing (only the packed values stay across runs); a GEMV (m 2) reads the dequantized
/// weight itself and nothing is packed for it.
#[test]
fn dequantized_weights_are_packed_on_the_device_once_per_binding() {
    use kernels_gpu::abi::KernelId as K;
    let mut rng = Rng::new(0xd9ac);
    let gemms = host::selftest::dequantized_gemms_graph(&mut rng);
    let conv = host::selftest::dequantized_conv_graph(&mut rng);
    let wgmma = |k: K| format!("{k:?}").starts_with("GemmWg") || format!("{k:?}").starts_with("ConvWg");
    let tc = |k: K| format!("{k:?}").starts_with("GemmTcPacked");
    for (what, g, symbol, size, packs, packed_readers) in [
        ("m 4096", &gemms, "m", 4096, 2, [wgmma as fn(K) -> bool, wgmma].as_slice()),
        ("m 64", &gemms, "m", 64, 2, [tc as fn(K) -> bool, tc].as_slice()),
        ("m 2", &gemms, "m", 2, 0, [].as_slice()),
        ("conv", &conv, "b", 8, 1, [wgmma as fn(K) -> bool].as_slice()),
        ("conv b 1", &conv, "b", 1, 1, [wgmma as fn(K) -> bool].as_slice()),
    ] {
        let binding = planner::Binding::new().with(symbol, size);
        let plan = planner::plan::compile(g, &binding, &planner::plan::PlanOptions::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let text = plan.to_string();
        let steps = kernel_steps(&plan);
        let pack_steps: Vec<_> = steps.iter().filter(|s| s.0 == K::PackWeightsF32).collect();
        assert_eq!(pack_steps.len(), packs, "{what}:\n{text}");
        let kept = plan.hoisted_results();
        for (i, (_, reads, writes, hoisted)) in pack_steps.iter().enumerate() {
            assert!(hoisted, "{what}: packing {i} is not hoisted:\n{text}");
            let (source, packed) = (reads[0], writes[0]);
            // The packed value is read by the GEMM / Conv the test expects, the source by no step
            // after the packing, and only the packed value is kept across runs.
            let readers: Vec<K> = steps.iter().filter(|s| s.1.contains(&packed)).map(|s| s.0).collect();
            assert!(
                readers.len() == 1 && packed_readers[i](readers[0]),
                "{what}: packed value {i} read by {readers:?}:\n{text}"
            );
            let later = steps.iter().filter(|s| s.0 != K::PackWeightsF32 && s.1.contains(&source)).count();
            assert_eq!(later, 0, "{what}: the dequantized weight {source} is still read:\n{text}");
            assert!(kept.contains(&packed) && !kept.contains(&source), "{what}: kept {kept:?}:\n{text}");
        }
        if packs == 0 {
            assert!(steps.iter().any(|s| s.0 == K::GemvF32 || s.0 == K::GemvProgramF32), "{what}:\n{text}");
        }
        // The small-m tensor-core GEMMs load a packed constant B before waiting for the previous
        // kernel (programmatic dependent launch); one the device packs they are told to load after.
        for st in &plan.steps {
            let planner::plan::Step::Kernel { kernel, args, .. } = st else { continue };
            if !tc(*kernel) {
                continue;
            }
            let planner::plan::Arg::Params(p) = &args[0] else { panic!("{what}: {args:?}") };
            let at = std::mem::offset_of!(kernels_gpu::abi::GemmParams, b_computed);
            let flag = u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
            assert_eq!(flag, 1, "{what}: {kernel:?} reads a B the device packs:\n{text}");
        }
        // Switched off: nothing is packed.
        let off = planner::plan::PlanOptions { pack_computed_weights: false, ..Default::default() };
        let plan = planner::plan::compile(g, &binding, &off).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(kernel_steps(&plan).iter().all(|s| s.0 != K::PackWeightsF32), "{what} off:\n{plan}");
    }
}

/// The products of a quantized model multiply integers less their zero points
/// (`quant::scale_out`, a Conv's too), which TF32 holds exactly: an `exact` plan runs them on the
/// TF32 `wgmma` entries (the device packing one plane of the weight) and says so, the decomposed
/// graph still computing what the reference does; with `tf32_integer_products` off they run the
/// exact entries, and a GEMM of float activations stays exact.
#[test]
fn quantized_products_run_on_the_tf32_entries_which_are_exact_for_them() {
    use kernels_gpu::abi::KernelId as K;
    let mut rng = Rng::new(0x1e32);
    let float = host::selftest::dequantized_gemms_graph(&mut rng);
    let float_feeds = vec![("x".to_string(), rng.tensor(&[4096, 256], -1.0, 1.0))];
    for (what, (g, feeds), symbol, size, integers) in [
        ("QDQ MatMul", host::selftest::qdq_wide_matmul_graph(&mut rng, 4096), "m", 4096, true),
        ("QDQ Conv", host::selftest::qdq_conv_graph(&mut rng, 8), "b", 8, true),
        ("float MatMul of dequantized weights", (float.clone(), float_feeds), "m", 4096, false),
    ] {
        let binding = planner::Binding::new().with(symbol, size);
        let bound = planner::fold::run(&planner::memory::bind_inputs(&g, &binding).unwrap()).unwrap();
        let d = planner::plan::decomposed(&bound).unwrap();
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(what, &host::reference::eval(&d, &feeds).unwrap(), &want);
        for on in [true, false] {
            let options = planner::plan::PlanOptions { tf32_integer_products: on, ..Default::default() };
            let plan =
                planner::plan::compile(&g, &binding, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
            let tf32 = |k: K| format!("{k:?}").ends_with("Tf32");
            let products: Vec<K> = (kernel_steps(&plan).into_iter())
                .map(|s| s.0)
                .filter(|&k| format!("{k:?}").starts_with("GemmWg") || format!("{k:?}").starts_with("ConvWg"))
                .collect();
            assert!(!products.is_empty(), "{what}:\n{plan}");
            let expect = on && integers;
            assert!(products.iter().all(|&k| tf32(k) == expect), "{what} (on {on}): {products:?}\n{plan}");
            let said = plan.lifted.iter().any(|l| l.contains("integers TF32 holds exactly"));
            assert_eq!(said, expect, "{what} (on {on}): {:?}", plan.lifted);
        }
    }
}

/// One dequantized weight read by three GEMMs of different paths (`wgmma` at m 4096, the small-m
/// tensor-core kernel at m 64, a GEMV at m 2): packed twice on the device, both right after the
/// dequantization; the GEMV reads the dequantized weight itself, which therefore lives on. With
/// hoisting off, the packing runs every run (after the dequantization, before the GEMMs).
#[test]
fn a_dequantized_weight_read_on_three_paths_is_packed_per_layout_and_kept_for_the_gemv() {
    use kernels_gpu::abi::KernelId as K;
    use planner::op::Quantize;
    use planner::{ConstTensor, Dim};
    let mut rng = Rng::new(0x3a7);
    let mut g = Graph::new();
    let q: Vec<i64> = (0..256 * 384).map(|_| (rng.next_u64() % 255) as i64 - 127).collect();
    let wq = g.initializer("wq", ConstTensor::from_i64s_as(DType::I8, &[256, 384], &q).unwrap());
    let s = g.initializer("s", ConstTensor::from_f32(&[], &[0.01]).unwrap());
    let w = g.op1(Op::DequantizeLinear(Quantize::default()), &[wq, s]);
    for (name, m) in [("x1", 4096), ("x2", 64), ("x3", 2)] {
        let x = g.input(name, DType::F32, vec![Dim::Known(m), Dim::Known(256)]);
        let y = g.op1(Op::MatMul, &[x, w]);
        g.output(y);
    }
    for hoist in [true, false] {
        let options = planner::plan::PlanOptions { hoist_constants: hoist, ..Default::default() };
        let plan = planner::plan::compile(&g, &planner::Binding::new(), &options).unwrap();
        let steps = kernel_steps(&plan);
        let packs: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].0 == K::PackWeightsF32).collect();
        assert_eq!(packs.len(), 2, "hoist {hoist}:\n{plan}");
        let source = steps[packs[0]].1[0];
        assert_eq!(steps[packs[1]].1[0], source, "hoist {hoist}:\n{plan}");
        // The dequantization's last step comes right before the packings.
        let made = (0..steps.len()).filter(|&i| steps[i].2.contains(&source)).max().unwrap();
        assert_eq!(packs, [made + 1, made + 2], "hoist {hoist}:\n{plan}");
        for &i in &packs {
            assert_eq!(steps[i].3, hoist, "hoist {hoist}: packing hoisted?\n{plan}");
            let packed = steps[i].2[0];
            assert!(steps.iter().any(|s| s.0 != K::PackWeightsF32 && s.1.contains(&packed)), "{plan}");
        }
        let gemv = steps.iter().find(|s| s.0 == K::GemvF32).expect("a GEMV");
        assert!(gemv.1.contains(&source), "hoist {hoist}: the GEMV reads the weight:\n{plan}");
        if hoist {
            assert!(plan.hoisted_results().contains(&source), "kept for the GEMV:\n{plan}");
        }
    }
}

/// Weights of the coded types (int4 / uint4 / int2, float8, float4) that the model only moves
/// and decodes (DequantizeLinear per axis or blocked, Cast to f32) are held as their codes and
/// decoded by a gather from the table of their values, and blocked DequantizeLinear (also of
/// int8) repeats its scale and zero point over their blocks: the decomposed graph computes what
/// the reference does, and the GPU plan compiles (it refused these weights by name before). Codes
/// that are not a weight (here a graph input) stay coded, and the GPU plan refuses them by name.
#[test]
fn coded_and_blocked_weights_are_decoded_on_the_device() {
    use planner::Coded as C;
    let mut rng = Rng::new(0xc0de);
    for (dtype, block, cast) in host::selftest::CODED_WEIGHT_CASES {
        let what = format!("{dtype} block {block} cast {cast}");
        let (g, feeds) = host::selftest::coded_weight_graph(&mut rng, dtype, block, cast);
        let d = planner::plan::decomposed(&g).unwrap_or_else(|e| panic!("{what}: {e}"));
        let infos = planner::shape_infer::infer(&d).unwrap();
        assert!(infos.iter().all(|i| !matches!(i.dtype, DType::Coded(_))), "{what}: a coded value is left");
        assert!(!d.nodes.iter().any(|n| matches!(n.op, Op::DequantizeLinear(_))), "{what}");
        let want = host::reference::eval(&g, &feeds).unwrap();
        assert_agree(&what, &host::reference::eval(&d, &feeds).unwrap(), &want);
        planner::plan::compile(&g, &planner::Binding::new(), &Default::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // As a session plans it (its constants folded on the host first): the codes still reach
        // the device and are decoded there.
        let options = host::SessionOptions::default();
        let ahead = host::session::PlanAhead::compile(&g, &feeds, &options, (132, true))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if matches!(dtype, DType::Coded(_)) {
            assert!(
                ahead.plan.to_string().contains("gather"),
                "{what}: decoded by a gather:\n{}",
                ahead.plan
            );
        }
    }
    let (mut g, _) = host::selftest::coded_weight_graph(&mut rng, DType::Coded(C::I4), true, false);
    let wq = planner::ValueId(g.values.iter().position(|v| v.name == "wq").unwrap() as u32);
    g.initializers.remove(&wq);
    g.values[wq.index()].info =
        Some(planner::TensorInfo { dtype: DType::Coded(C::I4), shape: planner::Shape::known(&[100, 16]) });
    g.inputs.push(wq);
    let err = planner::plan::compile(&g, &planner::Binding::new(), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("int4"), "{err}");
}

/// The integer analysis behind TF32 for exact products (`planner::plan::small_integer_values`)
/// is sound: on random graphs of integer-keeping and other ops over an input, integer and
/// fractional weights, every value it names holds, on random inputs run through the reference,
/// only integers of magnitude at most 2048 (or NaN / infinities).
#[test]
fn values_proven_small_integers_hold_only_small_integers() {
    use planner::op::{Cast, Clip, Transpose};
    use planner::{ConstTensor, Dim};
    let mut rng = Rng::new(0x1a7e);
    let mut claims = 0;
    for round in 0..400 {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [6, 6].map(Dim::Known));
        let q: Vec<i64> = (0..36).map(|_| (rng.next_u64() % 256) as i64 - 128).collect();
        let wq = g.initializer("wq", ConstTensor::from_i64s_as(DType::I8, &[6, 6], &q).unwrap());
        let ints: Vec<f32> = (0..36).map(|_| (rng.next_u64() % 41) as f32 - 20.0).collect();
        let wi = g.initializer("wi", ConstTensor::from_f32(&[6, 6], &ints).unwrap());
        let fr = g.initializer("wf", ConstTensor::from_f32(&[6, 6], &[0.5; 36]).unwrap());
        let c = |g: &mut Graph, name: &str, v: f32| {
            g.initializer(name, ConstTensor::from_f32(&[], &[v]).unwrap())
        };
        let (lo, hi, flo, big) = (
            c(&mut g, "lo", -100.0),
            c(&mut g, "hi", 255.0),
            c(&mut g, "flo", 0.5),
            c(&mut g, "big", 3000.0),
        );
        let cast = g.op1(Op::Cast(Cast::to(DType::F32)), &[wq]);
        let mut pool = vec![x, cast, wi, fr];
        for _ in 0..12 {
            let a = pool[(rng.next_u64() % pool.len() as u64) as usize];
            let b = pool[(rng.next_u64() % pool.len() as u64) as usize];
            let v = match rng.next_u64() % 13 {
                0 => g.op1(Op::Add, &[a, b]),
                1 => g.op1(Op::Sub, &[a, b]),
                2 => g.op1(Op::Mul, &[a, b]),
                3 => g.op1(Op::Round, &[a]),
                4 => g.op1(Op::Clip(Clip::default()), &[a, lo, hi]),
                5 => g.op1(Op::Clip(Clip::default()), &[a, flo, hi]),
                6 => g.op1(Op::Transpose(Transpose { perm: Some(vec![1, 0]) }), &[a]),
                7 => g.op1(Op::Max, &[a, b]),
                8 => g.op1(Op::Neg, &[a]),
                9 => g.op1(Op::Div, &[a, b]),
                10 => g.op1(Op::Cast(Cast::to(DType::F16)), &[a]),
                11 => g.op1(Op::Mul, &[a, big]),
                _ => g.op1(Op::Floor, &[a]),
            };
            let v = if g.values[v.index()].info.as_ref().is_some_and(|i| i.dtype == DType::F16)
                || matches!(g.nodes.last().map(|n| &n.op), Some(Op::Cast(_)))
            {
                g.op1(Op::Cast(Cast::to(DType::F32)), &[v])
            } else {
                v
            };
            pool.push(v);
        }
        for &v in &pool {
            let y = g.op1(Op::MatMul, &[v, v]);
            g.output(y);
            g.output(v);
        }
        let small = planner::plan::small_integer_values(&g).unwrap();
        let feeds = vec![("x".to_string(), rng.tensor(&[6, 6], -400.0, 400.0))];
        let got = host::reference::eval(&g, &feeds).unwrap();
        for (name, t) in &got {
            if !small.contains(name) {
                continue;
            }
            claims += 1;
            for (i, v) in t.data().to_f64s().iter().enumerate() {
                assert!(
                    !v.is_finite() || (v.fract() == 0.0 && v.abs() <= 2048.0),
                    "round {round}: `{name}`[{i}] = {v}, proven a small integer"
                );
            }
        }
    }
    assert!(claims > 300, "the analysis proved only {claims} values");
}

/// `GatherND(x, idx)` with x `[b, s]` and `idx[i, 0, q, j] = (i, j)`: PyTorch's dynamo export of
/// `x[:, None, None, :]` broadcast over `q` query rows (BERT's padding mask). The batch and
/// sequence coordinates are `Range`s (`folded`: the constant aranges the binding folds them to)
/// carried through Unsqueeze and Expand; `start` is the sequence range's first value (0 for the
/// grid). With `swapped` the components are (j, i) over a square x: a transpose, not a view.
fn mask_gather(b: usize, s: usize, q: usize, folded: bool, start: i64, swapped: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::Known(b), Dim::Known(s)]);
    let arange = |g: &mut Graph, name: &str, n: usize, from: i64| {
        if folded {
            let v: Vec<i64> = (from..from + n as i64).collect();
            g.const_i64(name, &[n], &v)
        } else {
            let (lo, hi, one) = (
                g.const_i64(&format!("{name}.lo"), &[], &[from]),
                g.const_i64(&format!("{name}.hi"), &[], &[from + n as i64]),
                g.const_i64(&format!("{name}.delta"), &[], &[1]),
            );
            g.op1(Op::Range, &[lo, hi, one])
        }
    };
    let rows = arange(&mut g, "rows", b, 0);
    let cols = arange(&mut g, "cols", s, start);
    let (row_axes, col_axes, last) = (
        g.const_i64("row_axes", &[3], &[1, 2, 3]),
        g.const_i64("col_axes", &[3], &[0, 1, 2]),
        g.const_i64("last", &[1], &[-1]),
    );
    let grid = g.const_i64("grid", &[4], &[b as i64, 1, q as i64, s as i64]);
    let parts: Vec<planner::ValueId> = [(rows, row_axes), (cols, col_axes)]
        .into_iter()
        .map(|(r, axes)| {
            let placed = g.unsqueeze(r, axes);
            let spread = g.op1(Op::Expand, &[placed, grid]);
            g.unsqueeze(spread, last)
        })
        .collect();
    let idx = if swapped { g.concat(&[parts[1], parts[0]], -1) } else { g.concat(&parts, -1) };
    let y = g.op1(Op::GatherNd(Default::default()), &[x, idx]);
    g.output(y);
    g
}

#[test]
fn coordinate_grid_gathers_become_views_that_compute_what_the_reference_does() {
    use host::selftest::random_inputs;
    let mut rng = Rng::new(0x91d);
    // (b, s, q, folded, start, swapped, becomes a view)
    for (b, s, q, folded, start, swapped, view) in [
        (2, 5, 3, false, 0, false, true),
        (3, 4, 1, true, 0, false, true),
        (1, 6, 2, true, 0, false, true),
        (1, 6, 2, false, 0, false, true),
        (2, 5, 3, false, 1, false, false),
        (4, 4, 2, true, 0, true, false),
    ] {
        let what = format!("b {b} s {s} q {q} folded {folded} start {start} swapped {swapped}");
        let g = mask_gather(b, s, q, folded, start, swapped);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let d = planner::plan::decomposed(&g).unwrap();
        let ops: Vec<&str> = d.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(!ops.contains(&"GatherND"), view, "{what}: {ops:?}");
        if view {
            assert!(ops.iter().all(|o| matches!(*o, "Reshape" | "Expand")), "{what}: {ops:?}");
        }
        // A start of 1 reads past the rows' end: the reference refuses both alike.
        let want = host::reference::eval(&g, &feeds);
        let got = host::reference::eval(&d, &feeds);
        match (want, got) {
            (Ok(want), Ok(got)) => assert_agree(&what, &got, &want),
            (Err(_), Err(_)) => assert_eq!(start, 1, "{what}"),
            (w, g) => panic!("{what}: reference {:?}, decomposed {:?}", w.map(|_| ()), g.map(|_| ())),
        }
        let plan =
            planner::plan::compile(&g, &planner::Binding::new(), &planner::plan::PlanOptions::default());
        assert!(plan.is_ok() || start == 1, "{what}: {:?}", plan.err());
    }
}
