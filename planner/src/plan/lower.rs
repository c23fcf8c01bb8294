//! Lowering one node of the (fused, bound) graph to plan steps. One `match` on the op; anything
//! without a GPU kernel yet returns the reason, which `compile` collects for every node. [`scratch`]
//! names the scratch buffers a node's steps need besides its graph values.

use kernels_gpu::abi::{Activation, BinaryOp, GemmParams, Params, UnaryOp, compare_op};

use super::blocks;
use super::conv::{self, ConvNode};
use super::elementwise::binary_params;
use super::ew_ops::{self, Variadic};
use super::gemm::{Epilogue, gemm_of, gemm_steps, splits_of};
use super::indexing;
use super::logic;
use super::loss;
use super::movement::{self, MoveNode};
use super::norm;
use super::recurrent;
use super::reduce::{self, ReduceNode};
use super::resize;
use super::rows::{self, RowNode};
use super::sequence;
use super::vision;
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{GeluApproximation, Op};
use crate::tensor_info::DType;

/// A plan is data: parameter structs travel as their bytes.
pub(super) fn bytes_of<T: Params>(p: &T) -> Vec<u8> {
    p.as_bytes().to_vec()
}

pub(super) type Lowered = Result<Vec<Step>, String>;

/// The A segments of a GEMM of parameters `p` (`gemm_cat`), checked against the path
/// `gemm_steps` takes: only the `wgmma` entries on a packed B read them.
fn cat_of(p: &GemmParams, fusion: &Fusion, o: &PlanOptions) -> Result<Option<super::gemm_cat::CatA>, String> {
    match fusion.cat {
        Some(cat) if fusion.packed_b.is_none() || !super::gemm::runs_tile(p, o) => Err(format!(
            "its A operand was planned as segments of row tables ({cat:?}), which only the wgmma GEMM \
             on a packed weight reads"
        )),
        cat => Ok(cat.cloned()),
    }
}

/// Most elements one value of a plan may have (2^48: far beyond any device's memory), so that the
/// lowerings' element counts and byte offsets cannot overflow.
const MAX_PLAN_ELEMS: u64 = 1 << 48;

/// `v`'s dims and dtype; an error for a data-dependent shape or one of more than
/// [`MAX_PLAN_ELEMS`] elements (a hostile Pad or Expand of absurd sizes).
pub(super) fn dims(values: &[PlannedValue], v: ValueId) -> Result<(&[usize], DType), String> {
    let pv = &values[v.index()];
    let d = pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))?;
    let elems = d.iter().try_fold(1u64, |n, &x| n.checked_mul(x as u64).filter(|&n| n <= MAX_PLAN_ELEMS));
    if elems.is_none() {
        return Err(format!("`{}` of shape {d:?} has more than 2^48 elements", pv.name));
    }
    Ok((d, pv.dtype))
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

/// The grid of a kernel that computes one element a thread (blocks of [`THREADS`]) over `elems`
/// elements: all of them, not capped as a grid-stride loop's.
pub(super) fn one_thread_each(elems: u64) -> Result<[u32; 3], String> {
    match u32::try_from(elems.div_ceil(THREADS as u64).max(1)) {
        Ok(blocks) if blocks < i32::MAX as u32 => Ok([blocks, 1, 1]),
        _ => Err(format!("{elems} elements need more thread blocks than a grid holds")),
    }
}

