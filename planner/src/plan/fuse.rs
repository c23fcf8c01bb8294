//! Activation fusion: an activation whose only input is a GEMM's (Gemm, MatMul or Conv, f32)
//! output, when it is that output's only consumer, becomes the GEMM kernel's epilogue. The
//! rewritten graph has the GEMM write the activation's output directly, and the intermediate
//! value is dropped from the value table (ids renumbered), so it gets no buffer.

use kernels_gpu::abi::Activation;

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{GeluApproximation, Op};
use crate::tensor_info::{DType, TensorInfo};

fn activation_of(op: &Op) -> Option<(Activation, f32)> {
    Some(match op {
        Op::Relu => (Activation::Relu, 0.0),
        Op::Sigmoid => (Activation::Sigmoid, 0.0),
        Op::Tanh => (Activation::Tanh, 0.0),
        Op::LeakyRelu(l) => (Activation::LeakyRelu, l.alpha),
        Op::Gelu(g) => match g.approximate {
            GeluApproximation::None => (Activation::GeluErf, 0.0),
            GeluApproximation::Tanh => (Activation::GeluTanh, 0.0),
        },
        _ => return None,
    })
}

/// The fused graph and, per GEMM node of it (new ids), the activation its epilogue applies.
pub(super) fn activations(g: &Graph, infos: &[TensorInfo]) -> (Graph, Vec<(NodeId, Activation, f32)>) {
    let mut readers = vec![0usize; g.values.len()];
    for n in &g.nodes {
        for u in n.uses() {
            readers[u.index()] += 1;
        }
    }
    let mut out = g.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut fused: Vec<(usize, Activation, f32)> = Vec::new();
    for (ai, act_node) in g.nodes.iter().enumerate() {
        let (Some((act, alpha)), [Some(x)], [Some(y)]) =
            (activation_of(&act_node.op), act_node.inputs.as_slice(), act_node.outputs.as_slice())
        else {
            continue;
        };
        let producer = g
            .nodes
            .iter()
            .position(|n| matches!(n.op, Op::Gemm(_) | Op::MatMul | Op::Conv(_)) && n.output(0) == Some(*x));
        let Some(pi) = producer else { continue };
        let single_use = readers[x.index()] == 1 && !g.outputs.contains(x);
        let f32s = infos.get(x.index()).is_some_and(|i| i.dtype == DType::F32);
        if single_use && f32s && !removed[pi] && !fused.iter().any(|(p, ..)| *p == pi) {
            out.nodes[pi].outputs[0] = Some(*y);
            removed[ai] = true;
            fused.push((pi, act, alpha));
        }
    }
    let mut new_id = vec![None; g.nodes.len()];
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for (i, n) in out.nodes.into_iter().enumerate() {
        if !removed[i] {
            new_id[i] = Some(NodeId(nodes.len() as u32));
            nodes.push(n);
        }
    }
    out.nodes = nodes;
    let mut dead = vec![false; g.values.len()];
    for (ai, n) in g.nodes.iter().enumerate() {
        if removed[ai] {
            for x in n.inputs.iter().flatten() {
                dead[x.index()] = true;
            }
        }
    }
    let epilogues = fused.into_iter().filter_map(|(p, a, alpha)| Some((new_id[p]?, a, alpha))).collect();
    (drop_values(out, &dead), epilogues)
}

/// `g` without the values marked dead (which nothing defines or reads), ids renumbered.
fn drop_values(mut g: Graph, dead: &[bool]) -> Graph {
    let mut map = vec![None; g.values.len()];
    let mut values = Vec::with_capacity(g.values.len());
    for (i, v) in g.values.drain(..).enumerate() {
        if !dead[i] {
            map[i] = Some(ValueId(values.len() as u32));
            values.push(v);
        }
    }
    g.values = values;
    let re = |v: ValueId| map[v.index()].expect("only unreferenced values are dropped");
    for n in &mut g.nodes {
        for slot in n.inputs.iter_mut().chain(n.outputs.iter_mut()).flatten() {
            *slot = re(*slot);
        }
        for sub in n.op.subgraphs_mut() {
            for c in &mut sub.captures {
                c.outer = re(c.outer);
            }
        }
    }
    for v in g.inputs.iter_mut().chain(g.outputs.iter_mut()) {
        *v = re(*v);
    }
    g.initializers = std::mem::take(&mut g.initializers).into_iter().map(|(v, c)| (re(v), c)).collect();
    g
}
