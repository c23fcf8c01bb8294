//! Constructors of convolution, pooling, normalization and attention operators.
//!
//! Per-axis lists (`strides`, `pads`, `dilations`, `kernel_shape`) pass through as given; an
//! absent list is empty, which the planner reads as the ONNX default. `BatchNormalization` before
//! opset 14 with training outputs is rejected. Softmax, LogSoftmax and Hardmax before opset 13
//! coerce their input to 2-D at `axis`; that is rewritten explicitly (see [`softmax_like`]).

use planner::DType;
use planner::op::{self, AutoPad, Op};

use crate::error::OnnxError;

use super::attrs::Attrs;
use super::lower::Lower;

fn auto_pad(a: &Attrs<'_>) -> Result<AutoPad, OnnxError> {
    let choices = [
        ("NOTSET", AutoPad::NotSet),
        ("SAME_UPPER", AutoPad::SameUpper),
        ("SAME_LOWER", AutoPad::SameLower),
        ("VALID", AutoPad::Valid),
    ];
    a.choice("auto_pad", AutoPad::NotSet, &choices)
}

fn group(a: &Attrs<'_>) -> Result<usize, OnnxError> {
    match a.usize_or("group", 1)? {
        0 => Err(a.invalid("group", "must be at least 1")),
        g => Ok(g),
    }
}

fn stash_type(a: &Attrs<'_>) -> Result<DType, OnnxError> {
    Ok(a.dtype("stash_type")?.unwrap_or(DType::F32))
}

/// `Conv`.
pub(crate) fn conv(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = conv_attrs(l)?;
    l.emit(Op::Conv(attrs))
}

/// `ConvInteger` (opset 10): Conv's attributes.
pub(crate) fn conv_integer(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = conv_attrs(l)?;
    l.emit(Op::ConvInteger(attrs))
}

/// `QLinearConv` (opset 10): Conv's attributes.
pub(crate) fn qlinear_conv(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = conv_attrs(l)?;
    l.emit(Op::QLinearConv(attrs))
}

fn conv_attrs(l: &Lower<'_, '_>) -> Result<op::Conv, OnnxError> {
    let a = l.attrs();
    Ok(op::Conv {
        auto_pad: auto_pad(&a)?,
        dilations: a.usizes("dilations")?,
        group: group(&a)?,
        kernel_shape: a.usizes("kernel_shape")?,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    })
}

/// `ConvTranspose`.
pub(crate) fn conv_transpose(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::ConvTranspose {
        auto_pad: auto_pad(&a)?,
        dilations: a.usizes("dilations")?,
        group: group(&a)?,
        kernel_shape: a.usizes("kernel_shape")?,
        output_padding: a.usizes("output_padding")?,
        output_shape: a.usizes("output_shape")?,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::ConvTranspose(attrs))
}

fn kernel_shape(a: &Attrs<'_>) -> Result<Vec<usize>, OnnxError> {
    match a.usizes("kernel_shape")? {
        k if k.is_empty() => Err(a.error("kernel_shape", crate::error::AttrIssue::Missing)),
        k => Ok(k),
    }
}

/// `MaxPool` (`kernel_shape` required).
pub(crate) fn max_pool(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::MaxPool {
        auto_pad: auto_pad(&a)?,
        ceil_mode: a.bool_or("ceil_mode", false)?,
        dilations: a.usizes("dilations")?,
        kernel_shape: kernel_shape(&a)?,
        pads: a.usizes("pads")?,
        storage_order: a.int_or("storage_order", 0)?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::MaxPool(attrs))
}

/// `AveragePool` (`kernel_shape` required; `dilations` since 19).
pub(crate) fn average_pool(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::AveragePool {
        auto_pad: auto_pad(&a)?,
        ceil_mode: a.bool_or("ceil_mode", false)?,
        count_include_pad: a.bool_or("count_include_pad", false)?,
        dilations: a.usizes("dilations")?,
        kernel_shape: kernel_shape(&a)?,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::AveragePool(attrs))
}

/// `LpPool` (`kernel_shape` required).
pub(crate) fn lp_pool(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::LpPool {
        auto_pad: auto_pad(&a)?,
        ceil_mode: a.bool_or("ceil_mode", false)?,
        dilations: a.usizes("dilations")?,
        kernel_shape: kernel_shape(&a)?,
        p: a.int_or("p", 2)?,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::LpPool(attrs))
}

/// `BatchNormalization`: before opset 14 its extra outputs are training statistics, which the
/// planner op does not define (it has `training_mode` from 14 on).
pub(crate) fn batch_norm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::BatchNormalization {
        epsilon: a.float_or("epsilon", 1e-5)?,
        momentum: a.float_or("momentum", 0.9)?,
        training_mode: a.bool_or("training_mode", false)?,
    };
    if l.opset < 14 && (1..5).any(|i| l.output(i).is_some()) {
        return Err(l.invalid("training outputs before opset 14 are not supported"));
    }
    l.emit(Op::BatchNormalization(attrs))
}

/// `InstanceNormalization`.
pub(crate) fn instance_norm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let epsilon = l.attrs().float_or("epsilon", 1e-5)?;
    l.emit(Op::InstanceNormalization(op::InstanceNormalization { epsilon }))
}

/// `LayerNormalization` (opset 17).
pub(crate) fn layer_norm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::LayerNormalization {
        axis: a.int_or("axis", -1)?,
        epsilon: a.float_or("epsilon", 1e-5)?,
        stash_type: stash_type(&a)?,
    };
    l.emit(Op::LayerNormalization(attrs))
}

