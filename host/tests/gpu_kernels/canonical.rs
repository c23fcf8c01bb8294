//! Exporter spellings made canonical (`host/tests/canonical.rs` checks the rewrites on the CPU)
//! computed on the GPU: BERT's separate Q, K and V projections merged into one GEMM, and
//! `nn.MultiheadAttention`'s packed projection read through its `Gather`s and unit transposes,
//! each against the CPU reference at several batch sizes; Mamba's short convolution (depthwise
//! `Conv` padded for causality, sliced, SiLU) as one causal-conv launch (`causal_conv_f32`, or
//! `causal_conv_rows_f32` where the transposes around it are read through), at lengths below,
//! at and past one block of time steps.

use host::selftest::{
    Projections, Rng, ShortConv, projected_attention_graph, random_inputs, short_conv_graph,
};
use host::{Session, SessionOptions};

use crate::ctx;

/// The session's result on random inputs equals the reference's within `1e-5 (1 + |ref|)`;
/// returns the plan's text.
fn check(what: &str, g: planner::Graph, rng: &mut Rng) -> String {
    let inputs = random_inputs(rng, &g, -1.0, 1.0);
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let got = s.run(&inputs).unwrap();
    for ((_, a), (_, b)) in got.iter().zip(&want) {
        assert_eq!(a.shape(), b.shape(), "{what}");
        for (i, (x, y)) in a.data().to_f64s().iter().zip(b.data().to_f64s()).enumerate() {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{what} [{i}]: gpu {x}, reference {y}");
        }
    }
    s.last_plan().unwrap().to_string()
}

#[test]
fn merged_and_gathered_projections_match_the_reference() {
    let mut rng = Rng::new(0xca70);
    for spelling in [Projections::Separate, Projections::Packed] {
        for batch in [1, 3] {
            check(
                &format!("{spelling:?}, batch {batch}"),
                projected_attention_graph(batch, 24, spelling),
                &mut rng,
            );
        }
    }
}

#[test]
fn lifted_short_convolutions_match_the_reference() {
    let mut rng = Rng::new(0xc0c0);
    for (spelling, bias, silu) in [
        (ShortConv::SlicedToLength, false, true),
        (ShortConv::SlicedFromEnd, true, true),
        (ShortConv::LeftPadded, true, false),
    ] {
        for (b, l, d, k) in [(1, 1, 8, 4), (2, 37, 40, 4), (1, 256, 64, 4), (2, 600, 24, 16)] {
            let what = format!("{spelling:?} bias {bias} silu {silu} B={b} L={l} D={d} K={k}");
            let text = check(&what, short_conv_graph(b, l, d, k, spelling, bias, silu), &mut rng);
            // The conv kernel over (B, D, L), or over (B, L, D) rows where the channels-last pass
            // reads through the transposes around it.
            let lifted = text.contains(" causal_conv_f32 ") || text.contains(" causal_conv_rows_f32 ");
            assert!(lifted, "{what}:\n{text}");
        }
    }
}
