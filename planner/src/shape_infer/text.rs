//! The string operators (StringNormalizer, StringSplit, StringConcat, RegexFullMatch) and
//! `LabelEncoder`.

use super::Ctx;
use super::elementwise::broadcast_infos;
use crate::error::PlanError;
use crate::op::LabelEncoder;
use crate::tensor_info::{DType, Shape, TensorInfo};

fn strings<'a>(ctx: &Ctx<'a>, slot: usize) -> Result<&'a TensorInfo, PlanError> {
    let x = ctx.input(slot)?;
    if x.dtype != DType::String {
        return Err(ctx.dtype(format!("input {slot} must be strings, got {}", x.dtype)));
    }
    Ok(x)
}

/// `[C]` or `[B, C]` strings; the last dim depends on the data (empty strings are dropped from a
/// `[C]` or `[1, C]` input).
pub(crate) fn string_normalizer(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = strings(ctx, 0)?;
    if !(1..=2).contains(&x.rank()) {
        return Err(ctx.mismatch(format!("the input must be [C] or [B, C], got {x}")));
    }
    let mut dims = x.shape.0.clone();
    let last = ctx.fresh();
    if let Some(d) = dims.last_mut() {
        *d = last;
    }
    Ok(vec![TensorInfo { dtype: DType::String, shape: Shape(dims) }])
}

/// Strings `X` -> the pieces `X.shape + [most pieces]` and their counts (int64 `X.shape`).
pub(crate) fn string_split(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = strings(ctx, 0)?.clone();
    let mut pieces = x.shape.0.clone();
    pieces.push(ctx.fresh());
    Ok(vec![
        TensorInfo { dtype: DType::String, shape: Shape(pieces) },
        TensorInfo { dtype: DType::I64, shape: x.shape },
    ])
}

/// Two broadcasting string operands -> strings.
pub(crate) fn string_concat(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (strings(ctx, 0)?, strings(ctx, 1)?);
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype: DType::String, shape }])
}

/// Strings -> bools of the same shape.
pub(crate) fn regex_full_match(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = strings(ctx, 0)?;
    Ok(vec![TensorInfo { dtype: DType::Bool, shape: x.shape.clone() }])
}

/// Keys' dtype in -> values' dtype out, same shape.
pub(crate) fn label_encoder(ctx: &mut Ctx, l: &LabelEncoder) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    Ok(vec![TensorInfo { dtype: l.output_dtype, shape: x.shape.clone() }])
}
