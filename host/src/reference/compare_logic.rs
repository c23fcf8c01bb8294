//! Comparison and logical ops (ONNX Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or,
//! Xor, Not, IsNaN, IsInf) and the selection op Where, all with multidirectional broadcasting.
//!
//! Comparisons follow IEEE 754: any comparison with NaN is false (so `Equal(NaN, NaN)` is false).
//! Outputs are bool tensors.

use planner::DType;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::Lanes;
use crate::reference::math::broadcast_lanes;
use crate::reference::strides::same_dtype;
use crate::tensor::HostTensor;

/// A comparison of ONNX's comparison family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// `a == b`.
    Equal,
    /// `a < b`.
    Less,
    /// `a > b`.
    Greater,
    /// `a <= b`.
    LessOrEqual,
    /// `a >= b`.
    GreaterOrEqual,
}

impl Compare {
    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Compare::Equal => a == b,
            Compare::Less => a < b,
            Compare::Greater => a > b,
            Compare::LessOrEqual => a <= b,
            Compare::GreaterOrEqual => a >= b,
        }
    }
}

/// ONNX `Equal`/`Less`/`Greater`/`LessOrEqual`/`GreaterOrEqual` on two operands of one dtype.
pub fn compare(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor, op: Compare) -> Result<HostTensor, HostError> {
    same_dtype(ctx, a, b)?;
    let (shape, lanes) = broadcast_lanes(ctx, &[a, b])?;
    let out: Vec<i64> = match (&lanes[0], &lanes[1]) {
        (Lanes::I(x), Lanes::I(y)) => x.iter().zip(y).map(|(&p, &q)| op.holds(p, q) as i64).collect(),
        (x, y) => x.to_f64s().iter().zip(y.to_f64s()).map(|(&p, q)| op.holds(p, q) as i64).collect(),
    };
    Lanes::I(out).into_tensor(DType::Bool, shape)
}

/// A binary logical op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logic {
    /// ONNX `And`.
    And,
    /// ONNX `Or`.
    Or,
    /// ONNX `Xor`.
    Xor,
}

/// ONNX `And`/`Or`/`Xor` on two bool tensors.
pub fn logic(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor, op: Logic) -> Result<HostTensor, HostError> {
    require_bool(ctx, a)?;
    require_bool(ctx, b)?;
    let (shape, lanes) = broadcast_lanes(ctx, &[a, b])?;
    let (x, y) = (lanes[0].to_f64s(), lanes[1].to_f64s());
    let out = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| {
            let (p, q) = (p != 0.0, q != 0.0);
            (match op {
                Logic::And => p && q,
                Logic::Or => p || q,
                Logic::Xor => p != q,
            }) as i64
        })
        .collect();
    Lanes::I(out).into_tensor(DType::Bool, shape)
}

/// ONNX `Not` of a bool tensor.
pub fn not(ctx: &NodeCtx, x: &HostTensor) -> Result<HostTensor, HostError> {
    require_bool(ctx, x)?;
    let v = Lanes::of(x)?.to_f64s().iter().map(|&e| (e == 0.0) as i64).collect();
    Lanes::I(v).into_tensor(DType::Bool, x.shape().to_vec())
}

fn require_bool(ctx: &NodeCtx, t: &HostTensor) -> Result<(), HostError> {
    if t.dtype() != DType::Bool {
        return Err(ctx.err(format!("expects bool inputs, got {}", t.dtype())));
    }
    Ok(())
}

/// ONNX `IsNaN`: true where the element is NaN (always false for integers).
pub fn is_nan(x: &HostTensor) -> Result<HostTensor, HostError> {
    let v = Lanes::of(x)?.to_f64s().iter().map(|e| e.is_nan() as i64).collect();
    Lanes::I(v).into_tensor(DType::Bool, x.shape().to_vec())
}

/// ONNX `IsInf`: true where the element is +inf (if `positive`) or -inf (if `negative`).
pub fn is_inf(x: &HostTensor, positive: bool, negative: bool) -> Result<HostTensor, HostError> {
    let v = Lanes::of(x)?
        .to_f64s()
        .iter()
        .map(|&e| ((positive && e == f64::INFINITY) || (negative && e == f64::NEG_INFINITY)) as i64)
        .collect();
    Lanes::I(v).into_tensor(DType::Bool, x.shape().to_vec())
}

/// ONNX `Where`: `cond ? x : y`, broadcasting all three.
pub fn where_(
    ctx: &NodeCtx,
    cond: &HostTensor,
    x: &HostTensor,
    y: &HostTensor,
) -> Result<HostTensor, HostError> {
    require_bool(ctx, cond)?;
    same_dtype(ctx, x, y)?;
    let (shape, lanes) = broadcast_lanes(ctx, &[cond, x, y])?;
    let n = lanes[0].len();
    let both = Lanes::concat(&[lanes[1].clone(), lanes[2].clone()]);
    let c = lanes[0].to_f64s();
    let idx: Vec<usize> = (0..n).map(|i| if c[i] != 0.0 { i } else { n + i }).collect();
    both.take(&idx).into_tensor(x.dtype(), shape)
}
