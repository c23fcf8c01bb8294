//! Lowering of the type-generic `logic` kernels: Cast / CastLike, comparisons and boolean logic
//! (bool output, NumPy broadcasting), Where (three-way broadcasting), OneHot.

use kernels_gpu::abi::{
    CastParams, CompareParams, KernelId, MAX_RANK, OneHotParams, Params, WhereParams, compare_op, int_op,
    scalar,
};

use super::elementwise::{binary_params, broadcast_strides_i64, collapse_dims};
use super::lower::{Lowered, dims};
use super::{Arg, PlanOptions, PlannedValue};
use crate::coded::RoundMode;
use crate::error::PlanError;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Bitwise, Op, ShiftDirection};
use crate::tensor_info::{DType, TensorInfo};

/// The kernels' code for `dtype`; the dtypes without GPU kernels are refused.
pub fn scalar_code(dtype: DType) -> Result<u32, String> {
    Ok(match dtype {
        DType::F32 => scalar::F32,
        DType::F64 => scalar::F64,
        DType::I64 => scalar::I64,
        DType::I32 => scalar::I32,
        DType::I8 => scalar::I8,
        DType::U8 => scalar::U8,
        DType::Bool => scalar::BOOL,
        DType::F16 => scalar::F16,
        DType::BF16 => scalar::BF16,
        DType::I16 => scalar::I16,
        DType::U16 => scalar::U16,
        DType::U32 => scalar::U32,
        DType::U64 => scalar::U64,
        DType::Coded(c) => c.scalar(),
        DType::String => return Err(no_gpu_dtype(dtype)),
    })
}

/// Refuses, all at once, the nodes that read or write a dtype their GPU kernels do not take.
/// Strings have no kernel; int16, uint16 / 32 / 64 and the coded types (float8, float4, int4,
/// int2, one code a byte) run in the type-generic kernels ([`held_anywhere`]) and nowhere else:
/// the other lowerings assume the native types, so a node of theirs reading one is refused here
/// rather than computed wrongly.
pub(super) fn native_dtypes(g: &Graph, infos: &[TensorInfo]) -> Result<(), PlanError> {
    let mut missing = Vec::new();
    for (id, node) in g.nodes.iter().enumerate() {
        let foreign = node
            .inputs
            .iter()
            .flatten()
            .chain(node.outputs.iter().flatten())
            .map(|v| infos[v.index()].dtype)
            .find(|&d| !d.is_native() && !held_anywhere(&node.op, node.inputs.len(), d));
        if let Some(d) = foreign {
            missing.push((g.node_label(NodeId(id as u32)), node.op.name(), no_gpu_dtype(d)));
        }
    }
    if missing.is_empty() { Ok(()) } else { Err(PlanError::NoKernel { nodes: missing }) }
}

/// Whether `op`'s GPU lowering takes values of `dtype` whatever it is (but strings): Cast and
/// CastLike, comparisons and boolean logic (the `logic` kernels, by [`scalar_code`]), integer
/// arithmetic, bitwise ops and shifts on integers of every width (`int_arith`), and the views
/// and BitCast, which copy bytes.
fn held_anywhere(op: &Op, inputs: usize, dtype: DType) -> bool {
    dtype != DType::String
        && (matches!(
            op,
            Op::Cast(_)
                | Op::CastLike(_)
                | Op::BitCast(_)
                | Op::Identity
                | Op::Reshape(_)
                | Op::Flatten(_)
                | Op::Squeeze(_)
                | Op::Unsqueeze(_)
        ) || compare_code(op).is_some()
            || (int_arith_code(op, inputs).is_some() && is_int_arith_type(dtype)))
}

/// Why a value of `dtype` (one the CPU reference holds but no GPU kernel) cannot be planned.
pub fn no_gpu_dtype(dtype: DType) -> String {
    format!("no GPU kernel takes {dtype} elements yet (the CPU reference runs them: --device cpu)")
}

/// The comparison / logic op code of `op`, if it is one (IsNaN and IsInf included).
pub fn compare_code(op: &Op) -> Option<u32> {
    Some(match op {
        Op::Equal => compare_op::EQUAL,
        Op::Less => compare_op::LESS,
        Op::Greater => compare_op::GREATER,
        Op::LessOrEqual => compare_op::LESS_OR_EQUAL,
        Op::GreaterOrEqual => compare_op::GREATER_OR_EQUAL,
        Op::And => compare_op::AND,
        Op::Or => compare_op::OR,
        Op::Xor => compare_op::XOR,
        Op::Not => compare_op::NOT,
        Op::IsNaN => compare_op::IS_NAN,
        Op::IsInf(a) => match (a.detect_positive, a.detect_negative) {
            (true, true) => compare_op::IS_INF,
            (true, false) => compare_op::IS_POS_INF,
            (false, true) => compare_op::IS_NEG_INF,
            (false, false) => compare_op::FALSE,
        },
        _ => return None,
    })
}