pub(super) fn linear_grid(o: &PlanOptions, work: u64) -> [u32; 3] {
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
        Op::LinearAttention(_) => super::linear_attention::scratch(g, id, values).into_iter().collect(),
        Op::SsdScan(_) => sequence::ssd_scratch(g, id, values, o),
        Op::Wkv6(_) | Op::RwkvWkv6 => sequence::wkv6_scratch(g, id, values, o),
        Op::SoftmaxCrossEntropyLoss(_) => {
            let n = &g.nodes[id.index()];
            match (n.inputs.first().copied().flatten(), n.outputs.get(1).copied().flatten()) {
                (Some(x), None) => {
                    let name = format!("{}/log-prob", g.node_label(id));
                    vec![loss::sce_scratch(name, &values[x.index()])]
                }
                _ => Vec::new(),
            }
        }
        Op::Conv(a) | Op::FusedConv(crate::op::FusedConv { conv: a, .. }) => {
            let n = &g.nodes[id.index()];
            conv::scratch(&conv_node(id, g.node_label(id), n), values, a, o).into_iter().collect()
        }
        Op::Gemm(_) | Op::MatMul | Op::FusedGemm(_) => {
            let planned = gemm_of(g, id, values, perms);
            match planned
                .map(|(p, _, b, _)| (p, splits_of(&p, super::tc_pack::takes_wg_packed(g, &p, b, o), o).0))
            {
                Ok((p, splits)) if splits > 1 => {
                    let elems = splits as usize * p.batch as usize * p.m as usize * p.n as usize;
                    let name = format!("{}/split-k", g.node_label(id));
                    vec![PlannedValue { name, dtype: DType::F32, dims: Some(vec![elems]) }]
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
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
    /// Epilogue programs of fused GEMMs, by the fused node's output.
    pub gemm_programs: &'a super::epilogue::GemmPrograms,
    /// The packed B of a GEMM that runs `gemm_tc_packed_f32` (`tc_pack`).
    pub packed_b: Option<ValueId>,
    /// Whether that B is packed by the device from a value it computes (`tc_pack::DevicePack`),
    /// not uploaded: the GEMM then reads it only after waiting for the previous kernel.
    pub packed_b_computed: bool,
    /// The LayerNormalization the GEMM applies to its A rows (`norm_gemm`).
    pub norm: Option<super::norm_gemm::NormGemm>,
    /// The segments the GEMM reads A from (`gemm_cat`).
    pub cat: Option<&'a super::gemm_cat::CatA>,
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
    if let Op::Scan(s) = &n.op {
        // Any output may be omitted (an unread final state).
        return super::scan_program::lower(g, id, s, values, o);
    }
    let label = n.op.name().to_string();
    let ins: Vec<Option<ValueId>> = n.inputs.clone();
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    if let Some(program) = fusion.programs.get(&out) {
        let inputs: Vec<ValueId> = ins.iter().flatten().copied().collect();
        return ew_program(id, label, program, &inputs, out, values);
    }
    if let Some(code) = logic::int_arith_code(&n.op, ins.len())
        && logic::is_int_arith_type(values[out.index()].dtype)
    {
        let a = ins.first().copied().flatten().ok_or("missing input")?;
        let unary = matches!(n.op, Op::Neg | Op::Abs | Op::BitwiseNot);
        let b = if unary { a } else { ins.get(1).copied().flatten().ok_or("missing input")? };
        return logic::int_arith(g, id, label, code, (a, b), out, values, o);
    }
    if let Some(u) = unary_op(&n.op) {
        let x = ins.first().copied().flatten().ok_or("missing input")?;
        return ew_ops::unary(id, label, u, x, out, values, o);
    }
    let variadic = match n.op {
        Op::Sum => Some(Variadic::Sum),
        Op::Mean => Some(Variadic::Mean),
        Op::Max if ins.len() != 2 => Some(Variadic::Max),
        Op::Min if ins.len() != 2 => Some(Variadic::Min),
        _ => None,
    };
    if let Some(v) = variadic {
        return ew_ops::variadic(id, label, v, &ins, out, values);
    }
    if let Some(b) = binary_op(&n.op) {
        let [Some(x), Some(y)] = ins.as_slice() else {
            return Err("an omitted input".into());
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
            let (mut p, a, b, c) = gemm_of(g, id, values, perms)?;
            p.b_computed = fusion.packed_b_computed as u32;
            let epi = Epilogue { act, program: None, norm: fusion.norm, cat: cat_of(&p, fusion, o)? };
            let b = (b, fusion.packed_b);
            Ok(gemm_steps(id, label, p, (a, b, c), out, epi, scratch.first().copied(), o))
        }
        Op::FusedGemm(f) => {
            let (mut p, a, b, c) = gemm_of(g, id, values, perms)?;
            p.b_computed = fusion.packed_b_computed as u32;
            let b = (b, fusion.packed_b);
            let fused = fusion.gemm_programs.get(&out).ok_or("a FusedGemm without its program")?;
            let cat = cat_of(&p, fusion, o)?;
            let extras = fused_extras(n, &ins);
            let base = if f.gemm.is_some() { "Gemm" } else { "MatMul" };
            // A program left empty (a bias add that became C) is no program; a spelled-out
            // activation runs as the built-in one.
            let (label, epi) = if fused.program.instrs.is_empty() && extras.is_empty() {
                (format!("{base}+Bias"), Epilogue { act, program: None, norm: fusion.norm, cat })
            } else if let (None, true, Some(found)) = (
                act,
                extras.is_empty(),
                super::epilogue::as_activation(&fused.program, o.activation_tolerance),
            ) {
                let label =
                    if f.gemm.is_none() && c.is_some() { format!("{base}+Bias") } else { base.to_string() };
                (label, Epilogue { act: Some((found, 0.0)), program: None, norm: fusion.norm, cat })
            } else {
                if fusion.norm.is_some() {
                    return Err("a LayerNormalization folded into a GEMM with an epilogue program".into());
                }
                let params = fused_program_params(&fused.program, out, &extras, values)?;
                let params = super::gemm::gemm_aligned(params, p.batch, p.m, p.n);
                let label = match act {
                    Some((a, _)) => format!("{base}+{a:?}+{}", fused.label),
                    None => format!("{base}+{}", fused.label),
                };
                (label, Epilogue { act, program: Some((params, extras)), norm: None, cat })
            };
            Ok(gemm_steps(id, label, p, (a, b, c), out, epi, scratch.first().copied(), o))
        }
        Op::Identity
        | Op::BitCast(_)
        | Op::Dropout(_)
        | Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Squeeze(_)
        | Op::Unsqueeze(_) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            let bytes = values[out.index()].bytes().ok_or("data-dependent output size")?;
            let mut steps = vec![Step::Copy { node: id, src: x, dst: out, bytes }];
            if let Some(mask) = n.outputs.get(1).copied().flatten() {
                // Inference: nothing dropped, the mask is all true. A training-mode Dropout with a
                // non-zero ratio draws random masks (the reference refuses it too).
                let constant =
                    |k: usize| ins.get(k).copied().flatten().map(|v| g.constant(v).map(|c| c.to_f64s()));
                let ratio_zero = matches!(constant(1), Some(Some(r)) if r.first() == Some(&0.0));
                let training = match constant(2) {
                    None => false,
                    Some(Some(t)) => t.first().is_some_and(|&v| v != 0.0),
                    Some(None) if ratio_zero => false,
                    Some(None) => return Err("Dropout with a run-time training_mode".into()),
                };
                if training && !ratio_zero {
                    return Err("training-mode Dropout draws random masks".into());
                }
                steps.extend(logic::compare(id, label, compare_op::TRUE, x, x, mask, values, o)?);
            }
            Ok(steps)
        }
        Op::Softmax(a) => rows::softmax(row_node(id, label, &ins, out), values, a.axis, false, o),
        Op::LogSoftmax(a) => rows::softmax(row_node(id, label, &ins, out), values, a.axis, true, o),
        Op::LpNormalization(a) => rows::lp_norm(row_node(id, label, &ins, out), values, a.axis, a.p, o),
        Op::Hardmax(a) => rows::hardmax(row_node(id, label, &ins, out), values, a.axis, o),
        Op::LayerNormalization(a) => {
            let stats = [n.outputs.get(1).copied().flatten(), n.outputs.get(2).copied().flatten()];
            for v in stats.into_iter().flatten() {
                f32_only(values, &[v]).map_err(|_| "Mean / InvStdDev in a stash type other than f32")?;
            }
            rows::layer_norm(row_node(id, label, &ins, out), values, a.axis, a.epsilon, stats, o)
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
        Op::FusedGather(f) => {
            let (Some(Some(x)), Some(Some(i))) = (ins.first(), ins.get(1)) else {
                return Err("missing input".into());
            };
            let fused = fusion.gemm_programs.get(&out).ok_or("a FusedGather without its program")?;
            let extras = fused_extras(n, &ins);
            let params = fused_program_params(&fused.program, out, &extras, values)?;
            let label = format!("Gather+{}", fused.label);
            movement::gather_program(id, label, (*x, *i, &extras), out, f.axis, params, values, o)
        }
        Op::Slice(s) => movement::slice(&move_node(id, label, &ins, &n.outputs), s, g, values, o),
        Op::Split(s) => movement::split(&move_node(id, label, &ins, &n.outputs), s, values, o),
        Op::Concat(c) => movement::concat(&move_node(id, label, &ins, &n.outputs), c.axis, values, o),
        Op::Expand => movement::expand(&move_node(id, label, &ins, &n.outputs), values, o),
        Op::Tile => movement::tile(&move_node(id, label, &ins, &n.outputs), g, values, o),
        Op::Pad(p) => movement::pad(&move_node(id, label, &ins, &n.outputs), p, g, values, o),
        Op::CenterCropPad(c) => {
            movement::center_crop_pad(&move_node(id, label, &ins, &n.outputs), c.axes.as_deref(), values, o)
        }
        Op::Resize(r) => resize::resize(&move_node(id, label, &ins, &n.outputs), r, g, values, o),
        Op::GatherNd(a) => {
            movement::gather_nd(&move_node(id, label, &ins, &n.outputs), a.batch_dims, values, o)
        }
        Op::PRelu => {
            let [Some(x), Some(slope)] = ins.as_slice() else { return Err("missing input".into()) };
            ew_ops::prelu(id, label, (*x, *slope), out, values)
        }
        Op::Mod(m) if m.fmod && values[out.index()].dtype == DType::F32 => {
            let [Some(a), Some(b)] = ins.as_slice() else { return Err("missing input".into()) };
            ew_ops::fmod(id, label, (*a, *b), out, values)
        }
        Op::Shrink(a) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            ew_ops::shrink(id, label, x, out, (a.lambd, a.bias), values)
        }
        Op::NegativeLogLikelihoodLoss(a) => {
            let ln = loss_node(id, label, n, a.reduction, a.ignore_index);
            loss::nll(&ln, values, o)
        }
        Op::SoftmaxCrossEntropyLoss(a) => {
            let ln = loss_node(id, label, n, a.reduction, a.ignore_index);
            loss::sce(&ln, scratch.first().copied(), values, o)
        }
        Op::GatherElements(a) => {
            indexing::gather_elements(&move_node(id, label, &ins, &n.outputs), a.axis, values, o)
        }
        Op::ScatterElements(a) => {
            let mn = move_node(id, label, &ins, &n.outputs);
            indexing::scatter_elements(&mn, a.axis, a.reduction, values, o)
        }
        Op::ScatterNd(a) => {
            indexing::scatter_nd(&move_node(id, label, &ins, &n.outputs), a.reduction, values, o)
        }
        Op::Scatter(a) => {
            let mn = move_node(id, label, &ins, &n.outputs);
            indexing::scatter_elements(&mn, a.axis, crate::op::ScatterReduction::None, values, o)
        }
        Op::Trilu(a) => indexing::trilu(&move_node(id, label, &ins, &n.outputs), a.upper, values, o),
        Op::CumSum(a) => indexing::cumsum(&move_node(id, label, &ins, &n.outputs), (a, false), g, values, o),
        Op::CumProd(a) => indexing::cumsum(&move_node(id, label, &ins, &n.outputs), (a, true), g, values, o),
        Op::TensorScatter(a) => blocks::tensor_scatter(&move_node(id, label, &ins, &n.outputs), a, values, o),
        Op::Det => blocks::det(&move_node(id, label, &ins, &n.outputs), values, o),
        Op::TreeEnsemble(t) => blocks::tree_ensemble(&move_node(id, label, &ins, &n.outputs), t, values, o),
        Op::RoiAlign(a) => vision::roi_align(&move_node(id, label, &ins, &n.outputs), a, values, o),
        Op::DeformConv(a) => vision::deform_conv(&move_node(id, label, &ins, &n.outputs), a, values, o),
        Op::DepthToSpace(a) => {
            let mn = move_node(id, label, &ins, &n.outputs);
            indexing::depth_to_space(&mn, a.blocksize, a.mode, values, o)
        }
        Op::SpaceToDepth(a) => {
            indexing::space_to_depth(&move_node(id, label, &ins, &n.outputs), a.blocksize, values, o)
        }
        Op::Cast(crate::op::Cast { saturate, round_mode, .. })
        | Op::CastLike(crate::op::CastLike { saturate, round_mode }) => {
            let x = ins.first().copied().flatten().ok_or("missing input")?;
            logic::cast(id, label, (x, out), (*saturate, *round_mode), values, o)
        }
        Op::OneHot(a) => {
            let [Some(i), Some(_), Some(v)] = ins.as_slice() else { return Err("missing input".into()) };
            logic::one_hot(id, label, (*i, *v), out, a.axis, values, o)
        }
        Op::Where => {
            let [Some(c), Some(a), Some(b)] = ins.as_slice() else { return Err("missing input".into()) };
            logic::where_(id, label, *c, *a, *b, out, values, o)
        }
        op if logic::compare_code(op).is_some() => {
            let code = logic::compare_code(op).unwrap_or_default();
            let a = ins.first().copied().flatten().ok_or("missing input")?;
            let b = if matches!(op, Op::Not | Op::IsNaN | Op::IsInf(_)) {
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
        | Op::LinearScan
        | Op::RwkvWkv6
        | Op::Wkv6(_)
        | Op::CausalConvWithState(_) => sequence::lower(g, id, values, scratch, o),
        Op::Conv(a) => {
            let operands = (fusion.packed_b, scratch.first().copied());
            conv::conv(conv_node(id, label, n), values, a, act, operands, None, o)
        }
        Op::FusedConv(f) => {
            let fused = fusion.gemm_programs.get(&out).ok_or("a FusedConv without its program")?;
            let extras = fused_extras(n, &ins);
            let label = format!("Conv+{}", fused.label);
            let operands = (fusion.packed_b, scratch.first().copied());
            let program = Some((&fused.program, extras.as_slice()));
            conv::conv(conv_node(id, label, n), values, &f.conv, act, operands, program, o)
        }
        Op::ConvTranspose(a) => conv::conv_transpose(conv_node(id, label, n), values, a, o),
        Op::MaxPool(a) => conv::max_pool(conv_node(id, label, n), values, a, o),
        Op::AveragePool(a) => conv::average_pool(conv_node(id, label, n), values, a, o),
        Op::LpPool(a) => conv::lp_pool(conv_node(id, label, n), values, a, o),
        Op::BatchNormalization(a) => norm::batch_norm(conv_node(id, label, n), values, a, o),
        Op::GroupNormalization(a) => norm::group_norm(conv_node(id, label, n), values, a, o),
        Op::InstanceNormalization(a) => norm::instance_norm(conv_node(id, label, n), values, a, o),
        Op::Lrn(a) => norm::lrn(conv_node(id, label, n), values, a, o),
        Op::ReverseSequence(a) => movement::reverse_sequence(
            &move_node(id, label, &ins, &n.outputs),
            (a.batch_axis, a.time_axis),
            values,
            o,
        ),
        Op::ArgMax(a) => reduce::arg_reduce(reduce_node(id, label, &ins, out), values, true, a, o),
        Op::ArgMin(a) => reduce::arg_reduce(reduce_node(id, label, &ins, out), values, false, a, o),
        Op::GlobalAveragePool => reduce::global_pool(reduce_node(id, label, &ins, out), values, false, o),
        Op::GlobalMaxPool => reduce::global_pool(reduce_node(id, label, &ins, out), values, true, o),
        Op::Attention(a) => super::attention_op::lower(g, id, a, values, o),
        Op::Dft(a) => super::sampling::dft(g, id, label, a, out, values, o),
        Op::Stft(a) => super::sampling::stft(g, id, label, a, out, values, o),
        Op::Col2Im(a) => super::sampling::col2im(g, id, label, a, out, values, o),
        Op::LinearAttention(a) => super::linear_attention::lower(g, id, a, values, scratch, o),
        Op::AffineGrid(a) => {
            let theta = ins.first().copied().flatten().ok_or("missing input")?;
            super::sampling::affine_grid(id, label, a, theta, out, values, o)
        }
        Op::GridSample(a) => {
            let [Some(x), Some(grid)] = ins.as_slice() else { return Err("missing input".into()) };
            super::sampling::grid_sample(id, label, a, (*x, *grid), out, values, o)
        }
        Op::RotaryEmbedding(a) => {
            let at = |k: usize| ins.get(k).copied().flatten();
            let (Some(x), Some(cos), Some(sin)) = (at(0), at(1), at(2)) else {
                return Err("RotaryEmbedding needs X and both caches".into());
            };
            super::rotary::rotary(id, label, a, (x, cos, sin, at(3)), out, values, o)
        }
        Op::TopK(a) => {
            let (Some(x), Some(indices)) = (ins.first().copied().flatten(), n.output(1)) else {
                return Err("TopK needs its input and both outputs".into());
            };
            super::select::top_k(id, label, a, x, (out, indices), values, o)
        }
        _ if super::fuse::ew_node(g, n).is_some() => {
            // An op only elementwise programs apply: a program of this one node (Clip's bounds,
            // when not constants, are program inputs broadcast from their one element).
            if ins.first().copied().flatten().is_none() {
                return Err("missing input".into());
            }
            let mut all: Vec<ValueId> = ins.iter().flatten().copied().collect();
            all.push(out);
            f32_only(values, &all)?;
            let (program, inputs) = super::fuse::compile_program(g, &[id.index()])
                .ok_or("the node's operands do not fit an elementwise program")?;
            ew_program(id, label, &program, &inputs, out, values)
        }
        _ => Err("no GPU kernel for this operator yet".into()),
    }
}

fn move_node<'a>(
    id: NodeId,
    label: String,
    ins: &'a [Option<ValueId>],
    outs: &'a [Option<ValueId>],
) -> MoveNode<'a> {
    MoveNode { id, label, ins, outs }
}

fn loss_node(
    id: NodeId,
    label: String,
    n: &crate::graph::Node,
    reduction: crate::op::LossReduction,
    ignore_index: Option<i64>,
) -> loss::LossNode<'_> {
    loss::LossNode { id, label, ins: &n.inputs, outs: &n.outputs, reduction, ignore_index }
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

/// The launch of an elementwise program whose inputs are `inputs` (broadcast to `out`).
pub(super) fn ew_program(
    id: NodeId,
    label: String,
    program: &super::fuse::EwProgram,
    inputs: &[ValueId],
    out: ValueId,
    values: &[PlannedValue],
) -> Lowered {
    use kernels_gpu::abi::EW_MAX_INPUTS;
    let od = dims(values, out)?.0;
    let shapes: Vec<&[usize]> =
        inputs.iter().map(|&v| dims(values, v).map(|d| d.0)).collect::<Result<_, _>>()?;
    let p = program_params(program, &shapes, od)?;
    let elems = p.elems;
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
        grid: one_thread_each(elems)?,
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args,
    }])
}

