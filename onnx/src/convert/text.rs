//! The string operators (`StringNormalizer`, `StringSplit`, `StringConcat`, `RegexFullMatch`)
//! and `ai.onnx.ml`'s `LabelEncoder`: CPU reference only (the GPU plan refuses strings by node).

use planner::DType;
use planner::op::{self, CaseChange, Label, Op};

use crate::error::OnnxError;

use super::attrs::Attrs;
use super::lower::Lower;

/// `StringNormalizer` (opset 10): `case_change_action`, `is_case_sensitive`, `stopwords`; a
/// `locale` other than the default is refused (case changes here are Unicode's, locale-free).
pub(crate) fn string_normalizer(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let cases = [("NONE", CaseChange::None), ("LOWER", CaseChange::Lower), ("UPPER", CaseChange::Upper)];
    if let Some(locale) = a.string("locale")?
        && !matches!(locale.as_str(), "" | "en_US" | "C" | "en_US.UTF-8")
    {
        return Err(
            a.invalid("locale", format!("{locale:?}: only the default (en_US) case rules are implemented"))
        );
    }
    l.emit(Op::StringNormalizer(op::StringNormalizer {
        case_change: a.choice("case_change_action", CaseChange::None, &cases)?,
        case_sensitive: a.bool_or("is_case_sensitive", false)?,
        stopwords: a.strings("stopwords")?.unwrap_or_default(),
    }))
}

/// `StringSplit` (opset 20): `delimiter` (absent or empty: whitespace), `maxsplit` (absent or
/// negative: unlimited).
pub(crate) fn string_split(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let delimiter = a.string("delimiter")?.filter(|d| !d.is_empty());
    let maxsplit = a.int("maxsplit")?.and_then(|m| usize::try_from(m).ok());
    l.emit(Op::StringSplit(op::StringSplit { delimiter, maxsplit }))
}

/// `RegexFullMatch` (opset 20): the required `pattern`.
pub(crate) fn regex_full_match(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let pattern = a.required("pattern", a.string("pattern")?)?;
    l.emit(Op::RegexFullMatch(op::RegexFullMatch { pattern }))
}

/// The labels of `LabelEncoder`'s `{prefix}_strings` / `_int64s` / `_floats` / `_tensor` (the one
/// given), with their dtype.
fn labels(a: &Attrs<'_>, prefix: &str) -> Result<Option<(Vec<Label>, DType)>, OnnxError> {
    if let Some(s) = a.strings(&format!("{prefix}_strings"))? {
        return Ok(Some((s.into_iter().map(Label::Str).collect(), DType::String)));
    }
    if let Some(v) = a.ints(&format!("{prefix}_int64s"))? {
        return Ok(Some((v.into_iter().map(Label::Int).collect(), DType::I64)));
    }
    if let Some(v) = a.floats(&format!("{prefix}_floats"))? {
        return Ok(Some((v.into_iter().map(|x| Label::Float(f64::from(x))).collect(), DType::F32)));
    }
    let attr = format!("{prefix}_tensor");
    match a.tensor(&attr)? {
        Some(t) => tensor_labels(a, &attr, t).map(Some),
        None => Ok(None),
    }
}

fn tensor_labels(
    a: &Attrs<'_>,
    attr: &str,
    t: &crate::proto::TensorProto,
) -> Result<(Vec<Label>, DType), OnnxError> {
    let c = super::tensor::to_const_labelled(t, attr)?;
    let labels = match c.dtype {
        DType::String => c.strings().unwrap_or_default().into_iter().map(Label::Str).collect(),
        d if d.is_int() => c.to_i64s().unwrap_or_default().into_iter().map(Label::Int).collect(),
        d if d.is_float() => c.to_f64s().into_iter().map(Label::Float).collect(),
        d => return Err(a.invalid(attr, format!("{d} labels"))),
    };
    Ok((labels, c.dtype))
}

/// `LabelEncoder` (ai.onnx.ml, opsets 1–4): one of each of `keys_*` / `values_*`, of equal
/// length; the `default_*` of the values' type (ONNX's defaults: `"_Unused"`, -1, -0.0).
pub(crate) fn label_encoder(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let (keys, _) = a.required("keys", labels(&a, "keys")?)?;
    let (values, output_dtype) = a.required("values", labels(&a, "values")?)?;
    if keys.len() != values.len() {
        return Err(a.invalid("values", format!("{} values for {} keys", values.len(), keys.len())));
    }
    let default = match output_dtype {
        DType::String => Label::Str(a.string("default_string")?.unwrap_or_else(|| "_Unused".into())),
        d if d.is_int() => Label::Int(a.int_or("default_int64", -1)?),
        _ => match a.tensor("default_tensor")? {
            Some(t) => {
                tensor_labels(&a, "default_tensor", t)?.0.into_iter().next().unwrap_or(Label::Float(-0.0))
            }
            None => Label::Float(f64::from(a.float_or("default_float", -0.0)?)),
        },
    };
    // A string or int default given as a tensor.
    let default = match (a.tensor("default_tensor")?, &default) {
        (Some(t), Label::Str(_) | Label::Int(_)) => {
            tensor_labels(&a, "default_tensor", t)?.0.into_iter().next().unwrap_or(default)
        }
        _ => default,
    };
    l.emit(Op::LabelEncoder(op::LabelEncoder { keys, values, default, output_dtype }))
}