/// The `int_arith` op code of `op` with `inputs` inputs, if that kernel computes it (on integer
/// operands).
pub fn int_arith_code(op: &Op, inputs: usize) -> Option<u32> {
    Some(match op {
        Op::Add => int_op::ADD,
        Op::Sum if inputs == 2 => int_op::ADD,
        Op::Sub => int_op::SUB,
        Op::Mul => int_op::MUL,
        Op::Div => int_op::DIV,
        Op::Mod(m) if m.fmod => int_op::FMOD,
        Op::Mod(_) => int_op::MOD,
        Op::Max if inputs == 2 => int_op::MAX,
        Op::Min if inputs == 2 => int_op::MIN,
        Op::Pow => int_op::POW,
        Op::Neg => int_op::NEG,
        Op::Abs => int_op::ABS,
        Op::Bitwise(Bitwise::And) => int_op::AND,
        Op::Bitwise(Bitwise::Or) => int_op::OR,
        Op::Bitwise(Bitwise::Xor) => int_op::XOR,
        Op::BitwiseNot => int_op::NOT,
        Op::BitShift(s) if s.direction == ShiftDirection::Left => int_op::SHL,
        Op::BitShift(_) => int_op::SHR,
        _ => return None,
    })
}

/// Whether `dtype` is one `int_arith` computes (every integer width; the shifts only take the
/// unsigned ones, as ONNX's BitShift does).
pub fn is_int_arith_type(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U64 | DType::U32 | DType::U16 | DType::U8
    )
}

/// Integer arithmetic `y = op(a, b)` (`code` from [`int_arith_code`]; Neg, Abs and BitwiseNot
/// pass `a` twice). A Div or Mod whose divisor is not a constant without zeros takes the status
/// word ([`Arg::Status`]): a zero divisor, an error in the reference, is reported by the session
/// after the run, naming the node.
#[allow(clippy::too_many_arguments)]
pub(super) fn int_arith(
    g: &Graph,
    id: NodeId,
    label: String,
    code: u32,
    (a, b): (ValueId, ValueId),
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((ad, dtype), (bd, btype), (yd, ytype)) = (dims(values, a)?, dims(values, b)?, dims(values, y)?);
    if btype != dtype || ytype != dtype {
        return Err(format!("integer arithmetic on {dtype} and {btype} into {ytype}"));
    }
    if matches!(code, int_op::SHL | int_op::SHR)
        && !matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    {
        return Err(format!("BitShift takes unsigned integers, not {dtype}"));
    }
    // A divisor not known to be free of zeros is checked on the device: a zero raises the
    // session's status word to this node's code, which the session reports after the run as the
    // error the reference gives (`Plan::checks`).
    let checked = matches!(code, int_op::DIV | int_op::MOD | int_op::FMOD)
        && !g.constant(b).and_then(|c| c.to_i64s()).is_some_and(|v| v.iter().all(|&x| x != 0));
    let bin = binary_params(ad, bd, yd).ok_or("the broadcast collapses to more than 8 dims")?;
    let status_code = if checked { status_code(id) } else { 0 };
    let p = CompareParams { bin, op: code, dtype: scalar_code(dtype)?, status_code, _pad: 0 };
    let status = if checked { Arg::Status } else { Arg::Null };
    launch(
        id,
        label,
        KernelId::IntArith,
        &p,
        bin.elems,
        o,
        [Arg::Value(a), Arg::Value(b), status, Arg::Value(y)],
    )
}

/// The code a checked step of node `id` raises the status word to (never 0, which is "no error").
pub(super) fn status_code(id: NodeId) -> u32 {
    id.0 + 1
}

fn launch(
    id: NodeId,
    label: String,
    kernel: KernelId,
    p: &impl Params,
    work: u64,
    o: &PlanOptions,
    args: impl IntoIterator<Item = Arg>,
) -> Lowered {
    if work == 0 {
        return Ok(Vec::new());
    }
    Ok(super::movement::step(id, label, kernel, p, work, o, args.into_iter().collect()))
}

