//! Scalar f32 math applied by the elementwise kernels, one function per op.
//!
//! Compiled for the device and for the host, so the host unit tests below can check every function
//! against an f64 evaluation without a GPU. The transcendental functions come from `libm` (a pure
//! Rust port of musl's, accurate to about 1 ulp); square root is the correctly rounded
//! `sqrt.rn.f32` on the device and `libm::sqrtf` (also correctly rounded) on the host. Functions are
//! written in forms that neither overflow nor cancel badly over the whole f32 range.
//!
//! The libm-based functions are kept out of line on the device: the kernels call them from
//! about twenty places each (unrolled vector loops, tails, broadcast paths), and inlining them all
//! made the PTX tens of thousands of lines per kernel, which the driver's JIT took seconds to compile
//! at module load. The elementwise bench reports what the calls cost (sigmoid row).

use core::f32::consts::FRAC_1_SQRT_2;

/// `a + b`
#[inline(always)]
pub fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// `a - b`
#[inline(always)]
pub fn sub(a: f32, b: f32) -> f32 {
    a - b
}

/// `a * b`
#[inline(always)]
pub fn mul(a: f32, b: f32) -> f32 {
    a * b
}

/// `a / b`
#[inline(always)]
pub fn div(a: f32, b: f32) -> f32 {
    a / b
}

/// `a ^ b` with C `powf` semantics (`pow(x, 0) = 1`, negative base with non-integer exponent NaN).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn pow(a: f32, b: f32) -> f32 {
    libm::powf(a, b)
}

/// A float type with a NaN ([`max`] and [`min`] take f32 and f64).
pub trait Nan: Copy + PartialOrd {
    /// A quiet NaN.
    const NAN: Self;
    /// Whether `self` is NaN.
    fn is_nan(self) -> bool;
}

impl Nan for f32 {
    const NAN: Self = f32::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Nan for f64 {
    const NAN: Self = f64::NAN;
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// `max(a, b)`, NaN when either operand is NaN (NumPy `maximum`, PyTorch `max`).
#[inline(always)]
pub fn max<T: Nan>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// `min(a, b)`, NaN when either operand is NaN.
#[inline(always)]
pub fn min<T: Nan>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::NAN
    } else if a < b {
        a
    } else {
        b
    }
}

/// `max(x, 0)`; NaN stays NaN (PyTorch `relu`).
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    if x < 0.0 { 0.0 } else { x }
}

/// `x < 0 ? alpha * x : x`
#[inline(always)]
pub fn leaky_relu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 { alpha * x } else { x }
}

/// `1 / (1 + e^-x)`, evaluated so that `e^t` only sees `t <= 0`: `1 / (1 + e^-x)` for `x >= 0`,
/// `e^x / (1 + e^x)` otherwise, with one exp and one division and no branch (a warp whose lanes
/// saw both signs ran both sides one after the other).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    num / (1.0 + e)
}

/// `fmod(a, b)`: the exact remainder of `a / b` truncated toward zero (out of line on the
/// device: it is long, and rare in the programs that inline the interpreter).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn fmod(a: f32, b: f32) -> f32 {
    libm::fmodf(a, b)
}

/// `tanh(x)`
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn tanh(x: f32) -> f32 {
    libm::tanhf(x)
}

/// `e^x`, within 2 ulp over the whole f32 range: Cody-Waite reduction `x = n ln2 + r`,
/// `|r| <= ln2/2`, a degree-7 Taylor polynomial for `e^r` (truncation error below 0.05 ulp), and a
/// scale by `2^n` split over two exact power-of-two factors so that subnormal results and the
/// overflow boundary come out right. Pure f32 with fused multiply-adds: no tables, no f64, no
/// stack, so it inlines into the kernels cheaply.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    // ln 2 = LN2_HI + LN2_LO, LN2_HI the nearest f32.
    const LN2_HI: f32 = core::f32::consts::LN_2;
    const LN2_LO: f32 = -1.904_654_3e-9;
    // Past these every result is inf or 0; clamping keeps n small (NaN passes through).
    let x = x.clamp(-104.0, 89.0);
    // Round-to-nearest of x log2(e) by the 1.5 * 2^23 trick: `t` holds n in its low mantissa bits.
    let t = x * LOG2E + 12_582_912.0;
    let n = t - 12_582_912.0;
    let r = fma(n, -LN2_LO, fma(n, -LN2_HI, x));
    // Horner with the coefficients written out: a coefficient array indexed in a loop ended up
    // in local memory on the device (a 64-byte stack frame per thread in ptxas -v).
    let p = fma(1.0 / 5040.0, r, 1.0 / 720.0);
    let p = fma(p, r, 1.0 / 120.0);
    let p = fma(p, r, 1.0 / 24.0);
    let p = fma(p, r, 1.0 / 6.0);
    let p = fma(p, r, 0.5);
    let p = fma(p, r, 1.0);
    let p = fma(p, r, 1.0);
    // n as an integer, read from t's bits (|n| <= 150): an `as` cast would add a saturating
    // conversion's range checks to every exp (a NaN's garbage here meets p's NaN below).
    let k = t.to_bits() as i32 - 0x4B40_0000;
    let (k1, k2) = (k >> 1, k - (k >> 1));
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    p * pow2(k1) * pow2(k2)
}

