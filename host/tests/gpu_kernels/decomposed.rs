//! Operators with small kernels of their own (TensorScatter, Det) and those the planner runs as
//! simpler ones (the training optimizers, BatchNormalization in training mode, Binarizer,
//! ArrayFeatureExtractor, MaxUnpool, bool ReduceMax / ReduceMin, Pow of mixed types, MatMul with
//! batch dims broadcast both ways, Einsum), and the exporter patterns the planner lifts (unrolled
//! recurrences, spelled-out RMS norms), on the device against the CPU reference: random shapes
//! and attributes.

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{self, Op};
use planner::{DType, Graph, ValueId};

use crate::indexing::{compare, known, pick};

fn floats(rng: &mut Rng, shape: &[usize], lo: f32, hi: f32) -> HostTensor {
    rng.tensor(shape, lo, hi)
}

fn scalar_i64(v: i64) -> HostTensor {
    HostTensor::new(vec![], vec![v]).unwrap()
}

#[test]
fn det_matches_the_reference() {
    let mut rng = Rng::new(0xde7);
    for (batch, m) in [(vec![], 1), (vec![], 3), (vec![5], 2), (vec![2, 3], 4), (vec![7], 9), (vec![3], 16)] {
        let mut shape = batch.clone();
        shape.extend([m, m]);
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let y = g.op1(Op::Det, &[x]);
        g.output(y);
        // Diagonally weighted, so the determinants stay well scaled.
        let mut t = floats(&mut rng, &shape, -1.0, 1.0).to_const();
        let mut v: Vec<f32> = t.bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        for (k, e) in v.iter_mut().enumerate() {
            if (k % (m * m)) % (m + 1) == 0 {
                *e += 2.0;
            }
        }
        t.bytes = v.iter().flat_map(|e| e.to_le_bytes()).collect();
        let x = HostTensor::from_const(&t).unwrap();
        compare(&format!("det {shape:?}"), g, &[("x".into(), x)], 1e-4);
    }
}

#[test]
fn tensor_scatter_matches_the_reference() {
    let mut rng = Rng::new(0x75c);
    for (cache, ulen, axis, circular, dtype) in [
        (vec![2, 5, 3], 2, 1, false, DType::F32),
        (vec![3, 2, 8, 4], 3, -2, true, DType::F32),
        (vec![2, 6], 4, 1, true, DType::I64),
        (vec![1, 4, 4], 4, 1, false, DType::F32),
    ] {
        let rank = cache.len() as i64;
        let ax = if axis < 0 { axis + rank } else { axis } as usize;
        let mut upd = cache.clone();
        upd[ax] = ulen;
        let len = cache[ax];
        let mut g = Graph::new();
        let c = g.input("cache", dtype, known(&cache));
        let u = g.input("update", dtype, known(&upd));
        let w = g.input("w", DType::I64, known(&[cache[0]]));
        let y = g.op1(Op::TensorScatter(op::TensorScatter { axis, circular }), &[c, u, w]);
        g.output(y);
        // Linear offsets keep the update inside; circular ones may wrap.
        let offs: Vec<i64> = (0..cache[0])
            .map(|_| (rng.next_u64() % if circular { len as u64 } else { (len - ulen + 1) as u64 }) as i64)
            .collect();
        let tensor = |rng: &mut Rng, s: &[usize]| {
            if dtype == DType::F32 {
                floats(rng, s, -3.0, 3.0)
            } else {
                let n: usize = s.iter().product();
                HostTensor::new(s.to_vec(), (0..n).map(|k| k as i64 * 7 - 11).collect::<Vec<_>>()).unwrap()
            }
        };
        let inputs = [
            ("cache".to_string(), tensor(&mut rng, &cache)),
            ("update".to_string(), tensor(&mut rng, &upd)),
            ("w".to_string(), HostTensor::new(vec![cache[0]], offs.clone()).unwrap()),
        ];
        compare(&format!("tensor scatter {cache:?} {ulen} {axis} {circular} {offs:?}"), g, &inputs, 0.0);
    }
}

/// An optimizer node over `n` tensors of `shape`: inputs R, T, then `lists` lists.
fn optimizer(
    op: Op,
    lists: usize,
    n: usize,
    shape: &[usize],
    t: i64,
    rng: &mut Rng,
) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let r = g.input("r", DType::F32, known(&[]));
    let tv = g.input("t", DType::I64, known(&[]));
    let mut ins = vec![r, tv];
    let mut inputs = vec![
        ("r".to_string(), HostTensor::new(vec![], vec![0.1f32]).unwrap()),
        ("t".to_string(), scalar_i64(t)),
    ];
    for l in 0..lists {
        for k in 0..n {
            let name = format!("in{l}_{k}");
            ins.push(g.input(&name, DType::F32, known(shape)));
            // Second moments (Adam's H, Adagrad's H) stay non-negative.
            let lo = if l == lists - 1 && lists > 2 { 0.0 } else { -1.0 };
            inputs.push((name, floats(rng, shape, lo, 1.0)));
        }
    }
    let outs = g.push(op, &ins, n * (lists - 1));
    outs.iter().for_each(|&o| g.output(o));
    (g, inputs)
}

