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
    let key = |v: f32| if v.is_sign_negative() { -(v.abs().to_bits() as i64) } else { v.to_bits() as i64 };
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
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x}: {got} vs {want}");
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

#[test]
fn fast_division_equals_integer_division_below_two_to_the_31() {
    let mut divisors: std::vec::Vec<u32> = (1..=4100).collect();
    for k in 1..31 {
        let p = 1u32 << k;
        divisors.extend([p - 1, p, p + 1, 3 * (p / 2) + 1]);
    }
    divisors.extend([0x7fff_ffff, 46_341, 65_536 * 3, 1_000_003]);
    let mut x = 0x9e37_79b9u32;
    for &d in &divisors {
        let f = FastDiv::new(d);
        let check = |n: u32| assert_eq!(f.divmod(n), (n / d, n % d), "{n} / {d}");
        for n in (0..2000)
            .chain([d - 1, d, d + 1, 2 * d.min(1 << 29) - 1, 0x7fff_fffe, 0x7fff_ffff])
            .filter(|&n| n < 1 << 31)
        {
            check(n);
        }
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            check(x & 0x7fff_ffff);
        }
    }
    assert_eq!(FastDiv::new(0).divmod(7), (7, 0));
}
