//! Operand access shared by the nn reference ops: inputs read exactly into f64, outputs rounded once
//! back to the dtype the op produces, plus the row-major index arithmetic the loops use.
//!
//! Invariant: every op in `nn` computes in f64 and rounds only when it builds an output tensor, so
//! an f16/bf16/f32 result carries exactly one rounding per element. Nothing here panics on data.

use half::{bf16, f16};
use planner::DType;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::shape::{broadcast_shape, broadcast_strides};
use crate::tensor::{HostTensor, TensorData};

/// A numeric input widened to f64, with the shape and dtype it came with.
#[derive(Debug, Clone)]
pub(crate) struct Floats {
    /// Shape of the input.
    pub shape: Vec<usize>,
    /// Elements, row-major, widened exactly (i64 beyond 2^53 rounds).
    pub data: Vec<f64>,
    /// The input's dtype (the dtype float outputs are rounded back to).
    pub dtype: DType,
}

/// True for the floating-point dtypes the nn ops accept.
pub(crate) fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// Input `slot`, which the op requires.
pub(crate) fn required<'t>(
    node: &NodeCtx,
    inputs: &[Option<&'t HostTensor>],
    slot: usize,
    what: &str,
) -> Result<&'t HostTensor, HostError> {
    inputs.get(slot).copied().flatten().ok_or_else(|| node.err(format!("input {slot} ({what}) is required")))
}

/// Input `slot` if present (an omitted optional input or a slot past the end is `None`).
pub(crate) fn optional<'t>(inputs: &[Option<&'t HostTensor>], slot: usize) -> Option<&'t HostTensor> {
    inputs.get(slot).copied().flatten()
}

/// A float tensor (f16, bf16, f32, f64) widened to f64.
pub(crate) fn floats(node: &NodeCtx, t: &HostTensor, what: &str) -> Result<Floats, HostError> {
    if !is_float(t.dtype()) {
        return Err(node.err(format!("{what} must be a float tensor, got {}", t.dtype())));
    }
    Ok(Floats { shape: t.shape().to_vec(), data: widened(t)?, dtype: t.dtype() })
}

/// The elements of `t` as f64, their memory reserved fallibly.
fn widened(t: &HostTensor) -> Result<Vec<f64>, HostError> {
    let d = t.data();
    crate::tensor::try_collect(t.len(), "an input widened to f64", (0..t.len()).map(|i| d.float_at(i)))
}

/// A float or integer tensor (not bool) widened to f64, for ops ONNX also defines on integers.
pub(crate) fn numbers(node: &NodeCtx, t: &HostTensor, what: &str) -> Result<Floats, HostError> {
    if t.dtype() == DType::Bool {
        return Err(node.err(format!("{what} must be numeric, got bool")));
    }
    Ok(Floats { shape: t.shape().to_vec(), data: widened(t)?, dtype: t.dtype() })
}

/// A numeric input read in place: each element widened to f64 as it is read ([`View::at`]), so
/// an op over a large input holds no widened copy of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'t> {
    /// Shape of the input.
    pub shape: &'t [usize],
    /// The input's dtype (the dtype float outputs are rounded back to).
    pub dtype: DType,
    data: &'t TensorData,
}

impl View<'_> {
    /// Element `i` (row-major), exactly as f64 (i64 beyond 2^53 rounds).
    pub fn at(&self, i: usize) -> f64 {
        self.data.float_at(i)
    }
}

/// A float tensor (f16, bf16, f32, f64) read in place.
pub(crate) fn float_view<'t>(node: &NodeCtx, t: &'t HostTensor, what: &str) -> Result<View<'t>, HostError> {
    if !is_float(t.dtype()) {
        return Err(node.err(format!("{what} must be a float tensor, got {}", t.dtype())));
    }
    Ok(View { shape: t.shape(), dtype: t.dtype(), data: t.data() })
}

