//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss through `Session` against the CPU
//! reference: every reduction, with and without weights, ignore_index (present in the target, and
//! negative), i32 and i64 targets, extra spatial dims, and SoftmaxCrossEntropyLoss with and
//! without its log_prob output.

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{self, LossReduction, Op};
use planner::{DType, Graph};

use crate::indexing::{compare, known};

/// Targets in `[0, classes)`, with `ignore` at about one position in five.
fn targets(rng: &mut Rng, shape: &[usize], classes: usize, ignore: Option<i64>, i32s: bool) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n)
        .map(|_| match ignore {
            Some(ii) if rng.next_u64().is_multiple_of(5) => ii,
            _ => (rng.next_u64() % classes as u64) as i64,
        })
        .collect();
    if i32s {
        HostTensor::new(shape.to_vec(), v.into_iter().map(|x| x as i32).collect::<Vec<i32>>()).unwrap()
    } else {
        HostTensor::new(shape.to_vec(), v).unwrap()
    }
}

#[test]
fn losses_match_the_reference() {
    let mut rng = Rng::new(0x1055);
    let shapes: [&[usize]; 4] = [&[3, 5], &[2, 4, 7], &[2, 3, 2, 9], &[40, 33, 30]];
    let mut case = 0;
    for shape in shapes {
        for reduction in [LossReduction::None, LossReduction::Sum, LossReduction::Mean] {
            for (weighted, ignore) in [(false, None), (true, None), (true, Some(1i64)), (false, Some(-5))] {
                for sce in [false, true] {
                    case += 1;
                    let i32s = case % 3 == 0;
                    let with_log_prob = sce && case % 2 == 0;
                    let classes = shape[1];
                    let tshape: Vec<usize> = [&shape[..1], &shape[2..]].concat();
                    let mut g = Graph::new();
                    let x = g.input("x", DType::F32, known(shape));
                    let t = g.input("t", if i32s { DType::I32 } else { DType::I64 }, known(&tshape));
                    let mut ins = vec![x, t];
                    let mut inputs = vec![
                        (
                            "x".to_owned(),
                            rng.tensor(shape, if sce { -5.0 } else { -8.0 }, if sce { 5.0 } else { 0.0 }),
                        ),
                        ("t".to_owned(), targets(&mut rng, &tshape, classes, ignore, i32s)),
                    ];
                    if weighted {
                        ins.push(g.input("w", DType::F32, known(&[classes])));
                        inputs.push(("w".to_owned(), rng.tensor(&[classes], 0.1, 2.0)));
                    }
                    let o = if sce {
                        Op::SoftmaxCrossEntropyLoss(op::SoftmaxCrossEntropyLoss {
                            reduction,
                            ignore_index: ignore,
                        })
                    } else {
                        Op::NegativeLogLikelihoodLoss(op::NegativeLogLikelihoodLoss {
                            reduction,
                            ignore_index: ignore,
                        })
                    };
                    let outs = g.push(o, &ins, if with_log_prob { 2 } else { 1 });
                    for y in outs {
                        g.output(y);
                    }
                    let what = format!(
                        "{} {shape:?} {reduction:?} weighted {weighted} ignore {ignore:?} i32 {i32s} log_prob {with_log_prob}",
                        if sce { "SCE" } else { "NLL" }
                    );
                    let plan = compare(&what, g, &inputs, 1e-5);
                    assert!(plan.contains("nll_loss_f32"), "{what}:\n{plan}");
                }
            }
        }
    }
}
