//! ONNX's coded narrow element types — float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), float4
//! (E2M1), int4 / uint4, int2 / uint2 — one code a byte (in its low bits), decoded and encoded
//! by bit arithmetic on f64, so the device and the host (the planner's `Coded`, the CPU
//! reference) convert with the same code.
//!
//! A type is its [`scalar`] code. Decoding is exact (every code is an f64). Encoding rounds once
//! to nearest-even, as ONNX `Cast` converts; see [`encode`] for the saturation rules.

use crate::abi::{round_mode, scalar};

/// The layout of a minifloat: field widths, bias and how it spells infinity, NaN and -0.
#[derive(Clone, Copy)]
struct Minifloat {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// IEEE infinities (all-ones exponent, zero mantissa) and NaNs (all-ones exponent).
    ieee: bool,
    /// NaN is the sign bit alone and there is no -0 (the FNUZ formats).
    unsigned_zero: bool,
    /// The all-ones code (`S.1111.111`) is NaN and the rest of its exponent are numbers (E4M3FN).
    nan_all_ones: bool,
}

#[inline(always)]
fn minifloat(ty: u32) -> Option<Minifloat> {
    let m = |exp_bits, man_bits, bias, ieee, unsigned_zero, nan_all_ones| Minifloat {
        exp_bits,
        man_bits,
        bias,
        ieee,
        unsigned_zero,
        nan_all_ones,
    };
    Some(match ty {
        scalar::F8E4M3FN => m(4, 3, 7, false, false, true),
        scalar::F8E4M3FNUZ => m(4, 3, 8, false, true, false),
        scalar::F8E5M2 => m(5, 2, 15, true, false, false),
        scalar::F8E5M2FNUZ => m(5, 2, 16, false, true, false),
        scalar::F4E2M1 => m(2, 1, 1, false, false, false),
        _ => return None,
    })
}

/// `2^k` for `-1022 <= k <= 1023`, exactly.
#[inline(always)]
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// True for the coded float types (float8, float4).
#[inline(always)]
pub const fn is_float(ty: u32) -> bool {
    matches!(
        ty,
        scalar::F8E4M3FN
            | scalar::F8E4M3FNUZ
            | scalar::F8E5M2
            | scalar::F8E5M2FNUZ
            | scalar::F8E8M0
            | scalar::F4E2M1
    )
}

/// The integer a code of an integer type stands for (its low bits, sign-extended for the signed
/// ones); for a float type, its value truncated toward zero (NaN gives 0).
#[inline(always)]
pub fn decode_int(ty: u32, code: u8) -> i64 {
    if is_float(ty) { decode(ty, code) as i64 } else { int_of(ty, code) }
}

/// The integer of a code of an integer coded type (another code: the byte itself).
#[inline(always)]
fn int_of(ty: u32, code: u8) -> i64 {
    match ty {
        scalar::I4 => (((code << 4) as i8) >> 4) as i64,
        scalar::U4 => (code & 0x0f) as i64,
        scalar::I2 => (((code << 6) as i8) >> 6) as i64,
        scalar::U2 => (code & 0x03) as i64,
        _ => code as i64,
    }
}

/// `v` wrapped to an integer coded type's width (another code: its low byte).
#[inline(always)]
fn wrap(ty: u32, v: i64) -> u8 {
    match ty {
        scalar::I4 | scalar::U4 => (v as u8) & 0x0f,
        scalar::I2 | scalar::U2 => (v as u8) & 0x03,
        _ => v as u8,
    }
}

/// The value a code of a coded type stands for, exactly.
#[inline(always)]
pub fn decode(ty: u32, code: u8) -> f64 {
    if ty == scalar::F8E8M0 {
        return if code == 0xff { f64::NAN } else { pow2(code as i32 - 127) };
    }
    let Some(f) = minifloat(ty) else { return int_of(ty, code) as f64 };
    let width = 1 + f.exp_bits + f.man_bits;
    let code = code as u32 & ((1 << width) - 1);
    let sign_bit = 1 << (width - 1);
    let exp = (code >> f.man_bits) & ((1 << f.exp_bits) - 1);
    let man = code & ((1 << f.man_bits) - 1);
    let exp_max = (1 << f.exp_bits) - 1;
    if f.unsigned_zero && code == sign_bit {
        return f64::NAN;
    }
    if f.nan_all_ones && exp == exp_max && man == (1 << f.man_bits) - 1 {
        return f64::NAN;
    }
    if f.ieee && exp == exp_max {
        let inf = if man == 0 { f64::INFINITY } else { f64::NAN };
        return if code & sign_bit != 0 { -inf } else { inf };
    }
    let magnitude = if exp == 0 {
        man as f64 * pow2(1 - f.bias - f.man_bits as i32)
    } else {
        ((1 << f.man_bits) | man) as f64 * pow2(exp as i32 - f.bias - f.man_bits as i32)
    };
    if code & sign_bit != 0 { -magnitude } else { magnitude }
}

/// The code of an integer, wrapped to the type's width (two's complement, as `Cast` between
/// integer types); for a float type, the value encoded as by [`encode`] (to nearest, without
/// saturation).
#[inline(always)]
pub fn encode_int(ty: u32, v: i64) -> u8 {
    if is_float(ty) { encode(ty, v as f64, false, round_mode::NEAREST) } else { wrap(ty, v) }
}

