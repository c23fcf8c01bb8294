//! Whole graphs on the GPU through `Session`, against the CPU reference executor: GEMM variants
//! (GEMV and tiled paths, transposes, broadcast bias, batched MatMul), fused activations,
//! elementwise chains planned in place, copies; CUDA-graph replay against eager launches; no device
//! allocation once a binding is warm; unsupported ops reported all at once.

use host::selftest::Rng;
use host::{HostError, HostTensor, Session, SessionOptions};
use planner::op::{Gemm, Op};
use planner::{Binding, ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize]) -> ValueId {
    let n = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.uniform(-0.5, 0.5)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

fn gemm(g: &mut Graph, a: ValueId, b: ValueId, c: Option<ValueId>, attrs: Gemm) -> ValueId {
    let ins = vec![Some(a), Some(b), c];
    g.push_opt(Op::Gemm(attrs), ins, 1)[0]
}

/// `|got - want| <= 1e-5 * (|want| + 1)` elementwise (f32 accumulation of ~1000 terms of size <= 1
/// against the f64 reference), with shapes and dtypes equal.
fn assert_close(got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len());
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()));
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!((a - b).abs() <= 1e-5 * (b.abs() + 1.0), "{gn}[{i}]: gpu {a}, reference {b}");
        }
    }
}

fn mlp(rng: &mut Rng) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(64)]);
    let (w0, b0) = (weight(&mut g, rng, "w0", &[64, 256]), weight(&mut g, rng, "b0", &[256]));
    let (w1, b1) = (weight(&mut g, rng, "w1", &[256, 256]), weight(&mut g, rng, "b1", &[256]));
    // w2 stored transposed ([out, in]) as PyTorch exports it.
    let (w2, b2) = (weight(&mut g, rng, "w2", &[1, 256]), weight(&mut g, rng, "b2", &[1]));
    let h0 = gemm(&mut g, x, w0, Some(b0), Gemm::default());
    let a0 = g.relu(h0);
    let h1 = gemm(&mut g, a0, w1, Some(b1), Gemm::default());
    let a1 = g.op1(Op::Tanh, &[h1]);
    let h2 = gemm(&mut g, a1, w2, Some(b2), Gemm { trans_b: true, ..Gemm::default() });
    let y = g.sigmoid(h2);
    g.output(y);
    g
}

fn input(rng: &mut Rng, name: &str, shape: &[usize]) -> (String, HostTensor) {
    (name.to_owned(), rng.tensor(shape, -1.0, 1.0))
}

#[test]
fn an_mlp_matches_the_reference_at_several_batch_sizes() {
    let mut rng = Rng::new(0xa11ce);
    let g = mlp(&mut rng);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    for batch in [1, 3, 8, 9, 100, 1] {
        let inputs = vec![input(&mut rng, "x", &[batch, 64])];
        let want = host::reference::eval(&g, &inputs).unwrap();
        assert_close(&s.run(&inputs).unwrap(), &want);
    }
    let plan = s.last_plan().unwrap();
    let text = plan.to_string();
    // Batch 1 on Hopper: the three layers, activations fused, in one cluster launch.
    assert!(text.contains("MLP[Gemm+Relu, Gemm+Tanh, Gemm+Sigmoid]"), "{text}");
    assert_eq!(plan.steps.len(), 1, "one fused MLP launch:\n{text}");
}

#[test]
fn a_warm_binding_allocates_nothing_and_replay_matches_eager() {
    let mut rng = Rng::new(7);
    let g = mlp(&mut rng);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    let inputs = vec![input(&mut rng, "x", &[4, 64])];
    let first = s.run(&inputs).unwrap();
    let warm = s.allocation_count();
    for _ in 0..20 {
        assert_eq!(s.run(&inputs).unwrap(), first, "graph replay is deterministic");
    }
    assert_eq!(s.allocation_count(), warm, "steady-state runs must not allocate");
    let mut eager =
        Session::new(ctx(), g, SessionOptions { cuda_graph: false, ..SessionOptions::default() }).unwrap();
    assert_eq!(eager.run(&inputs).unwrap(), first, "eager launches give the same bits as the replay");
    let times = s.time_executions(10, true).unwrap();
    assert!(times.iter().all(|t| *t > 0.0));
}

