//! Lowering one node of the (fused, bound) graph to plan steps. One `match` on the op; anything
//! without a GPU kernel yet returns the reason, which `compile` collects for every node.

use kernels_gpu::abi::GEMV_WARPS;
use kernels_gpu::abi::{
    Activation, BinaryOp, GEMM_SHARED_BYTES, GEMM_THREADS, GEMM_TILE, GEMV_MAX_M, GemmParams, Params,
    UnaryOp, UnaryParams,
};

use super::conv::{self, ConvNode};
use super::elementwise::{binary_params, broadcast_strides};
use super::movement;
use super::norm;
use super::reduce::{self, ReduceNode};
use super::rows::{self, RowNode};
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{GeluApproximation, Op};
use crate::tensor_info::DType;

/// A plan is data: parameter structs travel as their bytes.
fn bytes_of<T: Params>(p: &T) -> Vec<u8> {
    p.as_bytes().to_vec()
}

type Lowered = Result<Vec<Step>, String>;

fn dims(values: &[PlannedValue], v: ValueId) -> Result<(&[usize], DType), String> {
    let pv = &values[v.index()];
    pv.dims
        .as_deref()
        .map(|d| (d, pv.dtype))
        .ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

fn f32_only(values: &[PlannedValue], vs: &[ValueId]) -> Result<(), String> {
    for &v in vs {
        let pv = &values[v.index()];
        if pv.dtype != DType::F32 {
            return Err(format!("`{}` is {}; the GPU kernels take f32 so far", pv.name, pv.dtype));
        }
    }
    Ok(())
}

fn linear_grid(o: &PlanOptions, work: u64) -> [u32; 3] {
    capped_grid(o.sm_count, work.div_ceil(THREADS as u64))
}

fn unary_op(op: &Op) -> Option<UnaryOp> {
    Some(match op {
        Op::Relu => UnaryOp::Relu,
        Op::LeakyRelu(l) => UnaryOp::LeakyRelu { alpha: l.alpha },
        Op::Sigmoid => UnaryOp::Sigmoid,
        Op::Tanh => UnaryOp::Tanh,
        Op::Exp => UnaryOp::Exp,
        Op::Log => UnaryOp::Log,
        Op::Sqrt => UnaryOp::Sqrt,
        Op::Abs => UnaryOp::Abs,
        Op::Neg => UnaryOp::Neg,
        Op::Erf => UnaryOp::Erf,
        Op::Softplus => UnaryOp::Softplus,
        Op::Gelu(g) => match g.approximate {
            GeluApproximation::None => UnaryOp::GeluErf,
            GeluApproximation::Tanh => UnaryOp::GeluTanh,
        },
        _ => return None,
    })
}

fn binary_op(op: &Op) -> Option<BinaryOp> {
    Some(match op {
        Op::Add => BinaryOp::Add,
        Op::Sub => BinaryOp::Sub,
        Op::Mul => BinaryOp::Mul,
        Op::Div => BinaryOp::Div,
        Op::Pow => BinaryOp::Pow,
        Op::Max => BinaryOp::Max,
        Op::Min => BinaryOp::Min,
        _ => return None,
    })
}

/// The steps computing node `id`; `act` is the activation fused into it (GEMMs and Conv only).
pub(super) fn node(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    act: Option<(Activation, f32)>,
    o: &PlanOptions,
) -> Lowered {
    let n = &g.nodes[id.index()];
    let label = n.op.name().to_string();
    let ins: Vec<Option<ValueId>> = n.inputs.clone();
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    if let Some(u) = unary_op(&n.op) {
        let x = ins.first().copied().flatten().ok_or("missing input")?;
        f32_only(values, &[x, out])?;
        let elems = dims(values, x)?.0.iter().product::<usize>() as u64;
        let p = UnaryParams { elems, alpha: u.alpha(), _pad: 0 };
        return Ok(vec![Step::Kernel {
            nodes: vec![id],
            label,
            kernel: u.kernel(),
            grid: linear_grid(o, elems.div_ceil(4)),
            block: [THREADS, 1, 1],
            shared_bytes: 0,
            args: vec![Arg::Params(bytes_of(&p)), Arg::Value(x), Arg::Value(out)],
        }]);
    }
    if let Some(b) = binary_op(&n.op) {
        let [Some(x), Some(y)] = ins.as_slice() else {
            return Err("only the two-input form has a kernel".into());
        };
        f32_only(values, &[*x, *y, out])?;
        let (xd, yd, od) = (dims(values, *x)?.0, dims(values, *y)?.0, dims(values, out)?.0);
        let p = binary_params(xd, yd, od).ok_or("broadcast collapses to more than 8 dims")?;
        let work = if p.rank == 0 { p.elems.div_ceil(4) } else { p.elems };
        return Ok(vec![Step::Kernel {
            nodes: vec![id],
            label,
            kernel: b.kernel(),
            grid: linear_grid(o, work),
            block: [THREADS, 1, 1],
            shared_bytes: 0,
            args: vec![Arg::Params(bytes_of(&p)), Arg::Value(*x), Arg::Value(*y), Arg::Value(out)],
        }]);
    }
    if let Some((op, attrs)) = reduce::reduce_op(&n.op) {
        return reduce::reduce(g, reduce_node(id, label, &ins, out), values, op, attrs, o);
    }
    match &n.op {
        Op::Gemm(attrs) => {
            let (a, b) = match ins.as_slice() {
                [Some(a), Some(b), ..] => (*a, *b),
                _ => return Err("missing A or B".into()),
            };
            let c = ins.get(2).copied().flatten();
            f32_only(values, &[a, b, out])?;
            let (ad, bd) = (dims(values, a)?.0, dims(values, b)?.0);
            let (m, k) = if attrs.trans_a { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
            let nn = if attrs.trans_b { bd[0] } else { bd[1] };
            let mut p = GemmParams {
                m: m as u32,
                n: nn as u32,
                k: k as u32,
                batch: 1,
                a_rs: if attrs.trans_a { 1 } else { k as u64 },
                a_cs: if attrs.trans_a { m as u64 } else { 1 },
                b_rs: if attrs.trans_b { 1 } else { nn as u64 },
                b_cs: if attrs.trans_b { k as u64 } else { 1 },
                alpha: attrs.alpha,
                beta: attrs.beta,
                ..GemmParams::default()
            };
            if let Some(c) = c {
                f32_only(values, &[c])?;
                let cs = broadcast_strides(dims(values, c)?.0, 2);
                (p.c_rs, p.c_cs, p.has_c) = (cs[0] as u64, cs[1] as u64, 1);
            }
            Ok(vec![gemm_step(id, label, p, a, b, c, out, act)])
        }
        Op::MatMul => {
            let [Some(a), Some(b)] = ins.as_slice() else { return Err("missing input".into()) };
            f32_only(values, &[*a, *b, out])?;
            let (mut ad, mut bd) = (dims(values, *a)?.0.to_vec(), dims(values, *b)?.0.to_vec());
            if ad.len() == 1 {
                ad.insert(0, 1);
            }
            if bd.len() == 1 {
                bd.push(1);
            }
            let (m, k, nn) = (ad[ad.len() - 2], ad[ad.len() - 1], bd[bd.len() - 1]);
            let (a_batch, b_batch) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
            let (ab, bb): (usize, usize) = (a_batch.iter().product(), b_batch.iter().product());
            let mut p = GemmParams {
                m: m as u32,
                n: nn as u32,
                k: k as u32,
                batch: 1,
                a_rs: k as u64,
                a_cs: 1,
                b_rs: nn as u64,
                b_cs: 1,
                alpha: 1.0,
                beta: 0.0,
                y_bs: (m * nn) as u64,
                ..GemmParams::default()
            };
            if bb == 1 {
                // Shared weights: the batch folds into the rows of one GEMM.
                p.m = (ab * m) as u32;
            } else if ab == 1 || a_batch == b_batch {
                p.batch = ab.max(bb) as u32;
                p.a_bs = if ab == 1 { 0 } else { (m * k) as u64 };
                p.b_bs = (k * nn) as u64;
            } else {
                return Err(format!("batch broadcast {a_batch:?} x {b_batch:?} has no kernel yet"));
            }
            Ok(vec![gemm_step(id, label, p, *a, *b, None, out, act)])
        }
        Op::Identity
        | Op::Dropout(_)
        | Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Squeeze(_)
        | Op::Unsqueeze(_) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            let bytes = values[out.index()].bytes().ok_or("data-dependent output size")?;
            Ok(vec![Step::Copy { node: id, src: x, dst: out, bytes }])
        }
        Op::Softmax(a) => rows::softmax(row_node(id, label, &ins, out), values, a.axis, false, o),
        Op::LogSoftmax(a) => rows::softmax(row_node(id, label, &ins, out), values, a.axis, true, o),
        Op::LayerNormalization(a) => {
            if n.outputs.iter().skip(1).any(Option::is_some) {
                return Err("the LayerNormalization kernel writes Y only, not Mean or InvStdDev".into());
            }
            rows::layer_norm(row_node(id, label, &ins, out), values, a.axis, a.epsilon, o)
        }
        Op::RmsNormalization(a) => {
            rows::rms_norm(row_node(id, label, &ins, out), values, a.axis, a.epsilon, o)
        }
        Op::Transpose(t) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            movement::transpose(id, label, x, out, t.perm.as_deref(), values, o)
        }
        Op::Gather(a) => {
            let [Some(x), Some(i)] = ins.as_slice() else { return Err("missing input".into()) };
            movement::gather(id, label, *x, *i, out, a.axis, values, o)
        }
        Op::Conv(a) => conv::conv(conv_node(id, label, n), values, a, act, o),
        Op::ConvTranspose(a) => conv::conv_transpose(conv_node(id, label, n), values, a, o),
        Op::MaxPool(a) => conv::max_pool(conv_node(id, label, n), values, a, o),
        Op::AveragePool(a) => conv::average_pool(conv_node(id, label, n), values, a, o),
        Op::BatchNormalization(a) => norm::batch_norm(conv_node(id, label, n), values, a, o),
        Op::GroupNormalization(a) => norm::group_norm(conv_node(id, label, n), values, a, o),
        Op::InstanceNormalization(a) => norm::instance_norm(conv_node(id, label, n), values, a, o),
        Op::ArgMax(a) => reduce::arg_reduce(reduce_node(id, label, &ins, out), values, true, a, o),
        Op::ArgMin(a) => reduce::arg_reduce(reduce_node(id, label, &ins, out), values, false, a, o),
        Op::GlobalAveragePool => reduce::global_pool(reduce_node(id, label, &ins, out), values, false, o),
        Op::GlobalMaxPool => reduce::global_pool(reduce_node(id, label, &ins, out), values, true, o),
        _ => Err("no GPU kernel for this operator yet".into()),
    }
}

