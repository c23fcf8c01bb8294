//! Plans specialized on input values: a [`Session`](crate::Session) whose compile needed the
//! values of small inputs (shape operands fed as graph inputs; Resize's float roi / scales) keys
//! its plans on those values and compiles them with the inputs as constants. Dropout's ratio and
//! training mode fed as graph inputs are specialized the same way: with them constant the plan is
//! a copy and an all-true mask, or (training with a non-zero ratio) refused, as the reference does.

use planner::{Binding, DType, Graph};

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

/// Whether a plan may be specialized on the values of input `t` of `graph`: a small integer tensor
/// (a shape operand, axes, sizes, pads), or a small float or bool tensor that only decides what the
/// plan does ([`plan_operand`]: never data a kernel computes on).
pub(crate) fn specializable(graph: &Graph, name: &str, t: &HostTensor) -> bool {
    if t.len() > SPECIALIZE_MAX_ELEMS {
        return false;
    }
    match t.dtype() {
        DType::I64 => true,
        DType::F32 | DType::F16 | DType::F64 | DType::Bool => plan_operand(graph, name, t.dtype()),
        _ => false,
    }
}

/// Whether graph input `name` (of type `dtype`) is read only where its value decides the plan:
/// Resize's roi or scales, Range's bounds, Dropout's ratio or training mode (the bool).
fn plan_operand(graph: &Graph, name: &str, dtype: DType) -> bool {
    let Some(&v) = graph.inputs.iter().find(|v| graph.values[v.index()].name == name) else { return false };
    if graph.outputs.contains(&v) {
        return false;
    }
    // A body capturing the value reads it as data.
    if graph.nodes.iter().any(|n| n.uses().contains(&v) && !n.inputs.contains(&Some(v))) {
        return false;
    }
    let mut uses = graph.nodes.iter().flat_map(|n| {
        n.inputs.iter().enumerate().filter(|(_, i)| **i == Some(v)).map(move |(slot, _)| (&n.op, slot))
    });
    let mut any = false;
    uses.all(|(op, slot)| {
        any = true;
        match op {
            // A bool is only ever Dropout's training mode.
            planner::Op::Dropout(_) => (dtype == DType::Bool) == (slot == 2) && slot >= 1,
            _ if dtype == DType::Bool => false,
            // Resize's roi or scales, or a Range bound (its output's length is the value's).
            planner::Op::Resize(_) => slot == 1 || slot == 2,
            planner::Op::Range => true,
            _ => false,
        }
    }) && any
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
        .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec(), t.to_const().bytes))
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

/// `graph` with every node whose inputs are all constants computed on the host by the reference
/// executor and replaced by its results (as ONNX Runtime's constant folding does): a causal mask
/// built from a constant buffer by comparisons and `Where`, position embeddings gathered at a
/// constant `Range`. The planner's own folding covers shape arithmetic; this covers every op the
/// reference runs. Nodes with nested graphs and nodes producing a graph output are left alone; a
/// value over `FOLD_MAX_ELEMS` (the reference's limit stops it) or any failure leaves the graph
/// unchanged (the kernels then compute it as before).
pub fn fold_constants(graph: Graph) -> Graph {
    use std::collections::BTreeSet;
    let mut known: BTreeSet<planner::ValueId> = graph.initializers.keys().copied().collect();
    let mut picked = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        let outputs: Vec<_> = n.outputs.iter().flatten().copied().collect();
        if !n.op.subgraphs().is_empty()
            || outputs.is_empty()
            || outputs.iter().any(|v| graph.outputs.contains(v))
            || !n.inputs.iter().flatten().all(|v| known.contains(v))
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
    let limits = crate::reference::Limits {
        max_tensor_elems: FOLD_MAX_ELEMS,
        max_total_bytes: weights + 4 * FOLD_MAX_ELEMS as u64 * 8 * picked.len() as u64,
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
        assert!(super::specializable(&g, "k", &HostTensor::new(vec![1], vec![3i64]).unwrap()));
        assert!(!super::specializable(&g, "s", &f32s(65)));
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

        use crate::HostTensor;
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize, 3]);
        let c = |g: &mut Graph, name: &str, v: [f32; 3]| {
            g.initializer(
                name,
                ConstTensor::new(DType::F32, vec![3], v.iter().flat_map(|f| f.to_le_bytes()).collect())
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
        assert_eq!(folded.initializers.get(&r).map(|c| c.bytes.clone()), Some(want));
        // Same results as the original graph.
        let feeds = vec![(
            "x".to_string(),
            HostTensor::new(vec![2, 3], vec![1.0f32, -2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
        )];
        let (a, b) =
            (crate::reference::eval(&g, &feeds).unwrap(), crate::reference::eval(&folded, &feeds).unwrap());
        assert_eq!(a, b);
    }
}