/// `a * b + c` with one rounding (`fma.rn.f32` on the device, `libm::fmaf` on the host).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::fma_rn(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::fmaf(a, b, c)
    }
}

/// Natural logarithm (`-inf` at 0, NaN below).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn log(x: f32) -> f32 {
    libm::logf(x)
}

/// Correctly rounded square root.
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::sqrt_rn(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::sqrtf(x)
    }
}

/// Correctly rounded f64 square root.
#[inline(always)]
pub fn sqrt_f64(x: f64) -> f64 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::sqrt_rn_f64(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::sqrt(x)
    }
}

/// f64 `|x|` (the sign bit cleared).
#[inline(always)]
pub fn abs_f64(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & !(1 << 63))
}

/// f64 `e^x` (`libm`: below 1 ulp).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

/// f64 natural logarithm (`libm`: below 1 ulp; `-inf` at 0, NaN below).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn log_f64(x: f64) -> f64 {
    libm::log(x)
}

/// `|x|`
#[inline(always)]
pub fn abs(x: f32) -> f32 {
    x.abs()
}

/// `-x`
#[inline(always)]
pub fn neg(x: f32) -> f32 {
    -x
}

/// Error function.
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn erf(x: f32) -> f32 {
    libm::erff(x)
}

/// ONNX Gelu with `approximate = "none"`: `x/2 * (1 + erf(x / sqrt 2))`, as `x/2 * erfc(-x / sqrt 2)`
/// so that negative inputs do not cancel.
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * libm::erfcf(-x * FRAC_1_SQRT_2)
}

/// ONNX Gelu with `approximate = "tanh"`: `x/2 * (1 + tanh(u))`, `u = sqrt(2/pi) * (x + 0.044715 x^3)`,
/// as `x * sigmoid(2u)` (the same function) so that negative inputs do not cancel.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 2.0 * 0.797_884_6;
    x * sigmoid(TWO_SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x))
}

/// `x * sigmoid(x)` (SiLU, also called Swish).
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `ln(1 + e^x)`, as `max(x, 0) + ln(1 + e^-|x|)`, which never overflows.
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn softplus(x: f32) -> f32 {
    let m = if x > 0.0 { x } else { 0.0 };
    m + libm::log1pf(exp(-x.abs()))
}

/// `clamp(alpha * x + beta, 0, 1)`; NaN stays NaN.
#[inline(always)]
pub fn hard_sigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    (alpha * x + beta).clamp(0.0, 1.0)
}

/// `x < 0 ? alpha * (e^x - 1) : x`, with `e^x - 1` as `expm1` (no cancellation near 0).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
#[cfg_attr(not(target_arch = "nvptx64"), inline)]
pub fn elu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 { alpha * libm::expm1f(x) } else { x }
}

/// `x / (1 + |x|)`
#[inline(always)]
pub fn softsign(x: f32) -> f32 {
    x / (1.0 + x.abs())
}

/// `x > alpha ? x : 0`
#[inline(always)]
pub fn thresholded_relu(x: f32, alpha: f32) -> f32 {
    if x > alpha { x } else { 0.0 }
}

/// Applies an activation of an ONNX recurrent cell, with its `alpha` and `beta`.
#[inline(always)]
pub fn activate_cell(act: crate::abi::CellActivation, x: f32, alpha: f32, beta: f32) -> f32 {
    use crate::abi::CellActivation as A;
    match act {
        A::Relu => relu(x),
        A::Tanh => tanh(x),
        A::Sigmoid => sigmoid(x),
        A::Affine => fma(alpha, x, beta),
        A::LeakyRelu => leaky_relu(x, alpha),
        A::ThresholdedRelu => thresholded_relu(x, alpha),
        A::ScaledTanh => alpha * tanh(beta * x),
        A::HardSigmoid => hard_sigmoid(x, alpha, beta),
        A::Elu => elu(x, alpha),
        A::Softsign => softsign(x),
        A::Softplus => softplus(x),
    }
}