#[test]
fn training_optimizers_match_the_reference() {
    let mut rng = Rng::new(0x0971);
    for t in [0i64, 3] {
        for n in [1, 2] {
            // A scalar tensor too (the outputs keep its shape).
            let shape = if n == 1 && t == 3 { vec![] } else { vec![pick(&mut rng, &[1, 5, 300]), 2] };
            let adagrad = op::Adagrad { decay_factor: 0.1, epsilon: 1e-6, norm_coefficient: 0.01 };
            let (g, inputs) = optimizer(Op::Adagrad(adagrad), 3, n, &shape, t, &mut rng);
            compare(&format!("adagrad T {t} n {n}"), g, &inputs, 1e-5);
            let adam = op::Adam {
                epsilon: 1e-6,
                norm_coefficient: 0.02,
                norm_coefficient_post: 0.01,
                ..Default::default()
            };
            let (g, inputs) = optimizer(Op::Adam(adam), 4, n, &shape, t, &mut rng);
            compare(&format!("adam T {t} n {n}"), g, &inputs, 1e-5);
            for mode in [op::MomentumMode::Standard, op::MomentumMode::Nesterov] {
                let m = op::Momentum { alpha: 0.9, beta: 0.5, norm_coefficient: 0.01, mode };
                let (g, inputs) = optimizer(Op::Momentum(m), 3, n, &shape, t, &mut rng);
                compare(&format!("momentum {mode:?} T {t} n {n}"), g, &inputs, 1e-5);
            }
        }
    }
}

#[test]
fn batch_norm_training_binarizer_and_feature_extraction_match_the_reference() {
    let mut rng = Rng::new(0xb17);
    for shape in [vec![2, 3], vec![4, 5, 7], vec![2, 3, 4, 5]] {
        let c = shape[1];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let ps: Vec<ValueId> =
            ["scale", "bias", "mean", "var"].iter().map(|n| g.input(n, DType::F32, known(&[c]))).collect();
        let bn = op::BatchNormalization { epsilon: 1e-3, momentum: 0.8, training_mode: true };
        let outs = g.push(Op::BatchNormalization(bn), &[x, ps[0], ps[1], ps[2], ps[3]], 3);
        outs.iter().for_each(|&o| g.output(o));
        let mut inputs = vec![("x".to_string(), floats(&mut rng, &shape, -2.0, 2.0))];
        for n in ["scale", "bias", "mean", "var"] {
            inputs.push((n.to_string(), floats(&mut rng, &[c], 0.1, 1.0)));
        }
        compare(&format!("batch norm training {shape:?}"), g, &inputs, 1e-5);
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[4, 6]));
    let b = g.op1(Op::Binarizer(op::Binarizer { threshold: 0.25 }), &[x]);
    let idx = g.const_i64("idx", &[3], &[5, -1, 0]);
    let f = g.op1(Op::ArrayFeatureExtractor, &[x, idx]);
    g.output(b);
    g.output(f);
    compare("binarizer, feature extractor", g, &[("x".into(), floats(&mut rng, &[4, 6], -1.0, 1.0))], 0.0);
}

#[test]
fn max_unpool_of_max_pool_indices_matches_the_reference() {
    let mut rng = Rng::new(0x0a9);
    for (shape, kernel, strides, out) in [
        (vec![1, 2, 6, 6], vec![2, 2], vec![2, 2], None),
        (vec![2, 1, 7, 5], vec![3, 2], vec![2, 1], Some(vec![2, 1, 8, 6])),
    ] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let pool =
            op::MaxPool { kernel_shape: kernel.clone(), strides: strides.clone(), ..Default::default() };
        let pooled = g.push(Op::MaxPool(pool), &[x], 2);
        let unpool = op::MaxUnpool { kernel_shape: kernel, strides, pads: vec![] };
        let mut ins = vec![pooled[0], pooled[1]];
        if let Some(o) = &out {
            ins.push(g.const_i64("out", &[o.len()], &o.iter().map(|&d| d as i64).collect::<Vec<_>>()));
        }
        let y = g.op1(Op::MaxUnpool(unpool), &ins);
        g.output(y);
        compare(
            &format!("max unpool {shape:?} {out:?}"),
            g,
            &[("x".into(), floats(&mut rng, &shape, -1.0, 1.0))],
            0.0,
        );
    }
}

