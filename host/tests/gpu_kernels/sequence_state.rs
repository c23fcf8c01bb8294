//! Stateful sessions (`SessionOptions::stateful`) over every sequence op that keeps state: a
//! sequence run as a prefill plus single steps, or as single steps only, equals one run of the
//! whole sequence on the reference, with the state kept on the device between runs (CUDA-graph
//! replay included); `reset_state` restarts the sequence; `state` reads the state back and
//! `load_state` sets it; a batch change in the middle of a sequence is refused until a reset;
//! SOFIE's `MambaScan` keeps no state.

use host::selftest::Rng;
use host::{HostError, HostTensor, Session, SessionOptions, TensorData};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;
use crate::sequence::{Values, assert_close, draw};

/// `len` elements of `t` from `start` along `axis`.
fn slice(t: &HostTensor, axis: usize, start: usize, len: usize) -> HostTensor {
    fn take<T: Clone>(v: &[T], dims: &[usize], axis: usize, start: usize, len: usize) -> Vec<T> {
        let inner: usize = dims[axis + 1..].iter().product();
        v.chunks(dims[axis] * inner).flat_map(|c| c[start * inner..(start + len) * inner].to_vec()).collect()
    }
    let mut dims = t.shape().to_vec();
    let data: TensorData = match t.data() {
        TensorData::F32(v) => take(v, &dims, axis, start, len).into(),
        TensorData::Bool(v) => take(v, &dims, axis, start, len).into(),
        other => panic!("slice: {:?}", other.dtype()),
    };
    dims[axis] = len;
    HostTensor::new(dims, data).unwrap()
}