/// `dump_steps` gives each step's value as the step left it: at batch 100 the MLP runs as its
/// unfused steps, the last step's value is the output (same bits as the run), and the first
/// layer's value is that layer's reference result within f32 GEMM rounding.
#[test]
fn dumped_steps_hold_each_steps_value() {
    let mut rng = Rng::new(0xd0);
    let g = mlp(&mut rng);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    let inputs = vec![input(&mut rng, "x", &[100, 64])];
    let out = s.run(&inputs).unwrap();
    let steps = s.last_plan().unwrap().steps.len();
    let dumped = s.dump_steps().unwrap();
    assert!(dumped.len() >= steps, "{} values for {steps} steps", dumped.len());
    assert!(dumped.windows(2).all(|w| w[0].0 <= w[1].0), "in step order");
    let (last_step, _, last) = dumped.last().unwrap();
    assert_eq!(*last_step, steps - 1);
    assert_eq!(last, &out[0].1, "the last step's value is the output");
    // The first layer alone on the reference: x W0 + b0, then Relu (fused into the GEMM).
    let mut first = Graph::new();
    let x = first.input("x", DType::F32, vec![Dim::Known(100), Dim::Known(64)]);
    let (w0, b0) = (g.initializers[&ValueId(1)].clone(), g.initializers[&ValueId(2)].clone());
    let (w0, b0) = (first.initializer("w0", w0), first.initializer("b0", b0));
    let h = gemm(&mut first, x, w0, Some(b0), Gemm::default());
    let a = first.relu(h);
    first.output(a);
    let want = host::reference::eval(&first, &inputs).unwrap();
    let got = dumped.iter().find(|(_, _, t)| t.shape() == [100, 256]).expect("the first layer's value");
    assert_close(&[(want[0].0.clone(), got.2.clone())], &want);
    // The run's result is unchanged by the dump.
    assert_eq!(s.run(&inputs).unwrap(), out);
}

/// `dump_steps` dumps each named value whole and in its own layout: a GEMM result written through
/// the transpose that reads it (a rotary table: `inv_freq @ positions`, transposed, concatenated
/// with itself) is dumped as that transpose's value, and the Concat, one copy step per part, after
/// its last part (session 42: both showed as wrong values beside ONNX Runtime's).
#[test]
fn dumped_values_are_whole_and_in_their_own_layout() {
    use planner::op::{Concat, Transpose};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(1), Dim::Known(1), Dim::Known(16)]);
    let h = g.input("h", DType::F32, vec![Dim::Known(1), Dim::Known(16), Dim::Known(8)]);
    let freqs = [1.0f32, 0.1, 0.01, 0.001];
    let f = g.initializer("inv_freq", ConstTensor::from_f32(&[1, 4, 1], &freqs).unwrap());
    let x = g.relu(x);
    let y = g.op1(Op::MatMul, &[f, x]);
    let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1]) }), &[y]);
    let c = g.op1(Op::Concat(Concat { axis: -1 }), &[t, t]);
    let z = g.op1(Op::Mul, &[h, c]);
    g.output(z);
    let (t_name, c_name) = (g.value_name(t), g.value_name(c));
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let positions: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let inputs = vec![
        ("x".to_string(), HostTensor::new(vec![1, 1, 16], positions).unwrap()),
        ("h".to_string(), HostTensor::new(vec![1, 16, 8], vec![1f32; 128]).unwrap()),
    ];
    s.run(&inputs).unwrap();
    assert!(!s.last_plan().unwrap().stored_as.is_empty(), "the GEMM writes through the transpose");
    let dumped = s.dump_steps().unwrap();
    let values = |name: &str| -> Vec<Vec<f64>> {
        dumped.iter().filter(|(_, n, _)| n == name).map(|(_, _, t)| t.data().to_f64s()).collect()
    };
    // t[0, j, i] = inv_freq[i] * j; the Concat repeats each row of t.
    let want_t: Vec<f64> = (0..16).flat_map(|j| freqs.map(|f| (f * j as f32) as f64)).collect();
    let want_c: Vec<f64> = want_t.chunks(4).flat_map(|r| r.iter().chain(r).copied()).collect();
    let close = |got: &[f64], want: &[f64]| {
        got.len() == want.len() && got.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-6 * (b.abs() + 1.0))
    };
    let (t_dumps, c_dumps) = (values(&t_name), values(&c_name));
    assert_eq!((t_dumps.len(), c_dumps.len()), (1, 1), "each value dumped once");
    assert!(close(&t_dumps[0], &want_t), "{:?}", t_dumps[0]);
    assert!(close(&c_dumps[0], &want_c), "{:?}", c_dumps[0]);
}