#[test]
fn bool_reductions_mixed_pow_and_two_way_broadcast_matmul_match_the_reference() {
    let mut rng = Rng::new(0x5b0);
    let mut g = Graph::new();
    let x = g.input("x", DType::Bool, known(&[3, 4]));
    let axes = g.const_i64("axes", &[1], &[1]);
    for op in [Op::ReduceMax(op::Reduce::default()), Op::ReduceMin(op::Reduce::default())] {
        let y = g.op1(op, &[x, axes]);
        g.output(y);
    }
    let bits: Vec<bool> = (0..12).map(|k| k % 3 != 0 || k == 4).collect();
    compare("bool reductions", g, &[("x".into(), HostTensor::new(vec![3, 4], bits).unwrap())], 0.0);

    let mut g = Graph::new();
    let f = g.input("f", DType::F32, known(&[5]));
    let i = g.input("i", DType::I64, known(&[5]));
    let a = g.op1(Op::Pow, &[f, i]);
    let b = g.op1(Op::Pow, &[i, f]);
    g.output(a);
    g.output(b);
    let inputs = [
        ("f".to_string(), HostTensor::new(vec![5], vec![1.5f32, -2.0, 0.5, 3.0, 2.0]).unwrap()),
        ("i".to_string(), HostTensor::new(vec![5], vec![2i64, 3, 0, 1, 5]).unwrap()),
    ];
    compare("mixed pow", g, &inputs, 1e-6);

    for (a, b) in [(vec![3, 1, 3, 4], vec![1, 2, 4, 2]), (vec![2, 1, 5, 8], vec![4, 8, 3])] {
        let mut g = Graph::new();
        let x = g.input("a", DType::F32, known(&a));
        let y = g.input("b", DType::F32, known(&b));
        let z = g.matmul(x, y);
        g.output(z);
        let inputs = [
            ("a".to_string(), floats(&mut rng, &a, -1.0, 1.0)),
            ("b".to_string(), floats(&mut rng, &b, -1.0, 1.0)),
        ];
        compare(&format!("matmul {a:?} x {b:?}"), g, &inputs, 1e-5);
    }
}

/// FlexAttention with grouped heads, a score modifier reading a captured bias and a probability
/// modifier (the modifiers inlined around `Q Kᵀ`, softmax and `· V`).
#[test]
fn flex_attention_matches_the_reference() {
    let mut rng = Rng::new(0xf1e);
    for (hq, hkv, l, s, d, mods) in [(2, 2, 5, 7, 8, false), (4, 2, 6, 6, 16, true), (6, 3, 3, 9, 8, true)] {
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, known(&[2, hq, l, d]));
        let k = g.input("k", DType::F32, known(&[2, hkv, s, d]));
        let v = g.input("v", DType::F32, known(&[2, hkv, s, d]));
        let bias = g.input("bias", DType::F32, known(&[l, s]));
        let (score_mod, prob_mod) = if mods {
            let mut sm = Graph::new();
            let x = sm.input("scores", DType::F32, known(&[2, hq, l, s]));
            let b = sm.add_value("bias", None);
            sm.captures.push(planner::Capture { inner: b, outer: bias });
            let y = sm.add(x, b);
            sm.output(y);
            let mut pm = Graph::new();
            let p = pm.input("probs", DType::F32, known(&[2, hq, l, s]));
            let half = pm.initializer("half", planner::ConstTensor::from_f32(&[], &[0.5]).unwrap());
            let y = pm.mul(p, half);
            pm.output(y);
            (Some(Box::new(sm)), Some(Box::new(pm)))
        } else {
            (None, None)
        };
        let fa = op::FlexAttention { scale: Some(0.3), score_mod, prob_mod };
        let y = g.op1(Op::FlexAttention(fa), &[q, k, v]);
        g.output(y);
        let inputs = [
            ("q".to_string(), floats(&mut rng, &[2, hq, l, d], -1.0, 1.0)),
            ("k".to_string(), floats(&mut rng, &[2, hkv, s, d], -1.0, 1.0)),
            ("v".to_string(), floats(&mut rng, &[2, hkv, s, d], -1.0, 1.0)),
            ("bias".to_string(), floats(&mut rng, &[l, s], -2.0, 2.0)),
        ];
        compare(&format!("flex attention {hq}/{hkv} {l}x{s} mods {mods}"), g, &inputs, 1e-5);
    }
}