/// A float or integer tensor (not bool) read in place, for ops ONNX also defines on integers.
pub(crate) fn number_view<'t>(node: &NodeCtx, t: &'t HostTensor, what: &str) -> Result<View<'t>, HostError> {
    if t.dtype() == DType::Bool {
        return Err(node.err(format!("{what} must be numeric, got bool")));
    }
    Ok(View { shape: t.shape(), dtype: t.dtype(), data: t.data() })
}

/// An output of one dtype written element by element, each f64 rounded once as [`tensor`]
/// rounds it: the op holds no f64 copy of its output.
pub(crate) struct OutBuf {
    shape: Vec<usize>,
    data: TensorData,
}

impl OutBuf {
    /// An output of `dtype` and `shape`, zero-filled; its size checked by [`count`] and its
    /// memory reserved fallibly.
    pub fn new(node: &NodeCtx, dtype: DType, shape: Vec<usize>) -> Result<Self, HostError> {
        let n = count(node, &shape)?;
        let zeros = std::iter::repeat_n(0.0, n);
        let data = match dtype {
            DType::Bool => return Err(node.unsupported(format!("{dtype} output"))),
            d if d.is_int() => crate::reference::lanes::ints_to(dtype, n, std::iter::repeat_n(0, n))?,
            _ => crate::reference::lanes::floats_to(dtype, n, zeros)?,
        };
        Ok(OutBuf { shape, data })
    }

    /// Sets element `i` to `v`, rounded once (floats to nearest-even, integers to nearest and
    /// wrapped to their width).
    pub fn set(&mut self, i: usize, v: f64) {
        match &mut self.data {
            TensorData::F32(d) => d[i] = v as f32,
            TensorData::F64(d) => d[i] = v,
            TensorData::F16(d) => d[i] = f16::from_f64(v),
            TensorData::BF16(d) => d[i] = bf16::from_f64(v),
            TensorData::I64(d) => d[i] = v.round() as i64,
            TensorData::I32(d) => d[i] = v.round() as i64 as i32,
            TensorData::I8(d) => d[i] = v.round() as i64 as i8,
            TensorData::U8(d) => d[i] = v.round() as i64 as u8,
            TensorData::I16(d) => d[i] = v.round() as i64 as i16,
            TensorData::U16(d) => d[i] = v.round() as i64 as u16,
            TensorData::U32(d) => d[i] = v.round() as i64 as u32,
            TensorData::U64(d) => d[i] = v.round() as i64 as u64,
            TensorData::Bool(d) => d[i] = v != 0.0,
            TensorData::Coded(c, d) if c.is_float() => d[i] = c.encode(v, false, planner::RoundMode::Nearest),
            TensorData::Coded(c, d) => d[i] = c.encode_int(v.round() as i64),
            TensorData::String(d) => d[i] = v.to_string(),
        }
    }

    /// The finished tensor.
    pub fn finish(self, node: &NodeCtx) -> Result<HostTensor, HostError> {
        HostTensor::new(self.shape, self.data).map_err(|e| node.err(format!("internal: {e}")))
    }
}

/// Required float input `slot`.
pub(crate) fn input(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    what: &str,
) -> Result<Floats, HostError> {
    floats(node, required(node, inputs, slot, what)?, what)
}

/// Optional float input `slot`.
pub(crate) fn input_opt(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    what: &str,
) -> Result<Option<Floats>, HostError> {
    optional(inputs, slot).map(|t| floats(node, t, what)).transpose()
}

/// An integer tensor (any width) as `i64`s.
pub(crate) fn ints(node: &NodeCtx, t: &HostTensor, what: &str) -> Result<Vec<i64>, HostError> {
    if !t.dtype().is_int() {
        return Err(node.err(format!("{what} must be an integer tensor, got {}", t.dtype())));
    }
    match crate::reference::lanes::Lanes::of(t)? {
        crate::reference::lanes::Lanes::I(v) => Ok(v),
        crate::reference::lanes::Lanes::F(_) => Err(node.err(format!("{what}: integer lanes expected"))),
    }
}

