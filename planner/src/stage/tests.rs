//! Staging tests: where graphs are cut, what crosses, and that each part compiles once bound.

use super::*;
use crate::op::Op;
use crate::plan::{PlanOptions, compile};

fn input(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    g.input(name, DType::F32, dims.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>())
}

fn names(g: &Graph, vs: &[ValueId]) -> Vec<String> {
    vs.iter().map(|&v| g.value_name(v)).collect()
}

#[test]
fn a_graph_without_data_dependent_shapes_is_not_split() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4]);
    let y = g.relu(x);
    g.output(y);
    assert_eq!(split(&g, &Binding::new()).unwrap(), None);
}

#[test]
fn non_zero_cuts_the_graph_into_head_frontier_and_rest() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 5]);
    let r = g.relu(x);
    let nz = g.op1(Op::NonZero, &[r]);
    let c = g.cast(nz, DType::F32);
    let s = g.sigmoid(c);
    let other = g.sigmoid(x);
    g.output(s);
    g.output(other);
    let st = split(&g, &Binding::new()).unwrap().expect("split");
    // The head computes what does not wait: the NonZero input, and the other output.
    assert_eq!(names(&st.head, &st.head.inputs), ["x"]);
    let mut outs = names(&st.head, &st.head.outputs);
    outs.sort();
    assert_eq!(outs, [g.value_name(r), g.value_name(other)]);
    assert_eq!(st.head.nodes.len(), 2);
    let f = &st.frontier[..];
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].input.as_str(), f[0].dims.as_slice(), f[0].dtype),
        (g.value_name(r).as_str(), &[4, 5][..], DType::F32)
    );
    assert_eq!(f[0].output, g.value_name(nz));
    // The rest reads the NonZero output, whose count is a symbol to bind.
    let rest = st.rest.expect("rest");
    assert_eq!(names(&rest, &rest.inputs), [g.value_name(nz)]);
    assert_eq!(names(&rest, &rest.outputs), [g.value_name(s)]);
    let info = rest.values[rest.inputs[0].index()].info.clone().unwrap();
    assert_eq!(info.shape.dims(), &[Dim::Known(2), Dim::Symbol(f[0].symbol.clone())]);
    // Both parts compile: the head as it is, the rest once the count is bound.
    compile(&st.head, &Binding::new(), &PlanOptions::default()).unwrap();
    let bound = Binding::new().with(&f[0].symbol, 7);
    let p = compile(&rest, &bound, &PlanOptions::default()).unwrap();
    assert_eq!(p.values[p.outputs[0].index()].dims, Some(vec![2, 7]));
    assert_eq!(split(&rest, &bound).unwrap(), None);
}

#[test]
fn graph_inputs_and_constants_reach_later_stages() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[6]);
    let w = g.initializer("w", crate::ConstTensor::from_f32(&[1], &[2.0]).unwrap());
    let nz = g.op1(Op::NonZero, &[x]);
    let c = g.cast(nz, DType::F32);
    let m = g.mul(c, w);
    let both = g.add(m, w);
    g.output(both);
    g.output(x);
    let st = split(&g, &Binding::new()).unwrap().expect("split");
    // x: the NonZero input and a graph output pass through the head; w stays a constant of the rest.
    assert!(st.head.nodes.is_empty());
    assert_eq!(names(&st.head, &st.head.outputs), ["x"]);
    let rest = st.rest.expect("rest");
    assert_eq!(names(&rest, &rest.inputs), [g.value_name(nz)]);
    assert_eq!(rest.initializers.len(), 1);
    compile(&st.head, &Binding::new(), &PlanOptions::default()).unwrap();
}