#[test]
fn arena_growth_drops_the_graphs_that_point_into_the_old_arena() {
    let mut rng = Rng::new(0xa7e4a);
    let g = mlp(&mut rng);
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let small = vec![input(&mut rng, "x", &[1, 64])];
    let first = s.run(&small).unwrap();
    assert_eq!(s.captured_graphs(), 1);
    // Batch 100 needs a larger arena; batch 1's graph holds the freed arena's addresses, and its
    // replay would write into memory the pool may have handed to another buffer.
    s.run(&[input(&mut rng, "x", &[100, 64])]).unwrap();
    assert_eq!(s.captured_graphs(), 1, "only the batch-100 graph outlives the arena growth");
    // Batch 1 again: launched into the new arena and recaptured, same bits.
    assert_eq!(s.run(&small).unwrap(), first);
    assert_eq!(s.captured_graphs(), 2);
    // Shrinking gives batch 100's arena back (batch 1 ran last); batch 1 still gives the same bits
    // without allocating again.
    let before = s.device_bytes();
    let freed = s.shrink().unwrap();
    assert!(freed > 0 && s.device_bytes() == before - freed && s.captured_graphs() == 0);
    let warm = s.allocation_count();
    assert_eq!(s.run(&small).unwrap(), first);
    assert_eq!(s.allocation_count(), warm);
}

#[test]
fn gemm_and_matmul_variants_match_the_reference() {
    let mut rng = Rng::new(99);
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, vec![Dim::Known(70), Dim::Known(33)]);
    let at = g.input("at", DType::F32, vec![Dim::Known(33), Dim::Known(70)]);
    let bt = weight(&mut g, &mut rng, "bt", &[65, 33]);
    let c_row = weight(&mut g, &mut rng, "c_row", &[70, 1]);
    let y1 =
        gemm(&mut g, a, bt, Some(c_row), Gemm { trans_b: true, alpha: 0.5, beta: 2.0, ..Gemm::default() });
    let y2 = gemm(&mut g, at, bt, None, Gemm { trans_a: true, trans_b: true, ..Gemm::default() });
    let q = g.input("q", DType::F32, vec![Dim::Known(3), Dim::Known(5), Dim::Known(16), Dim::Known(24)]);
    let k = g.input("k", DType::F32, vec![Dim::Known(3), Dim::Known(5), Dim::Known(24), Dim::Known(9)]);
    let w = weight(&mut g, &mut rng, "w", &[24, 130]);
    let y3 = g.matmul(q, k);
    let y4 = g.matmul(q, w);
    let sum = g.add(y1, y2);
    let y5 = g.op1(Op::Exp, &[sum]);
    for y in [y3, y4, y5] {
        g.output(y);
    }
    let inputs = vec![
        input(&mut rng, "a", &[70, 33]),
        input(&mut rng, "at", &[33, 70]),
        input(&mut rng, "q", &[3, 5, 16, 24]),
        input(&mut rng, "k", &[3, 5, 24, 9]),
    ];
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    assert_close(&s.run(&inputs).unwrap(), &want);
}

#[test]
fn elementwise_chains_run_in_place_and_reshapes_copy() {
    let mut rng = Rng::new(5);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Known(1000)]);
    let bias = weight(&mut g, &mut rng, "bias", &[1000]);
    let a = g.add(x, bias);
    let b = g.relu(a);
    let c = g.sigmoid(b);
    let d = g.mul(c, x);
    let shape = g.const_i64("shape", &[2], &[-1, 500]);
    let e = g.reshape(d, shape);
    let f = g.op1(Op::Neg, &[e]);
    g.output(f);
    // Unfused, so that the chain is several kernels writing over their inputs (fused, it is one
    // elementwise program; `programs.rs` tests that).
    let options = SessionOptions { fuse_elementwise: false, ..SessionOptions::default() };
    let mut s = Session::new(ctx(), g.clone(), options).unwrap();
    for n in [1, 7] {
        let inputs = vec![input(&mut rng, "x", &[n, 1000])];
        let want = host::reference::eval(&g, &inputs).unwrap();
        assert_close(&s.run(&inputs).unwrap(), &want);
    }
    let plan = s.last_plan().unwrap();
    assert!(plan.memory.stats.in_place_count >= 2, "{:?}", plan.memory.stats);
    // Fused: the chain up to the reshape is one program, the reshape a view, Neg its own launch
    // (a view's reader is not fused across the reshape).
    let mut fused = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    let inputs = vec![input(&mut rng, "x", &[3, 1000])];
    assert_close(&fused.run(&inputs).unwrap(), &host::reference::eval(&g, &inputs).unwrap());
    let text = fused.last_plan().unwrap().to_string();
    assert!(text.contains("[4 ops] ew_program_f32") && !text.contains("copy"), "{text}");
}

