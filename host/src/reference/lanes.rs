//! [`Lanes`]: the two numeric views every reference op computes in. Floats (f16, bf16, f32, f64)
//! are read exactly into f64; integers and bools (as 0/1) into i64. Results go back to a dtype
//! through [`Lanes::into_tensor`], which follows ONNX `Cast`: floats round once to nearest-even,
//! integers wrap to their width (two's complement, as numpy's `astype`), float to integer truncates
//! toward zero (saturating; NaN gives 0), anything to bool is `x != 0`.
//!
//! Invariant: reading a tensor into lanes and writing it back to its own dtype is lossless, so
//! data-movement ops (gather, slice, transpose, ...) may go through lanes freely.

use std::cmp::Ordering;

use half::{bf16, f16};
use planner::{DType, RoundMode};

use crate::error::HostError;
use crate::tensor::{HostTensor, TensorData, try_collect};

/// Elements of a tensor in a computation-friendly form.
#[derive(Clone, Debug, PartialEq)]
pub enum Lanes {
    /// Floating-point elements, widened exactly.
    F(Vec<f64>),
    /// Integer and bool elements, widened exactly (bool as 0 or 1).
    I(Vec<i64>),
}

impl Lanes {
    /// The elements of `t`, widened exactly, their memory reserved fallibly.
    pub fn of(t: &HostTensor) -> Result<Lanes, HostError> {
        let (d, n) = (t.data(), t.len());
        if d.dtype() == DType::String {
            // (Cast reads numbers spelled as strings itself; nothing else computes on them.)
            return Err(HostError::Unsupported {
                node: String::new(),
                op: "",
                detail: "strings are no numbers (Cast parses them)".into(),
            });
        }
        if let Some(big) = d.u64_in_i64() {
            // The driver names the node (an empty node is filled in there).
            return Err(HostError::Unsupported {
                node: String::new(),
                op: "",
                detail: format!("uint64 value {big} (past 2^63 - 1: the reference computes integers in i64)"),
            });
        }
        let w = "a tensor widened to 8-byte lanes";
        Ok(if t.dtype().is_float() {
            Lanes::F(try_collect(n, w, (0..n).map(|i| d.float_at(i)))?)
        } else {
            Lanes::I(try_collect(n, w, (0..n).map(|i| d.int_at(i)))?)
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Lanes::F(v) => v.len(),
            Lanes::I(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements at positions `idx`, in that order (every index must be in range).
    pub fn take(&self, idx: &[usize]) -> Lanes {
        match self {
            Lanes::F(v) => Lanes::F(idx.iter().map(|&i| v[i]).collect()),
            Lanes::I(v) => Lanes::I(idx.iter().map(|&i| v[i]).collect()),
        }
    }

    /// Orders elements `i` and `j` exactly (integers are not widened to f64); NaN is greater than
    /// every number and equal to NaN.
    pub fn cmp_at(&self, i: usize, j: usize) -> Ordering {
        match self {
            Lanes::I(v) => v[i].cmp(&v[j]),
            Lanes::F(v) => match (v[i].is_nan(), v[j].is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => v[i].partial_cmp(&v[j]).unwrap_or(Ordering::Equal),
            },
        }
    }

    /// True when element `i` is NaN.
    pub fn is_nan_at(&self, i: usize) -> bool {
        matches!(self, Lanes::F(v) if v[i].is_nan())
    }

    /// The elements as f64 (integers beyond 2^53 round).
    pub fn to_f64s(&self) -> Vec<f64> {
        match self {
            Lanes::F(v) => v.clone(),
            Lanes::I(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    /// Concatenation of `parts` (all of the same kind; mixed kinds widen to f64).
    pub fn concat(parts: &[Lanes]) -> Lanes {
        if parts.iter().all(|p| matches!(p, Lanes::I(_))) {
            let mut out = Vec::new();
            for p in parts {
                if let Lanes::I(v) = p {
                    out.extend_from_slice(v);
                }
            }
            return Lanes::I(out);
        }
        Lanes::F(parts.iter().flat_map(Lanes::to_f64s).collect())
    }

    /// A tensor of `dtype` and `shape` from these lanes, converting as ONNX `Cast` does.
    pub fn into_tensor(self, dtype: DType, shape: Vec<usize>) -> Result<HostTensor, HostError> {
        let data = match self {
            Lanes::F(v) => floats_to(dtype, v.len(), v.into_iter())?,
            Lanes::I(v) => ints_to(dtype, v.len(), v.into_iter())?,
        };
        HostTensor::new(shape, data)
    }
}

/// The `n` f64 values of `v` as `dtype`: one rounding to nearest to float types (float8 without
/// saturation, so that every code, infinities and E8M0's smallest included, reads back as
/// itself: `Cast` applies its own rules through [`floats_to_with`]); truncation toward zero
/// (saturating, NaN to 0) to integer types (int4 / int2 then wrap); `x != 0` to bool (NaN is
/// true).
pub fn floats_to(dtype: DType, n: usize, v: impl Iterator<Item = f64>) -> Result<TensorData, HostError> {
    floats_to_with(dtype, n, v, false, RoundMode::Nearest)
}

/// As [`floats_to`], with `Cast`'s `saturate` and `round_mode` for the coded float types.
pub fn floats_to_with(
    dtype: DType,
    n: usize,
    v: impl Iterator<Item = f64>,
    saturate: bool,
    round: RoundMode,
) -> Result<TensorData, HostError> {
    let w = "computed elements";
    Ok(match dtype {
        DType::F32 => TensorData::F32(try_collect(n, w, v.map(|x| x as f32))?),
        DType::F16 => TensorData::F16(try_collect(n, w, v.map(f16::from_f64))?),
        DType::BF16 => TensorData::BF16(try_collect(n, w, v.map(bf16::from_f64))?),
        DType::F64 => TensorData::F64(try_collect(n, w, v)?),
        DType::I64 => TensorData::I64(try_collect(n, w, v.map(|x| x as i64))?),
        DType::I32 => TensorData::I32(try_collect(n, w, v.map(|x| x as i32))?),
        DType::I8 => TensorData::I8(try_collect(n, w, v.map(|x| x as i8))?),
        DType::U8 => TensorData::U8(try_collect(n, w, v.map(|x| x as u8))?),
        DType::I16 => TensorData::I16(try_collect(n, w, v.map(|x| x as i16))?),
        DType::U16 => TensorData::U16(try_collect(n, w, v.map(|x| x as u16))?),
        DType::U32 => TensorData::U32(try_collect(n, w, v.map(|x| x as u32))?),
        DType::U64 => TensorData::U64(try_collect(n, w, v.map(|x| x as u64))?),
        DType::Bool => TensorData::Bool(try_collect(n, w, v.map(|x| x != 0.0))?),
        DType::Coded(c) => TensorData::Coded(c, try_collect(n, w, v.map(|x| c.encode(x, saturate, round)))?),
        DType::String => TensorData::String(try_collect(n, w, v.map(|x| x.to_string()))?),
    })
}

/// The `n` i64 values of `v` as `dtype`: wrapping to narrower integers, one rounding to floats
/// (for bf16 beyond 2^53 the value passes through f64 first), `x != 0` to bool.
pub fn ints_to(dtype: DType, n: usize, v: impl Iterator<Item = i64>) -> Result<TensorData, HostError> {
    let w = "computed elements";
    Ok(match dtype {
        DType::F32 => TensorData::F32(try_collect(n, w, v.map(|x| x as f32))?),
        DType::F16 => TensorData::F16(try_collect(n, w, v.map(|x| f16::from_f64(x as f64)))?),
        DType::BF16 => TensorData::BF16(try_collect(n, w, v.map(|x| bf16::from_f64(x as f64)))?),
        DType::F64 => TensorData::F64(try_collect(n, w, v.map(|x| x as f64))?),
        DType::I64 => TensorData::I64(try_collect(n, w, v)?),
        DType::I32 => TensorData::I32(try_collect(n, w, v.map(|x| x as i32))?),
        DType::I8 => TensorData::I8(try_collect(n, w, v.map(|x| x as i8))?),
        DType::U8 => TensorData::U8(try_collect(n, w, v.map(|x| x as u8))?),
        DType::I16 => TensorData::I16(try_collect(n, w, v.map(|x| x as i16))?),
        DType::U16 => TensorData::U16(try_collect(n, w, v.map(|x| x as u16))?),
        DType::U32 => TensorData::U32(try_collect(n, w, v.map(|x| x as u32))?),
        DType::U64 => TensorData::U64(try_collect(n, w, v.map(|x| x as u64))?),
        DType::Bool => TensorData::Bool(try_collect(n, w, v.map(|x| x != 0))?),
        DType::Coded(c) => TensorData::Coded(c, try_collect(n, w, v.map(|x| c.encode_int(x)))?),
        DType::String => TensorData::String(try_collect(n, w, v.map(|x| x.to_string()))?),
    })
}

/// A tensor of `shape` with every element `t[idx[i]]` (data movement in `t`'s own dtype).
pub fn gather_elems(t: &HostTensor, idx: &[usize], shape: Vec<usize>) -> Result<HostTensor, HostError> {
    HostTensor::new(shape, t.data().take(idx.len(), idx.iter().copied())?)
}

/// A tensor of `shape` whose `n` elements are `t`'s at the offsets `idx` yields (data movement in
/// `t`'s own dtype, no offset vector held).
pub fn gather_iter(
    t: &HostTensor,
    n: usize,
    idx: impl IntoIterator<Item = usize>,
    shape: Vec<usize>,
) -> Result<HostTensor, HostError> {
    HostTensor::new(shape, t.data().take(n, idx)?)
}

/// A tensor of `shape` with element i equal to `t[idx[i]]`, or to `fill` (a one-element tensor of
/// the same dtype) where `idx[i]` is `None`.
pub fn gather_or_fill(
    t: &HostTensor,
    idx: &[Option<usize>],
    fill: &HostTensor,
    shape: Vec<usize>,
) -> Result<HostTensor, HostError> {
    HostTensor::new(shape, t.data().take_or(idx, fill.data())?)
}

/// ONNX `BitCast`: `t`'s little-endian bytes read as `to` (of the same width; a nonzero byte is a
/// true bool).
pub fn bit_cast(ctx: &crate::reference::NodeCtx, t: &HostTensor, to: DType) -> Result<HostTensor, HostError> {
    // Bit widths (int4 and uint8 both take a byte here, not both eight bits); no strings.
    if t.dtype().bits().is_none() || t.dtype().bits() != to.bits() {
        return Err(ctx.err(format!("{} and {to} differ in width", t.dtype())));
    }
    let c = t.to_const();
    HostTensor::from_const(
        &planner::ConstTensor::new(to, c.dims, c.bytes).map_err(|e| ctx.err(e.to_string()))?,
    )
}

/// Python's `repr` of a float from Rust's shortest positional (`display`) and scientific (`sci`)
/// spellings of it: positional with at least one decimal for exponents -4 ..= 15, else
/// `d.ddde±XX`; `nan`, `inf`, `-inf`.
fn py_float(display: String, sci: String, x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        if display.contains('.') { display } else { format!("{display}.0") }
    } else {
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// `Cast` of strings to `to`: each must spell a number of that kind (integers exactly, floats
/// rounded once for f32 / f64); a string that does not is an error naming it.
fn from_strings(
    s: &[String],
    to: DType,
    shape: Vec<usize>,
    saturate: bool,
    round: RoundMode,
) -> Result<HostTensor, HostError> {
    let bad = |x: &String| HostError::Unsupported {
        node: String::new(),
        op: "",
        detail: format!("the string {x:?} spells no {to}"),
    };
    let n = s.len();
    let data = match to {
        DType::String => TensorData::String(s.to_vec()),
        DType::F32 => TensorData::F32(
            s.iter().map(|x| x.trim().parse::<f32>().map_err(|_| bad(x))).collect::<Result<_, _>>()?,
        ),
        d if d.is_float() => {
            let v: Vec<f64> =
                s.iter().map(|x| x.trim().parse::<f64>().map_err(|_| bad(x))).collect::<Result<_, _>>()?;
            floats_to_with(d, n, v.into_iter(), saturate, round)?
        }
        d => {
            // Integers (and bools, as 0 / 1) exactly; uint64 past i64::MAX keeps its bits.
            let v: Vec<i64> = s
                .iter()
                .map(|x| x.trim().parse::<i128>().map(|v| v as i64).map_err(|_| bad(x)))
                .collect::<Result<_, _>>()?;
            ints_to(d, n, v.into_iter())?
        }
    };
    HostTensor::new(shape, data)
}

/// ONNX `Cast` (and `CastLike`): `t` converted to `to` by the rules in the module docs, with
/// `saturate` and `round` for the coded float targets (float8, E8M0).
pub fn cast(t: &HostTensor, to: DType, saturate: bool, round: RoundMode) -> Result<HostTensor, HostError> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    let shape = t.shape().to_vec();
    if let TensorData::String(s) = t.data() {
        return from_strings(s, to, shape, saturate, round);
    }
    if to == DType::String {
        // Each element as Python's repr of it: the shortest text that reads back to it in its
        // own dtype ("1.0", "1e-05", "nan"), integers in decimal, bools as True / False.
        let d = t.data();
        let text = |i: usize| match d {
            TensorData::F32(v) => py_float(v[i].to_string(), format!("{:e}", v[i]), f64::from(v[i])),
            TensorData::F16(v) => py_float(v[i].to_string(), format!("{:e}", v[i].to_f32()), v[i].to_f64()),
            TensorData::BF16(v) => py_float(v[i].to_string(), format!("{:e}", v[i].to_f32()), v[i].to_f64()),
            TensorData::Bool(v) => if v[i] { "True" } else { "False" }.to_string(),
            d if d.dtype().is_float() => {
                let x = d.float_at(i);
                py_float(x.to_string(), format!("{x:e}"), x)
            }
            TensorData::U64(v) => v[i].to_string(),
            d => d.int_at(i).to_string(),
        };
        return HostTensor::new(
            shape,
            TensorData::String(try_collect(t.len(), "strings", (0..t.len()).map(text))?),
        );
    }
    match Lanes::of(t)? {
        Lanes::F(v) => HostTensor::new(shape, floats_to_with(to, v.len(), v.into_iter(), saturate, round)?),
        // Integers to a coded float go through their value, with Cast's rules.
        Lanes::I(v) if matches!(to, DType::Coded(c) if c.is_float()) => HostTensor::new(
            shape,
            floats_to_with(to, v.len(), v.into_iter().map(|x| x as f64), saturate, round)?,
        ),
        lanes => lanes.into_tensor(to, shape),
    }
}