/// The program inputs of fused node `n` after its producer's operands ([`Op::fused_operands`]).
fn fused_extras(n: &crate::graph::Node, ins: &[Option<ValueId>]) -> Vec<ValueId> {
    ins.iter().skip(n.op.fused_operands().unwrap_or(ins.len())).flatten().copied().collect()
}

/// The parameters of a fused node's epilogue `program` over its output `out`, input 0 being the
/// producer's result and `extras` the other inputs.
pub(super) fn fused_program_params(
    program: &super::fuse::EwProgram,
    out: ValueId,
    extras: &[ValueId],
    values: &[PlannedValue],
) -> Result<kernels_gpu::abi::EwProgramParams, String> {
    let od = dims(values, out)?.0;
    let mut shapes = vec![od];
    for &x in extras {
        shapes.push(dims(values, x)?.0);
    }
    program_params(program, &shapes, od)
}

/// The parameters of `program` over an output of dims `od` whose inputs have dims `shapes` (each
/// broadcast to `od`).
pub(super) fn program_params(
    program: &super::fuse::EwProgram,
    shapes: &[&[usize]],
    od: &[usize],
) -> Result<kernels_gpu::abi::EwProgramParams, String> {
    use kernels_gpu::abi::{EW_MAX_INPUTS, EW_MAX_INSTRS, EwProgramParams, MAX_RANK};
    if shapes.len() > EW_MAX_INPUTS || program.instrs.len() > EW_MAX_INSTRS {
        return Err("the elementwise program exceeds the kernel's inputs or instructions".into());
    }
    // An input of higher rank than the output (a Clip bound of shape [1] on a scalar) broadcasts
    // through its trailing dims when the extra leading ones are 1.
    let shapes: Vec<&[usize]> = (shapes.iter())
        .map(|s| {
            let extra = s.len().saturating_sub(od.len());
            if s[..extra].iter().all(|&d| d == 1) {
                Ok(&s[extra..])
            } else {
                Err(format!("an input of shape {s:?} does not broadcast to {od:?}"))
            }
        })
        .collect::<Result<_, _>>()?;
    let elems = od.iter().product::<usize>() as u64;
    let mut p = EwProgramParams {
        elems,
        n_instr: program.instrs.len() as u32,
        n_inputs: shapes.len() as u32,
        out_reg: program.out_reg,
        ..EwProgramParams::default()
    };
    p.instrs[..program.instrs.len()].copy_from_slice(&program.instrs);
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
    Ok(p.with_fast_division())
}