#[test]
fn a_reshaped_input_is_read_in_place() {
    // The reshape of a graph input is the input's buffer (no copy step); the unfused Relu after
    // it, which could run in place, writes a buffer of its own, since the view is read again.
    let mut rng = Rng::new(6);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4usize, 250]);
    let shape = g.const_i64("shape", &[1], &[1000]);
    let v = g.reshape(x, shape);
    let r = g.relu(v);
    let n = g.op1(Op::Neg, &[r]);
    let y = g.add(n, v);
    g.output(y);
    let options = SessionOptions { fuse_elementwise: false, ..SessionOptions::default() };
    let mut s = Session::new(ctx(), g.clone(), options).unwrap();
    for _ in 0..3 {
        let inputs = vec![input(&mut rng, "x", &[4, 250])];
        let want = host::reference::eval(&g, &inputs).unwrap();
        assert_close(&s.run(&inputs).unwrap(), &want);
    }
    let text = s.last_plan().unwrap().to_string();
    assert!(!text.contains("copy") && text.contains(&format!("{v}@input")), "{text}");
}

#[test]
fn bad_inputs_and_unsupported_ops_are_clear_errors() {
    let mut rng = Rng::new(1);
    let g = mlp(&mut rng);
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let e = s.run(&[input(&mut rng, "x", &[2, 63])]).unwrap_err();
    assert!(matches!(&e, HostError::Input { name, .. } if name == "x"), "{e}");
    let e = s.run(&[input(&mut rng, "y", &[2, 64])]).unwrap_err();
    assert!(e.to_string().contains("`x`"), "{e}");
    let e = s.run(&[("x".into(), HostTensor::new(vec![1, 64], vec![0i64; 64]).unwrap())]).unwrap_err();
    assert!(e.to_string().contains("int64") || e.to_string().contains("I64"), "{e}");

    let mut g = Graph::new();
    // f64 operands, which neither kernel takes.
    let x = g.input("x", DType::F64, vec![Dim::Known(4), Dim::Known(8), Dim::Known(8)]);
    let sm = g.op1(Op::Mod(planner::op::Mod { fmod: true }), &[x, x]);
    let t = g.op1(Op::Det, &[sm]);
    g.output(t);
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let x = HostTensor::new(vec![4, 8, 8], vec![1.5f64; 256]).unwrap();
    let e = s.run(&[("x".into(), x)]).unwrap_err().to_string();
    assert!(e.contains("2 node(s)") && e.contains("Mod") && e.contains("Det"), "{e}");
    let _ = Binding::new();
}

#[test]
fn split_k_gemms_match_the_reference() {
    // Few output tiles and a long k: the planner splits k into a workspace and reduces it in a
    // second launch (the epilogue — alpha, beta C, activation — runs in the reduction).
    let mut rng = Rng::new(0x5917);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(128), Dim::Known(1024)]);
    let w = weight(&mut g, &mut rng, "w", &[1024, 256]);
    let bias = weight(&mut g, &mut rng, "bias", &[256]);
    let y1 = gemm(&mut g, x, w, Some(bias), Gemm { alpha: 0.5, beta: 2.0, ..Gemm::default() });
    let r = g.relu(y1);
    // A k that is not a multiple of the chunk, a transposed B, batched MatMul with shared weights.
    let xt = g.input("xt", DType::F32, vec![Dim::Known(3), Dim::Known(70), Dim::Known(1000)]);
    let wt = weight(&mut g, &mut rng, "wt", &[1000, 90]);
    let y2 = g.matmul(xt, wt);
    let q = g.input("q", DType::F32, vec![Dim::Known(2), Dim::Known(65), Dim::Known(700)]);
    let k = g.input("k", DType::F32, vec![Dim::Known(2), Dim::Known(700), Dim::Known(33)]);
    let y3 = g.matmul(q, k);
    for y in [r, y2, y3] {
        g.output(y);
    }
    let inputs = vec![
        input(&mut rng, "x", &[128, 1024]),
        input(&mut rng, "xt", &[3, 70, 1000]),
        input(&mut rng, "q", &[2, 65, 700]),
        input(&mut rng, "k", &[2, 700, 33]),
    ];
    let want = host::reference::eval(&g, &inputs).unwrap();
    // The CUDA-core kernel (the tensor-core one takes these shapes without splitting k).
    let options = SessionOptions { tensor_core_gemm: false, ..SessionOptions::default() };
    let mut s = Session::new(ctx(), g, options).unwrap();
    let got = s.run(&inputs).unwrap();
    // Sums of ~1000 products of size <= 0.5: a few ulps of the magnitude.
    for ((gn, gt), (_, wt)) in got.iter().zip(&want) {
        let (gv, wv) = (gt.data().to_f64s(), wt.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!((a - b).abs() <= 1e-4 * (b.abs() + 1.0), "{gn}[{i}]: gpu {a}, reference {b}");
        }
    }
    let plan = s.last_plan().unwrap().to_string();
    assert!(plan.matches("split-k reduce gemm_reduce_f32").count() >= 2, "{plan}");
}

