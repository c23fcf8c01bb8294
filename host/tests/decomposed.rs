//! The planner's decompositions of operators without a GPU kernel of their own
//! (`planner::plan::decomposed`), checked on the CPU: the reference runs the original graph and
//! the decomposed one, and they must agree, and the GPU plan of the original must compile.
//! Einsum: batched and broadcast matrix products, the five contractions of transformers' Mamba2
//! export, ellipses of different ranks, implicit outputs, three operands, reductions, transposes
//! and outer products; a diagonal (not covered) stays an Einsum.

use host::HostTensor;
use host::selftest::Rng;
use planner::op::Einsum;
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

#[test]
fn a_diagonal_einsum_is_left_for_the_planner_to_refuse() {
    let (g, _) = einsum("ii->i", &[&[3, 3]], &mut Rng::new(1));
    let d = planner::plan::decomposed(&g).unwrap();
    assert!(d.nodes.iter().any(|n| matches!(n.op, Op::Einsum(_))));
}