#[test]
fn a_second_non_zero_is_cut_again_once_the_first_count_is_bound() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3, 3]);
    let nz = g.op1(Op::NonZero, &[x]);
    let nz2 = g.op1(Op::NonZero, &[nz]);
    g.output(nz2);
    let st = split(&g, &Binding::new()).unwrap().expect("split");
    assert_eq!(st.frontier.len(), 1, "the second NonZero waits for the first");
    let rest = st.rest.expect("rest");
    let next = split(&rest, &Binding::new().with(&st.frontier[0].symbol, 4)).unwrap().expect("split again");
    assert_eq!(next.frontier.len(), 1);
    assert_eq!((next.frontier[0].dims.as_slice(), next.frontier[0].dtype), (&[2, 4][..], DType::I64));
    assert_eq!(next.frontier[0].output, g.value_name(nz2));
    assert!(next.rest.is_none());
}

#[test]
fn other_data_dependent_ops_are_refused_by_name() {
    // A Range whose bounds arrive at run time: its length is the data's.
    let mut g = Graph::new();
    let ends: Vec<ValueId> = ["start", "limit", "delta"].iter().map(|n| input(&mut g, n, &[])).collect();
    let y = g.op1(Op::Range, &ends);
    g.output(y);
    let e = split(&g, &Binding::new()).unwrap_err().to_string();
    assert!(e.contains("range_0") && e.contains("depends on the data"), "{e}");
}

/// Compiles every stage of `g` as a session would, binding each NonZero count to `count`; returns
/// the number of stages.
fn compile_stages(g: &Graph, count: usize) -> usize {
    let options = PlanOptions::default();
    let mut st = split(g, &Binding::new()).unwrap().expect("staged");
    let mut bound = Binding::new();
    let mut stages = 1;
    loop {
        compile(&st.head, &Binding::new(), &options).unwrap();
        for f in &st.frontier {
            bound.set(&f.symbol, count);
        }
        let Some(rest) = st.rest else { return stages };
        stages += 1;
        match split(&rest, &bound).unwrap() {
            Some(next) => st = next,
            None => {
                compile(&rest, &bound, &options).unwrap();
                return stages;
            }
        }
    }
}

#[test]
fn every_stage_of_a_selection_model_compiles() {
    // The rows of x whose first column is positive, through a linear layer (as the GPU test).
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[100, 4]);
    let zero = g.const_i64("zero", &[], &[0]);
    let col = g.gather(x, zero, 1);
    let pos = g.relu(col);
    let nz = g.op1(Op::NonZero, &[pos]);
    let flat = g.const_i64("flat", &[1], &[-1]);
    let idx = g.reshape(nz, flat);
    let picked = g.gather(x, idx, 0);
    let w = g.initializer("w", crate::ConstTensor::from_f32(&[4, 8], &[0.5; 32]).unwrap());
    let b = g.initializer("b", crate::ConstTensor::from_f32(&[8], &[0.1; 8]).unwrap());
    let h = g.matmul(picked, w);
    let hb = g.add(h, b);
    let y = g.relu(hb);
    let total = g.op1(Op::ReduceSum(crate::op::Reduce { keepdims: false, ..Default::default() }), &[y]);
    g.output(y);
    g.output(total);
    for count in [0, 1, 37, 100] {
        assert_eq!(compile_stages(&g, count), 2);
    }
    // NonZero of (NonZero - 2): the second NonZero is cut out of the rest.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[5, 6]);
    let nz = g.op1(Op::NonZero, &[x]);
    let two = g.initializer("two", crate::ConstTensor::from_f32(&[], &[2.0]).unwrap());
    let as_f32 = g.cast(nz, DType::F32);
    let shifted = g.sub(as_f32, two);
    let again = g.op1(Op::NonZero, &[shifted]);
    g.output(again);
    g.output(nz);
    assert_eq!(compile_stages(&g, 3), 2);
}

