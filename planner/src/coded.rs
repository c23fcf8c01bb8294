//! [`Coded`]: ONNX's element types of eight bits or fewer that are codes of a format rather than
//! machine integers — float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), float4 (E2M1), int4 /
//! uint4 and int2 / uint2.
//!
//! In memory (host tensors, constants) each element is one code in one byte, in the low bits;
//! ONNX files pack the 4-bit and 2-bit ones (two or four per byte, the first element in the low
//! bits), which the importer unpacks. Decoding is exact (every code is a value of f64 or i64);
//! encoding a float rounds once to nearest-even as ONNX `Cast` does, with its saturation rules.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One of ONNX's coded narrow element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Coded {
    /// float8: 4 exponent bits (bias 7), 3 mantissa bits, no infinity, NaN `S.1111.111`.
    F8E4M3FN,
    /// float8: 4 exponent bits (bias 8), 3 mantissa bits, no infinity, no -0, NaN `0x80`.
    F8E4M3FNUZ,
    /// float8: 5 exponent bits (bias 15), 2 mantissa bits, IEEE infinities and NaNs.
    F8E5M2,
    /// float8: 5 exponent bits (bias 16), 2 mantissa bits, no infinity, no -0, NaN `0x80`.
    F8E5M2FNUZ,
    /// float8: an unsigned power of two `2^(code - 127)`; `0xFF` is NaN.
    F8E8M0,
    /// float4: 2 exponent bits (bias 1), 1 mantissa bit, no infinity or NaN (largest 6).
    F4E2M1,
    /// Signed 4-bit integer (-8 ..= 7).
    I4,
    /// Unsigned 4-bit integer (0 ..= 15).
    U4,
    /// Signed 2-bit integer (-2 ..= 1).
    I2,
    /// Unsigned 2-bit integer (0 ..= 3).
    U2,
}

impl Coded {
    /// Every coded type.
    pub const ALL: [Coded; 10] = [
        Coded::F8E4M3FN,
        Coded::F8E4M3FNUZ,
        Coded::F8E5M2,
        Coded::F8E5M2FNUZ,
        Coded::F8E8M0,
        Coded::F4E2M1,
        Coded::I4,
        Coded::U4,
        Coded::I2,
        Coded::U2,
    ];

    /// Bits one element takes in an ONNX file (8, 4 or 2).
    pub const fn bits(self) -> u32 {
        match self {
            Coded::F8E4M3FN | Coded::F8E4M3FNUZ | Coded::F8E5M2 | Coded::F8E5M2FNUZ | Coded::F8E8M0 => 8,
            Coded::F4E2M1 | Coded::I4 | Coded::U4 => 4,
            Coded::I2 | Coded::U2 => 2,
        }
    }

    /// True for the float formats.
    pub const fn is_float(self) -> bool {
        !matches!(self, Coded::I4 | Coded::U4 | Coded::I2 | Coded::U2)
    }

    /// The type's code in the GPU kernels' [`kernels_gpu::abi::scalar`].
    pub const fn scalar(self) -> u32 {
        use kernels_gpu::abi::scalar;
        match self {
            Coded::F8E4M3FN => scalar::F8E4M3FN,
            Coded::F8E4M3FNUZ => scalar::F8E4M3FNUZ,
            Coded::F8E5M2 => scalar::F8E5M2,
            Coded::F8E5M2FNUZ => scalar::F8E5M2FNUZ,
            Coded::F8E8M0 => scalar::F8E8M0,
            Coded::F4E2M1 => scalar::F4E2M1,
            Coded::I4 => scalar::I4,
            Coded::U4 => scalar::U4,
            Coded::I2 => scalar::I2,
            Coded::U2 => scalar::U2,
        }
    }

    /// True for the types with negative values.
    pub const fn is_signed(self) -> bool {
        !matches!(self, Coded::U4 | Coded::U2 | Coded::F8E8M0)
    }