/// The f32 tensors `parts` joined along `axis`.
fn concat(parts: &[HostTensor], axis: usize) -> HostTensor {
    let outer: usize = parts[0].shape()[..axis].iter().product();
    let mut dims = parts[0].shape().to_vec();
    dims[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
    let mut data = Vec::new();
    for o in 0..outer {
        for p in parts {
            let v = p.f32s("part").unwrap();
            let chunk = v.len() / outer;
            data.extend_from_slice(&v[o * chunk..(o + 1) * chunk]);
        }
    }
    HostTensor::new(dims, data).unwrap()
}

/// A graph of one sequence node whose time-dependent inputs have a symbolic `len` axis; the other
/// operands are constants.
struct Stream {
    g: Graph,
    /// Time-dependent inputs: name, dims for the whole sequence, time axis, values.
    inputs: Vec<(&'static str, Vec<usize>, usize, Values)>,
    /// The time axis of each graph output; `None` for a final state.
    outputs: Vec<Option<usize>>,
    /// The kernel the plan must launch.
    symbol: &'static str,
}

impl Stream {
    fn new(symbol: &'static str) -> Self {
        Stream { g: Graph::new(), inputs: Vec::new(), outputs: Vec::new(), symbol }
    }

    /// A time-dependent input: `dims` with the time axis `axis` symbolic (`dims[axis]` is the
    /// whole sequence's length).
    fn input(&mut self, name: &'static str, dims: &[usize], axis: usize, values: Values) -> Option<ValueId> {
        let dtype = if matches!(values, Values::Mask(_)) { DType::Bool } else { DType::F32 };
        let decl = dims
            .iter()
            .enumerate()
            .map(|(i, &d)| if i == axis { Dim::Symbol("len".into()) } else { Dim::Known(d) });
        let v = self.g.input(name, dtype, decl);
        self.inputs.push((name, dims.to_vec(), axis, values));
        Some(v)
    }

    fn constant(&mut self, rng: &mut Rng, name: &str, dims: &[usize], lo: f32, hi: f32) -> Option<ValueId> {
        let t = rng.tensor(dims, lo, hi);
        Some(self.g.initializer(name, ConstTensor::from_f32(dims, t.f32s("constant").unwrap()).unwrap()))
    }

    /// Adds the node; `axes[i]` is output i's time axis.
    fn node(&mut self, op: Op, ins: Vec<Option<ValueId>>, axes: &[Option<usize>]) -> String {
        for y in self.g.push_opt(op, ins, axes.len()) {
            self.g.output(y);
        }
        self.outputs = axes.to_vec();
        self.g.nodes.last().unwrap().name.clone()
    }
}

const L: usize = 9;

/// Every stateful op, over `L` steps: (what, stream, its node's name, the final state's output).
fn streams(rng: &mut Rng) -> Vec<(&'static str, Stream, String, Option<usize>)> {
    let u = Values::Uniform(-1.0, 1.0);
    let mut all = Vec::new();

    let (b, d, n) = (2, 5, 16);
    let mut s = Stream::new("selective_scan_f32");
    let ins = vec![
        s.input("u", &[b, d, L], 2, u),
        s.input("delta", &[b, d, L], 2, Values::Uniform(-3.0, 1.0)),
        s.constant(rng, "A", &[d, n], -2.0, -0.1),
        s.input("Bm", &[b, n, L], 2, u),
        s.input("Cm", &[b, n, L], 2, u),
        s.constant(rng, "D", &[d], -1.0, 1.0),
        s.input("z", &[b, d, L], 2, Values::Uniform(-2.0, 2.0)),
        s.constant(rng, "bias", &[d], -1.0, 0.5),
    ];
    let name = s.node(Op::SelectiveScan(op::SelectiveScan { delta_softplus: true }), ins, &[Some(2), None]);
    all.push(("SelectiveScan", s, name, Some(1)));

    let (b, h, p, n) = (1, 2, 4, 8);
    let mut s = Stream::new("ssd_scan_f32");
    let ins = vec![
        s.input("x", &[b, L, h, p], 1, u),
        s.input("dt", &[b, L, h], 1, Values::Uniform(-3.0, 1.0)),
        s.constant(rng, "A", &[h], -2.0, -0.1),
        s.input("Bm", &[b, L, 1, n], 1, u),
        s.input("Cm", &[b, L, 1, n], 1, u),
        s.constant(rng, "D", &[h], -1.0, 1.0),
        None,
        s.constant(rng, "dt_bias", &[h], -1.0, 0.5),
    ];
    let attrs = op::SsdScan { dt_softplus: true, ..Default::default() };
    let name = s.node(Op::SsdScan(attrs), ins, &[Some(1), None]);
    all.push(("SSDScan", s, name, Some(1)));

    let (b, w) = (2, 40);
    let mut s = Stream::new("rglru_f32");
    let ins = vec![
        s.input("x", &[b, L, w], 1, u),
        s.input("a", &[b, L, w], 1, Values::Uniform(0.0, 0.999)),
        s.input("reset", &[b, L], 1, Values::Mask(0.2)),
    ];
    let name = s.node(Op::Rglru, ins, &[Some(1), None]);
    all.push(("RGLRU", s, name, Some(1)));

    let mut s = Stream::new("rglru_f32");
    let ins = vec![s.input("x", &[b, L, w], 1, u), s.input("a", &[b, L, w], 1, Values::Uniform(0.0, 0.999))];
    let name = s.node(Op::GriffinRglru, ins, &[Some(1)]);
    all.push(("GriffinRGLRU", s, name, None));

    let mut s = Stream::new("rglru_f32");
    let ins = vec![s.input("x", &[b, L, w], 1, u), s.input("a", &[b, L, w], 1, Values::Uniform(-1.0, 1.0))];
    let name = s.node(Op::LinearScan, ins, &[Some(1), None]);
    all.push(("LinearScan", s, name, Some(1)));

    for sofie in [false, true] {
        let (b, h, n) = (1, 2, 33);
        let mut s = Stream::new("wkv6_f32");
        let mut ins: Vec<Option<ValueId>> =
            ["r", "k", "v"].into_iter().map(|r| s.input(r, &[b, h, L, n], 2, u)).collect();
        ins.push(s.input("w", &[b, h, L, n], 2, Values::Uniform(-2.0, 1.0)));
        ins.push(s.constant(rng, "u", &[h, n], -1.0, 1.0));
        if sofie {
            let name = s.node(Op::RwkvWkv6, ins, &[Some(2)]);
            all.push(("RWKV_WKV6", s, name, None));
        } else {
            let attrs = op::Wkv6 { layout: op::Wkv6Layout::Bhtn };
            let name = s.node(Op::Wkv6(attrs), ins, &[Some(2), None]);
            all.push(("WKV6", s, name, Some(1)));
        }
    }

    let (b, d, k) = (2, 6, 4);
    let mut s = Stream::new("causal_conv_f32");
    let ins = vec![
        s.input("x", &[b, d, L], 2, u),
        s.constant(rng, "w", &[d, k], -1.0, 1.0),
        s.constant(rng, "bias", &[d], -1.0, 1.0),
    ];
    let attrs = op::CausalConvWithState { activation: op::ConvActivation::Silu, ..Default::default() };
    let name = s.node(Op::CausalConvWithState(attrs), ins, &[Some(2), None]);
    all.push(("CausalConvWithState", s, name, Some(1)));

    // Channels-last (what the planner makes of a conv between transposes): x and y (B, L, D),
    // the state updated in place by the thread of each channel's first run of steps.
    let mut s = Stream::new("causal_conv_rows_f32");
    let ins = vec![
        s.input("x", &[b, L, d], 1, u),
        s.constant(rng, "w", &[d, k], -1.0, 1.0),
        s.constant(rng, "bias", &[d], -1.0, 1.0),
    ];
    let attrs = op::CausalConvWithState {
        activation: op::ConvActivation::Silu,
        channels_last: true,
        ..Default::default()
    };
    let name = s.node(Op::CausalConvWithState(attrs), ins, &[Some(1), None]);
    all.push(("CausalConvWithState channels-last", s, name, Some(1)));
    all
}

/// Runs `chunks` (lengths summing to `L`) of the sequence `inputs` through `s`, returning each
/// run's outputs.
fn run_chunks(
    s: &mut Session,
    st: &Stream,
    inputs: &[HostTensor],
    chunks: &[usize],
) -> Vec<Vec<(String, HostTensor)>> {
    let mut start = 0;
    let mut runs = Vec::new();
    for &c in chunks {
        let part: Vec<(String, HostTensor)> = st
            .inputs
            .iter()
            .zip(inputs)
            .map(|((name, _, axis, _), t)| (name.to_string(), slice(t, *axis, start, c)))
            .collect();
        runs.push(s.run(&part).unwrap_or_else(|e| panic!("chunk at {start}: {e}")));
        start += c;
    }
    runs
}

/// The outputs of chunked runs as one run's: time outputs joined, final states from the last run.
fn joined(st: &Stream, runs: &[Vec<(String, HostTensor)>]) -> Vec<(String, HostTensor)> {
    st.outputs
        .iter()
        .enumerate()
        .map(|(i, axis)| {
            let name = runs[0][i].0.clone();
            match axis {
                Some(a) => (name, concat(&runs.iter().map(|r| r[i].1.clone()).collect::<Vec<_>>(), *a)),
                None => (name, runs.last().unwrap()[i].1.clone()),
            }
        })
        .collect()
}

#[test]
fn stateful_decoding_equals_one_run_of_the_whole_sequence() {
    let mut rng = Rng::new(0x57a7e);
    // The default kernels (the prefills on the chunked selective scan and the WKV spans, the state
    // read and written in place through them), then the sequential ones.
    let sequential =
        SessionOptions { chunked_selective_scan: false, wkv_spans: false, ..SessionOptions::default() };
    for options in [SessionOptions::default(), sequential] {
        decoding_equals_one_run(&mut rng, options);
    }
}

/// [`stateful_decoding_equals_one_run_of_the_whole_sequence`] in sessions of `options`.
fn decoding_equals_one_run(rng: &mut Rng, options: SessionOptions) {
    let stateful = SessionOptions { stateful: true, ..options };
    for (what, st, node, final_out) in streams(rng) {
        let inputs: Vec<HostTensor> = st.inputs.iter().map(|(_, dims, _, v)| draw(rng, dims, *v)).collect();
        let named: Vec<(String, HostTensor)> =
            st.inputs.iter().zip(&inputs).map(|(i, t)| (i.0.to_string(), t.clone())).collect();
        let want = host::reference::eval(&st.g, &named).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
        let mut s = Session::new(ctx(), st.g.clone(), stateful).unwrap();

        // Prefill 4 steps, then decode 5 single steps (two bindings, each captured and replayed).
        let runs = run_chunks(&mut s, &st, &inputs, &[4, 1, 1, 1, 1, 1]);
        assert_close(&format!("{what}: prefill + decode"), &joined(&st, &runs), &want, L);
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains(st.symbol) && plan.contains(&format!("state:{node}")), "{what}: {plan}");
        assert_eq!(s.state_slots().len(), 1, "{what}");
        assert_eq!(s.state_slots()[0].name, node);
        let state = s.state(&node).unwrap();
        match final_out {
            Some(i) => {
                assert_close(&format!("{what}: state()"), &[(want[i].0.clone(), state)], &want[i..=i], L)
            }
            None if what == "GriffinRGLRU" => {
                // y_t = h_t: the state is the last step's output.
                let last = slice(&want[0].1, 1, L - 1, 1);
                let last = HostTensor::new(vec![2, 40], last.f32s("y").unwrap().to_vec()).unwrap();
                assert_close(&format!("{what}: state()"), &[("h".into(), state)], &[("h".into(), last)], L);
            }
            None => assert_eq!(state.shape(), [1, 2, 33, 33], "{what}"),
        }

        // A reset restarts the sequence: single steps from zero state equal the whole run again.
        s.reset_state().unwrap();
        assert!(s.state(&node).unwrap().f32s("state").unwrap().iter().all(|&v| v == 0.0), "{what}: reset");
        let runs = run_chunks(&mut s, &st, &inputs, &[1; L]);
        assert_close(&format!("{what}: single steps after reset"), &joined(&st, &runs), &want, L);

        // Without stateful mode every run starts from zeros: a second chunk does not continue.
        let mut plain = Session::new(ctx(), st.g.clone(), options).unwrap();
        let runs = run_chunks(&mut plain, &st, &inputs, &[4, 5]);
        let (second, axis) = (&runs[1][0].1, st.outputs[0].unwrap());
        let fresh = run_chunks(&mut plain, &st, &inputs, &[4, 5]);
        assert_eq!(fresh[1][0].1, *second, "{what}: stateless runs repeat");
        assert_ne!(
            slice(second, axis, 0, 1),
            slice(&want[0].1, axis, 4, 1),
            "{what}: a stateless second chunk must not continue the first"
        );
    }
}

/// Mamba-2 in a stateful session: chunked prefills (`ssd_chunk_f32`, the state read and written in
/// place a tile a block) and single steps (`ssd_scan_f32`) continue each other, and equal one run
/// of the whole sequence on the reference.
#[test]
fn ssd_chunked_prefills_and_steps_continue_each_other() {
    const LONG: usize = 76;
    let mut rng = Rng::new(0x55dc);
    let (b, h, p, n) = (2, 3, 12, 64);
    let u = Values::Uniform(-1.0, 1.0);
    let mut st = Stream::new("ssd_chunk_f32");
    let ins = vec![
        st.input("x", &[b, LONG, h, p], 1, u),
        st.input("dt", &[b, LONG, h], 1, Values::Uniform(-3.0, 1.0)),
        st.constant(&mut rng, "A", &[h], -2.0, -0.1),
        st.input("Bm", &[b, LONG, 1, n], 1, u),
        st.input("Cm", &[b, LONG, 1, n], 1, u),
        st.constant(&mut rng, "D", &[h * p], -1.0, 1.0),
        st.input("z", &[b, LONG, h, p], 1, Values::Uniform(-2.0, 2.0)),
        st.constant(&mut rng, "dt_bias", &[h], -1.0, 0.5),
    ];
    let attrs = op::SsdScan { dt_softplus: true, ..Default::default() };
    st.node(Op::SsdScan(attrs), ins, &[Some(1), None]);
    let inputs: Vec<HostTensor> = st.inputs.iter().map(|(_, dims, _, v)| draw(&mut rng, dims, *v)).collect();
    let named: Vec<(String, HostTensor)> =
        st.inputs.iter().zip(&inputs).map(|(i, t)| (i.0.to_string(), t.clone())).collect();
    let want = host::reference::eval(&st.g, &named).unwrap();
    let mut s =
        Session::new(ctx(), st.g.clone(), SessionOptions { stateful: true, ..SessionOptions::default() })
            .unwrap();
    let (mut start, mut runs) = (0, Vec::new());
    for len in [40, 1, 33, 2] {
        let part: Vec<(String, HostTensor)> = st
            .inputs
            .iter()
            .zip(&inputs)
            .map(|((name, _, axis, _), t)| (name.to_string(), slice(t, *axis, start, len)))
            .collect();
        runs.push(s.run(&part).unwrap_or_else(|e| panic!("steps {start}..{}: {e}", start + len)));
        let kernel = if len >= 32 { "ssd_chunk_f32" } else { "ssd_scan_f32" };
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains(kernel), "{len} steps: {plan}");
        start += len;
    }
    assert_close("SSDScan: chunked prefills and steps", &joined(&st, &runs), &want, LONG);
}

