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

/// `max(a, b)`, NaN when either operand is NaN (NumPy `maximum`, PyTorch `max`).
#[inline(always)]
pub fn max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// `min(a, b)`, NaN when either operand is NaN.
#[inline(always)]
pub fn min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
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
        30 => libm::floorf(a),
        31 => libm::ceilf(a),
        32 => libm::rintf(a),
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

#[cfg(test)]
mod tests {
    //! Each function against an f64 evaluation over a sweep of the f32 range.
    extern crate std;
    use super::*;

    fn sweep() -> impl Iterator<Item = f32> {
        // Dense near zero, sparse out to the range ends, both signs, plus the special values.
        let mags = (-300..=300).map(|i| 10f64.powf(i as f64 / 20.0) as f32);
        mags.flat_map(|m| [m, -m]).chain([0.0, -0.0, 1.0, -1.0, f32::INFINITY, f32::NEG_INFINITY])
    }

    /// Relative error in units of f32 epsilon, with an absolute floor for results near 0.
    fn check(name: &str, got: f32, want: f64, x: f32, max_eps: f64) {
        if want.is_nan() {
            assert!(got.is_nan(), "{name}({x}) = {got}, want NaN");
            return;
        }
        if want.is_infinite() || want.abs() > f32::MAX as f64 {
            assert_eq!(got as f64, if want > 0.0 { f64::INFINITY } else { f64::NEG_INFINITY }, "{name}({x})");
            return;
        }
        // Below 1e-30 (subnormal territory after a product) only the absolute error matters.
        let err = (got as f64 - want).abs() / want.abs().max(1e-30);
        assert!(err <= max_eps * f32::EPSILON as f64, "{name}({x}) = {got}, want {want}: {err:e} relative");
    }