#[test]
fn compress_runs_as_a_gather_of_non_zero_indices() {
    for (axis, cond_len) in [(Some(0), 3), (Some(-1), 4), (None, 7)] {
        let mut g = Graph::new();
        let x = input(&mut g, "x", &[3, 4]);
        let cond = g.input("cond", DType::Bool, [Dim::Known(cond_len)]);
        let y = g.op1(Op::Compress(crate::op::Compress { axis }), &[x, cond]);
        g.output(y);
        let st = split(&g, &Binding::new()).unwrap().expect("staged");
        assert_eq!(st.frontier.len(), 1);
        assert_eq!(st.frontier[0].input, "cond");
        let rest = st.rest.expect("rest");
        let bound = Binding::new().with(&st.frontier[0].symbol, 2);
        let p = compile(&rest, &bound, &PlanOptions::default()).unwrap();
        let want = match axis {
            Some(0) => vec![2, 4],
            Some(_) => vec![3, 2],
            None => vec![2],
        };
        assert_eq!(p.values[p.outputs[0].index()].dims, Some(want), "{axis:?}");
    }
    // A condition longer than the axis stays a Compress, refused by name.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3, 4]);
    let cond = g.input("cond", DType::Bool, [Dim::Known(5)]);
    let y = g.op1(Op::Compress(crate::op::Compress { axis: Some(0) }), &[x, cond]);
    g.output(y);
    assert!(split(&g, &Binding::new()).unwrap_err().to_string().contains("compress_0"));
}

#[test]
fn empty_operands_compile_without_panicking() {
    // What a NonZero count of 0 makes of the ops downstream: empty rows, empty reductions, k = 0.
    let reduce = |keepdims| Op::ReduceSum(crate::op::Reduce { keepdims, ..Default::default() });
    for (rows, k) in [(0, 4), (3, 0), (0, 0)] {
        let mut g = Graph::new();
        let x = input(&mut g, "x", &[rows, k]);
        let w = g.initializer("w", crate::ConstTensor::from_f32(&[k, 5], &vec![1.0; k * 5]).unwrap());
        let h = g.matmul(x, w);
        let r = g.relu(h);
        let s = g.op1(reduce(false), &[r]);
        let t = g.op1(reduce(true), &[x]);
        let sm = g.softmax(x, -1);
        g.output(s);
        g.output(t);
        g.output(sm);
        for options in
            [PlanOptions::default(), PlanOptions { tensor_core_gemm: false, ..PlanOptions::default() }]
        {
            compile(&g, &Binding::new(), &options).unwrap();
        }
    }
}

/// A Loop over `h0` (`[2, 8]`): `h' = tanh(h W)` with `W` captured, `h'` also stacked; then
/// `relu` of the stack.
fn loop_graph() -> (Graph, ValueId) {
    let mut g = Graph::new();
    let h0 = input(&mut g, "h0", &[2, 8]);
    let m = g.const_i64("m", &[], &[3]);
    let w = g.initializer("w", crate::ConstTensor::from_f32(&[8, 8], &[0.1; 64]).unwrap());
    let mut body = Graph::new();
    let _i = body.input("i", DType::I64, Vec::<Dim>::new());
    let c = body.input("c", DType::Bool, Vec::<Dim>::new());
    let h = body.input("h", DType::F32, [2usize, 8].map(Dim::Known));
    let wi = body.add_value("w", None);
    body.captures.push(crate::Capture { inner: wi, outer: w });
    let z = body.matmul(h, wi);
    let t = body.op1(Op::Tanh, &[z]);
    body.output(c);
    body.output(t);
    body.output(t);
    let outs =
        g.push_opt(Op::Loop(crate::op::Loop { body: Box::new(body) }), vec![Some(m), None, Some(h0)], 2);
    let y = g.relu(outs[1]);
    g.output(outs[0]);
    g.output(y);
    (g, outs[1])
}