#[test]
fn load_state_sets_the_state_a_sequence_continues_from() {
    let mut rng = Rng::new(0x10ad);
    let (b, w) = (3, 33);
    // The stateful graph, and the same node with an explicit initial state for the reference.
    let graph = |init: bool| {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [Dim::Known(b), Dim::Symbol("len".into()), Dim::Known(w)]);
        let a = g.input("a", DType::F32, [Dim::Known(b), Dim::Symbol("len".into()), Dim::Known(w)]);
        let h0 = init.then(|| g.input("h0", DType::F32, [Dim::Known(b), Dim::Known(w)]));
        for y in g.push_opt(Op::Rglru, vec![Some(x), Some(a), None, h0], 2) {
            g.output(y);
        }
        g
    };
    let x = rng.tensor(&[b, L, w], -1.0, 1.0);
    let a = rng.tensor(&[b, L, w], 0.0, 0.999);
    let h0 = rng.tensor(&[b, w], -1.0, 1.0);
    let inputs = vec![("x".to_owned(), x), ("a".to_owned(), a)];
    let mut with_h0 = inputs.clone();
    with_h0.push(("h0".into(), h0.clone()));
    let want = host::reference::eval(&graph(true), &with_h0).unwrap();
    let mut s =
        Session::new(ctx(), graph(false), SessionOptions { stateful: true, ..SessionOptions::default() })
            .unwrap();
    // The state exists once a run has compiled the plan.
    s.run(&inputs).unwrap();
    let node = s.state_slots()[0].name.clone();
    s.load_state(&node, &h0).unwrap();
    assert_eq!(s.state(&node).unwrap(), h0);
    assert_close("RGLRU from a loaded state", &s.run(&inputs).unwrap(), &want, L);
    let bad = HostTensor::new(vec![b, w + 1], vec![0.0f32; b * (w + 1)]).unwrap();
    assert!(matches!(s.load_state(&node, &bad), Err(HostError::State { .. })));
    assert!(matches!(s.state("nope"), Err(HostError::State { .. })));
    // Stateful mode refuses a node that also reads an initial-state input.
    let mut both =
        Session::new(ctx(), graph(true), SessionOptions { stateful: true, ..SessionOptions::default() })
            .unwrap();
    let e = both.run(&with_h0).unwrap_err().to_string();
    assert!(e.contains("stateful mode"), "{e}");
}

