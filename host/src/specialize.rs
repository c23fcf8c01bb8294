//! Plans specialized on input values: a [`Session`](crate::Session) whose compile needed the
//! values of small inputs (shape operands fed as graph inputs; Resize's float roi / scales) keys
//! its plans on those values and compiles them with the inputs as constants. Dropout's ratio and
//! training mode fed as graph inputs are specialized the same way: with them constant the plan is
//! a copy and an all-true mask, or (training with a non-zero ratio) refused, as the reference does.

use planner::{Binding, DType, Graph, Op, ValueId};

use crate::HostTensor;

/// What a plan is compiled for: the sizes of the symbolic dims and, once the session specializes
/// ([`Session`](crate::Session) docs), the values of its small integer inputs (and of Resize's float roi / scales).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) dims: Binding,
    pub(crate) values: Vec<(String, DType, Vec<usize>, Vec<u8>)>,
}

/// Largest input (elements) whose values a plan may be specialized on.
const SPECIALIZE_MAX_ELEMS: usize = 64;

/// Whether a plan may be specialized on the values of input `t` of `graph`: a small tensor whose
/// value decides the plan ([`decides_plan`]): a shape operand (a shape, axes, sizes, pads, starts
/// and ends, repeats, a count, an FFT length), read directly or through shape arithmetic; Resize's
/// roi or scales, Range's bounds, Dropout's ratio or training mode. Data a kernel only computes on
/// (token ids, masks, features, a divisor) never is, however small: specializing on it would
/// compute the model on the host.
pub(crate) fn specializable(graph: &Graph, name: &str, t: &HostTensor) -> bool {
    t.len() <= SPECIALIZE_MAX_ELEMS
        && matches!(t.dtype(), DType::I64 | DType::I32 | DType::F32 | DType::F16 | DType::F64 | DType::Bool)
        && decides_plan(graph, name)
}

/// How a node reads one of its inputs.
enum Read {
    /// Its value decides the plan (a shape operand), or only its shape or type is read.
    Operand,
    /// Its value flows into the node's outputs (shape arithmetic, or data: the outputs' uses say).
    Through,
    /// A kernel computes on it.
    Data,
}

/// How `op` reads its input `slot`.
fn read_of(op: &Op, slot: usize) -> Read {
    use Op::*;
    match (op, slot) {
        (Shape(_) | Size, _) | (CastLike(_), 1) => Read::Operand,
        (Reshape(_) | Expand | Tile | Squeeze(_) | Unsqueeze(_) | Split(_) | TopK(_) | OneHot(_), 1)
        | (CumSum(_) | CumProd(_) | Trilu(_) | CenterCropPad(_), 1)
        | (SignalWindow(_), 0)
        | (ConstantOfShape(_), 0)
        | (Range, 0..=2)
        | (Slice(_), 1..=4)
        | (Pad(_), 1 | 3)
        | (Resize(_), 1..=3)
        | (Dropout(_), 1 | 2)
        | (Col2Im(_), 1 | 2)
        | (Dft(_), 1 | 2)
        | (Stft(_), 1 | 3)
        | (MaxUnpool(_), 2)
        | (NonMaxSuppression(_), 2) => Read::Operand,
        (
            ReduceSum(_) | ReduceMean(_) | ReduceMax(_) | ReduceMin(_) | ReduceProd(_) | ReduceL1(_)
            | ReduceL2(_) | ReduceLogSum(_) | ReduceLogSumExp(_) | ReduceSumSquare(_),
            1,
        ) => Read::Operand,
        (
            Cast(_) | CastLike(_) | Identity | Concat(_) | Gather(_) | Flatten(_) | Add | Sub | Mul | Div
            | Mod(_) | Neg | Abs | Max | Min | Sign | Equal | Less | Greater | LessOrEqual | GreaterOrEqual
            | Not | And | Or | Where | ReduceSum(_) | ReduceProd(_) | ReduceMax(_) | ReduceMin(_),
            _,
        )
        | (Reshape(_) | Squeeze(_) | Unsqueeze(_) | Slice(_) | Expand | Tile, 0) => Read::Through,
        _ => Read::Data,
    }
}