#[test]
fn forked_sessions_share_weights_and_run_on_their_own_threads() {
    let mut rng = Rng::new(0xf0e);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(64)]);
    let w = weight(&mut g, &mut rng, "w", &[64, 512]);
    let b = weight(&mut g, &mut rng, "b", &[512]);
    let y = gemm(&mut g, x, w, Some(b), Gemm::default());
    let r = g.relu(y);
    g.output(r);
    let mut first = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    first.run(&[input(&mut rng, "x", &[4, 64])]).unwrap();
    let forks: Vec<Session> = (0..4).map(|_| first.fork().unwrap()).collect();
    let feeds: Vec<Vec<(String, HostTensor)>> =
        (0..4).map(|_| vec![input(&mut rng, "x", &[4, 64])]).collect();
    let results: Vec<Vec<(String, HostTensor)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = forks
            .into_iter()
            .zip(&feeds)
            .map(|(mut s, feed)| {
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for _ in 0..20 {
                        out = s.run(feed).unwrap();
                    }
                    // The fork reused the uploaded weights: its device bytes are its own buffers only.
                    assert!(s.device_bytes() < 64 * 512 * 4, "fork holds {} bytes", s.device_bytes());
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (feed, got) in feeds.iter().zip(&results) {
        assert_close(got, &host::reference::eval(&g, feed).unwrap());
    }
}

#[test]
fn weights_marked_persisting_in_l2_give_the_same_bits() {
    let mut rng = Rng::new(0x12c4);
    let g = mlp(&mut rng);
    for batch in [1, 3, 200] {
        let inputs = vec![input(&mut rng, "x", &[batch, 64])];
        let run = |persist: bool| {
            let options = SessionOptions { l2_persist_weights: persist, ..SessionOptions::default() };
            let mut s = Session::new(ctx(), g.clone(), options).unwrap();
            // Twice: the first run launches eagerly, the second replays the captured graph.
            s.run(&inputs).unwrap();
            s.run(&inputs).unwrap()
        };
        let (on, off) = (run(true), run(false));
        for ((name, a), (_, b)) in on.iter().zip(&off) {
            assert_eq!(a.data().to_f64s(), b.data().to_f64s(), "batch {batch}: {name}");
        }
    }
    // A device with persisting L2 (Ampere and later) had some set aside for the hint.
    if ctx().info().persisting_l2_max_bytes > 0 {
        assert!(ctx().persisting_l2() > 0, "{:?}", ctx().info());
    }
}

#[test]
fn a_plan_compiled_ahead_without_a_context_is_adopted_and_runs() {
    let mut rng = Rng::new(0xadd);
    let g = mlp(&mut rng);
    let x = vec![input(&mut rng, "x", &[5, 64])];
    let (sm, flavour) = host::device::plan_target(0).expect("the device");
    assert_eq!((sm, flavour), (ctx().info().sm_count, ctx().flavour()));
    let hopper = flavour == host::PtxFlavour::Hopper;
    let compile = |sm| host::session::PlanAhead::compile(&g, &x, &SessionOptions::default(), (sm, hopper));
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    // A plan for another device's options is refused; one for this session's is taken.
    assert!(!s.adopt_plan(compile(sm + 1).expect("compiles")));
    let mut ahead = compile(sm).expect("compiles");
    let took = std::time::Duration::from_nanos(12345);
    ahead.took = took;
    assert!(s.adopt_plan(ahead));
    let got = s.run(&x).unwrap();
    assert_eq!(s.prepare_report().map(|p| p.plan), Some(took), "the adopted plan ran");
    assert_close(&got, &host::reference::eval(&g, &x).unwrap());
}