/// Builds an output of `dtype` from f64 values: floats round once to nearest-even; integers round
/// to nearest and wrap to their width (as numpy's `astype` of an integer product does).
pub(crate) fn tensor(
    node: &NodeCtx,
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<f64>,
) -> Result<HostTensor, HostError> {
    let n = data.len();
    let data: TensorData = match dtype {
        // (Moved, not copied.)
        DType::F64 => data.into(),
        DType::Bool | DType::String => return Err(node.unsupported(format!("{dtype} output"))),
        d if d.is_int() => crate::reference::lanes::ints_to(d, n, data.iter().map(|&x| x.round() as i64))?,
        d => crate::reference::lanes::floats_to(d, n, data.into_iter())?,
    };
    // An internal inconsistency still names the node it happened in.
    HostTensor::new(shape, data).map_err(|e| node.err(format!("internal: {e}")))
}

/// Fails unless `got` equals `want`.
pub(crate) fn expect_shape(
    node: &NodeCtx,
    got: &[usize],
    want: &[usize],
    what: &str,
) -> Result<(), HostError> {
    if got != want {
        return Err(node.err(format!("{what} must have shape {want:?}, got {got:?}")));
    }
    Ok(())
}

/// Fails unless `got` has rank `rank`.
pub(crate) fn expect_rank(node: &NodeCtx, got: &[usize], rank: usize, what: &str) -> Result<(), HostError> {
    if got.len() != rank {
        return Err(node.err(format!("{what} must have rank {rank}, got shape {got:?}")));
    }
    Ok(())
}

/// Element count of `shape`, or an error when it overflows or exceeds the run's size limit
/// ([`NodeCtx::count`]).
pub(crate) fn count(node: &NodeCtx, shape: &[usize]) -> Result<usize, HostError> {
    node.count(shape)
}

/// Row-major strides of `shape` (in elements).
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Writes the multi-index of row-major offset `offset` in `shape` into `idx`.
pub(crate) fn unravel(mut offset: usize, shape: &[usize], idx: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = offset % shape[d];
            offset /= shape[d];
        }
    }
}

/// For every element of `to` (row-major), the offset of the element of a tensor of shape `from`
/// that unidirectional broadcasting reads; an error unless `from` broadcasts to `to`.
pub(crate) fn broadcast_map(
    node: &NodeCtx,
    from: &[usize],
    to: &[usize],
    what: &str,
) -> Result<Vec<usize>, HostError> {
    if from.len() > to.len() || broadcast_shape(from, to).as_deref() != Some(to) {
        return Err(node.err(format!("{what} of shape {from:?} does not broadcast to {to:?}")));
    }
    let s = broadcast_strides(from, to.len());
    let mut idx = vec![0; to.len()];
    let n = count(node, to)?;
    Ok((0..n)
        .map(|i| {
            unravel(i, to, &mut idx);
            idx.iter().zip(&s).map(|(i, s)| i * s).sum()
        })
        .collect())
}

/// [`broadcast_map`] as an iterator: nothing held per element.
pub(crate) fn broadcast_iter(
    node: &NodeCtx,
    from: &[usize],
    to: &[usize],
    what: &str,
) -> Result<impl Iterator<Item = usize> + use<>, HostError> {
    if from.len() > to.len() || broadcast_shape(from, to).as_deref() != Some(to) {
        return Err(node.err(format!("{what} of shape {from:?} does not broadcast to {to:?}")));
    }
    Ok(crate::reference::strides::broadcast_offsets(from, to))
}

/// ONNX axis normalisation: `axis` in `[-rank, rank)` maps to `[0, rank)`.
pub(crate) fn axis(node: &NodeCtx, axis: i64, rank: usize) -> Result<usize, HostError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(node.err(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// `x * sigmoid(x)`.
pub(crate) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// `1 / (1 + e^-x)`.
pub(crate) fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `ln(1 + e^x)`, without overflow for large `x`.
pub(crate) fn softplus(x: f64) -> f64 {
    if x > 30.0 { x + (-x).exp().ln_1p() } else { x.exp().ln_1p() }
}