/// Whether the value of graph input `name` decides the plan ([`specializable`]): some read of it
/// reaches a plan operand (directly or through shape arithmetic), and none reaches a graph output
/// or a nested graph's capture (there the value would be data the host computed).
fn decides_plan(graph: &Graph, name: &str) -> bool {
    use std::collections::HashMap;
    let Some(&v) = graph.inputs.iter().find(|v| graph.values[v.index()].name == name) else { return false };
    // Every value's reads: (node, slot), `None` for a nested graph's capture.
    let mut reads: HashMap<ValueId, Vec<(usize, Option<usize>)>> = HashMap::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        for (slot, input) in n.inputs.iter().enumerate() {
            if let Some(u) = input {
                reads.entry(*u).or_default().push((i, Some(slot)));
            }
        }
        for u in n.uses() {
            if !n.inputs.contains(&Some(u)) {
                reads.entry(u).or_default().push((i, None));
            }
        }
    }
    /// (some read reaches a plan operand, some read reaches a graph output or a capture).
    type Reach = (bool, bool);
    fn reach(
        graph: &Graph,
        reads: &HashMap<ValueId, Vec<(usize, Option<usize>)>>,
        memo: &mut HashMap<ValueId, Reach>,
        v: ValueId,
    ) -> Reach {
        if let Some(&known) = memo.get(&v) {
            return known;
        }
        memo.insert(v, (false, false));
        let mut r = (false, graph.outputs.contains(&v));
        for &(i, slot) in reads.get(&v).into_iter().flatten() {
            let n = &graph.nodes[i];
            let (operand, escapes) = match slot.map(|s| read_of(&n.op, s)) {
                Some(Read::Operand) => (true, false),
                Some(Read::Through) => n
                    .outputs
                    .iter()
                    .flatten()
                    .map(|&o| reach(graph, reads, memo, o))
                    .fold((false, false), |a, b| (a.0 || b.0, a.1 || b.1)),
                Some(Read::Data) => (false, false),
                None => (false, true),
            };
            r = (r.0 || operand, r.1 || escapes);
        }
        memo.insert(v, r);
        r
    }
    let (operand, escapes) = reach(graph, &reads, &mut HashMap::new(), v);
    operand && !escapes
}

/// The values `inputs` pin for a specialized plan: the specializable ones, as name, dtype, dims and
/// bytes.
pub(crate) fn values(
    graph: &Graph,
    inputs: &[(String, HostTensor)],
) -> Vec<(String, DType, Vec<usize>, Vec<u8>)> {
    inputs
        .iter()
        .filter(|(n, t)| specializable(graph, n, t))
        .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec(), t.to_const().bytes.into_vec()))
        .collect()
}

/// `graph` with the inputs `key` pins turned into constants.
pub(crate) fn graph(graph: &Graph, key: &Key) -> Graph {
    let mut g = graph.clone();
    for (name, dtype, dims, bytes) in &key.values {
        let Some(pos) = g.inputs.iter().position(|v| &g.values[v.index()].name == name) else { continue };
        if let Ok(c) = planner::ConstTensor::new(*dtype, dims.clone(), bytes.clone()) {
            let v = g.inputs.remove(pos);
            g.initializers.insert(v, c);
        }
    }
    g
}

/// Largest value (elements) [`fold_constants`] computes.
const FOLD_MAX_ELEMS: usize = 1 << 18;

/// Bytes [`fold_constants`] may hold beyond the weights while it computes (all values together).
const FOLD_MAX_BYTES: u64 = 64 << 20;

