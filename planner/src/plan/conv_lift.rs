//! Causal depthwise convolutions as exporters write PyTorch's short sequence convolution
//! (`Conv1d(d, d, k, groups = d, padding = k - 1)` then `[..., :L]`, in Mamba, Mamba2 and
//! Griffin blocks):
//!
//! ```text
//! y = Conv(x [B, D, L], w [D, 1, K], b? [D]; group D, pads [K-1, K-1])   // [B, D, L + K - 1]
//! s = Slice(y, starts [0], ends [L], axes [2 | -1])                       // [B, D, L]
//! out = s, or Mul(s, Sigmoid(s))                                         // SiLU, either order
//! ```
//!
//! (or pads `[K-1, 0]` and no Slice) become `CausalConvWithState(x, w as [D, K], b)` with the
//! SiLU as its activation: one launch, no padded result, no slice copy, no activation program.
//! Intermediates read elsewhere keep the pattern unlifted.
//!
//! In a stateful session (`PlanOptions::stateful`) the lifted convolution keeps its window
//! across runs, as the other lifted sequence ops keep theirs: a run continues the previous one's
//! sequence instead of padding with zeros (what step-by-step decoding needs; a stateless run
//! pads, as the exported Conv does).

use crate::constant::ConstTensor;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{CausalConvWithState, ConvActivation, Op};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with every causal depthwise convolution lifted (module doc), and
/// how many there were; `None` when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::Conv(_))) {
        return None;
    }
    let readers = super::fuse::reader_counts(graph);
    let consumers = graph.consumers();
    let mut g = graph.clone();
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let Some((x, weight, bias, last, out, activation)) = causal(graph, infos, (&readers, &consumers), i)
        else {
            continue;
        };
        let Some(w) = graph.constant(weight) else { continue };
        let (d, k) = (w.dims[0], w.dims[2]);
        let Ok(w2) = ConstTensor::new(w.dtype, vec![d, k], w.bytes.clone()) else { continue };
        let wv = g.add_value(format!("{}:causal_weight", n.name), Some(w2.info()));
        g.initializers.insert(wv, w2);
        g.nodes[last] = Node {
            name: graph.nodes[last].name.clone(),
            op: Op::CausalConvWithState(CausalConvWithState { activation, ..Default::default() }),
            inputs: vec![Some(x), Some(wv), bias],
            outputs: vec![Some(out)],
        };
        count += 1;
    }
    (count > 0).then(|| (crate::dce::eliminate(&g), count))
}

/// The lifted form of the pattern starting at Conv node `i`: x, the weight, the bias, the
/// index of the pattern's last node, its output and the activation.
fn causal(
    g: &Graph,
    infos: &[TensorInfo],
    (readers, consumers): (&[usize], &[Vec<NodeId>]),
    i: usize,
) -> Option<(ValueId, ValueId, Option<ValueId>, usize, ValueId, ConvActivation)> {
    let n = &g.nodes[i];
    let Op::Conv(c) = &n.op else { return None };
    let x = n.inputs.first().copied().flatten()?;
    let weight = n.inputs.get(1).copied().flatten()?;
    let bias = n.inputs.get(2).copied().flatten();
    let y = n.output(0)?;
    let dims = |v: ValueId| infos.get(v.index()).filter(|i| i.dtype == DType::F32)?.shape.as_known();
    let [_, d, l] = <[usize; 3]>::try_from(dims(x)?).ok()?;
    let w = g.constant(weight)?;
    let ones = |v: &[usize]| v.iter().all(|&s| s == 1);
    let k = *w.dims.get(2)?;
    let plain = matches!(c.auto_pad, crate::op::AutoPad::NotSet)
        && ones(&c.strides)
        && ones(&c.dilations)
        && c.group == d
        && w.dims == [d, 1, k]
        && w.dtype == DType::F32
        && (1..=kernels_gpu::abi::CONV_MAX_WIDTH as usize).contains(&k)
        && (c.kernel_shape.is_empty() || c.kernel_shape == [k])
        && bias.is_none_or(|b| dims(b).is_some_and(|bd| bd == [d]));
    if !plain {
        return None;
    }
    // The padded form is sliced back to its first L positions.
    let (last, s) = if c.pads == [k - 1, k - 1] {
        if readers[y.index()] != 1 || g.outputs.contains(&y) {
            return None;
        }
        let si = consumers[y.index()].first()?.index();
        let sn = &g.nodes[si];
        let (Op::Slice(_), Some(s)) = (&sn.op, sn.output(0)) else { return None };
        let int = |i: usize| sn.inputs.get(i).copied().flatten().and_then(|v| g.constant(v)?.to_i64s());
        let padded = (l + k - 1) as i64;
        let end = int(2)?.first().map(|&e| if e < 0 { e + padded } else { e.min(padded) })?;
        let axes_ok = int(3).is_some_and(|a| a == [2] || a == [-1]);
        let steps_ok = sn.inputs.get(4).copied().flatten().is_none() || int(4).is_some_and(|s| s == [1]);
        if sn.inputs.first() != Some(&Some(y)) || int(1)? != [0] || end != l as i64 || !axes_ok || !steps_ok {
            return None;
        }
        (si, s)
    } else if c.pads == [k - 1, 0] {
        (i, y)
    } else {
        return None;
    };
    // `s * sigmoid(s)` after, when that is all that reads s.
    if readers[s.index()] == 2 && !g.outputs.contains(&s) {
        let users: Vec<usize> = consumers[s.index()].iter().map(|n| n.index()).collect();
        let sig = users.iter().copied().find(|&i| matches!(g.nodes[i].op, Op::Sigmoid))?;
        let sv = g.nodes[sig].output(0)?;
        let mul = users.iter().copied().find(|&i| i != sig)?;
        let mn = &g.nodes[mul];
        let silu = matches!(mn.op, Op::Mul)
            && readers[sv.index()] == 1
            && !g.outputs.contains(&sv)
            && (mn.inputs == [Some(s), Some(sv)] || mn.inputs == [Some(sv), Some(s)]);
        if silu {
            return Some((x, weight, bias, mul, mn.output(0)?, ConvActivation::Silu));
        }
        return None;
    }
    Some((x, weight, bias, last, s, ConvActivation::None))
}
