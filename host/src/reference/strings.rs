//! The string operators on the reference (`StringNormalizer`, `StringSplit`, `StringConcat`,
//! `RegexFullMatch`, `Equal` of strings) and `ai.onnx.ml`'s `LabelEncoder`.

use planner::op::{CaseChange, Label, LabelEncoder, RegexFullMatch, StringNormalizer, StringSplit};

use super::NodeCtx;
use super::strides::{broadcast_all, broadcast_offsets};
use crate::error::HostError;
use crate::tensor::{HostTensor, TensorData, try_collect};

fn strings<'t>(ctx: &NodeCtx, t: &'t HostTensor, what: &str) -> Result<&'t [String], HostError> {
    match t.data() {
        TensorData::String(v) => Ok(v),
        other => Err(ctx.err(format!("{what} must be strings, got {}", other.dtype()))),
    }
}

/// `f(a, b)` over the broadcast of two string tensors.
fn zip_strings<T>(
    ctx: &NodeCtx,
    a: &HostTensor,
    b: &HostTensor,
    f: impl Fn(&str, &str) -> T,
) -> Result<(Vec<usize>, Vec<T>), HostError> {
    let (x, y) = (strings(ctx, a, "A")?, strings(ctx, b, "B")?);
    let shape = broadcast_all(ctx, &[a.shape(), b.shape()])?;
    let n = ctx.count(&shape)?;
    let pairs = broadcast_offsets(a.shape(), &shape).zip(broadcast_offsets(b.shape(), &shape));
    Ok((shape, try_collect(n, "string results", pairs.map(|(i, j)| f(&x[i], &y[j])))?))
}

/// `Equal` of two string tensors (broadcasting).
pub fn equal(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    let (shape, eq) = zip_strings(ctx, a, b, |x, y| x == y)?;
    HostTensor::new(shape, eq)
}

/// `StringConcat(X, Y)`: `x + y`, broadcasting.
pub fn concat(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    let (shape, joined) = zip_strings(ctx, a, b, |x, y| format!("{x}{y}"))?;
    HostTensor::new(shape, joined)
}

/// `RegexFullMatch(X)`: whether each string matches the pattern whole (RE2 syntax, which Rust's
/// `regex` crate follows; a pattern it does not take is an error naming it).
pub fn regex_full_match(
    ctx: &NodeCtx,
    x: &HostTensor,
    attrs: &RegexFullMatch,
) -> Result<HostTensor, HostError> {
    let s = strings(ctx, x, "X")?;
    // The pattern alone first: anchoring an unbalanced one (`a)|(?:b`) could make it parse.
    let bad = |e: regex::Error| ctx.err(format!("pattern {:?}: {e}", attrs.pattern));
    regex::Regex::new(&attrs.pattern).map_err(bad)?;
    let re = regex::Regex::new(&format!("^(?:{})$", attrs.pattern)).map_err(bad)?;
    HostTensor::new(x.shape().to_vec(), try_collect(s.len(), "matches", s.iter().map(|v| re.is_match(v)))?)
}

/// Python's whitespace: Unicode's, and the ASCII separators `\x1c`..`\x1f`.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split(sep, maxsplit)`: at `sep`, or (`None`) at runs of whitespace with none at
/// either end.
fn split(s: &str, sep: Option<&str>, maxsplit: Option<usize>) -> Vec<String> {
    match sep {
        Some(sep) => match maxsplit {
            Some(m) => s.splitn(m + 1, sep).map(str::to_string).collect(),
            None => s.split(sep).map(str::to_string).collect(),
        },
        None => {
            let mut out = Vec::new();
            let mut rest = s.trim_start_matches(py_space);
            while !rest.is_empty() {
                if maxsplit == Some(out.len()) {
                    out.push(rest.to_string());
                    break;
                }
                match rest.find(py_space) {
                    Some(i) => {
                        out.push(rest[..i].to_string());
                        rest = rest[i..].trim_start_matches(py_space);
                    }
                    None => {
                        out.push(rest.to_string());
                        break;
                    }
                }
            }
            out
        }
    }
}

/// `StringSplit(X)`: the pieces of each string (padded with empty strings to the most any has)
/// and how many each has.
pub fn string_split(
    ctx: &NodeCtx,
    x: &HostTensor,
    attrs: &StringSplit,
) -> Result<Vec<HostTensor>, HostError> {
    let s = strings(ctx, x, "X")?;
    let pieces: Vec<Vec<String>> =
        s.iter().map(|v| split(v, attrs.delimiter.as_deref(), attrs.maxsplit)).collect();
    let most = pieces.iter().map(Vec::len).max().unwrap_or(0);
    let mut shape = x.shape().to_vec();
    shape.push(most);
    let n = ctx.count(&shape)?;
    let mut out = try_collect(n, "split strings", std::iter::empty())?;
    for p in &pieces {
        out.extend(p.iter().cloned());
        out.extend(std::iter::repeat_n(String::new(), most - p.len()));
    }
    let counts: Vec<i64> = pieces.iter().map(|p| p.len() as i64).collect();
    Ok(vec![HostTensor::new(shape, out)?, HostTensor::new(x.shape().to_vec(), counts)?])
}