/// Attention with `nonpad_kv_seqlen` and a mask narrower than the keys (both become an additive
/// mask), and Mod with `fmod` on f32 (mixed signs, zero divisors).
#[test]
fn padded_attention_and_float_fmod_match_the_reference() {
    let mut rng = Rng::new(0xad0);
    for (narrow, lens) in [(false, [3i64, 6]), (true, [6, 1]), (true, [0, 4])] {
        let (b, h, sq, skv, d) = (2, 3, 4, 6, 8);
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, known(&[b, h, sq, d]));
        let k = g.input("k", DType::F32, known(&[b, h, skv, d]));
        let v = g.input("v", DType::F32, known(&[b, h, skv, d]));
        let width = if narrow { 4 } else { skv };
        let m = g.input("m", DType::F32, known(&[b, h, sq, width]));
        let l = g.input("l", DType::I64, known(&[b]));
        let y = g.push_opt(
            Op::Attention(Default::default()),
            vec![Some(q), Some(k), Some(v), Some(m), None, None, Some(l)],
            1,
        )[0];
        g.output(y);
        let inputs = [
            ("q".to_string(), floats(&mut rng, &[b, h, sq, d], -1.0, 1.0)),
            ("k".to_string(), floats(&mut rng, &[b, h, skv, d], -1.0, 1.0)),
            ("v".to_string(), floats(&mut rng, &[b, h, skv, d], -1.0, 1.0)),
            ("m".to_string(), floats(&mut rng, &[b, h, sq, width], -1.0, 0.0)),
            ("l".to_string(), HostTensor::new(vec![b], lens.to_vec()).unwrap()),
        ];
        compare(&format!("padded attention narrow {narrow} lens {lens:?}"), g, &inputs, 1e-5);
    }
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, known(&[8]));
    let bb = g.input("b", DType::F32, known(&[8]));
    let y = g.op1(Op::Mod(op::Mod { fmod: true }), &[a, bb]);
    g.output(y);
    let inputs = [
        (
            "a".to_string(),
            HostTensor::new(vec![8], vec![-4.3f32, 7.2, 5.0, 4.3, -7.2, 8.0, 1e30, 3.0]).unwrap(),
        ),
        (
            "b".to_string(),
            HostTensor::new(vec![8], vec![2.1f32, -3.4, 8.0, -2.1, 3.4, 5.0, 7.0, 0.0]).unwrap(),
        ),
    ];
    compare("fmod", g, &inputs, 0.0);
}

/// A random forest of full depth-3 trees (every comparison mode, membership sets, NaN features
/// that some nodes send to their true child) over several targets, each aggregate.
#[test]
fn tree_ensemble_matches_the_reference() {
    let mut rng = Rng::new(0x7ee);
    for aggregate in
        [op::TreeAggregate::Sum, op::TreeAggregate::Average, op::TreeAggregate::Min, op::TreeAggregate::Max]
    {
        let (trees, features, targets, rows) = (5, 4, 3, 37);
        let mut t = op::TreeEnsemble { n_targets: targets, aggregate, ..Default::default() };
        for tree in 0..trees {
            // Branch nodes 0..7 of this tree: node k's children are 2k+1, 2k+2 (leaves past 6).
            let base = t.nodes_modes.len();
            t.tree_roots.push(base);
            for k in 0..7usize {
                let mode = (rng.next_u64() % 7) as u8;
                t.nodes_modes.push(mode);
                t.nodes_featureids.push((rng.next_u64() % features as u64) as usize);
                t.nodes_splits.push(((rng.next_u64() % 9) as f64 - 4.0) / 2.0);
                t.members.push(if mode == 6 { vec![-1.0, 0.5, 1.5] } else { Vec::new() });
                t.nodes_missing_value_tracks_true.push(rng.next_u64().is_multiple_of(2));
                let leaf_child = |c: usize| c >= 7;
                let (l, r) = (2 * k + 1, 2 * k + 2);
                let leaves_before = tree * 8;
                let id = |c: usize| if leaf_child(c) { leaves_before + c - 7 } else { base + c };
                t.nodes_truenodeids.push(id(l));
                t.nodes_trueleafs.push(leaf_child(l));
                t.nodes_falsenodeids.push(id(r));
                t.nodes_falseleafs.push(leaf_child(r));
            }
            for _ in 0..8 {
                t.leaf_targetids.push((rng.next_u64() % targets as u64) as usize);
                t.leaf_weights.push(rng.uniform(-2.0, 2.0) as f64);
            }
        }
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[rows, features]));
        let y = g.op1(Op::TreeEnsemble(t), &[x]);
        g.output(y);
        let v: Vec<f32> = (0..rows * features)
            .map(|_| match rng.next_u64() % 10 {
                0 => f32::NAN,
                1 => 0.5,
                _ => ((rng.next_u64() % 17) as f32 - 8.0) / 4.0,
            })
            .collect();
        let inputs = [("x".to_string(), HostTensor::new(vec![rows, features], v).unwrap())];
        compare(&format!("tree ensemble {aggregate:?}"), g, &inputs, 1e-6);
    }
}