/// Applies a GEMM-epilogue activation.
#[inline(always)]
pub fn activate(act: crate::abi::Activation, x: f32, alpha: f32) -> f32 {
    use crate::abi::Activation;
    match act {
        Activation::None => x,
        Activation::Relu => relu(x),
        Activation::Sigmoid => sigmoid(x),
        Activation::Tanh => tanh(x),
        Activation::GeluErf => gelu_erf(x),
        Activation::GeluTanh => gelu_tanh(x),
        Activation::Silu => silu(x),
        Activation::LeakyRelu => leaky_relu(x, alpha),
    }
}

/// The f32 value of IEEE binary16 bits `h` (exact).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match exp {
        // Zero and subnormals: mant * 2^-24, exact in f32.
        0 => {
            let magnitude = mant as f32 * 5.960_464_5e-8;
            return if sign != 0 { -magnitude } else { magnitude };
        }
        0x1f => sign | 0x7f80_0000 | (mant << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

/// `x` rounded to the nearest IEEE binary16 (ties to even; overflow to infinity, NaN stays NaN).
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    let u = x.to_bits();
    let sign = ((u >> 16) & 0x8000) as u16;
    let a = u & 0x7fff_ffff;
    if a > 0x7f80_0000 {
        return sign | 0x7e00 | ((a >> 13) & 0x3ff) as u16;
    }
    let e = (a >> 23) as i32 - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let (r, rem, half) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = (a & 0x7f_ffff) | 0x80_0000;
        let shift = (14 - e) as u32;
        (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1))
    } else {
        (((e as u32) << 10) | ((a & 0x7f_ffff) >> 13), a & 0x1fff, 0x1000)
    };
    // A carry out of the mantissa bumps the exponent, up to infinity: the right result.
    let up = rem > half || (rem == half && r & 1 == 1);
    sign | (r + up as u32) as u16
}

