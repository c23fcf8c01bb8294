//! Exporter spellings made canonical before fusion (`planner::plan::decomposed` shows the graph
//! the fusion passes read), checked on the CPU: the reference computes the original and the
//! rewritten graph alike, and the GPU plan reads what it should in place.
//! - Sibling projections (BERT's separate Q, K and V `MatMul + Add`) merge into one `MatMul` by
//!   the concatenated weights and a `Split`; the plan runs them as one GEMM whose result the
//!   attention reads three times.
//! - `nn.MultiheadAttention`'s packed projection taken apart by `Gather`s of one index: at batch
//!   1 the attention reads Q, K and V through them (no gather or transpose steps).
//! - A Transpose that moves only axes of extent 1 is the Reshape it is.
//! - A depthwise `Conv` padded for causality and cut back to the sequence (and a SiLU after) is
//!   the `CausalConvWithState` it is.

use host::HostTensor;
use host::selftest::{Projections, Rng, ShortConv, projected_attention_graph, short_conv_graph};
use planner::plan::{Arg, PlanOptions, Step, compile, decomposed};
use planner::{Binding, Graph, Op};

fn assert_agree(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((_, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(g.shape(), w.shape(), "{what}");
        for (i, (a, b)) in g.data().to_f64s().iter().zip(w.data().to_f64s()).enumerate() {
            assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{what} [{i}]: rewritten {a}, reference {b}");
        }
    }
}

/// The original graph and its canonical form agree on the reference; returns the latter.
fn canonical(g: &Graph, seed: u64, what: &str) -> Graph {
    let d = decomposed(g).unwrap();
    let feeds = host::selftest::random_inputs(&mut Rng::new(seed), g, -1.0, 1.0);
    let want = host::reference::eval(g, &feeds).unwrap();
    let got = host::reference::eval(&d, &feeds).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_agree(what, &got, &want);
    d
}

fn count(g: &Graph, f: impl Fn(&Op) -> bool) -> usize {
    g.nodes.iter().filter(|n| f(&n.op)).count()
}

/// Labels of the plan's kernel steps.
fn labels(plan: &planner::plan::Plan) -> Vec<String> {
    (plan.steps.iter())
        .filter_map(|s| if let Step::Kernel { label, .. } = s { Some(label.clone()) } else { None })
        .collect()
}

#[test]
fn separate_q_k_v_projections_merge_into_one_gemm_the_attention_reads_in_place() {
    for batch in [1, 3] {
        let what = format!("batch {batch}");
        let g = projected_attention_graph(batch, 8, Projections::Separate);
        let d = canonical(&g, 0x5e9, &what);
        assert_eq!(count(&g, |o| matches!(o, Op::MatMul)), 5, "{what}");
        assert_eq!(count(&d, |o| matches!(o, Op::MatMul)), 3, "{what}: {:?}", d.nodes);
        assert_eq!(count(&d, |o| matches!(o, Op::Split(_))), 1, "{what}");
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        assert_eq!(labels(&plan), ["MatMul+Bias", "Attention", "Gemm"], "{what}:\n{text}");
        // Q, K and V are the one GEMM result.
        let Step::Kernel { args, .. } = &plan.steps[1] else { panic!("{text}") };
        let qkv: Vec<&Arg> = args.iter().filter(|a| matches!(a, Arg::Value(_))).take(3).collect();
        assert!(qkv.windows(2).all(|w| w[0] == w[1]), "{what}:\n{text}");
        // Without attention fusion nothing is merged (the Split would be copied).
        let off = PlanOptions { fuse_attention: false, ..PlanOptions::default() };
        let plan = compile(&g, &Binding::new(), &off).unwrap();
        assert_eq!(labels(&plan).iter().filter(|l| l.starts_with("MatMul")).count(), 5, "{plan}");
    }
}

#[test]
fn a_packed_projection_taken_apart_by_gathers_is_read_in_place() {
    for batch in [1, 2] {
        let what = format!("batch {batch}");
        let g = projected_attention_graph(batch, 8, Projections::Packed);
        let d = canonical(&g, 0x9ac, &what);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let labels = labels(&plan);
        assert!(labels.iter().any(|l| l == "Attention"), "{what}:\n{text}");
        // At batch 1 the sequence-first transposes move only the unit batch axis: views, and
        // the attention reads Q, K and V through the gathers. (Above it, merging the batch
        // with the heads is not one stride of the packed projection: the gathers copy.)
        let transposes = count(&d, |o| matches!(o, Op::Transpose(_)));
        if batch == 1 {
            assert_eq!(labels, ["MatMul+Bias", "Attention", "Gemm"], "{what}:\n{text}");
        } else {
            assert!(transposes > 0, "{what}");
        }
    }
}

#[test]
fn causal_depthwise_convolutions_become_one_causal_conv() {
    let spellings = [ShortConv::SlicedToLength, ShortConv::SlicedFromEnd, ShortConv::LeftPadded];
    for (i, spelling) in spellings.into_iter().enumerate() {
        for (bias, silu) in [(false, true), (true, false), (true, true)] {
            for (b, l, d, k) in [(1, 9, 6, 4), (2, 3, 5, 2), (1, 1, 3, 3)] {
                let what = format!("{spelling:?} bias {bias} silu {silu} B={b} L={l} D={d} K={k}");
                let g = short_conv_graph(b, l, d, k, spelling, bias, silu);
                let d = canonical(&g, 0xc0 + i as u64, &what);
                assert_eq!(
                    count(&d, |o| matches!(o, Op::CausalConvWithState(_))),
                    1,
                    "{what}: {:?}",
                    d.nodes
                );
                let left = count(&d, |o| matches!(o, Op::Conv(_) | Op::Slice(_) | Op::Sigmoid | Op::Mul));
                assert_eq!(left, 0, "{what}: {:?}", d.nodes);
                let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
                assert!(labels(&plan).iter().any(|l| l == "CausalConvWithState"), "{what}:\n{plan}");
            }
        }
    }
    // Not causal (symmetric padding kept), strided, or not depthwise: left alone.
    use planner::op::Conv;
    let g = short_conv_graph(1, 9, 6, 4, ShortConv::SlicedToLength, false, false);
    for change in 0..3 {
        let mut h = g.clone();
        for n in &mut h.nodes {
            if let Op::Conv(c) = &mut n.op {
                match change {
                    0 => c.pads = vec![3, 1],
                    1 => c.strides = vec![2],
                    _ => c.dilations = vec![2],
                }
            }
        }
        let d = decomposed(&h).unwrap();
        assert_eq!(count(&d, |o| matches!(o, Op::Conv(Conv { .. }))), 1, "change {change}");
    }
}

#[test]
fn layers_sharing_their_projection_weights_share_one_concatenation() {
    // ALBERT-style: two attention layers with the same Q, K and V weights.
    let g = projected_attention_graph(1, 8, Projections::Separate);
    let mut g2 = g.clone();
    // Feed the first layer's output to a second copy of its nodes (same initializers).
    let (x, y) = (g.inputs[0], g.outputs[0]);
    let mut map = std::collections::HashMap::new();
    map.insert(x, y);
    for n in &g.nodes {
        let mut m = n.clone();
        m.name = format!("{}_2", n.name);
        for i in m.inputs.iter_mut().flatten() {
            *i = *map.get(i).unwrap_or(i);
        }
        for o in m.outputs.iter_mut().flatten() {
            let v = g2.add_value(format!("{}_2", g.value_name(*o)), None);
            map.insert(*o, v);
            *o = v;
        }
        g2.nodes.push(m);
    }
    g2.outputs = vec![map[&y]];
    let d = canonical(&g2, 0x2a, "two layers");
    assert_eq!(count(&d, |o| matches!(o, Op::Split(_))), 2);
    let merged = d.initializers.keys().filter(|&&v| d.value_name(v).contains(".merged")).count();
    assert_eq!(merged, 2, "one weight and one bias concatenation for both layers");
}