#[test]
fn a_batch_change_mid_sequence_is_refused_until_reset() {
    let mut rng = Rng::new(0xba7c4);
    let mut g = Graph::new();
    let dims = || [Dim::Symbol("b".into()), Dim::Symbol("len".into()), Dim::Known(8)];
    let x = g.input("x", DType::F32, dims());
    let a = g.input("a", DType::F32, dims());
    for y in g.push(Op::Rglru, &[x, a], 2) {
        g.output(y);
    }
    let mut inputs = |b: usize| {
        vec![
            ("x".to_owned(), rng.tensor(&[b, 3, 8], -1.0, 1.0)),
            ("a".to_owned(), rng.tensor(&[b, 3, 8], 0.0, 0.99)),
        ]
    };
    let mut s =
        Session::new(ctx(), g.clone(), SessionOptions { stateful: true, ..SessionOptions::default() })
            .unwrap();
    s.run(&inputs(2)).unwrap();
    let three = inputs(3);
    let e = s.run(&three).unwrap_err();
    assert!(matches!(e, HostError::State { .. }) && e.to_string().contains("reset_state"), "{e}");
    // After a reset the state is reallocated for the new batch and starts from zero; going back
    // to the first batch reallocates again (its captured graph must not keep the old address).
    s.reset_state().unwrap();
    let want = host::reference::eval(&g, &three).unwrap();
    assert_close("batch 3 after reset", &s.run(&three).unwrap(), &want, 3);
    s.reset_state().unwrap();
    let two = inputs(2);
    let want = host::reference::eval(&g, &two).unwrap();
    assert_close("batch 2 after reset", &s.run(&two).unwrap(), &want, 3);
    assert_eq!(s.state_slots()[0].dims, [2, 8]);
}