    fn sigmoid64(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    #[test]
    fn unary_functions_match_f64() {
        for x in sweep() {
            let d = x as f64;
            check("sigmoid", sigmoid(x), sigmoid64(d), x, 4.0);
            check("tanh", tanh(x), d.tanh(), x, 4.0);
            check("exp", exp(x), d.exp(), x, 4.0);
            check("log", log(x), d.ln(), x, 4.0);
            check("sqrt", sqrt(x), d.sqrt(), x, 0.5);
            check("erf", erf(x), libm::erf(d), x, 4.0);
            check("silu", silu(x), d * sigmoid64(d), x, 8.0);
            check("softplus", softplus(x), if d > 30.0 { d } else { d.exp().ln_1p() }, x, 4.0);
            // In the negative tails the result is ill-conditioned in the rounded inner argument
            // (relative sensitivity about x^2), so the bound grows with it.
            let tail = (d * d).min(1e3);
            check("gelu_erf", gelu_erf(x), 0.5 * d * libm::erfc(-d / 2f64.sqrt()), x, 8.0 + tail);
            let inner = (2.0 / core::f64::consts::PI).sqrt() * (d + 0.044715 * d * d * d);
            if d.abs() < 1e6 {
                check("gelu_tanh", gelu_tanh(x), d * sigmoid64(2.0 * inner), x, 16.0 + 4.0 * tail);
            }
        }
    }

    /// Distance in f32 ulps between `got` and the correctly rounded value of `want`.
    fn ulps(got: f32, want: f64) -> u32 {
        let w = want as f32;
        let key =
            |v: f32| if v.is_sign_negative() { -(v.abs().to_bits() as i64) } else { v.to_bits() as i64 };
        (key(got) - key(w)).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_within_2_ulp_across_the_range() {
        let mut worst = (0, 0.0f32);
        // Every 97th f32 of both signs, through overflow and underflow.
        for bits in (0..0x4300_0000u32).step_by(97) {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                let want = (x as f64).exp();
                if want < f32::MIN_POSITIVE as f64 {
                    // Subnormal results: absolute error within one normal ulp of 2^-126.
                    assert!(
                        (exp(x) as f64 - want).abs() <= f32::MIN_POSITIVE as f64 * f32::EPSILON as f64,
                        "exp({x})"
                    );
                    continue;
                }
                let u = ulps(exp(x), want);
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        assert!(worst.0 <= 2, "exp is {} ulp off at {}", worst.0, worst.1);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(88.8), f32::INFINITY);
    }

    #[test]
    fn sigmoid_is_the_two_sided_formula_bit_for_bit() {
        // The branch-free form against `1 / (1 + e^-x)` for x >= 0 and `e^x / (1 + e^x)` below.
        let two_sided = |x: f32| if x >= 0.0 { 1.0 / (1.0 + exp(-x)) } else { exp(x) / (1.0 + exp(x)) };
        let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, -f32::MIN_POSITIVE];
        for x in (0..u32::MAX).step_by(4099).map(f32::from_bits).chain(specials) {
            let (got, want) = (sigmoid(x), two_sided(x));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn cell_activations_match_f64() {
        use crate::abi::CellActivation as A;
        let (a, b) = (0.7f32, 0.3f32);
        let (ad, bd) = (a as f64, b as f64);
        for x in sweep().filter(|x| x.abs() < 1e30) {
            let d = x as f64;
            let cases: [(A, f64); 11] = [
                (A::Relu, d.max(0.0)),
                (A::Tanh, d.tanh()),
                (A::Sigmoid, sigmoid64(d)),
                (A::Affine, ad * d + bd),
                (A::LeakyRelu, if d < 0.0 { ad * d } else { d }),
                (A::ThresholdedRelu, if d > ad { d } else { 0.0 }),
                (A::ScaledTanh, ad * (bd * d).tanh()),
                (A::HardSigmoid, (ad * d + bd).clamp(0.0, 1.0)),
                (A::Elu, if d < 0.0 { ad * d.exp_m1() } else { d }),
                (A::Softsign, d / (1.0 + d.abs())),
                (A::Softplus, if d > 30.0 { d } else { d.exp().ln_1p() }),
            ];
            for (act, want) in cases {
                assert_eq!(A::from_code(act as u32), act);
                let got = activate_cell(act, x, a, b);
                // Affine and HardSigmoid round `alpha * x` (the f64 side uses the exact product).
                if matches!(act, A::Affine | A::HardSigmoid) {
                    assert!((got as f64 - want).abs() <= 4.0 * f32::EPSILON as f64 * (want.abs() + 1.0));
                } else {
                    check(&std::format!("{act:?}"), got, want, x, 8.0);
                }
            }
        }
    }

    #[test]
    fn nan_propagates_through_max_min_relu() {
        assert!(max(f32::NAN, 1.0).is_nan() && max(1.0, f32::NAN).is_nan());
        assert!(min(f32::NAN, 1.0).is_nan() && min(1.0, f32::NAN).is_nan());
        assert!(relu(f32::NAN).is_nan());
        assert_eq!(relu(-3.0), 0.0);
        assert_eq!(leaky_relu(-2.0, 0.1), -0.2);
    }

    #[test]
    fn half_conversions_match_the_hosts() {
        // Every f16 bit pattern to f32 and back; f32 samples (all exponents, halfway points) to
        // f16 and bf16, against Rust's own (round-to-nearest-even) conversions.
        for h in 0..=u16::MAX {
            let want = f16::from_bits(h) as f32;
            let got = f16_to_f32(h);
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{h:#06x}");
            if !want.is_nan() {
                assert_eq!(f32_to_f16(want), h, "{h:#06x} round trip");
            }
            let b = bf16_to_f32(h);
            if !b.is_nan() {
                assert_eq!(f32_to_bf16(b), h, "bf16 {h:#06x} round trip");
            }
        }
        let mut u = 1u32;
        while u < 0x7f80_0000 {
            for bits in [u, u + 0x1000, u + 0x0fff, u + 0x1001, u | 0x8000_0000] {
                let x = f32::from_bits(bits);
                assert_eq!(f32_to_f16(x), (x as f16).to_bits(), "{x:e}");
                let want_bf = {
                    // Round to nearest even on the top 16 bits.
                    let r = bits & 0xffff;
                    let t = bits >> 16;
                    let up = r > 0x8000 || (r == 0x8000 && t & 1 == 1);
                    (t + up as u32) as u16
                };
                assert_eq!(f32_to_bf16(x), want_bf, "{x:e}");
            }
            u = u.wrapping_mul(3) / 2 + 7;
        }
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(-65520.0), 0xfc00);
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
    }
}
