//! NonZero and the staged runs it causes, on the device against the CPU reference: random shapes
//! and dtypes (float -0.0 and NaN included), inputs large enough for many blocks, empty and full
//! results; a model whose rest depends on the count; a NonZero of a NonZero result; and no device
//! allocation once the run-time region is warm, whatever the counts.

use host::selftest::{Rng, selected_rows_graph, selected_rows_input};
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{DType, Graph};

use crate::ctx;
use crate::indexing::{compare, known, pick, shape_of};

/// `x` of `shape` with about `density` of its elements non-zero, of `dtype`.
fn sparse(rng: &mut Rng, shape: &[usize], dtype: DType, density: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    let hits: Vec<bool> = (0..n).map(|_| (rng.next_u64() % 1000) as f64 / 1000.0 < density).collect();
    let shape = shape.to_vec();
    let r = match dtype {
        DType::F32 => {
            // Zeros of both signs; the non-zero values include NaN and the smallest subnormal.
            let odd = [f32::NAN, f32::from_bits(1), -1.5, 3.0, f32::INFINITY];
            let v: Vec<f32> =
                hits.iter().map(|&h| if h { pick(rng, &odd) } else { pick(rng, &[0.0, -0.0]) }).collect();
            HostTensor::new(shape, v)
        }
        DType::F64 => {
            let v: Vec<f64> =
                hits.iter().map(|&h| if h { pick(rng, &[f64::NAN, -2.0, 1e-310]) } else { -0.0 }).collect();
            HostTensor::new(shape, v)
        }
        DType::I64 => HostTensor::new(
            shape,
            hits.iter().map(|&h| if h { -(1i64 << 40) } else { 0 }).collect::<Vec<_>>(),
        ),
        DType::I32 => {
            HostTensor::new(shape, hits.iter().map(|&h| if h { i32::MIN } else { 0 }).collect::<Vec<_>>())
        }
        DType::U8 => {
            HostTensor::new(shape, hits.iter().map(|&h| if h { 128u8 } else { 0 }).collect::<Vec<_>>())
        }
        _ => HostTensor::new(shape, hits.to_vec()),
    };
    r.unwrap()
}

fn non_zero_graph(shape: &[usize], dtype: DType) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", dtype, known(shape));
    let y = g.op1(Op::NonZero, &[x]);
    g.output(y);
    g
}

#[test]
fn non_zero_matches_the_reference() {
    let mut rng = Rng::new(0x2e70);
    let dtypes = [DType::F32, DType::F64, DType::I64, DType::I32, DType::U8, DType::Bool];
    for rank in 0..=4 {
        for _ in 0..6 {
            let shape = shape_of(&mut rng, rank, &[1, 2, 3, 7, 64, 300]);
            let dtype = pick(&mut rng, &dtypes);
            let density = pick(&mut rng, &[0.0, 0.01, 0.5, 1.0]);
            let x = sparse(&mut rng, &shape, dtype, density);
            let what = format!("NonZero {shape:?} {dtype} density {density}");
            compare(&what, non_zero_graph(&shape, dtype), &[("x".into(), x)], 0.0);
        }
    }
}

#[test]
fn non_zero_of_a_large_input_spans_many_blocks() {
    let mut rng = Rng::new(0x2e71);
    for shape in [vec![1 << 22], vec![3, 700, 999], vec![2, 2, 2, 2, 2, 2, 2, 2]] {
        for density in [0.001, 0.3, 1.0] {
            let x = sparse(&mut rng, &shape, DType::F32, density);
            compare(
                &format!("NonZero {shape:?} {density}"),
                non_zero_graph(&shape, DType::F32),
                &[("x".into(), x)],
                0.0,
            );
        }
    }
}