#[test]
fn sofie_mamba_scan_keeps_no_state() {
    let mut rng = Rng::new(0x3a3b);
    let (b, d, n, l) = (1, 4, 8, 5);
    let mut g = Graph::new();
    let names = ["u", "delta", "A", "Bm", "Cm", "Dskip"];
    let dims = [vec![b, d, l], vec![b, d, l], vec![d, n], vec![b, n, l], vec![b, n, l], vec![d]];
    let ins: Vec<ValueId> = names
        .iter()
        .zip(&dims)
        .map(|(nm, ds)| g.input(nm, DType::F32, ds.iter().map(|&x| Dim::Known(x))))
        .collect();
    let y = g.op1(Op::MambaScan, &ins);
    g.output(y);
    let ranges = [(-1.0, 1.0), (0.01, 0.5), (-2.0, -0.1), (-1.0, 1.0), (-1.0, 1.0), (-1.0, 1.0)];
    let inputs: Vec<(String, HostTensor)> = names
        .iter()
        .zip(&dims)
        .zip(ranges)
        .map(|((nm, ds), (lo, hi))| (nm.to_string(), rng.tensor(ds, lo, hi)))
        .collect();
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s =
        Session::new(ctx(), g, SessionOptions { stateful: true, ..SessionOptions::default() }).unwrap();
    for _ in 0..3 {
        assert_close("MambaScan, stateful session", &s.run(&inputs).unwrap(), &want, l);
    }
    assert!(s.state_slots().is_empty());
}