#[test]
fn control_flow_runs_between_stages_and_its_body_compiles_on_its_own() {
    let (g, stacked) = loop_graph();
    let st = split(&g, &Binding::new()).unwrap().expect("split at the loop");
    assert!(st.frontier.is_empty());
    let [c] = &st.controls[..] else { panic!("one control node: {:?}", st.controls.len()) };
    assert_eq!(c.op.name(), "Loop");
    assert!(matches!(&c.captures[..], [v] if matches!(&v[..], [Captured::Constant(_)])), "w is a constant");
    // The trip count (a constant) and the carried value reach the loop through the head.
    assert_eq!(c.inputs.len(), 3);
    let outs = names(&st.head, &st.head.outputs);
    assert!(outs.contains(&"h0".to_string()) && outs.contains(&"w".to_string()), "{outs:?}");
    let head = compile(&st.head, &Binding::new(), &PlanOptions::default()).expect("the head compiles");
    assert!(head.outputs.len() >= 3, "constants the loop reads are head outputs: {head}");
    // The stacked output's dims are symbols in the rest, bound by the run.
    let (syms, dtype) = &c.symbols[1];
    assert_eq!((syms.len(), *dtype), (3, DType::F32));
    let rest = st.rest.expect("relu waits for the loop");
    assert_eq!(names(&rest, &rest.inputs), [g.value_name(stacked)]);
    let mut counts = Binding::new();
    for (s, d) in syms.iter().zip([3, 2, 8]) {
        counts.set(s, d);
    }
    compile(&rest, &counts, &PlanOptions::default()).expect("the rest compiles once bound");
    // The body: (i, cond, h, captured w) as inputs, compiled for bound shapes.
    let Op::Loop(l) = &c.op else { unreachable!() };
    let sig = [(DType::I64, 0), (DType::Bool, 0), (DType::F32, 2), (DType::F32, 2)];
    let body = body_graph(&l.body, &[None], &sig).unwrap();
    assert_eq!(names(&body, &body.inputs), (0..4).map(body_input_name).collect::<Vec<_>>());
    let mut dims = Binding::new();
    for (i, d) in [(2, [2, 8]), (3, [8, 8])] {
        for (k, n) in d.into_iter().enumerate() {
            dims.set(&body_symbol(i, k), n);
        }
    }
    assert_eq!(split(&body, &dims).unwrap(), None, "the body has no control flow of its own");
    compile(&body, &dims, &PlanOptions::default()).expect("the body compiles");
    assert!(body_graph(&l.body, &[None], &sig[..3]).is_err(), "a capture without its value");
    assert!(body_graph(&l.body, &[], &sig).is_err(), "captures not matched");
    // A captured constant stays one: three inputs.
    let Captured::Constant(w) = &c.captures[0][0] else { unreachable!() };
    let with_w = body_graph(&l.body, &[Some(w.clone())], &sig[..3]).unwrap();
    assert_eq!(with_w.inputs.len(), 3);
    let dims = [(DType::I64, vec![]), (DType::Bool, vec![]), (DType::F32, vec![2, 8])];
    let outs = body_output_dims(&l.body, &[Some(w.clone())], &dims, &[]).unwrap();
    let f = DType::F32;
    assert_eq!(outs, [(DType::Bool, Some(vec![])), (f, Some(vec![2, 8])), (f, Some(vec![2, 8]))]);
}

#[test]
fn non_max_suppression_runs_between_stages() {
    let mut g = Graph::new();
    let boxes = input(&mut g, "boxes", &[2, 10, 4]);
    let scores = input(&mut g, "scores", &[2, 3, 10]);
    let max = g.const_i64("max", &[1], &[4]);
    let nms = crate::op::NonMaxSuppression { center_point_box: true };
    let sel = g.op1(Op::NonMaxSuppression(nms), &[boxes, scores, max]);
    let y = g.cast(sel, DType::F32);
    g.output(y);
    let st = split(&g, &Binding::new()).unwrap().expect("split at NonMaxSuppression");
    let [f] = &st.frontier[..] else { panic!("one frontier node") };
    assert_eq!((f.input.as_str(), f.dims.as_slice()), ("boxes", &[2, 10, 4][..]));
    let FrontierKind::NonMaxSuppression { center_point_box, scores, scores_dims, scalars } = &f.kind else {
        panic!("{:?}", f.kind)
    };
    assert!(*center_point_box);
    assert_eq!((scores.as_str(), scores_dims.as_slice()), ("scores", &[2, 3, 10][..]));
    assert_eq!(scalars, &[Some("max".to_string()), None, None]);
    let rest = st.rest.expect("the cast waits");
    compile(&rest, &Binding::new().with(&f.symbol, 5), &PlanOptions::default()).unwrap();
}