/// `graph` with every node whose inputs are all constants computed on the host by the reference
/// executor and replaced by its results (as ONNX Runtime's constant folding does): a causal mask
/// built from a constant buffer by comparisons and `Where`, position embeddings gathered at a
/// constant `Range`. The planner's own folding covers shape arithmetic; this covers every op the
/// reference runs. Nodes with nested graphs and nodes producing a graph output are left alone; a
/// value over `FOLD_MAX_ELEMS` (the reference's limit stops it) or any failure leaves the graph
/// unchanged (the kernels then compute it as before).
///
/// DequantizeLinear is left alone too (and so is what reads it), as ONNX Runtime's folding leaves
/// it in a QDQ model: folding a quantized weight's dequantization stored it as f32 (four times
/// the bytes of int8) and hid it from the planner's QDQ passes, which multiply the integers
/// exactly and scale after; folded, every GEMM of a QDQ model became a float GEMM of the
/// dequantized weights, rounded differently from the reference's integer products (GPT-2 int8:
/// 3,028 of 65,536 outputs more than one quantum off on the GPU, session 31).
///
/// A Cast (CastLike) of quantized codes (an 8-bit or narrower integer or float weight: int8,
/// int4, float8, ...) is a dequantization spelled out, and is left alone for the same reasons:
/// folded, the weight was stored widened (four times the bytes of int8, eight of int4) and a
/// coded weight never reached the device as its codes.
pub fn fold_constants(graph: Graph) -> Graph {
    use std::collections::BTreeSet;
    let mut known: BTreeSet<planner::ValueId> = graph.initializers.keys().copied().collect();
    // The element types inference gives (an initializer's own where it fails): a weight moved
    // (reshaped, transposed) before its cast is still codes. Inferred once, and only for a graph
    // with a cast of constants.
    let dtypes = std::cell::OnceCell::new();
    let codes = |v: &Option<planner::ValueId>| {
        let dtypes: &Vec<Option<planner::DType>> =
            dtypes.get_or_init(|| match planner::shape_infer::infer(&graph) {
                Ok(infos) => infos.iter().map(|i| Some(i.dtype)).collect(),
                Err(_) => (0..graph.values.len() as u32)
                    .map(|v| graph.initializers.get(&planner::ValueId(v)).map(|c| c.dtype))
                    .collect(),
            });
        let dtype = v.and_then(|v| dtypes.get(v.index()).copied().flatten());
        dtype.is_some_and(|d| d != planner::DType::Bool && d.size_bytes() == 1)
    };
    let mut picked = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        let outputs: Vec<_> = n.outputs.iter().flatten().copied().collect();
        if !n.op.subgraphs().is_empty()
            || matches!(n.op, planner::Op::DequantizeLinear(_))
            || outputs.is_empty()
            || outputs.iter().any(|v| graph.outputs.contains(v))
            || !n.inputs.iter().flatten().all(|v| known.contains(v))
            || (matches!(n.op, planner::Op::Cast(_) | planner::Op::CastLike(_))
                && n.inputs.first().is_some_and(codes))
        {
            continue;
        }
        known.extend(outputs);
        picked.push(i);
    }
    // The picked nodes' outputs that something else reads (the other nodes' uses, gathered once).
    let picked_set: BTreeSet<usize> = picked.iter().copied().collect();
    let read_elsewhere: BTreeSet<planner::ValueId> = (graph.nodes.iter().enumerate())
        .filter(|(j, _)| !picked_set.contains(j))
        .flat_map(|(_, n)| n.uses())
        .collect();
    let frontier: Vec<planner::ValueId> = picked
        .iter()
        .flat_map(|&i| graph.nodes[i].outputs.iter().flatten().copied())
        .filter(|v| read_elsewhere.contains(v))
        .collect();
    if frontier.is_empty() {
        return graph;
    }
    // The picked nodes alone, over their own value table (validation wants every value defined).
    let mut sub = Graph::new();
    let mut ids = std::collections::BTreeMap::new();
    let mut map = |sub: &mut Graph, v: planner::ValueId| {
        *ids.entry(v).or_insert_with(|| {
            let info = &graph.values[v.index()];
            let id = sub.add_value(info.name.clone(), info.info.clone());
            if let Some(c) = graph.initializers.get(&v) {
                sub.initializers.insert(id, c.clone());
            }
            id
        })
    };
    for &i in &picked {
        let mut n = graph.nodes[i].clone();
        n.inputs = n.inputs.iter().map(|v| v.map(|v| map(&mut sub, v))).collect();
        n.outputs = n.outputs.iter().map(|v| v.map(|v| map(&mut sub, v))).collect();
        sub.nodes.push(n);
    }
    sub.outputs = frontier.iter().map(|&v| map(&mut sub, v)).collect();
    let weights: u64 = graph.initializers.values().map(|c| c.bytes.len() as u64).sum();
    // Host work is bounded: no value over FOLD_MAX_ELEMS, and FOLD_MAX_BYTES in all beyond the
    // weights, however many nodes fold (past either the fold stops and the kernels compute it).
    let limits = crate::reference::Limits {
        max_tensor_elems: FOLD_MAX_ELEMS,
        max_total_bytes: weights + FOLD_MAX_BYTES,
        ..crate::reference::Limits::default()
    };
    let Ok(values) = crate::reference::eval_with(&sub, &[], limits) else { return graph };
    let mut g = graph;
    for (v, (_, t)) in frontier.iter().zip(values) {
        g.initializers.insert(*v, t.to_const());
    }
    g.nodes =
        g.nodes.into_iter().enumerate().filter(|(i, _)| !picked_set.contains(i)).map(|(_, n)| n).collect();
    // The folded nodes' internal values are now undefined: compact them away.
    planner::dce::eliminate(&g)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_small_integers_and_resize_roi_or_scales_are_specialized() {
        use planner::op::{self, Op};
        use planner::{DType, Graph};

        use crate::HostTensor;
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [1usize, 4]);
        let s = g.input("s", DType::F32, [2usize]);
        let z = g.input("z", DType::F32, [1usize, 8]);
        let y = g.push_opt(Op::Resize(op::Resize::default()), vec![Some(x), None, Some(s)], 1)[0];
        let w = g.op1(Op::Add, &[y, z]);
        g.output(w);
        let f32s = |n: usize| HostTensor::new(vec![n], vec![1.0f32; n]).unwrap();
        assert!(super::specializable(&g, "s", &f32s(2)));
        // Data (Resize's X, an Add operand) never is, however small.
        assert!(!super::specializable(&g, "x", &f32s(4)));
        assert!(!super::specializable(&g, "z", &f32s(8)));
        // Not a graph input: nothing to specialize.
        assert!(!super::specializable(&g, "k", &HostTensor::new(vec![1], vec![3i64]).unwrap()));
        assert!(!super::specializable(&g, "s", &f32s(65)));
    }

    #[test]
    fn shape_operands_are_specialized_through_shape_arithmetic_and_token_ids_never_are() {
        use planner::op::{self, Op};
        use planner::{ConstTensor, DType, Graph};
        let mut g = Graph::new();
        // Token ids [2, 16] into an embedding table, then a CumSum: data, however small.
        let ids = g.input("ids", DType::I64, [2usize, 16]);
        let table = g.initializer("table", ConstTensor::from_f32(&[10, 4], &[0.5; 40]).unwrap());
        let emb = g.push(Op::Gather(op::Gather::default()), &[table, ids], 1)[0];
        let axis = g.initializer("axis", ConstTensor::from_i64s_as(DType::I64, &[], &[1]).unwrap());
        let cs = g.push(Op::CumSum(op::CumSum::default()), &[emb, axis], 1)[0];
        // A new shape fed as an input, through shape arithmetic (Mul by a constant, Concat) into a
        // Reshape: it decides the plan.
        let shape = g.input("shape", DType::I64, [2usize]);
        let two = g.initializer("two", ConstTensor::from_i64s_as(DType::I64, &[1], &[1]).unwrap());
        let scaled = g.op1(Op::Mul, &[shape, two]);
        let r = g.push(Op::Reshape(op::Reshape::default()), &[cs, scaled], 1)[0];
        g.output(r);
        // A mask [2, 16] turned into floats and added to the data: data too.
        let mask = g.input("mask", DType::I64, [2usize, 16]);
        let mf = g.push(Op::Cast(op::Cast::to(DType::F32)), &[mask], 1)[0];
        let sum = g.op1(Op::Add, &[mf, mf]);
        g.output(sum);
        let i64s = |dims: Vec<usize>| {
            let n = dims.iter().product();
            crate::HostTensor::new(dims, vec![1i64; n]).unwrap()
        };
        assert!(!super::specializable(&g, "ids", &i64s(vec![2, 16])));
        assert!(!super::specializable(&g, "mask", &i64s(vec![2, 16])));
        assert!(super::specializable(&g, "shape", &i64s(vec![2])));
        // The same shape input also read as data (a graph output) is not.
        g.output(shape);
        assert!(!super::specializable(&g, "shape", &i64s(vec![2])));
    }

    #[test]
    fn dropout_ratio_and_training_mode_are_specialized_and_its_data_is_not() {
        use planner::op::{self, Op};
        use planner::{DType, Graph};

        use crate::HostTensor;
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [3usize]);
        let r = g.input("r", DType::F32, Vec::<usize>::new());
        let t = g.input("t", DType::Bool, Vec::<usize>::new());
        let outs = g.push_opt(Op::Dropout(op::Dropout::default()), vec![Some(x), Some(r), Some(t)], 2);
        g.output(outs[0]);
        g.output(outs[1]);
        let scalar_f32 = HostTensor::new(vec![], vec![0.0f32]).unwrap();
        let scalar_bool = HostTensor::new(vec![], vec![true]).unwrap();
        assert!(super::specializable(&g, "r", &scalar_f32));
        assert!(super::specializable(&g, "t", &scalar_bool));
        assert!(!super::specializable(&g, "x", &HostTensor::new(vec![3], vec![1.0f32; 3]).unwrap()));
        // A bool read anywhere else is data.
        let mut h = Graph::new();
        let b = h.input("b", DType::Bool, [1usize]);
        let y = h.op1(Op::Not, &[b]);
        h.output(y);
        assert!(!super::specializable(&h, "b", &HostTensor::new(vec![1], vec![true]).unwrap()));
        // Nor is a ratio that an If's branch also captures (the branch reads it as data).
        let branch = || {
            let mut b = Graph::new();
            let inner = b.add_value("r", None);
            b.captures.push(planner::graph::Capture { inner, outer: r });
            b.output(inner);
            b
        };
        let (then_b, else_b) = (branch(), branch());
        let cond = g.input("c", DType::Bool, Vec::<usize>::new());
        let iff = op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) };
        let o = g.push(Op::If(iff), &[cond], 1)[0];
        g.output(o);
        assert!(!super::specializable(&g, "r", &scalar_f32));
    }

    #[test]
    fn constant_subgraphs_fold_into_initializers_and_the_rest_stays() {
        use planner::{ConstTensor, DType, Graph};
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize, 3]);
        let c = |g: &mut Graph, name: &str, v: [f32; 3]| {
            g.initializer(
                name,
                ConstTensor::new(
                    DType::F32,
                    vec![3],
                    v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>(),
                )
                .unwrap(),
            )
        };
        let (c1, c2) = (c(&mut g, "c1", [1.0, 2.0, 3.0]), c(&mut g, "c2", [0.5, 0.5, -4.0]));
        // A constant chain (Add, then Relu), read by a data node; a constant graph output.
        let t = g.op1(planner::Op::Add, &[c1, c2]);
        let r = g.op1(planner::Op::Relu, &[t]);
        let y = g.op1(planner::Op::Mul, &[x, r]);
        let k = g.op1(planner::Op::Neg, &[c1]);
        g.output(y);
        g.output(k);
        let folded = super::fold_constants(g.clone());
        // The Mul and the output's Neg remain; the Relu's result is a constant [1.5, 2.5, 0].
        assert_eq!(folded.nodes.len(), 2);
        let want: Vec<u8> = [1.5f32, 2.5, 0.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        let name = &g.values[r.index()].name;
        let r =
            folded.values.iter().position(|v| &v.name == name).map(|i| planner::ValueId(i as u32)).unwrap();
        assert_eq!(folded.initializers.get(&r).map(|c| c.bytes.to_vec()), Some(want));
        same_results(&g, &folded);
    }

    /// A quantized weight's DequantizeLinear stays in the graph (its int8 data too), and so does
    /// the MatMul reading it; the results are unchanged.
    #[test]
    fn dequantized_weights_stay_quantized() {
        use planner::{ConstTensor, DType, Graph, Op, op};
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize, 3]);
        let w = g
            .initializer("w", ConstTensor::new(DType::I8, vec![3, 2], vec![1, 255, 3, 128, 127, 0]).unwrap());
        let s =
            g.initializer("s", ConstTensor::new(DType::F32, vec![], 0.25f32.to_le_bytes().to_vec()).unwrap());
        let z = g.initializer("z", ConstTensor::new(DType::I8, vec![], vec![2]).unwrap());
        let d = g.op1(Op::DequantizeLinear(op::Quantize::default()), &[w, s, z]);
        let y = g.op1(Op::MatMul, &[x, d]);
        g.output(y);
        let folded = super::fold_constants(g.clone());
        assert_eq!(folded.nodes.len(), 2, "the DequantizeLinear was folded");
        assert!(folded.nodes.iter().any(|n| matches!(n.op, Op::DequantizeLinear(_))));
        assert!(folded.initializers.values().any(|c| c.dtype == DType::I8 && c.bytes.len() == 6));
        same_results(&g, &folded);
    }

    /// A Cast of quantized codes (int8, float8 e5m2, int4) stays in the graph with its codes, as
    /// a DequantizeLinear does; a Cast of an f32 or a bool constant still folds.
    #[test]
    fn casts_of_codes_stay_and_other_casts_fold() {
        use planner::{Coded, ConstTensor, DType, Graph, Op, op};
        for (dtype, folds) in [
            (DType::I8, false),
            (DType::U8, false),
            (DType::Coded(Coded::F8E5M2), false),
            (DType::Coded(Coded::I4), false),
            (DType::F32, true),
            (DType::Bool, true),
        ] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, [2usize, 3]);
            let bytes = if dtype == DType::F32 {
                [1.0f32, -2.0, 0.5, 3.0, 0.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect()
            } else if dtype == DType::Bool {
                vec![1, 0, 1, 1, 0, 0]
            } else {
                vec![1, 0x35, 3, 0x80, 0x7a, 0]
            };
            let w = g.initializer("w", ConstTensor::new(dtype, vec![3, 2], bytes).unwrap());
            let c = g.op1(Op::Cast(op::Cast::to(DType::F32)), &[w]);
            let y = g.op1(Op::MatMul, &[x, c]);
            g.output(y);
            let folded = super::fold_constants(g.clone());
            let cast_left = folded.nodes.iter().any(|n| matches!(n.op, Op::Cast(_)));
            assert_eq!(cast_left, !folds, "{dtype}");
            assert_eq!(folded.initializers.values().any(|c| c.dtype == dtype), !folds || dtype == DType::F32);
            same_results(&g, &folded);
        }
    }

    /// `folded` gives the bits `g` gives on a `[2, 3]` input `x`.
    fn same_results(g: &planner::Graph, folded: &planner::Graph) {
        let x = crate::HostTensor::new(vec![2, 3], vec![1.0f32, -2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let feeds = vec![("x".to_string(), x)];
        let (a, b) =
            (crate::reference::eval(g, &feeds).unwrap(), crate::reference::eval(folded, &feeds).unwrap());
        assert_eq!(a, b, "folding changed a result");
    }
}