#[test]
fn einsum_runs_as_batched_matmuls_on_the_device() {
    // Einsum has no kernel of its own: the planner runs it as the MatMuls, reductions and
    // transposes it reduces to (Mamba2's chunked-scan contractions among them).
    let mut rng = Rng::new(0xe175);
    let cases: &[(&str, &[&[usize]])] = &[
        ("bij,bjk->bik", &[&[3, 40, 33], &[3, 33, 20]]),
        ("bhld,bhmd->bhlm", &[&[2, 4, 16, 64], &[2, 4, 16, 64]]),
        ("bclhn,bcshn->bclhs", &[&[2, 4, 16, 2, 64], &[2, 4, 16, 2, 64]]),
        ("bcshn,bcshp->bchpn", &[&[2, 4, 16, 2, 64], &[2, 4, 16, 2, 32]]),
        ("...ij,...jk->...ik", &[&[1, 5, 8], &[3, 8, 6]]),
        ("abc,cd,de->abe", &[&[2, 3, 40], &[40, 5], &[5, 6]]),
        ("i,j->ij", &[&[30], &[17]]),
        ("bi,bi->b", &[&[50, 128], &[50, 128]]),
    ];
    for (equation, shapes) in cases {
        let mut g = Graph::new();
        let mut feeds = Vec::new();
        let ins: Vec<ValueId> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = format!("x{i}");
                feeds.push((name.clone(), floats(&mut rng, s, -1.0, 1.0)));
                g.input(&name, DType::F32, known(s))
            })
            .collect();
        let y = g.op1(Op::Einsum(op::Einsum { equation: (*equation).into() }), &ins);
        g.output(y);
        let plan = compare(equation, g, &feeds, 1e-4);
        assert!(plan.contains("gemm") || plan.contains("gemv"), "{equation}: no GEMM in\n{plan}");
    }
}

/// An einsum of computed operands reads them through the strides of its decomposition's
/// transposes (two batch levels where the heads sit inside the rows, a transpose then a reshape
/// that merges dims) and writes its result through the transpose that reads it: Mamba2's
/// contractions and attention's, with no transpose step, match the reference; batch dims that
/// do not collapse to two levels keep their transposes and match too.
#[test]
fn einsum_gemms_walk_transposed_operands_and_results() {
    let mut rng = Rng::new(0xe176);
    let cases: &[(&str, &[&[usize]], bool)] = &[
        ("bclhn,bcshn->bclsh", &[&[2, 4, 64, 8, 64], &[2, 4, 64, 8, 64]], true),
        ("bclsh,bcshp->bclhp", &[&[2, 4, 64, 64, 8], &[2, 4, 64, 8, 64]], true),
        ("bclhn,bclhp->bchpn", &[&[2, 4, 64, 8, 64], &[2, 4, 64, 8, 64]], true),
        ("bzch,bzhpn->bchpn", &[&[2, 5, 5, 8], &[2, 5, 8, 64, 64]], true),
        ("bclhn,bchpn->bclhp", &[&[2, 4, 64, 8, 64], &[2, 4, 8, 64, 64]], true),
        ("bhld,bhmd->bhlm", &[&[2, 4, 33, 64], &[2, 4, 17, 64]], true),
        // Three batch dims interleaved with the rows: not two levels.
        ("abcij,cbajk->acbik", &[&[2, 3, 5, 7, 9], &[5, 3, 2, 9, 6]], false),
    ];
    for &(equation, shapes, folds) in cases {
        let mut g = Graph::new();
        let mut feeds = Vec::new();
        let ins: Vec<ValueId> = (shapes.iter().enumerate())
            .map(|(i, s)| {
                let name = format!("x{i}");
                feeds.push((name.clone(), floats(&mut rng, s, -1.0, 1.0)));
                let x = g.input(&name, DType::F32, known(s));
                g.op1(Op::Neg, &[x])
            })
            .collect();
        let y = g.op1(Op::Einsum(op::Einsum { equation: equation.into() }), &ins);
        let y = g.op1(Op::Neg, &[y]);
        g.output(y);
        let plan = compare(equation, g, &feeds, 1e-4);
        assert!(plan.contains("gemm"), "{equation}: no GEMM in\n{plan}");
        assert_eq!(!plan.contains("transpose_f32"), folds, "{equation}:\n{plan}");
    }
}

