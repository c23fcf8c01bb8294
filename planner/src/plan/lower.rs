//! Lowering one node of the (fused, bound) graph to plan steps. One `match` on the op; anything
//! without a GPU kernel yet returns the reason, which `compile` collects for every node. [`scratch`]
//! names the scratch buffers a node's steps need besides its graph values.

use kernels_gpu::abi::GEMV_WARPS;
use kernels_gpu::abi::{
    Activation, BinaryOp, GEMM_SHARED_BYTES, GEMM_THREADS, GEMM_TILE, GEMV_MAX_M, GemmParams, KernelId,
    Params, UnaryOp, UnaryParams,
};

use super::conv::{self, ConvNode};
use super::elementwise::{binary_params, broadcast_strides};
use super::logic;
use super::movement::{self, MoveNode};
use super::norm;
use super::recurrent;
use super::reduce::{self, ReduceNode};
use super::rows::{self, RowNode};
use super::sequence;
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{GeluApproximation, Op};
use crate::tensor_info::DType;

/// A plan is data: parameter structs travel as their bytes.
pub(super) fn bytes_of<T: Params>(p: &T) -> Vec<u8> {
    p.as_bytes().to_vec()
}

pub(super) type Lowered = Result<Vec<Step>, String>;

pub(super) fn dims(values: &[PlannedValue], v: ValueId) -> Result<(&[usize], DType), String> {
    let pv = &values[v.index()];
    pv.dims
        .as_deref()
        .map(|d| (d, pv.dtype))
        .ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

pub(super) fn f32_only(values: &[PlannedValue], vs: &[ValueId]) -> Result<(), String> {
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

pub(super) fn unary_op(op: &Op) -> Option<UnaryOp> {
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

pub(super) fn binary_op(op: &Op) -> Option<BinaryOp> {
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

/// The scratch buffers node `id`'s steps need (named, with their dtype and dims), in the order
/// [`node`] receives their value ids.
pub(super) fn scratch(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    perms: &super::fuse::OperandPerms,
    o: &PlanOptions,
) -> Vec<PlannedValue> {
    match &g.nodes[id.index()].op {
        Op::Lstm(_) | Op::Gru(_) | Op::Rnn(_) => recurrent::scratch(g, id, values).into_iter().collect(),
        Op::Gemm(_) | Op::MatMul => match gemm_of(g, id, values, perms) {
            Ok((p, ..)) if split_k(&p, o.sm_count).0 > 1 => {
                let (splits, _) = split_k(&p, o.sm_count);
                let elems = splits as usize * p.batch as usize * p.m as usize * p.n as usize;
                let name = format!("{}/split-k", g.node_label(id));
                vec![PlannedValue { name, dtype: DType::F32, dims: Some(vec![elems]) }]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Split-K factor and k per split for the tiled GEMM `p`: when its output tiles cannot fill the
/// device (fewer than one per multiprocessor) and k is long, k is cut into chunks (at least 64
/// long, a multiple of the k step) so that about two blocks per multiprocessor run.
pub(super) fn split_k(p: &GemmParams, sm_count: u32) -> (u32, u32) {
    let tiles = p.n.div_ceil(GEMM_TILE) as u64 * p.m.div_ceil(GEMM_TILE) as u64 * p.batch as u64;
    if p.m <= GEMV_MAX_M || p.k < 128 || tiles >= sm_count as u64 || tiles == 0 {
        return (1, p.k);
    }
    let want = (2 * sm_count as u64).div_ceil(tiles).min((p.k / 64) as u64).clamp(1, 32) as u32;
    let chunk = p.k.div_ceil(want).next_multiple_of(kernels_gpu::abi::GEMM_BK);
    (p.k.div_ceil(chunk), chunk)
}

/// The GEMM parameters and operands (A, B, optional C) of a Gemm or MatMul node.
fn gemm_of(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    perms: &super::fuse::OperandPerms,
) -> Result<(GemmParams, ValueId, ValueId, Option<ValueId>), String> {
    let n = &g.nodes[id.index()];
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    let ins = &n.inputs;
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
            Ok((p, a, b, c))
        }
        Op::MatMul => {
            let [Some(a), Some(b)] = ins.as_slice() else { return Err("missing input".into()) };
            f32_only(values, &[*a, *b, out])?;
            let [pa, pb] = perms.get(&out).cloned().unwrap_or([None, None]);
            let p = matmul_params(
                operand_view(dims(values, *a)?.0, pa.as_deref(), true),
                operand_view(dims(values, *b)?.0, pb.as_deref(), false),
            )?;
            Ok((p, *a, *b, None))
        }
        _ => Err("not a GEMM".into()),
    }
}

/// What the fusion passes decided about the node being lowered.
pub(super) struct Fusion<'a> {
    /// The activation fused into a GEMM's epilogue.
    pub act: Option<(Activation, f32)>,
    /// Operand permutations of MatMuls reading transposes through strides.
    pub perms: &'a super::fuse::OperandPerms,
    /// Elementwise programs, by the output of the node standing for each.
    pub programs: &'a super::fuse::Programs,
}

/// The steps computing node `id`; `scratch` holds the value ids of its [`scratch`] buffers, `act`
/// is the activation fused into it (GEMMs and Conv only).
pub(super) fn node(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    scratch: &[ValueId],
    fusion: &Fusion,
    o: &PlanOptions,
) -> Lowered {
    let (act, perms) = (fusion.act, fusion.perms);
    let n = &g.nodes[id.index()];
    if let Op::Lstm(_) | Op::Gru(_) | Op::Rnn(_) = n.op {
        // Any of their outputs may be omitted, the first included.
        return recurrent::lower(g, id, values, scratch);
    }
    let label = n.op.name().to_string();
    let ins: Vec<Option<ValueId>> = n.inputs.clone();
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    if let Some(program) = fusion.programs.get(&out) {
        let inputs: Vec<ValueId> = ins.iter().flatten().copied().collect();
        return ew_program(id, label, program, &inputs, out, values, o);
    }
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
        Op::Gemm(_) | Op::MatMul => {
            let (p, a, b, c) = gemm_of(g, id, values, perms)?;
            Ok(gemm_steps(id, label, p, (a, b, c), out, act, scratch.first().copied(), o))
        }
        Op::Identity
        | Op::Dropout(_)
        | Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Squeeze(_)
        | Op::Unsqueeze(_) => {
            if n.outputs.iter().skip(1).any(Option::is_some) {
                return Err("Dropout's mask output has no GPU kernel yet".into());
            }
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
        Op::Slice(s) => movement::slice(&move_node(id, label, &ins, &n.outputs), s, g, values, o),
        Op::Split(s) => movement::split(&move_node(id, label, &ins, &n.outputs), s, values, o),
        Op::Concat(c) => movement::concat(&move_node(id, label, &ins, &n.outputs), c.axis, values, o),
        Op::Expand => movement::expand(&move_node(id, label, &ins, &n.outputs), values, o),
        Op::Tile => movement::tile(&move_node(id, label, &ins, &n.outputs), g, values, o),
        Op::Pad(p) => movement::pad(&move_node(id, label, &ins, &n.outputs), p, g, values, o),
        Op::GatherNd(a) => {
            movement::gather_nd(&move_node(id, label, &ins, &n.outputs), a.batch_dims, values, o)
        }
        Op::Cast(_) | Op::CastLike(_) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            logic::cast(id, label, x, out, values, o)
        }
        Op::Where => {
            let [Some(c), Some(a), Some(b)] = ins.as_slice() else { return Err("missing input".into()) };
            logic::where_(id, label, *c, *a, *b, out, values, o)
        }
        op if logic::compare_code(op).is_some() => {
            let code = logic::compare_code(op).unwrap_or_default();
            let a = ins.first().copied().flatten().ok_or("missing input")?;
            let b = if matches!(op, Op::Not) {
                a
            } else {
                ins.get(1).copied().flatten().ok_or("missing input")?
            };
            logic::compare(id, label, code, a, b, out, values, o)
        }
        Op::MambaScan
        | Op::SelectiveScan(_)
        | Op::SsdScan(_)
        | Op::GriffinRglru
        | Op::Rglru
        | Op::RwkvWkv6
        | Op::Wkv6(_)
        | Op::CausalConvWithState(_) => sequence::lower(g, id, values, o),
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
        _ if super::fuse::ew_node(g, n).is_some() => {
            // An op only elementwise programs apply: a program of this one node.
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            f32_only(values, &[x, out])?;
            let (program, inputs) = super::fuse::compile_program(g, &[id.index()])
                .ok_or("the op's bounds must be scalar constants")?;
            ew_program(id, label, &program, &inputs, out, values, o)
        }
        _ => Err("no GPU kernel for this operator yet".into()),
    }
}

/// A MatMul operand of `dims` as the kernel walks it: dims and element strides. An absorbed
/// transpose (`perm`: operand dim `d` is source dim `perm[d]`) is read in its contiguous source's
/// layout; a 1-D A gains a leading 1, a 1-D B a trailing 1.
fn operand_view(dims: &[usize], perm: Option<&[usize]>, is_a: bool) -> (Vec<usize>, Vec<u64>) {
    let contiguous = |ds: &[usize]| {
        let mut strides = vec![0u64; ds.len()];
        let mut s = 1u64;
        for (k, &d) in ds.iter().enumerate().rev() {
            strides[k] = s;
            s *= d as u64;
        }
        strides
    };
    let (mut d, mut st): (Vec<usize>, Vec<u64>) = match perm {
        Some(p) => {
            let mut src = vec![0usize; dims.len()];
            for (k, &a) in p.iter().enumerate() {
                src[a] = dims[k];
            }
            let ss = contiguous(&src);
            (dims.to_vec(), p.iter().map(|&a| ss[a]).collect())
        }
        None => (dims.to_vec(), contiguous(dims)),
    };
    if d.len() == 1 {
        if is_a {
            d.insert(0, 1);
            st.insert(0, 0);
        } else {
            d.push(1);
            st.push(0);
        }
    }
    (d, st)
}

/// GEMM parameters of `A @ B` for operand views `(dims, strides)` with NumPy batch broadcasting;
/// the output is contiguous. The broadcast batch must collapse to one strided dim, or fold into
/// the rows when B is shared across it.
fn matmul_params(a: (Vec<usize>, Vec<u64>), b: (Vec<usize>, Vec<u64>)) -> Result<GemmParams, String> {
    let ((ad, ast), (bd, bst)) = (a, b);
    let (ra, rb) = (ad.len(), bd.len());
    let (m, k, n) = (ad[ra - 2], ad[ra - 1], bd[rb - 1]);
    if bd[rb - 2] != k {
        return Err(format!("inner dims {k} and {} differ", bd[rb - 2]));
    }
    let batch_rank = (ra - 2).max(rb - 2);
    // Right-aligned batch dims: (extent, a stride, b stride); broadcast dims read stride 0.
    let mut batch: Vec<(usize, u64, u64)> = Vec::new();
    for i in 0..batch_rank {
        let at = |d: &[usize], st: &[u64], r: usize| {
            let off = batch_rank - (r - 2);
            if i < off { (1, 0) } else { (d[i - off], st[i - off]) }
        };
        let ((na, sa), (nb, sb)) = (at(&ad, &ast, ra), at(&bd, &bst, rb));
        let e = na.max(nb);
        if (na != e && na != 1) || (nb != e && nb != 1) {
            return Err(format!("batch dims {na} and {nb} do not broadcast"));
        }
        if e != 1 {
            batch.push((e, if na == 1 { 0 } else { sa }, if nb == 1 { 0 } else { sb }));
        }
    }
    let mut p = GemmParams {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        batch: 1,
        a_rs: ast[ra - 2],
        a_cs: ast[ra - 1],
        b_rs: bst[rb - 2],
        b_cs: bst[rb - 1],
        alpha: 1.0,
        beta: 0.0,
        y_bs: (m * n) as u64,
        ..GemmParams::default()
    };
    let total: usize = batch.iter().map(|b| b.0).product();
    // B shared across the batch and A's rows contiguous across it: one GEMM with more rows.
    let a_folds = {
        let mut stride = p.a_rs * m as u64;
        batch.iter().rev().all(|&(e, sa, _)| {
            let ok = sa == stride;
            stride *= e as u64;
            ok
        })
    };
    if batch.iter().all(|&(_, _, sb)| sb == 0) && a_folds && total > 1 {
        p.m = (total * m) as u32;
        return Ok(p);
    }
    // Collapse the batch dims into one (each outer stride = inner stride * inner extent).
    let mut collapsed: Vec<(usize, u64, u64)> = Vec::new();
    for (e, sa, sb) in batch {
        match collapsed.last_mut() {
            Some(l) if l.1 == sa * e as u64 && l.2 == sb * e as u64 => *l = (l.0 * e, sa, sb),
            _ => collapsed.push((e, sa, sb)),
        }
    }
    match collapsed.as_slice() {
        [] => {}
        [(e, sa, sb)] => (p.batch, p.a_bs, p.b_bs) = (*e as u32, *sa, *sb),
        _ => {
            return Err(format!(
                "the batch dims collapse to {} strided dims (one has a kernel)",
                collapsed.len()
            ));
        }
    }
    Ok(p)
}

fn move_node<'a>(
    id: NodeId,
    label: String,
    ins: &'a [Option<ValueId>],
    outs: &'a [Option<ValueId>],
) -> MoveNode<'a> {
    MoveNode { id, label, ins, outs }
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

/// The launches computing `out = act(alpha A B + beta C)` from `p`: the GEMV kernel for
/// `p.m <= GEMV_MAX_M`, else the tiled kernel — split over k into `workspace` and reduced by a
/// second launch when [`split_k`] asks for it and a workspace was planned ([`scratch`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_steps(
    id: NodeId,
    label: String,
    mut p: GemmParams,
    (a, b, c): (ValueId, ValueId, Option<ValueId>),
    out: ValueId,
    act: Option<(Activation, f32)>,
    workspace: Option<ValueId>,
    o: &PlanOptions,
) -> Vec<Step> {
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
    let c_arg = c.map_or(Arg::Null, Arg::Value);
    let launch = |label: String, kernel, grid, block, shared_bytes, args| Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid,
        block,
        shared_bytes,
        args,
    };
    if p.m <= GEMV_MAX_M {
        let cols = if p.b_cs == 1 { kernels_gpu::abi::GEMV_COLS } else { 1 };
        let args = vec![Arg::Params(bytes_of(&p)), Arg::Value(a), Arg::Value(b), c_arg, Arg::Value(out)];
        let grid = [p.n.div_ceil(cols).max(1), p.batch, 1];
        return vec![launch(
            label,
            KernelId::GemvF32,
            grid,
            [GEMV_WARPS * 32, 1, 1],
            GEMM_SHARED_BYTES,
            args,
        )];
    }
    let tiles = [p.n.div_ceil(GEMM_TILE).max(1), p.m.div_ceil(GEMM_TILE), p.batch];
    let block = [GEMM_THREADS, GEMM_THREADS, 1];
    let (splits, chunk) = split_k(&p, o.sm_count);
    let Some(ws) = workspace.filter(|_| splits > 1) else {
        let args = vec![Arg::Params(bytes_of(&p)), Arg::Value(a), Arg::Value(b), c_arg, Arg::Value(out)];
        return vec![launch(label, KernelId::GemmF32, tiles, block, GEMM_SHARED_BYTES, args)];
    };
    (p.splits, p.k_chunk) = (splits, chunk);
    let outputs = p.batch as u64 * p.m as u64 * p.n as u64;
    let partial =
        vec![Arg::Params(bytes_of(&p)), Arg::Value(a), Arg::Value(b), c_arg.clone(), Arg::Value(ws)];
    let reduce = vec![Arg::Params(bytes_of(&p)), c_arg, Arg::Value(ws), Arg::Value(out)];
    vec![
        launch(
            format!("{label} split-k x{splits}"),
            KernelId::GemmF32,
            [tiles[0], tiles[1], p.batch * splits],
            block,
            GEMM_SHARED_BYTES,
            partial,
        ),
        launch(
            format!("{label} split-k reduce"),
            KernelId::GemmReduceF32,
            linear_grid(o, outputs),
            [THREADS, 1, 1],
            0,
            reduce,
        ),
    ]
}

/// The launch of an elementwise program whose inputs are `inputs` (broadcast to `out`).
fn ew_program(
    id: NodeId,
    label: String,
    program: &super::fuse::EwProgram,
    inputs: &[ValueId],
    out: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    use kernels_gpu::abi::{EW_MAX_INPUTS, EW_MAX_INSTRS, EwProgramParams, MAX_RANK};
    let od = dims(values, out)?.0;
    if inputs.len() > EW_MAX_INPUTS || program.instrs.len() > EW_MAX_INSTRS {
        return Err("the elementwise program exceeds the kernel's inputs or instructions".into());
    }
    let elems = od.iter().product::<usize>() as u64;
    let mut p = EwProgramParams {
        elems,
        n_instr: program.instrs.len() as u32,
        n_inputs: inputs.len() as u32,
        out_reg: program.out_reg,
        ..EwProgramParams::default()
    };
    p.instrs[..program.instrs.len()].copy_from_slice(&program.instrs);
    let shapes: Vec<&[usize]> =
        inputs.iter().map(|&v| dims(values, v).map(|d| d.0)).collect::<Result<_, _>>()?;
    if !shapes.iter().all(|s| *s == od) {
        let strides: Vec<Vec<i64>> =
            shapes.iter().map(|s| super::elementwise::broadcast_strides_i64(s, od.len())).collect();
        let dims_ = super::elementwise::collapse_dims(od, &strides);
        if dims_.len() > MAX_RANK {
            return Err("the broadcast collapses to more than 8 dims".into());
        }
        p.rank = dims_.len().max(1) as u32;
        let first = MAX_RANK - p.rank as usize;
        p.out_shape[MAX_RANK - 1] = 1;
        for (k, (n, s)) in dims_.into_iter().enumerate() {
            p.out_shape[first + k] = n as u64;
            for (j, st) in s.into_iter().enumerate() {
                p.strides[j][first + k] = st as u64;
            }
        }
    }
    let mut args = vec![Arg::Params(bytes_of(&p))];
    for k in 0..EW_MAX_INPUTS {
        args.push(inputs.get(k).map_or(Arg::Null, |&v| Arg::Value(v)));
    }
    args.push(Arg::Value(out));
    let label = format!("{label}[{} ops]", program.instrs.len());
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label,
        kernel: kernels_gpu::abi::KernelId::EwProgramF32,
        grid: linear_grid(o, elems),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(m: u32, n: u32, k: u32, batch: u32) -> GemmParams {
        GemmParams { m, n, k, batch, ..GemmParams::default() }
    }

    #[test]
    fn split_k_fills_the_device_only_when_tiles_cannot() {
        // GPT-2's MLP down-projection: 8 tiles, k 1024 -> 16 chunks of 64.
        assert_eq!(split_k(&p(128, 256, 1024, 1), 132), (16, 64));
        // k too short, or enough tiles, or a GEMV: no split.
        assert_eq!(split_k(&p(128, 256, 64, 1), 132).0, 1);
        assert_eq!(split_k(&p(1024, 1024, 4096, 1), 132).0, 1);
        assert_eq!(split_k(&p(4, 256, 4096, 1), 132).0, 1);
        // Chunks are multiples of the k step and cover k exactly once.
        for k in [128, 129, 700, 1000, 4097] {
            let (splits, chunk) = split_k(&p(70, 90, k, 3), 132);
            assert_eq!(chunk % kernels_gpu::abi::GEMM_BK, 0);
            assert!(splits * chunk >= k && (splits - 1) * chunk < k, "k {k}: {splits} x {chunk}");
        }
    }
}
