//! Property tests: random DAGs of elementwise and broadcasting ops.
//!
//! Every input shape is a broadcast-compatible "sub-shape" of one target shape, so every node is
//! valid. Checks: inference succeeds; with symbols (one symbol per size > 1) it agrees with the fully
//! concrete inference once the symbols are bound; and every output matches a direct NumPy-style
//! broadcast of the concrete input shapes.

use proptest::prelude::*;

use crate::graph::{Graph, ValueId};
use crate::op::Op;
use crate::shape_infer::infer;
use crate::tensor_info::{Binding, DType, Dim};

#[derive(Debug, Clone)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Where(usize, usize, usize),
}

#[derive(Debug, Clone)]
struct DagProblem {
    /// Concrete shapes of the graph inputs.
    inputs: Vec<Vec<usize>>,
    steps: Vec<Step>,
}

fn sub_shape(target: &[usize]) -> impl Strategy<Value = Vec<usize>> + use<> {
    let target = target.to_vec();
    (0..=target.len(), proptest::collection::vec(any::<bool>(), target.len())).prop_map(
        move |(keep, ones)| {
            let start = target.len() - keep;
            (start..target.len()).map(|i| if ones[i] { 1 } else { target[i] }).collect()
        },
    )
}

fn problem() -> impl Strategy<Value = DagProblem> {
    proptest::collection::vec(prop_oneof![Just(1usize), Just(2), Just(3), Just(5)], 0..=4)
        .prop_flat_map(|target| (proptest::collection::vec(sub_shape(&target), 1..5), Just(target)))
        .prop_flat_map(|(inputs, _)| {
            let n_in = inputs.len();
            let step = (
                0u8..4,
                0u8..5,
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
            );
            (Just(inputs), proptest::collection::vec(step, 1..12)).prop_map(move |(inputs, raw)| {
                let steps = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (kind, op, a, b, c))| {
                        let avail = n_in + i;
                        match kind {
                            0 => Step::Unary(op, a.index(avail)),
                            3 => Step::Where(a.index(avail), b.index(avail), c.index(avail)),
                            _ => Step::Binary(op, a.index(avail), b.index(avail)),
                        }
                    })
                    .collect();
                DagProblem { inputs, steps }
            })
        })
}

fn broadcast_concrete(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank).map(|i| at(a, i).max(at(b, i))).collect()
}

impl DagProblem {
    /// Builds the graph; `symbolic` turns every size > 1 into the symbol `s<size>`.
    fn graph(&self, symbolic: bool) -> (Graph, Vec<ValueId>) {
        let mut g = Graph::new();
        let cond = g.input("cond", DType::Bool, [1usize]);
        let mut vals = Vec::new();
        for (i, shape) in self.inputs.iter().enumerate() {
            let dims: Vec<Dim> = shape
                .iter()
                .map(|&d| if symbolic && d > 1 { Dim::Symbol(format!("s{d}")) } else { Dim::Known(d) })
                .collect();
            vals.push(g.input(&format!("x{i}"), DType::F32, dims));
        }
        for step in &self.steps {
            let v = match *step {
                Step::Unary(op, a) => {
                    let op = [Op::Relu, Op::Exp, Op::Neg, Op::Sigmoid, Op::Tanh][op as usize % 5].clone();
                    g.op1(op, &[vals[a]])
                }
                Step::Binary(op, a, b) => {
                    let op = [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max][op as usize % 5].clone();
                    g.op1(op, &[vals[a], vals[b]])
                }
                Step::Where(c, a, b) => {
                    let mask = g.op1(Op::Greater, &[vals[c], vals[a]]);
                    let both = g.op1(Op::And, &[mask, cond]);
                    g.where_(both, vals[a], vals[b])
                }
            };
            vals.push(v);
        }
        for &v in &vals {
            g.output(v);
        }
        (g, vals)
    }

    /// Expected concrete shapes of all values, by direct broadcasting.
    fn expected(&self) -> Vec<Vec<usize>> {
        let mut shapes = self.inputs.clone();
        for step in &self.steps {
            let s = match *step {
                Step::Unary(_, a) => shapes[a].clone(),
                Step::Binary(_, a, b) => broadcast_concrete(&shapes[a], &shapes[b]),
                Step::Where(c, a, b) => {
                    let mask = broadcast_concrete(&broadcast_concrete(&shapes[c], &shapes[a]), &[1]);
                    broadcast_concrete(&mask, &broadcast_concrete(&shapes[a], &shapes[b]))
                }
            };
            shapes.push(s);
        }
        shapes
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn elementwise_dags_infer_consistently(p in problem()) {
        let expected = p.expected();
        let (concrete, vals) = p.graph(false);
        let infos = infer(&concrete).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (symbolic, svals) = p.graph(true);
        let sinfos = infer(&symbolic).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let binding = [2usize, 3, 5].iter().fold(Binding::new(), |b, &d| b.with(&format!("s{d}"), d));
        for (i, (&v, &sv)) in vals.iter().zip(&svals).enumerate() {
            let c = infos[v.index()].shape.as_known();
            prop_assert_eq!(c.as_ref(), Some(&expected[i]), "value {}", i);
            let bound = sinfos[sv.index()].shape.bind(&binding);
            let bound = bound.map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&bound, &expected[i], "symbolic value {}", i);
            prop_assert_eq!(infos[v.index()].dtype, sinfos[sv.index()].dtype);
        }
    }
}