/// `cat([x[src], x[dst]], -1)` of computed rows runs as one `gather_nd_b16` of the stacked
/// indices (no Concat of gathered rows) and matches the reference.
#[test]
fn concatenated_gathers_run_as_one_vector_gather() {
    let mut rng = Rng::new(0x9a8);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[300, 32]));
    let x = g.op1(Op::Neg, &[x]);
    let ids: Vec<ValueId> =
        (0..2).map(|j| g.input(&format!("i{j}"), DType::I64, known(&[1000, 1]))).collect();
    let parts: Vec<ValueId> =
        ids.iter().map(|&i| g.op1(Op::GatherNd(op::GatherNd::default()), &[x, i])).collect();
    let y = g.op1(Op::Concat(op::Concat { axis: -1 }), &parts);
    g.output(y);
    let index = |rng: &mut Rng| {
        let v: Vec<i64> = (0..1000).map(|_| (rng.next_u64() % 600) as i64 - 300).collect();
        HostTensor::new(vec![1000, 1], v).unwrap()
    };
    let feeds = vec![
        ("x".to_string(), floats(&mut rng, &[300, 32], -1.0, 1.0)),
        ("i0".into(), index(&mut rng)),
        ("i1".into(), index(&mut rng)),
    ];
    let plan = compare("concatenated gathers", g, &feeds, 0.0);
    assert_eq!(plan.matches("gather_nd_b16").count(), 1, "{plan}");
}

/// Unrolled recurrences (the ScatterElements chain of torch.export, the stacked Concat; axes 1
/// and 2; from zeros and from an initial state; lengths of one chunk, several windows) run as one
/// chunked `rglru_f32` scan, with no step left.
#[test]
fn unrolled_recurrences_run_as_one_scan_and_match_the_reference() {
    use host::selftest::{Writeback, random_inputs, unrolled_scan_graph};
    let mut rng = Rng::new(0x5ca7);
    let cases: &[(&[usize], usize, Writeback, bool, bool)] = &[
        (&[2, 6, 33], 1, Writeback::Scatter, false, false),
        (&[1, 300, 64], 1, Writeback::Scatter, false, false),
        (&[2, 140, 40], 1, Writeback::Concat, true, true),
        (&[3, 2, 17, 5], 2, Writeback::Scatter, true, false),
    ];
    for &(dims, axis, wb, h0, swapped) in cases {
        let what = format!("{dims:?} axis {axis} {wb:?} h0 {h0} swapped {swapped}");
        let g = unrolled_scan_graph(dims, axis, wb, h0, swapped);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let plan = compare(&what, g, &feeds, 1e-4);
        assert!(plan.contains("lifted") && plan.contains("rglru_f32"), "{what}: {plan}");
        assert!(!plan.contains("scatter_elements") && !plan.contains("gather"), "{what}: steps left: {plan}");
    }
}

/// transformers' Mamba selective scan as its slow path exports it unrolled (the state update
/// and a readout MatMul per step, stacked) runs as one `rglru_f32` scan and one batched readout,
/// at its sizes (d 512, state 16) and at odd ones.
#[test]
fn an_unrolled_selective_scan_runs_as_one_scan_and_a_batched_readout() {
    use host::selftest::{random_inputs, unrolled_selective_scan_graph};
    let mut rng = Rng::new(0x3a3ba);
    for (b, d, l, n) in [(1, 512, 64, 16), (2, 7, 33, 3)] {
        let what = format!("b {b} d {d} l {l} n {n}");
        let g = unrolled_selective_scan_graph(b, d, l, n);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let plan = compare(&what, g, &feeds, 1e-4);
        assert!(plan.contains("rglru_f32") && plan.contains("rolled"), "{what}: {plan}");
        let steps = plan.lines().filter(|l| l.starts_with('#')).count();
        assert!(steps <= 8, "{what}: {steps} steps: {plan}");
    }
}

/// transformers' Mamba recurrence with its operands' products (`exp(A·Δ)`, `Δ·B·u`) spelled out
/// runs as one selective-scan launch (chunked over time: state sizes up to 32), at the export's
/// sizes (d 512, state 16) and odd ones.
#[test]
fn transformers_mamba_recurrence_runs_as_one_selective_scan() {
    use host::selftest::{mamba_inputs, unrolled_mamba_graph};
    let mut rng = Rng::new(0x3a3bb);
    for (b, d, l, n, swapped) in [(1, 512, 64, 16, false), (2, 7, 33, 3, true)] {
        let what = format!("b {b} d {d} l {l} n {n}");
        let g = unrolled_mamba_graph(b, d, l, n, swapped);
        let feeds = mamba_inputs(&mut rng, &g);
        let plan = compare(&what, g, &feeds, 1e-4);
        assert_eq!(plan.matches(" selective_scan_chunked_f32 ").count(), 1, "{what}: {plan}");
        assert!(!plan.contains("rglru_f32") && !plan.contains("gemm"), "{what}: {plan}");
    }
}