#[test]
fn a_model_downstream_of_non_zero_runs_in_stages_without_allocating_once_warm() {
    let mut rng = Rng::new(0x2e72);
    let rows = 1000;
    for positive in [0.0, 0.2, 1.0] {
        let x = selected_rows_input(&mut rng, rows, positive);
        compare(&format!("selected rows {positive}"), selected_rows_graph(rows), &[("x".into(), x)], 1e-5);
    }
    // One session, counts changing from run to run: the region grows to the largest need, then
    // runs with counts it has seen allocate nothing, and nothing stays in the region between runs.
    let g = selected_rows_graph(rows);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    let inputs: Vec<HostTensor> =
        [0.9, 0.1, 0.5].iter().map(|&p| selected_rows_input(&mut rng, rows, p)).collect();
    for x in &inputs {
        s.run(&[("x".into(), x.clone())]).unwrap();
    }
    let (warm, region) = (s.allocation_count(), s.region_stats());
    assert!(region.capacity >= region.high_water && region.high_water > 0, "{region:?}");
    assert_eq!(region.used, 0, "every block is freed after a run");
    for x in inputs.iter().rev().chain(&inputs) {
        let got = s.run(&[("x".into(), x.clone())]).unwrap();
        let want = host::reference::eval(&g, &[("x".into(), x.clone())]).unwrap();
        assert_eq!(got[0].1.shape(), want[0].1.shape());
        assert_eq!(s.allocation_count(), warm, "a warm staged run allocated");
    }
    assert_eq!(s.region_stats().used, 0);
    // Counts never seen, between those seen: the stages after NonZero are planned again, but their
    // constants come from the pool and everything fits the arena and region: still no allocation.
    for k in 0..5 {
        let x = selected_rows_input(&mut rng, rows, 0.3 + 0.1 * k as f64);
        let got = s.run(&[("x".into(), x.clone())]).unwrap();
        let want = host::reference::eval(&g, &[("x".into(), x)]).unwrap();
        assert_eq!(got[0].1.shape(), want[0].1.shape());
        assert_eq!(s.allocation_count(), warm, "a run with a new count allocated");
    }
    assert!(s.last_plan().is_none() && s.profile_steps(1).is_err(), "a staged model has no single plan");
    // `execute` runs the stages again on the last inputs.
    s.execute().unwrap();
    assert_eq!(s.allocation_count(), warm);
    // Shrinking frees the arena and the region; the next run allocates them again and is right.
    let before = s.device_bytes();
    let freed = s.shrink().unwrap();
    assert!(freed > 0 && s.region_stats().capacity == 0, "freed {freed} of {before}");
    let x = &inputs[1];
    let got = s.run(&[("x".into(), x.clone())]).unwrap();
    let want = host::reference::eval(&g, &[("x".into(), x.clone())]).unwrap();
    assert_eq!((got[0].1.shape(), got[1].1.data().to_f64s().len()), (want[0].1.shape(), 1));
    assert!(s.allocation_count() > warm);
}

#[test]
fn non_zero_of_a_non_zero_result_is_a_second_stage() {
    let mut rng = Rng::new(0x2e73);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[5, 6]));
    let nz = g.op1(Op::NonZero, &[x]);
    let two = g.initializer("two", planner::ConstTensor::from_f32(&[], &[2.0]).unwrap());
    let as_f32 = g.cast(nz, DType::F32);
    let shifted = g.sub(as_f32, two);
    let again = g.op1(Op::NonZero, &[shifted]);
    g.output(again);
    g.output(nz);
    for density in [0.0, 0.3, 1.0] {
        let xs = sparse(&mut rng, &[5, 6], DType::F32, density);
        compare(&format!("NonZero of NonZero {density}"), g.clone(), &[("x".into(), xs)], 0.0);
    }
}

#[test]
fn empty_operands_match_the_reference() {
    // What a NonZero count of 0 makes of the ops downstream: empty rows, empty reductions, k = 0.
    let mut rng = Rng::new(0x2e74);
    let reduce = |keepdims| Op::ReduceSum(op::Reduce { keepdims, ..Default::default() });
    for (rows, k) in [(0, 4), (3, 0), (0, 0)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[rows, k]));
        let w: Vec<f32> = (0..k * 5).map(|i| i as f32).collect();
        let w = g.initializer("w", planner::ConstTensor::from_f32(&[k, 5], &w).unwrap());
        let b = g.initializer("b", planner::ConstTensor::from_f32(&[5], &[0.5; 5]).unwrap());
        let h = g.matmul(x, w);
        let hb = g.add(h, b);
        let r = g.relu(hb);
        let s = g.op1(reduce(false), &[r]);
        let t = g.op1(reduce(true), &[x]);
        let sm = g.softmax(x, -1);
        for v in [r, s, t, sm] {
            g.output(v);
        }
        let xs = rng.tensor(&[rows, k], -1.0, 1.0);
        compare(&format!("empty operands {rows}x{k}"), g, &[("x".into(), xs)], 1e-6);
    }
}