fn conv_node(id: NodeId, label: String, n: &crate::graph::Node) -> ConvNode<'_> {
    ConvNode { id, label, ins: &n.inputs, outs: &n.outputs }
}

fn reduce_node(id: NodeId, label: String, ins: &[Option<ValueId>], out: ValueId) -> ReduceNode<'_> {
    ReduceNode { id, label, ins, out }
}

fn row_node(id: NodeId, label: String, ins: &[Option<ValueId>], out: ValueId) -> RowNode<'_> {
    RowNode { id, label, ins, out }
}

#[allow(clippy::too_many_arguments)]
fn gemm_step(
    id: NodeId,
    label: String,
    mut p: GemmParams,
    a: ValueId,
    b: ValueId,
    c: Option<ValueId>,
    out: ValueId,
    act: Option<(Activation, f32)>,
) -> Step {
    let label = match act {
        Some((a, _)) => format!("{label}+{a:?}"),
        None => label,
    };
    if let Some((a, alpha)) = act {
        (p.act, p.act_alpha) = (a as u32, alpha);
    }
    if p.y_bs == 0 {
        p.y_bs = p.m as u64 * p.n as u64;
    }
    let (kernel, grid, block) = if p.m <= GEMV_MAX_M {
        let cols = if p.b_cs == 1 { kernels_gpu::abi::GEMV_COLS } else { 1 };
        (
            kernels_gpu::abi::KernelId::GemvF32,
            [p.n.div_ceil(cols).max(1), p.batch, 1],
            [GEMV_WARPS * 32, 1, 1],
        )
    } else {
        (
            kernels_gpu::abi::KernelId::GemmF32,
            [p.n.div_ceil(GEMM_TILE).max(1), p.m.div_ceil(GEMM_TILE), p.batch],
            [GEMM_THREADS, GEMM_THREADS, 1],
        )
    };
    let c_arg = c.map_or(Arg::Null, Arg::Value);
    Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid,
        block,
        shared_bytes: GEMM_SHARED_BYTES,
        args: vec![Arg::Params(bytes_of(&p)), Arg::Value(a), Arg::Value(b), c_arg, Arg::Value(out)],
    }
}