    /// Lower-case name as in ONNX documentation (`float8e4m3fn`, `int4`, ...).
    pub const fn onnx_name(self) -> &'static str {
        match self {
            Coded::F8E4M3FN => "float8e4m3fn",
            Coded::F8E4M3FNUZ => "float8e4m3fnuz",
            Coded::F8E5M2 => "float8e5m2",
            Coded::F8E5M2FNUZ => "float8e5m2fnuz",
            Coded::F8E8M0 => "float8e8m0",
            Coded::F4E2M1 => "float4e2m1",
            Coded::I4 => "int4",
            Coded::U4 => "uint4",
            Coded::I2 => "int2",
            Coded::U2 => "uint2",
        }
    }

    /// The integer a code of an integer type stands for (the low `bits` bits, sign-extended for
    /// the signed ones); for a float type, its value truncated toward zero (NaN gives 0).
    pub fn decode_int(self, code: u8) -> i64 {
        kernels_gpu::math::coded::decode_int(self.scalar(), code)
    }

    /// The value a code stands for, exactly.
    pub fn decode(self, code: u8) -> f64 {
        kernels_gpu::math::coded::decode(self.scalar(), code)
    }

    /// The code of an integer, wrapped to the type's width (two's complement, as `Cast` between
    /// integer types); for a float type, the value encoded as by [`Coded::encode`] (to nearest,
    /// without saturation; `Cast` passes its own rules to `encode`).
    pub fn encode_int(self, v: i64) -> u8 {
        kernels_gpu::math::coded::encode_int(self.scalar(), v)
    }

    /// The code of `x`, as ONNX `Cast` converts (the GPU kernels' own code,
    /// [`kernels_gpu::math::coded::encode`]):
    /// - float8 / float4: rounded once to nearest-even. With `saturate` (Cast's default) values
    ///   past the largest finite one, and infinities, become it (with their sign); without, they
    ///   become infinity (E5M2) or NaN (the formats without infinity). NaN stays NaN. float4 has
    ///   no NaN or infinity and always saturates (NaN gives 0). The FNUZ formats have no -0.
    /// - E8M0: the power of two of `x`'s f32 exponent, rounded as `round` says (the mantissa
    ///   decides `Up` and `Nearest`), ignoring the sign; NaN and infinity give NaN.
    /// - integer types: truncated toward zero, then wrapped to the width (NaN gives 0).
    pub fn encode(self, x: f64, saturate: bool, round: RoundMode) -> u8 {
        kernels_gpu::math::coded::encode(self.scalar(), x, saturate, round.code())
    }
}

/// How a conversion to E8M0 rounds (ONNX `Cast`'s `round_mode`, opset 24).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RoundMode {
    /// Toward the next power of two when any mantissa bit is set (the default).
    #[default]
    Up,
    /// Down to the value's own power of two.
    Down,
    /// To the nearer power of two, ties to even.
    Nearest,
}

impl RoundMode {
    /// The mode's code in the GPU kernels' [`kernels_gpu::abi::round_mode`].
    pub const fn code(self) -> u32 {
        use kernels_gpu::abi::round_mode;
        match self {
            RoundMode::Up => round_mode::UP,
            RoundMode::Down => round_mode::DOWN,
            RoundMode::Nearest => round_mode::NEAREST,
        }
    }
}