/// `StringNormalizer(X)` as ONNX's reference computes it: stop words (whole space-separated
/// words) removed before the case change when case-sensitive, after it (against the stop words
/// changed alike) when not; on a `[C]` or `[1, C]` input the strings left empty are dropped (all
/// dropped: one empty string).
pub fn string_normalizer(
    ctx: &NodeCtx,
    x: &HostTensor,
    attrs: &StringNormalizer,
) -> Result<HostTensor, HostError> {
    let s = strings(ctx, x, "X")?;
    let case = |v: &str| match attrs.case_change {
        CaseChange::None => v.to_string(),
        CaseChange::Lower => v.to_lowercase(),
        CaseChange::Upper => v.to_uppercase(),
    };
    let stops: Vec<String> = if attrs.case_sensitive {
        attrs.stopwords.clone()
    } else {
        attrs.stopwords.iter().map(|w| case(w)).collect()
    };
    let drop_stops = |v: &str| -> String {
        if stops.is_empty() {
            return v.to_string();
        }
        v.split(' ').filter(|w| !stops.iter().any(|s| s == w)).collect::<Vec<_>>().join(" ")
    };
    let normal: Vec<String> = s
        .iter()
        .map(|v| if attrs.case_sensitive { case(&drop_stops(v)) } else { drop_stops(&case(v)) })
        .collect();
    match x.shape() {
        [_] | [1, _] => {
            let mut kept: Vec<String> = normal.into_iter().filter(|v| !v.is_empty()).collect();
            if kept.is_empty() {
                kept.push(String::new());
            }
            let shape = if x.shape().len() == 1 { vec![kept.len()] } else { vec![1, kept.len()] };
            HostTensor::new(shape, kept)
        }
        [_, _] => HostTensor::new(x.shape().to_vec(), normal),
        other => Err(ctx.err(format!("X must be [C] or [B, C], got {other:?}"))),
    }
}

/// `LabelEncoder(X)`: each element replaced by the value of the key it equals (floats by value,
/// NaN matching NaN), or by the default.
pub fn label_encoder(ctx: &NodeCtx, x: &HostTensor, attrs: &LabelEncoder) -> Result<HostTensor, HostError> {
    use std::collections::HashMap;
    /// A key as it is looked up: floats by their bits, all NaNs one key, -0 as 0.
    #[derive(PartialEq, Eq, Hash)]
    enum Key<'k> {
        Int(i64),
        Float(u64),
        Str(&'k str),
    }
    let n = ctx.count(x.shape())?;
    let d = x.data();
    let float_key = |v: f64| Key::Float(if v.is_nan() { f64::NAN.to_bits() } else { (v + 0.0).to_bits() });
    let kinds_match = match (d, attrs.keys.first()) {
        (_, None) => true,
        (TensorData::String(_), Some(k)) => matches!(k, Label::Str(_)),
        (d, Some(Label::Float(_))) => d.dtype().is_float(),
        (d, Some(Label::Int(_))) => d.dtype().is_int(),
        (_, Some(Label::Str(_))) => false,
    };
    if !kinds_match {
        return Err(ctx.err(format!("{} input against keys of another type", x.dtype())));
    }
    // Equal keys: the last wins, as in the dict ONNX's reference builds in order.
    let mut table: HashMap<Key<'_>, usize> = HashMap::with_capacity(attrs.keys.len());
    for (p, k) in attrs.keys.iter().enumerate() {
        let key = match k {
            Label::Int(i) => Key::Int(*i),
            Label::Float(f) => float_key(*f),
            Label::Str(s) => Key::Str(s),
        };
        table.insert(key, p);
    }
    let found = (0..n).map(|i| {
        let k = match d {
            TensorData::String(v) => Key::Str(&v[i]),
            d if d.dtype().is_float() => float_key(d.float_at(i)),
            d => Key::Int(d.int_at(i)),
        };
        table.get(&k).map_or(&attrs.default, |&p| &attrs.values[p])
    });
    let data: TensorData = match &attrs.default {
        Label::Str(_) => TensorData::String(try_collect(
            n,
            "labels",
            found.map(|v| match v {
                Label::Str(s) => s.clone(),
                Label::Int(i) => i.to_string(),
                Label::Float(f) => f.to_string(),
            }),
        )?),
        Label::Int(_) => {
            let ints = found.map(|v| match v {
                Label::Int(i) => *i,
                Label::Float(f) => *f as i64,
                Label::Str(_) => 0,
            });
            super::lanes::ints_to(attrs.output_dtype, n, ints)?
        }
        Label::Float(_) => {
            let floats = found.map(|v| match v {
                Label::Float(f) => *f,
                Label::Int(i) => *i as f64,
                Label::Str(_) => f64::NAN,
            });
            super::lanes::floats_to(attrs.output_dtype, n, floats)?
        }
    };
    HostTensor::new(x.shape().to_vec(), data)
}