/// The f32 value of bfloat16 bits `b` (exact).
#[inline(always)]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// `x` rounded to the nearest bfloat16 (ties to even; NaN stays NaN).
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if x.is_nan() {
        return ((u >> 16) | 0x40) as u16;
    }
    (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

/// The centred integer of an 8-bit QuantizeLinear of `x` at scale `s`
/// ([`crate::abi::ew_extra::QUANTIZE`], `aux` as [`crate::abi::quantize_aux`] packs it): the
/// spelled-out ops `x / s`, round to nearest even, `+ z`, `max(lo)`, `min(hi)`, `- z`, each as
/// its own instruction computes it, so the same bits (NaN and signed zeros included).
#[inline(always)]
pub fn quantize_centred(x: f32, s: f32, aux: u32) -> f32 {
    let z = aux as u16 as i16 as f32;
    let (lo, hi) = if aux >> 16 & 1 != 0 { (0.0, 255.0) } else { (-128.0, 127.0) };
    let has_z = aux >> 17 & 1 != 0;
    let r = rint_f32(div(x, s));
    let r = if has_z { add(r, z) } else { r };
    let c = min(max(r, lo), hi);
    if has_z { sub(c, z) } else { c }
}

/// Instruction `ins` of an elementwise program on operands `a` and `b`: [`ew_op`], or
/// [`quantize_centred`] for the op that also reads [`crate::abi::EwInstr::aux`]. What the
/// planner evaluates programs with on the host.
pub fn ew_instr(ins: &crate::abi::EwInstr, a: f32, b: f32) -> f32 {
    if ins.op == crate::abi::ew_extra::QUANTIZE {
        quantize_centred(a, b, ins.aux)
    } else {
        ew_op(ins.op, a, b, ins.imm)
    }
}

// Rounding to integers: `cvt` on the device, `libm` on the host (both exact).
#[cfg(target_arch = "nvptx64")]
use crate::intrinsics::{ceil_f32, floor_f32, rint_f32};
#[cfg(not(target_arch = "nvptx64"))]
use libm::{ceilf as ceil_f32, floorf as floor_f32, rintf as rint_f32};

/// `op(a, b)` of an elementwise-program instruction (`abi::EwInstr`; NaN for an unknown code):
/// each arm is the function the op's single-op kernel applies. Out of line on the device (the
/// program calls it from each unrolled instruction); the planner evaluates programs with it on
/// the host (recognizing spelled-out activations).
#[cfg_attr(target_arch = "nvptx64", inline(never))]
pub fn ew_op(op: u32, a: f32, b: f32, imm: f32) -> f32 {
    match op {
        0 => add(a, b),
        1 => sub(a, b),
        2 => mul(a, b),
        3 => div(a, b),
        4 => pow(a, b),
        5 => max(a, b),
        6 => min(a, b),
        16 => relu(a),
        17 => leaky_relu(a, imm),
        18 => sigmoid(a),
        19 => tanh(a),
        20 => exp(a),
        21 => log(a),
        22 => sqrt(a),
        23 => abs(a),
        24 => neg(a),
        25 => erf(a),
        26 => gelu_erf(a),
        27 => gelu_tanh(a),
        28 => silu(a),
        29 => softplus(a),
        30 => floor_f32(a),
        31 => ceil_f32(a),
        32 => rint_f32(a),
        33 => div(1.0, a),
        34 => libm::sinf(a),
        35 => libm::cosf(a),
        36 => libm::tanf(a),
        37 => libm::asinf(a),
        38 => libm::acosf(a),
        39 => libm::atanf(a),
        40 => libm::sinhf(a),
        41 => libm::coshf(a),
        42 => libm::asinhf(a),
        43 => libm::acoshf(a),
        44 => libm::atanhf(a),
        45 => {
            if a > 0.0 {
                1.0
            } else if a < 0.0 {
                -1.0
            } else {
                a
            }
        }
        46 => elu(a, imm),
        47 => softsign(a),
        48 => a * hard_sigmoid(a, 1.0 / 6.0, 0.5),
        49 => thresholded_relu(a, imm),
        50 => a * tanh(softplus(a)),
        51 => max(0.0, a) + min(0.0, imm * libm::expm1f(a / imm)),
        52 => {
            if a < 0.0 {
                b * a
            } else {
                a
            }
        }
        53 => {
            if a < -imm {
                a + b
            } else if a > imm {
                a - b
            } else {
                0.0
            }
        }
        54 => fmod(a, b),
        _ => f32::NAN,
    }
}

/// Division of unsigned indices below 2^31 by a fixed divisor through a multiply-high and a shift
/// (Granlund and Montgomery's method, as CUTLASS's `FastDivmod`): the divisor's multiplier and
/// shift are computed once ([`FastDiv::new`], on the host for `ew_program_f32`), and each quotient
/// then costs a few instructions instead of the tens of a 32-bit `div` or the ~100 of a 64-bit one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastDiv {
    /// The divisor (1 when built from 0).
    pub d: u32,
    /// `ceil(2^(31 + l) / d)` with `l = ceil(log2 d)`; 0 for `d == 1`.
    pub m: u32,
    /// `l - 1`, the shift after taking the high word; 0 for `d == 1`.
    pub s: u32,
}

impl FastDiv {
    /// The divisor `d` (0 is taken as 1: a dim of 0 has no index to divide).
    pub fn new(d: u32) -> Self {
        let d = d.max(1);
        if d == 1 {
            return Self { d, m: 0, s: 0 };
        }
        let l = 32 - (d - 1).leading_zeros(); // ceil(log2 d) >= 1
        let m = ((1u64 << (31 + l)).div_ceil(d as u64)) as u32;
        Self { d, m, s: l - 1 }
    }

    /// `(n / d, n % d)` for `n < 2^31`.
    #[inline(always)]
    pub fn divmod(self, n: u32) -> (u32, u32) {
        let q = if self.d == 1 { n } else { (((n as u64 * self.m as u64) >> 32) as u32) >> self.s };
        (q, n - q * self.d)
    }
}

/// `base ^ exp` of integers, wrapping, by repeated squaring; a negative exponent truncates
/// `1 / base^|exp|` (ONNX Pow of integers: what the GPU's `int_arith` and the CPU reference
/// compute).
#[inline(always)]
pub fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 if exp % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        };
    }
    pow_u64(base as u64, exp as u64) as i64
}

/// `base ^ exp` of unsigned 64-bit integers, wrapping, by repeated squaring (the same bits as
/// [`int_pow`] of their two's-complement values for a non-negative exponent).
#[inline(always)]
pub fn pow_u64(base: u64, exp: u64) -> u64 {
    let (mut result, mut b, mut e) = (1u64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    result
}

pub mod coded;

#[cfg(test)]
mod tests;
