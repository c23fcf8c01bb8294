//! Exporter spellings made canonical (`host/tests/canonical.rs` checks the rewrites on the CPU)
//! computed on the GPU: BERT's separate Q, K and V projections merged into one GEMM, and
//! `nn.MultiheadAttention`'s packed projection read through its `Gather`s and unit transposes,
//! each against the CPU reference at several batch sizes.

use host::selftest::{Projections, Rng, projected_attention_graph, random_inputs};
use host::{Session, SessionOptions};

use crate::ctx;

#[test]
fn merged_and_gathered_projections_match_the_reference() {
    let mut rng = Rng::new(0xca70);
    for spelling in [Projections::Separate, Projections::Packed] {
        for batch in [1, 3] {
            let what = format!("{spelling:?}, batch {batch}");
            let g = projected_attention_graph(batch, 24, spelling);
            let inputs = random_inputs(&mut rng, &g, -1.0, 1.0);
            let want = host::reference::eval(&g, &inputs).unwrap();
            let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
            let got = s.run(&inputs).unwrap();
            for ((_, a), (_, b)) in got.iter().zip(&want) {
                assert_eq!(a.shape(), b.shape(), "{what}");
                for (i, (x, y)) in a.data().to_f64s().iter().zip(b.data().to_f64s()).enumerate() {
                    assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{what} [{i}]: gpu {x}, reference {y}");
                }
            }
        }
    }
}