/// Cast / CastLike of `x` into `y` (the output's dtype is the target), with Cast's `saturate`
/// and `round_mode` for the coded float targets.
pub(super) fn cast(
    id: NodeId,
    label: String,
    (x, y): (ValueId, ValueId),
    (saturate, round): (bool, RoundMode),
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((xd, from), (_, to)) = (dims(values, x)?, dims(values, y)?);
    let elems = xd.iter().product::<usize>() as u64;
    let p = CastParams {
        elems,
        from: scalar_code(from)?,
        to: scalar_code(to)?,
        saturate: saturate as u32,
        round: round.code(),
    };
    launch(id, label, KernelId::Cast, &p, elems, o, [x, y].map(Arg::Value))
}

/// A comparison or logic op (`code` from [`compare_code`]); the one-operand ops (Not, IsNaN,
/// IsInf) pass their input twice.
#[allow(clippy::too_many_arguments)]
pub(super) fn compare(
    id: NodeId,
    label: String,
    code: u32,
    a: ValueId,
    b: ValueId,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((ad, dtype), (bd, _), (yd, _)) = (dims(values, a)?, dims(values, b)?, dims(values, y)?);
    let bin = binary_params(ad, bd, yd).ok_or("the broadcast collapses to more than 8 dims")?;
    let p = CompareParams { bin, op: code, dtype: scalar_code(dtype)?, status_code: 0, _pad: 0 };
    if matches!(dtype, DType::F16 | DType::BF16) {
        return Err(format!("comparisons of {dtype} have no kernel yet"));
    }
    launch(id, label, KernelId::Compare, &p, bin.elems, o, [a, b, y].map(Arg::Value))
}

/// Where(cond, a, b) with three-way broadcasting to `y`.
#[allow(clippy::too_many_arguments)]
pub(super) fn where_(
    id: NodeId,
    label: String,
    c: ValueId,
    a: ValueId,
    b: ValueId,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((cd, _), (ad, dtype), (bd, _), (yd, _)) =
        (dims(values, c)?, dims(values, a)?, dims(values, b)?, dims(values, y)?);
    let elems = yd.iter().product::<usize>() as u64;
    let mut p = WhereParams { elems, ..WhereParams::default() };
    if !(cd == yd && ad == yd && bd == yd) {
        let r = yd.len();
        let strides = [cd, ad, bd].map(|d| broadcast_strides_i64(d, r));
        let dims = collapse_dims(yd, &strides);
        if dims.len() > MAX_RANK {
            return Err("the broadcast collapses to more than 8 dims".into());
        }
        p.rank = dims.len() as u32;
        let first = MAX_RANK - dims.len();
        for (k, (n, s)) in dims.into_iter().enumerate() {
            p.out_shape[first + k] = n as u64;
            (p.c_strides[first + k], p.a_strides[first + k], p.b_strides[first + k]) =
                (s[0] as u64, s[1] as u64, s[2] as u64);
        }
        if p.rank == 0 {
            // One element: offsets 0 everywhere.
            p.rank = 1;
            p.out_shape[MAX_RANK - 1] = 1;
        }
    }
    let kernel = match dtype.size_bytes() {
        1 => KernelId::WhereB1,
        4 => KernelId::WhereB4,
        8 => KernelId::WhereB8,
        _ => return Err(format!("Where of {dtype} has no kernel yet")),
    };
    launch(id, label, kernel, &p, elems, o, [c, a, b, y].map(Arg::Value))
}

/// OneHot(indices, depth, values) along `axis` of the output; the depth is the output's extent
/// there (shape inference needs it constant).
#[allow(clippy::too_many_arguments)]
pub(super) fn one_hot(
    id: NodeId,
    label: String,
    (idx, values_in): (ValueId, ValueId),
    y: ValueId,
    axis: i64,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((id_dims, it), (vd, vt), (yd, _)) = (dims(values, idx)?, dims(values, values_in)?, dims(values, y)?);
    if vd.iter().product::<usize>() != 2 {
        return Err(format!("values must hold [off, on], got {vd:?}"));
    }
    if matches!(it, DType::Bool | DType::F16 | DType::BF16) {
        return Err(format!("indices of {it}"));
    }
    let r = yd.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) || yd.len() != id_dims.len() + 1 {
        return Err(format!("axis {axis} for output {yd:?}"));
    }
    let a = a as usize;
    let prod = |s: &[usize]| s.iter().product::<usize>() as u64;
    let p = OneHotParams {
        outer: prod(&id_dims[..a]),
        depth: yd[a] as u64,
        inner: prod(&id_dims[a..]),
        index_type: scalar_code(it)?,
        value_type: scalar_code(vt)?,
    };
    launch(id, label, KernelId::OneHot, &p, prod(yd), o, [idx, values_in, y].map(Arg::Value))
}