/// `GroupNormalization` (opset 21, per-channel scale and bias).
pub(crate) fn group_norm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::GroupNormalization {
        epsilon: a.float_or("epsilon", 1e-5)?,
        num_groups: a.required("num_groups", a.usize("num_groups")?)?,
        stash_type: stash_type(&a)?,
    };
    l.emit(Op::GroupNormalization(attrs))
}

/// `RMSNormalization` (opset 23).
pub(crate) fn rms_norm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::RmsNormalization {
        axis: a.int_or("axis", -1)?,
        epsilon: a.float_or("epsilon", 1e-5)?,
        stash_type: stash_type(&a)?,
    };
    l.emit(Op::RmsNormalization(attrs))
}

/// `Attention` (opset 23).
pub(crate) fn attention(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Attention {
        is_causal: a.bool_or("is_causal", false)?,
        kv_num_heads: a.usize("kv_num_heads")?,
        q_num_heads: a.usize("q_num_heads")?,
        qk_matmul_output_mode: a.int_or("qk_matmul_output_mode", 0)?,
        scale: a.float("scale")?,
        softcap: a.float_or("softcap", 0.0)?,
        softmax_precision: a.dtype("softmax_precision")?,
    };
    l.emit(Op::Attention(attrs))
}

/// `RotaryEmbedding` (opset 23).
pub(crate) fn rotary_embedding(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::RotaryEmbedding {
        interleaved: a.bool_or("interleaved", false)?,
        num_heads: a.usize("num_heads")?,
        rotary_embedding_dim: a.usize_or("rotary_embedding_dim", 0)?,
        full_caches: false,
    };
    l.emit(Op::RotaryEmbedding(attrs))
}

/// Emits `Softmax(axis)`-family op `make` with ONNX-13 semantics, rewriting the opset < 13
/// "coerce to 2-D at axis" semantics as `Reshape(make(Flatten(x, axis), 1), Shape(x))` unless
/// `axis` is the last one (where both semantics agree).
pub(crate) fn softmax_like(l: &mut Lower<'_, '_>, make: fn(op::Softmax) -> Op) -> Result<(), OnnxError> {
    let legacy = l.opset < 13;
    let axis = l.attrs().int_or("axis", if legacy { 1 } else { -1 })?;
    let x = l.required_input(0)?;
    let last = axis == -1 || l.declared_rank(x).is_some_and(|r| i64::try_from(r) == Ok(axis + 1));
    if !legacy || last {
        return l.emit(make(op::Softmax { axis }));
    }
    let y = l.required_output(0)?;
    let (shape, flat, flat_y) = (l.temp("shape"), l.temp("flatten"), l.temp("2d"));
    l.push("shape", Op::Shape(op::ShapeOf::default()), &[Some(x)], &[shape]);
    l.push("flatten", Op::Flatten(op::Flatten { axis }), &[Some(x)], &[flat]);
    l.push("2d", make(op::Softmax { axis: 1 }), &[Some(flat)], &[flat_y]);
    // Every dim of `shape` is a real size, so 0 must stay 0 (allowzero).
    let reshape = Op::Reshape(op::Reshape { allowzero: true });
    l.push("reshape", reshape, &[Some(flat_y), Some(shape)], &[y]);
    Ok(())
}

/// `LinearAttention` (opset 27): `chunk_size` is a tuning hint with no effect on the result.
pub(crate) fn linear_attention(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::LinearAttentionRule as R;
    let a = l.attrs();
    let rules =
        [("linear", R::Linear), ("gated", R::Gated), ("delta", R::Delta), ("gated_delta", R::GatedDelta)];
    let update_rule = a.choice("update_rule", R::GatedDelta, &rules)?;
    let attrs = op::LinearAttention {
        kv_num_heads: a.required("kv_num_heads", a.usize("kv_num_heads")?)?,
        q_num_heads: a.required("q_num_heads", a.usize("q_num_heads")?)?,
        scale: a.float("scale")?.filter(|&s| s != 0.0),
        update_rule,
    };
    let gated = matches!(update_rule, R::Gated | R::GatedDelta);
    let delta = matches!(update_rule, R::Delta | R::GatedDelta);
    if gated != l.input(4).is_some() || delta != l.input(5).is_some() {
        return Err(l.invalid(format!("update_rule {update_rule:?} needs decay: {gated}, beta: {delta}")));
    }
    l.emit(Op::LinearAttention(attrs))
}

/// `MaxUnpool` (opsets 9/11).
pub(crate) fn max_unpool(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let kernel_shape = a.required("kernel_shape", a.ints("kernel_shape")?)?;
    let kernel_shape = kernel_shape
        .iter()
        .map(|&k| usize::try_from(k).ok().filter(|&k| k > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| a.invalid("kernel_shape", format!("{kernel_shape:?} must be positive")))?;
    let attrs = op::MaxUnpool { kernel_shape, pads: a.usizes("pads")?, strides: a.usizes("strides")? };
    l.emit(Op::MaxUnpool(attrs))
}

/// `DeformConv` (opset 19).
pub(crate) fn deform_conv(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let offset_group = match a.usize_or("offset_group", 1)? {
        0 => return Err(a.invalid("offset_group", "must be at least 1")),
        g => g,
    };
    let attrs = op::DeformConv {
        dilations: a.usizes("dilations")?,
        group: group(&a)?,
        kernel_shape: a.usizes("kernel_shape")?,
        offset_group,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::DeformConv(attrs))
}