/// transformers' RWKV-4 WKV loop as its export unrolls it (three carried states, a running
/// maximum among them) runs as one `wkv4_f32` launch, at the export's sizes (d 256, sequence 64)
/// and at odd ones, with both write-backs, both export spellings and the states returned or not;
/// the same loop with another
/// function per step as one `scan_program_f32` launch.
#[test]
fn transformers_rwkv_wkv_loop_runs_as_one_kernel() {
    use host::selftest::{random_inputs, unrolled_wkv_graph};
    let mut rng = Rng::new(0x3c4f);
    for (b, l, d, scatter, views, state) in [
        (1, 64, 256, true, false, false),
        (8, 64, 256, true, true, true),
        (3, 17, 5, false, true, true),
        (2, 3, 300, true, false, false),
    ] {
        let what = format!("b {b} l {l} d {d} scatter {scatter} views {views} state {state}");
        let g = unrolled_wkv_graph(b, l, d, scatter, views, state);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let plan = compare(&what, g, &feeds, 1e-5);
        assert_eq!(plan.matches("wkv4_f32").count(), 1, "{what}: {plan}");
        let steps = plan.lines().filter(|l| l.starts_with('#')).count();
        assert!(steps <= 4, "{what}: {steps} steps: {plan}");
        // The same loop with every exponential a sigmoid: not WKV, the program kernel runs it.
        let mut g = unrolled_wkv_graph(b, l, d, scatter, views, state);
        for n in &mut g.nodes {
            if matches!(n.op, Op::Exp) {
                n.op = Op::Sigmoid;
            }
        }
        let plan = compare(&format!("{what} sigmoid"), g, &feeds, 1e-5);
        assert_eq!(plan.matches("scan_program_f32").count(), 1, "{what}: {plan}");
    }
}

/// Unrolled maps (views, broadcasting, a shared-index Gather, Softmax per step) run as one
/// computation over the axis.
#[test]
fn unrolled_maps_run_rolled_up_and_match_the_reference() {
    use host::selftest::{random_inputs, unrolled_map_graph};
    let mut rng = Rng::new(0x7011);
    for (b, l, m, negative) in [(2, 50, 33, false), (1, 3, 8, true)] {
        let what = format!("b {b} l {l} m {m} negative {negative}");
        let g = unrolled_map_graph(b, l, m, negative);
        let feeds = random_inputs(&mut rng, &g, -1.0, 1.0);
        let plan = compare(&what, g, &feeds, 1e-5);
        assert_eq!(plan.matches("Softmax").count(), 1, "{what}: {plan}");
    }
}

/// Spelled-out RMS normalizations run as the `rms_norm_f32` row kernel.
#[test]
fn spelled_out_rms_norms_run_as_the_row_kernel_and_match_the_reference() {
    use host::selftest::{RmsSpelling, random_inputs, spelled_rms_norm_graph};
    let mut rng = Rng::new(0x4a5);
    for (spelling, dims) in [
        (RmsSpelling::ReciprocalSqrt, &[2, 128, 256][..]),
        (RmsSpelling::PowHalf, &[3, 1000][..]),
        (RmsSpelling::DivSqrt, &[4, 9][..]),
        (RmsSpelling::DivOne, &[2, 3, 4, 6][..]),
    ] {
        let what = format!("{spelling:?} {dims:?}");
        let g = spelled_rms_norm_graph(dims, spelling);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let plan = compare(&what, g, &feeds, 1e-5);
        assert!(plan.contains("rms_norm_f32") && !plan.contains("reduce_f32"), "{what}: {plan}");
    }
    // Grouped (`MambaRMSNormGated`'s views): one group takes its weight as the kernel's scale.
    for (b, l, d, groups) in [(1, 256, 512, 1), (2, 3, 8, 2)] {
        let what = format!("grouped b {b} l {l} d {d} groups {groups}");
        let g = host::selftest::grouped_rms_norm_graph(b, l, d, groups);
        let feeds = random_inputs(&mut rng, &g, -2.0, 2.0);
        let plan = compare(&what, g, &feeds, 1e-5);
        assert_eq!(plan.contains("mul_f32"), groups > 1, "{what}: {plan}");
    }
}

/// f16 / bf16 graphs run widened to f32 (`selftest::narrow_float_block`): the device's output
/// (cast down to bf16) matches the reference's native f16 / bf16 arithmetic within its rounding.
#[test]
fn f16_and_bf16_blocks_run_widened_and_match_the_reference() {
    let mut rng = Rng::new(0xf16);
    for (dtype, tol) in [(DType::F16, 4e-3), (DType::BF16, 3e-2)] {
        let (g, feeds) = host::selftest::narrow_float_block(dtype, &mut rng);
        let want = host::reference::eval(&g, &feeds).unwrap();
        let mut s = host::Session::new(crate::ctx(), g, host::SessionOptions::default()).unwrap();
        let got = s.run(&feeds).unwrap();
        assert_eq!((got[0].1.dtype(), got[0].1.shape()), (DType::BF16, want[0].1.shape()), "{dtype}");
        for (i, (a, b)) in got[0].1.data().to_f64s().iter().zip(want[0].1.data().to_f64s()).enumerate() {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{dtype}[{i}]: gpu {a}, reference {b}");
        }
    }
}