/// The code of `x` in coded type `ty`, as ONNX `Cast` converts:
/// - float8 / float4: rounded once to nearest-even. With `saturate` (Cast's default) values past
///   the largest finite one, and infinities, become it (with their sign); without, they become
///   infinity (E5M2) or NaN (the formats without infinity). NaN stays NaN. float4 has no NaN or
///   infinity and always saturates (NaN gives 0). The FNUZ formats have no -0.
/// - E8M0: the power of two of `x`'s f32 exponent, rounded as `round` ([`round_mode`]) says
///   (the mantissa decides up and nearest), ignoring the sign; NaN and infinity give NaN.
/// - integer types: truncated toward zero, then wrapped to the width (NaN gives 0).
#[inline(always)]
pub fn encode(ty: u32, x: f64, saturate: bool, round: u32) -> u8 {
    if ty == scalar::F8E8M0 {
        return encode_e8m0(x as f32, saturate, round);
    }
    let Some(f) = minifloat(ty) else {
        return wrap(ty, if x.is_nan() { 0 } else { x as i64 });
    };
    let width = 1 + f.exp_bits + f.man_bits;
    let sign_bit: u32 = 1 << (width - 1);
    let bits = x.to_bits();
    let neg = bits >> 63 != 0;
    let sign = if neg { sign_bit } else { 0 };
    let exp_max = (1u32 << f.exp_bits) - 1;
    // The largest finite code: the all-ones exponent is special for IEEE formats, and its
    // all-ones mantissa for E4M3FN.
    let max_code = if f.ieee {
        ((exp_max - 1) << f.man_bits) | ((1 << f.man_bits) - 1)
    } else if f.nan_all_ones {
        (exp_max << f.man_bits) | ((1 << f.man_bits) - 2)
    } else {
        (exp_max << f.man_bits) | ((1 << f.man_bits) - 1)
    };
    let nan = if f.unsigned_zero {
        sign_bit
    } else if f.ieee {
        (exp_max << f.man_bits) | (1 << (f.man_bits - 1))
    } else if f.nan_all_ones {
        (exp_max << f.man_bits) | ((1 << f.man_bits) - 1)
    } else {
        0 // float4: no NaN
    };
    let overflow = if saturate || ty == scalar::F4E2M1 {
        (sign | max_code) as u8
    } else if f.ieee {
        (sign | (exp_max << f.man_bits)) as u8
    } else {
        nan as u8
    };
    let field64 = ((bits >> 52) & 0x7ff) as i32;
    if field64 == 0x7ff {
        // Infinity saturates with `saturate`; without it, past-max handling applies.
        return if bits & ((1 << 52) - 1) != 0 { nan as u8 } else { overflow };
    }
    // The exponent whose quantum 2^(e - man_bits) rounds |x| (subnormals share emin's), and the
    // rounded multiple m of that quantum. f64 subnormals lie far below half of every format's
    // smallest subnormal: they round to zero.
    let emin = 1 - f.bias;
    let m = if field64 == 0 {
        0
    } else {
        let e64 = field64 - 1023;
        let mant = (1u64 << 52) | (bits & ((1 << 52) - 1));
        let shift = 52 + emin.max(e64) - f.man_bits as i32 - e64;
        if shift >= 54 {
            0 // below a quarter of the quantum
        } else {
            let shift = shift as u32;
            let (q, rem, half) = (mant >> shift, mant & ((1 << shift) - 1), 1u64 << (shift - 1));
            q + (rem > half || (rem == half && q & 1 == 1)) as u64
        }
    };
    if m == 0 {
        // Zero keeps its sign, but in the FNUZ formats (whose sign bit alone is NaN).
        return if f.unsigned_zero { 0 } else { sign as u8 };
    }
    let e = emin.max(field64 - 1023);
    let (e, m) = if m == 1 << (f.man_bits + 1) { (e + 1, m >> 1) } else { (e, m) };
    let code = if m < 1 << f.man_bits {
        m as u32 // subnormal: exponent field 0
    } else {
        let field = e + f.bias;
        if field > exp_max as i32 {
            return overflow;
        }
        ((field as u32) << f.man_bits) | (m as u32 & ((1 << f.man_bits) - 1))
    };
    if code > max_code {
        return overflow;
    }
    (sign | code) as u8
}

/// E8M0 from an f32's bits as ONNX's reference converts (`onnx.numpy_helper.to_float8e8m0`).
#[inline(always)]
fn encode_e8m0(x: f32, saturate: bool, round: u32) -> u8 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xff;
    if exp == 0xff {
        return 0xff;
    }
    let up = match round {
        round_mode::DOWN => false,
        round_mode::NEAREST => {
            let (g, r, s) = (bits & 0x40_0000 != 0, bits & 0x20_0000 != 0, bits & 0x1f_ffff != 0);
            g && (r || s || exp > 0)
        }
        _ => bits & 0x7f_ffff != 0,
    };
    let up = up && !(saturate && exp == 0xfe);
    (exp + up as u32) as u8
}