#[test]
fn top_k_matches_the_reference() {
    let mut rng = Rng::new(0x70b4);
    let mut cases: Vec<(Vec<usize>, i64, DType)> = Vec::new();
    for rank in 1..=3 {
        for _ in 0..5 {
            let shape = shape_of(&mut rng, rank, &[1, 2, 5, 17, 64, 130]);
            let axis = (rng.next_u64() % rank as u64) as i64
                - if rng.next_u64().is_multiple_of(2) { rank as i64 } else { 0 };
            cases.push((shape, axis, pick(&mut rng, &[DType::F32, DType::I32, DType::I64])));
        }
    }
    // A kNN-sized problem and the longest row the kernel sorts.
    cases.push((vec![128, 128], -1, DType::F32));
    cases.push((vec![2, 4096], 1, DType::F32));
    cases.push((vec![3, 2048], 1, DType::I64));
    for (shape, axis, dtype) in cases {
        let a = axis.rem_euclid(shape.len() as i64) as usize;
        let k = 1 + (rng.next_u64() % shape[a] as u64) as i64;
        let largest = rng.next_u64().is_multiple_of(2);
        let mut g = Graph::new();
        let x = g.input("x", dtype, known(&shape));
        let kv = g.const_i64("k", &[1], &[k]);
        let top = op::TopK { axis, largest, sorted: true, k: None };
        let outs = g.push(Op::TopK(top), &[x, kv], 2);
        g.output(outs[0]);
        g.output(outs[1]);
        let n: usize = shape.iter().product();
        // Coarse values (ties), and for f32 also -0.0, NaN and infinities.
        let xs = if dtype == DType::F32 {
            let odd = [f32::NAN, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY];
            let v: Vec<f32> = (0..n)
                .map(|_| match rng.next_u64() % 10 {
                    0 => pick(&mut rng, &odd),
                    _ => (rng.next_u64() % 9) as f32 - 4.0,
                })
                .collect();
            HostTensor::new(shape.clone(), v).unwrap()
        } else if dtype == DType::I32 {
            let v: Vec<i32> = (0..n).map(|_| pick(&mut rng, &[i32::MIN, -7, 0, 3, 3, i32::MAX])).collect();
            HostTensor::new(shape.clone(), v).unwrap()
        } else {
            // Values apart only in their high or low 32 bits, and the extremes.
            let odd = [i64::MIN, -(1 << 40), -1, 0, 1 << 40, (1 << 40) + 1, 3, 3, i64::MAX];
            let v: Vec<i64> = (0..n).map(|_| pick(&mut rng, &odd)).collect();
            HostTensor::new(shape.clone(), v).unwrap()
        };
        let plan = compare(
            &format!("TopK {shape:?} axis {axis} k {k} largest {largest} {dtype}"),
            g,
            &[("x".into(), xs)],
            0.0,
        );
        assert!(plan.contains("top_k"), "{plan}");
    }
}