/// QDQ (`selftest::qdq_matmul_graph`) runs as the f32 arithmetic that defines it: the int8 output
/// equals the reference's, the f32 one agrees within f32 rounding.
#[test]
fn qdq_graphs_run_as_their_arithmetic_and_match_the_reference() {
    let mut rng = Rng::new(0x9d9);
    let (g, feeds) = host::selftest::qdq_matmul_graph(&mut rng);
    compare("QDQ MatMul", g, &feeds, 1e-5);
}

/// QDQ MatMul and Gemm graphs as `onnxruntime.quantization` writes them (per-tensor activations
/// quantized and dequantized in pairs; per-column, per-tensor and per-output-channel transposed
/// weights), the products of integers scaled after (`quant::scale_out`): the quantized output
/// exactly as the reference computes it.
#[test]
fn qdq_matmul_and_gemm_match_the_reference() {
    let mut rng = Rng::new(0x9d9);
    let cases = [
        ("QDQ MatMul", host::selftest::qdq_matmul_graph(&mut rng)),
        ("QDQ Gemm", host::selftest::qdq_gemm_graph(&mut rng)),
        ("QDQ Gemm, per-channel transposed weight", host::selftest::qdq_gemm_per_channel_graph(&mut rng)),
        ("QDQ around views (pairs dropped)", host::selftest::qdq_views_graph(&mut rng)),
    ];
    for (what, (g, feeds)) in cases {
        compare(what, g, &feeds, 1e-6);
    }
}

/// A session does not fold a quantized weight's DequantizeLinear on the host (its constant
/// folding leaves it, as ONNX Runtime's does): the GEMM reads the weight's integers (the int8
/// weight, or its integers less the zero point as f32, which the planner may fold for a small
/// weight) and scales the product after. Folded by the session, the weights reached the device
/// dequantized and every QDQ GEMM multiplied rounded non-integers (GPT-2 int8: 3,028 of 65,536
/// outputs more than a quantum from ONNX Runtime; none since).
#[test]
fn qdq_weights_reach_the_gemm_as_integers() {
    let mut rng = Rng::new(0x9d8);
    let cases = [
        ("QDQ MatMul", host::selftest::qdq_matmul_graph(&mut rng)),
        ("QDQ Gemm", host::selftest::qdq_gemm_graph(&mut rng)),
        ("QDQ Gemm, per-channel transposed weight", host::selftest::qdq_gemm_per_channel_graph(&mut rng)),
    ];
    for (what, (g, feeds)) in cases {
        let mut s = host::Session::new(crate::ctx(), g, host::SessionOptions::default()).unwrap();
        s.run(&feeds).unwrap();
        let plan = s.last_plan().expect("one plan");
        // The weight matrix (8 x 4) as the plan holds it.
        let held: Vec<&planner::ConstTensor> = (plan.weights.iter())
            .filter_map(|v| plan.constants.get(v))
            .filter(|c| c.dims.iter().product::<usize>() == 32)
            .collect();
        assert!(!held.is_empty(), "{what}: no weight matrix in the plan:\n{plan}");
        for c in held {
            let integers = c.dtype == DType::I8
                || (c.dtype == DType::F32
                    && c.bytes.chunks(4).all(|b| f32::from_le_bytes(b.try_into().unwrap()).fract() == 0.0));
            assert!(
                integers,
                "{what}: a {} weight of non-integers (dequantized) in the plan:\n{plan}",
                c.dtype
            );
        }
    }
}

/// Weights of the coded types (int4 / uint4 / int2, float8, float4) and blocked 8-bit ones,
/// dequantized or cast to f32 (`selftest::coded_weight_graph`): held as their codes in uint8 on the
/// device and decoded by a table gather, the MatMul matches the reference.
#[test]
fn coded_and_blocked_weights_decode_on_the_device_and_match_the_reference() {
    let mut rng = Rng::new(0xc0df);
    for (dtype, block, cast) in host::selftest::CODED_WEIGHT_CASES {
        let (g, feeds) = host::selftest::coded_weight_graph(&mut rng, dtype, block, cast);
        let plan = compare(&format!("{dtype} block {block} cast {cast}"), g, &feeds, 1e-5);
        if matches!(dtype, DType::Coded(_)) {
            assert!(plan.contains("gather"), "{dtype}: decoded by a gather:\n{plan}");
        }
    }
}