impl fmt::Display for Coded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.onnx_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The host's first codec (log2 and f64 arithmetic, written from ONNX's tables), kept as the
    // oracle the bit-level one shared with the device is checked against.
    /// The layout of a minifloat: field widths, bias and how it spells infinity, NaN and -0.
    struct Minifloat {
        exp_bits: u32,
        man_bits: u32,
        bias: i32,
        /// IEEE infinities (all-ones exponent, zero mantissa) and NaNs (all-ones exponent).
        ieee: bool,
        /// NaN is `0x80` and there is no -0 (the FNUZ formats).
        unsigned_zero: bool,
        /// The all-ones code (`S.1111.111`) is NaN and the rest of its exponent are numbers (E4M3FN).
        nan_all_ones: bool,
    }

    impl Coded {
        fn minifloat(self) -> Option<Minifloat> {
            let m = |exp_bits, man_bits, bias, ieee, unsigned_zero, nan_all_ones| Minifloat {
                exp_bits,
                man_bits,
                bias,
                ieee,
                unsigned_zero,
                nan_all_ones,
            };
            Some(match self {
                Coded::F8E4M3FN => m(4, 3, 7, false, false, true),
                Coded::F8E4M3FNUZ => m(4, 3, 8, false, true, false),
                Coded::F8E5M2 => m(5, 2, 15, true, false, false),
                Coded::F8E5M2FNUZ => m(5, 2, 16, false, true, false),
                Coded::F4E2M1 => m(2, 1, 1, false, false, false),
                Coded::F8E8M0 | Coded::I4 | Coded::U4 | Coded::I2 | Coded::U2 => return None,
            })
        }

        /// The integer a code of an integer type stands for (the low `bits` bits, sign-extended for
        /// the signed ones); for a float type, its value truncated toward zero (NaN gives 0).
        fn oracle_decode_int(self, code: u8) -> i64 {
            match self {
                Coded::I4 => i64::from(((code << 4) as i8) >> 4),
                Coded::U4 => i64::from(code & 0x0f),
                Coded::I2 => i64::from(((code << 6) as i8) >> 6),
                Coded::U2 => i64::from(code & 0x03),
                _ => self.decode(code) as i64,
            }
        }

        /// The value a code stands for, exactly.
        fn oracle_decode(self, code: u8) -> f64 {
            if self == Coded::F8E8M0 {
                return if code == 0xff { f64::NAN } else { 2f64.powi(i32::from(code) - 127) };
            }
            let Some(f) = self.minifloat() else { return self.oracle_decode_int(code) as f64 };
            let width = 1 + f.exp_bits + f.man_bits;
            let code = u32::from(code) & ((1 << width) - 1);
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
                f64::from(man) * 2f64.powi(1 - f.bias - f.man_bits as i32)
            } else {
                f64::from((1 << f.man_bits) | man) * 2f64.powi(exp as i32 - f.bias - f.man_bits as i32)
            };
            if code & sign_bit != 0 { -magnitude } else { magnitude }
        }

        /// The code of an integer, wrapped to the type's width (two's complement, as `Cast` between
        /// integer types); for a float type, the value encoded as by [`Coded::encode`] (to nearest,
        /// without saturation; `Cast` passes its own rules to `encode`).
        fn oracle_encode_int(self, v: i64) -> u8 {
            match self {
                Coded::I4 | Coded::U4 => (v as u8) & 0x0f,
                Coded::I2 | Coded::U2 => (v as u8) & 0x03,
                _ => self.oracle_encode(v as f64, false, RoundMode::Nearest),
            }
        }

        /// The code of `x`, as ONNX `Cast` converts:
        /// - float8 / float4: rounded once to nearest-even. With `saturate` (Cast's default) values
        ///   past the largest finite one, and infinities, become it (with their sign); without, they
        ///   become infinity (E5M2) or NaN (the formats without infinity). NaN stays NaN. float4 has
        ///   no NaN or infinity and always saturates (NaN gives 0). The FNUZ formats have no -0.
        /// - E8M0: the power of two of `x`'s f32 exponent, rounded as `round` says (the mantissa
        ///   decides `Up` and `Nearest`), ignoring the sign; NaN and infinity give NaN.
        /// - integer types: truncated toward zero, then wrapped to the width (NaN gives 0).
        fn oracle_encode(self, x: f64, saturate: bool, round: RoundMode) -> u8 {
            if self == Coded::F8E8M0 {
                return oracle_encode_e8m0(x as f32, saturate, round);
            }
            let Some(f) = self.minifloat() else {
                let t = if x.is_nan() { 0 } else { x as i64 };
                return self.encode_int(t);
            };
            let width = 1 + f.exp_bits + f.man_bits;
            let sign_bit: u32 = 1 << (width - 1);
            let neg = x.is_sign_negative();
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
            let overflow = |sign: u32| -> u8 {
                if saturate || self == Coded::F4E2M1 {
                    (sign | max_code) as u8
                } else if f.ieee {
                    (sign | (exp_max << f.man_bits)) as u8
                } else {
                    nan as u8
                }
            };
            if x.is_nan() {
                return nan as u8;
            }
            if x.is_infinite() {
                // Infinity saturates with `saturate`; without it, past-max handling applies.
                return overflow(if neg { sign_bit } else { 0 });
            }
            let a = x.abs();
            let emin = 1 - f.bias;
            // The exponent whose quantum 2^(e - man_bits) rounds `a`; subnormals share emin's.
            let e = if a == 0.0 { emin } else { (a.log2().floor() as i32).max(emin) };
            // log2 of a can land one off for values a hair below a power of two: correct it.
            let e = if a != 0.0 && e > emin && a < 2f64.powi(e) { e - 1 } else { e };
            let e = if a >= 2f64.powi(e + 1) { e + 1 } else { e };
            let quantum = 2f64.powi(e - f.man_bits as i32);
            let m = (a / quantum).round_ties_even() as u64;
            let (e, m) = if m == 1 << (f.man_bits + 1) { (e + 1, m >> 1) } else { (e, m) };
            if m == 0 {
                // Zero keeps its sign, but in the FNUZ formats (whose 0x80 is NaN).
                return if f.unsigned_zero { 0 } else { sign as u8 };
            }
            let code = if m < 1 << f.man_bits {
                m as u32 // subnormal: exponent field 0
            } else {
                let field = e + f.bias;
                if field > exp_max as i32 {
                    return overflow(if neg { sign_bit } else { 0 });
                }
                ((field as u32) << f.man_bits) | (m as u32 & ((1 << f.man_bits) - 1))
            };
            if code > max_code {
                return overflow(if neg { sign_bit } else { 0 });
            }
            (sign | code) as u8
        }
    }

    /// E8M0 from an f32's bits as ONNX's reference converts (`onnx.numpy_helper.to_float8e8m0`).
    fn oracle_encode_e8m0(x: f32, saturate: bool, round: RoundMode) -> u8 {
        let bits = x.to_bits();
        let exp = (bits >> 23) & 0xff;
        if exp == 0xff {
            return 0xff;
        }
        let up = match round {
            RoundMode::Down => false,
            RoundMode::Up => bits & 0x7f_ffff != 0,
            RoundMode::Nearest => {
                let (g, r, s) = (bits & 0x40_0000 != 0, bits & 0x20_0000 != 0, bits & 0x1f_ffff != 0);
                g && (r || s || exp > 0)
            }
        };
        let up = up && !(saturate && exp == 0xfe);
        (exp + u32::from(up)) as u8
    }

    /// Every code decodes to a value that encodes back to the same code (-0 and the NaN
    /// spellings aside), infinities and E8M0's smallest (an f32 subnormal) included, for every
    /// format.
    #[test]
    fn every_code_round_trips() {
        for c in Coded::ALL {
            for code in 0..(1u16 << c.bits()) {
                let code = code as u8;
                let v = c.decode(code);
                if v.is_nan() {
                    assert!(c.decode(c.encode(v, false, RoundMode::Up)).is_nan(), "{c} {code:#x}");
                    continue;
                }
                // (As the reference's generic writes encode: to nearest, unsaturated.)
                let back = c.encode(v, false, RoundMode::Nearest);
                assert_eq!(c.decode(back), v, "{c} code {code:#x} = {v}");
                if c.is_float() && v != 0.0 {
                    assert_eq!(back, code, "{c} code {code:#x} = {v}");
                }
            }
        }
    }

    /// The bit-level codec shared with the device (`kernels_gpu::math::coded`) decodes every code
    /// and encodes every value as the oracle does: each code's value and its neighbours, the midpoints between
    /// codes, values past the range, 200,000 pseudo-random f64 across the exponents, infinities,
    /// NaN, zeros and f64 subnormals, with and without saturation, in every rounding mode.
    #[test]
    fn the_device_codec_converts_as_this_one() {
        use kernels_gpu::abi::round_mode;
        use kernels_gpu::math::coded as dev;
        let modes = [
            (RoundMode::Up, round_mode::UP),
            (RoundMode::Down, round_mode::DOWN),
            (RoundMode::Nearest, round_mode::NEAREST),
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for c in Coded::ALL {
            let ty = c.scalar();
            let mut xs =
                vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 5e-324, -5e-324, 1e300, -1e300];
            for code in 0..(1u16 << c.bits()) {
                let (code, v) = (code as u8, c.oracle_decode(code as u8));
                let d = dev::decode(ty, code);
                assert!(
                    d.to_bits() == v.to_bits() || (d.is_nan() && v.is_nan()),
                    "{c} decode {code:#x}: {d} vs {v}"
                );
                assert_eq!(dev::decode_int(ty, code), c.oracle_decode_int(code), "{c} decode_int {code:#x}");
                if v.is_finite() {
                    xs.extend([
                        v,
                        -v,
                        v * 1.5,
                        v * 0.75,
                        v * (1.0 + f64::EPSILON),
                        v * (1.0 - f64::EPSILON),
                        v * 2.0,
                        v * 0.5,
                    ]);
                }
            }
            for _ in 0..200_000 {
                let r = next();
                // Exponents around the formats' range, any mantissa and sign.
                let e = (r >> 52) % 80;
                xs.push(f64::from_bits((r & 0x800f_ffff_ffff_ffff) | ((1023 + e - 40) << 52)));
            }
            for &x in &xs {
                for saturate in [false, true] {
                    for (mode, code) in modes {
                        let (want, got) =
                            (c.oracle_encode(x, saturate, mode), dev::encode(ty, x, saturate, code));
                        assert_eq!(got, want, "{c} encode {x:e} (saturate {saturate}, {mode:?})");
                    }
                }
                let i = x as i64;
                assert_eq!(dev::encode_int(ty, i), c.oracle_encode_int(i), "{c} encode_int {i}");
            }
        }
    }

    #[test]
    fn known_values_and_limits() {
        assert_eq!(Coded::F8E4M3FN.decode(0x7e), 448.0);
        assert_eq!(Coded::F8E4M3FNUZ.decode(0x7f), 240.0);
        assert_eq!(Coded::F8E5M2.decode(0x7b), 57344.0);
        assert_eq!(Coded::F8E5M2FNUZ.decode(0x7f), 57344.0);
        assert_eq!(Coded::F4E2M1.decode(0x7), 6.0);
        assert_eq!(Coded::F4E2M1.decode(0xf), -6.0);
        assert_eq!(Coded::F8E4M3FN.decode(0x01), 2f64.powi(-9));
        assert_eq!(Coded::F8E4M3FNUZ.decode(0x01), 2f64.powi(-10));
        assert!(Coded::F8E4M3FNUZ.decode(0x80).is_nan() && Coded::F8E4M3FN.decode(0xff).is_nan());
        assert_eq!(Coded::F8E5M2.decode(0x7c), f64::INFINITY);
        assert_eq!((Coded::I4.decode_int(0x9), Coded::U4.decode_int(0x9)), (-7, 9));
        assert_eq!((Coded::I2.decode_int(0x2), Coded::U2.decode_int(0x2)), (-2, 2));
        assert_eq!(Coded::F8E8M0.decode(127), 1.0);
    }

    /// The rows of ONNX `Cast`'s float8 table and the node tests' rounding cases.
    #[test]
    fn encode_follows_casts_rules() {
        let enc = |c: Coded, x: f64, sat: bool| c.decode(c.encode(x, sat, RoundMode::Up));
        // Ties to even, and half the smallest subnormal rounds to zero.
        assert_eq!(enc(Coded::F8E4M3FN, 0.4802, true), 0.46875);
        assert_eq!(enc(Coded::F4E2M1, 0.25, true), 0.0);
        assert_eq!(enc(Coded::F4E2M1, -3.5, true), -4.0);
        assert_eq!(enc(Coded::F8E4M3FN, 464.0, false), 448.0);
        // Saturation and its absence.
        assert_eq!(enc(Coded::F8E4M3FN, f64::INFINITY, true), 448.0);
        assert_eq!(enc(Coded::F8E4M3FNUZ, -1e6, true), -240.0);
        assert!(enc(Coded::F8E4M3FN, 1e6, false).is_nan());
        assert!(enc(Coded::F8E5M2FNUZ, f64::INFINITY, false).is_nan());
        assert_eq!(enc(Coded::F8E5M2, -1e6, false), f64::NEG_INFINITY);
        assert_eq!(enc(Coded::F8E5M2, 61440.0, true), 57344.0);
        assert_eq!(enc(Coded::F4E2M1, 1e6, false), 6.0);
        // Signed zeros: kept where the format has -0.
        assert_eq!(Coded::F8E4M3FN.encode(-1e-7, true, RoundMode::Up), 0x80);
        assert_eq!(Coded::F8E4M3FNUZ.encode(-1e-7, true, RoundMode::Up), 0x00);
        // Integers wrap; floats truncate toward zero first.
        assert_eq!(Coded::I4.decode_int(Coded::I4.encode(-9.0, true, RoundMode::Up)), 7);
        assert_eq!(Coded::U4.decode_int(Coded::U4.encode(-1.0, true, RoundMode::Up)), 15);
        assert_eq!(Coded::I2.decode_int(Coded::I2.encode_int(3)), -1);
        // E8M0's rounding modes.
        assert_eq!(Coded::F8E8M0.encode(7.0, true, RoundMode::Up), 130);
        assert_eq!(Coded::F8E8M0.encode(7.0, true, RoundMode::Down), 129);
        assert_eq!(Coded::F8E8M0.encode(5.0, true, RoundMode::Nearest), 129);
        assert_eq!(Coded::F8E8M0.encode(f64::NAN, true, RoundMode::Up), 0xff);
    }
}