/// NonMaxSuppression in stages: random boxes (corners in either order, or centre and size),
/// duplicate and disjoint boxes, ties of scores, every combination of the optional scalars; and a
/// gather of the kept boxes after it (the stage that waits for the count).
#[test]
fn non_max_suppression_matches_the_reference() {
    let mut rng = Rng::new(0x4e5);
    for (batch, classes, n) in [(1, 1, 6), (2, 3, 40), (1, 2, 700)] {
        for center in [false, true] {
            for given in 0..4usize {
                let mut g = Graph::new();
                let boxes = g.input("boxes", DType::F32, known(&[batch, n, 4]));
                let scores = g.input("scores", DType::F32, known(&[batch, classes, n]));
                let mut ins = vec![Some(boxes), Some(scores)];
                let mut inputs = Vec::new();
                // The scalars given: none, max only, max and IoU, all three.
                let names = ["max", "iou", "score"];
                let values = [
                    HostTensor::new(vec![1], vec![(n / 3) as i64]).unwrap(),
                    HostTensor::new(vec![1], vec![0.4f32]).unwrap(),
                    HostTensor::new(vec![1], vec![0.3f32]).unwrap(),
                ];
                for k in 0..given.min(3) {
                    let dtype = if k == 0 { DType::I64 } else { DType::F32 };
                    ins.push(Some(g.input(names[k], dtype, known(&[1]))));
                    inputs.push((names[k].to_string(), values[k].clone()));
                }
                let nms = op::NonMaxSuppression { center_point_box: center };
                let sel = g.push_opt(Op::NonMaxSuppression(nms), ins, 1)[0];
                // The kept boxes of batch 0: gather their indices (column 2) from boxes[0].
                let col = g.const_i64("col", &[], &[2]);
                let idx = g.gather(sel, col, 1);
                let zero = g.const_i64("zero", &[], &[0]);
                let first = g.gather(boxes, zero, 0);
                let kept = g.gather(first, idx, 0);
                g.output(sel);
                g.output(kept);
                let mut b = Vec::with_capacity(batch * n * 4);
                for i in 0..batch * n {
                    // Every fifth box repeats the one before it (IoU 1); coordinates on a coarse grid.
                    if i % 5 == 4 {
                        let prev: Vec<f32> = b[b.len() - 4..].to_vec();
                        b.extend(prev);
                        continue;
                    }
                    let v: Vec<f32> = (0..4).map(|_| (rng.next_u64() % 20) as f32 * 0.5).collect();
                    b.extend(if center { vec![v[0], v[1], v[2] + 0.5, v[3] + 0.5] } else { v });
                }
                let s: Vec<f32> =
                    (0..batch * classes * n).map(|_| (rng.next_u64() % 16) as f32 / 16.0).collect();
                inputs
                    .insert(0, ("scores".to_string(), HostTensor::new(vec![batch, classes, n], s).unwrap()));
                inputs.insert(0, ("boxes".to_string(), HostTensor::new(vec![batch, n, 4], b).unwrap()));
                compare(
                    &format!("nms {batch}x{classes}x{n} center {center} scalars {given}"),
                    g,
                    &inputs,
                    0.0,
                );
            }
        }
    }
}

/// Unique in stages: flattened and along an axis (slices compared lexicographically), sorted and
/// in order of first occurrence, f32 (with -0.0 and NaN), i32 and i64, some outputs omitted; and
/// an op after it on the distinct values.
#[test]
fn unique_matches_the_reference() {
    let mut rng = Rng::new(0x0417);
    for (shape, axis) in [
        (vec![12], None),
        (vec![3, 5], None),
        (vec![6, 2], Some(0)),
        (vec![2, 7, 3], Some(1)),
        (vec![4, 3], Some(-1)),
        (vec![1], None),
        (vec![700], None),
    ] {
        for dtype in [DType::F32, DType::I32, DType::I64] {
            for sorted in [true, false] {
                let omit = rng.next_u64().is_multiple_of(3);
                let mut g = Graph::new();
                let x = g.input("x", dtype, known(&shape));
                // Indices and counts omitted (no value at all) or given.
                let outs: Vec<Option<_>> = ["y", "indices", "inverse", "counts"]
                    .iter()
                    .enumerate()
                    .map(|(k, n)| (!(omit && k % 2 == 1)).then(|| g.add_value(*n, None)))
                    .collect();
                g.add_node(planner::Node {
                    name: "unique".into(),
                    op: Op::Unique(op::Unique { axis, sorted }),
                    inputs: vec![Some(x)],
                    outputs: outs.clone(),
                });
                let y = g.cast(outs[0].unwrap(), DType::F32);
                g.output(y);
                outs[1..].iter().flatten().for_each(|&v| g.output(v));
                let n: usize = shape.iter().product();
                let xs = match dtype {
                    DType::F32 => {
                        let odd = [f32::NAN, -0.0, 0.0, 1.5, -2.0, 1.5, 3.0];
                        HostTensor::new(
                            shape.clone(),
                            (0..n).map(|_| pick(&mut rng, &odd)).collect::<Vec<_>>(),
                        )
                    }
                    DType::I32 => HostTensor::new(
                        shape.clone(),
                        (0..n).map(|_| pick(&mut rng, &[-5i32, 0, 7, 7, i32::MAX])).collect::<Vec<_>>(),
                    ),
                    _ => HostTensor::new(
                        shape.clone(),
                        (0..n).map(|_| pick(&mut rng, &[i64::MIN, -1, 1 << 40, 3, 3])).collect::<Vec<_>>(),
                    ),
                }
                .unwrap();
                compare(
                    &format!("unique {shape:?} axis {axis:?} {dtype} sorted {sorted} omit {omit}"),
                    g,
                    &[("x".into(), xs)],
                    0.0,
                );
            }
        }
    }
}
