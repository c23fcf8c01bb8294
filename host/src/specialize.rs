//! Plans specialized on input values: a [`Session`](crate::Session) whose compile needed the
//! values of small inputs (shape operands fed as graph inputs; Resize's float roi / scales) keys
//! its plans on those values and compiles them with the inputs as constants.

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
/// (a shape operand, axes, sizes, pads), or a small float tensor that only Resize reads, as its roi
/// or scales (never data a kernel computes on).
pub(crate) fn specializable(graph: &Graph, name: &str, t: &HostTensor) -> bool {
    if t.len() > SPECIALIZE_MAX_ELEMS {
        return false;
    }
    match t.dtype() {
        DType::I64 => true,
        DType::F32 | DType::F16 | DType::F64 => resize_operand(graph, name),
        _ => false,
    }
}

/// Whether graph input `name` is read only as the roi or scales of Resize nodes.
fn resize_operand(graph: &Graph, name: &str) -> bool {
    let Some(&v) = graph.inputs.iter().find(|v| graph.values[v.index()].name == name) else { return false };
    if graph.outputs.contains(&v) {
        return false;
    }
    let mut uses = graph.nodes.iter().flat_map(|n| {
        n.inputs.iter().enumerate().filter(|(_, i)| **i == Some(v)).map(move |(slot, _)| (&n.op, slot))
    });
    let mut any = false;
    uses.all(|(op, slot)| {
        any = true;
        matches!(op, planner::Op::Resize(_)) && (slot == 1 || slot == 2)
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
}
