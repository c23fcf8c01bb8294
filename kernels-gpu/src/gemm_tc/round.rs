//! A lane's operands of the tensor-core GEMM and one 32-wide k round of them: where A's rows and
//! B's columns start ([`Operands`]), the LayerNorm a `NORM` kernel applies as it loads A
//! ([`Norm`]), and the loads of a round ([`load`], or its weights and its A apart).

use super::NT;
use crate::abi::GEMM_TC_KC;
use crate::intrinsics::F32x4;
use crate::math;

/// A lane's operands: where its two A rows and four B columns start, and how to walk them in k.
pub(crate) struct Operands {
    pub(crate) a: *const f32,
    pub(crate) b: *const f32,
    pub(crate) k: u32,
    /// Offsets of (row `g`, k 0) and (row `g + 8`, k 0) of A.
    pub(crate) a_base: [u64; 2],
    pub(crate) a_stride: u64,
    pub(crate) a_vec: bool,
    /// Offsets of (k 0, column `8j + g`) of B; packed, of the lane's entry for n tile `j` and
    /// round 0.
    pub(crate) b_base: [u64; NT],
    /// B's k stride; packed, the stride of its rounds.
    pub(crate) b_stride: u64,
    pub(crate) b_vec: bool,
    /// `8 t`: the lane's first k within a round.
    pub(crate) lane_k: u32,
}

/// The LayerNormalization a `NORM` kernel applies to A as it loads it: `scale`, `bias` (null: none)
/// over k, and the statistics (mean, `1 / sqrt(var + eps)`) of the lane's two rows.
#[derive(Clone, Copy)]
pub(crate) struct Norm {
    pub(super) scale: *const f32,
    pub(super) bias: *const f32,
    pub(super) stats: [(f32, f32); 2],
    /// `scale` and `bias` are 16-byte aligned (vector loads in full rounds).
    pub(super) vec: bool,
}

impl Norm {
    /// No LayerNorm (kernels without one).
    pub(crate) const NONE: Norm =
        Norm { scale: core::ptr::null(), bias: core::ptr::null(), stats: [(0.0, 1.0); 2], vec: false };
}

/// One round's operand values of a lane (`g = lane / 4`, `t = lane % 4`, round start `k0`):
/// `a[h][q] = A[g + 8h][k0 + 8t + q]`, `b[j][q]` the bits of `B[k0 + 8t + q][8j + g]` (zero past
/// k). From a packed B, `b[j][q]` is that value's TF32 big part and `b[j][8 + q]` its small part;
/// otherwise `b[j][8..]` is unused (and optimised away). With a LayerNorm, `n` holds its scale and
/// bias at the lane's eight k (unused, and optimised away, otherwise).
#[derive(Clone, Copy)]
pub(crate) struct Round {
    pub(super) a: [[f32; 8]; 2],
    pub(super) b: [[u32; 16]; NT],
    pub(super) n: [[f32; 8]; 2],
}

/// `src[base + (k0 + q) * stride]` for `q < 8`, zero where `k0 + q >= k`; two 16-byte loads when
/// `vec` (then `stride == 1`, `base + k0` is a multiple of 4 and `k0 + 8 <= k`).
///
/// # Safety
/// Every element with `k0 + q < k` is readable; with `vec`, `src + base + k0` is 16-byte aligned.
#[inline(always)]
pub(super) unsafe fn eight(src: *const f32, base: u64, stride: u64, k0: u32, k: u32, vec: bool) -> [f32; 8] {
    if vec {
        // SAFETY: aligned and inside the operand (the contract).
        let (lo, hi) = unsafe {
            let p = src.add((base + k0 as u64) as usize) as *const F32x4;
            (*p, *p.add(1))
        };
        return [lo.0[0], lo.0[1], lo.0[2], lo.0[3], hi.0[0], hi.0[1], hi.0[2], hi.0[3]];
    }
    let mut v = [0f32; 8];
    for (q, x) in v.iter_mut().enumerate() {
        let kk = k0 + q as u32;
        if kk < k {
            // SAFETY: kk < k: inside the operand (the contract).
            *x = unsafe { *src.add((base + kk as u64 * stride) as usize) };
        }
    }
    v
}

/// `src[at..at + 16]` as bits: four 16-byte loads.
///
/// # Safety
/// The sixteen elements are readable and `src + at` is 16-byte aligned.
#[inline(always)]
unsafe fn sixteen(src: *const f32, at: u64) -> [u32; 16] {
    // SAFETY: aligned and inside the packed operand (the contract).
    let [q0, q1, q2, q3] = unsafe {
        let p = src.add(at as usize) as *const F32x4;
        [*p, *p.add(1), *p.add(2), *p.add(3)]
    };
    let (a, b, c, d) =
        (q0.0.map(f32::to_bits), q1.0.map(f32::to_bits), q2.0.map(f32::to_bits), q3.0.map(f32::to_bits));
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], c[0], c[1], c[2], c[3], d[0], d[1], d[2], d[3]]
}

/// The lane's B values of n tile `J` in the round starting at `k0` ([`Round::b`]).
///
/// # Safety
/// As [`load`].
#[inline(always)]
unsafe fn b_tile<const J: usize, const PACKED: bool>(o: &Operands, k0: u32, full: bool) -> [u32; 16] {
    if PACKED {
        // SAFETY: a round below ceil(k / 32) of a column tile the packed B holds, aligned (forwarded).
        return unsafe { sixteen(o.b, o.b_base[J] + (k0 / GEMM_TC_KC) as u64 * o.b_stride) };
    }
    // SAFETY: forwarded.
    let v = unsafe { eight(o.b, o.b_base[J], o.b_stride, k0 + o.lane_k, o.k, full && o.b_vec) };
    let b = |q: usize| v[q].to_bits();
    [b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7), 0, 0, 0, 0, 0, 0, 0, 0]
}

/// The lane's operands of the round starting at `k0` (a multiple of [`GEMM_TC_KC`]); B packed
/// when `PACKED`; with `NORM`, also the LayerNorm's scale and bias at the same k (A as it is in
/// memory: [`normalize`] applies the statistics, which need not be known when the loads issue).
///
/// # Safety
/// `o` addresses valid operands for every k below `o.k` (the kernel's contract); packed, every
/// round of `o.b` below `ceil(o.k / GEMM_TC_KC)` at 16-byte alignment; with `NORM`, `norm.scale`
/// (and `norm.bias` unless null) hold `o.k` f32.
#[inline(always)]
pub(crate) unsafe fn load<const PACKED: bool, const NORM: bool>(o: &Operands, k0: u32, norm: &Norm) -> Round {
    // SAFETY: forwarded.
    unsafe {
        let mut r = load_rest::<PACKED, NORM>(o, k0, norm);
        load_a(o, k0, &mut r);
        r
    }
}

/// A round's A values, into `r` ([`load`]).
///
/// # Safety
/// As [`load`].
#[inline(always)]
pub(super) unsafe fn load_a(o: &Operands, k0: u32, r: &mut Round) {
    // Vector loads only in full rounds: the choice is the same for the whole warp.
    let full = k0 + GEMM_TC_KC <= o.k;
    let kk = k0 + o.lane_k;
    // SAFETY: forwarded.
    unsafe {
        r.a = [
            eight(o.a, o.a_base[0], o.a_stride, kk, o.k, full && o.a_vec),
            eight(o.a, o.a_base[1], o.a_stride, kk, o.k, full && o.a_vec),
        ];
    }
}

/// A round without its A values ([`load`]): B and the LayerNorm's scale and bias, which are
/// weights when B is packed (no kernel writes them: they may load before the previous kernel
/// finishes).
///
/// # Safety
/// As [`load`].
#[inline(always)]
pub(super) unsafe fn load_rest<const PACKED: bool, const NORM: bool>(
    o: &Operands,
    k0: u32,
    norm: &Norm,
) -> Round {
    // Vector loads only in full rounds: the choice is the same for the whole warp.
    let full = k0 + GEMM_TC_KC <= o.k;
    let kk = k0 + o.lane_k;
    // SAFETY: forwarded.
    unsafe {
        let a = [[0.0; 8]; 2];
        // Scale and bias at the same k (zero past k, so the normalized values are too).
        let n = if !NORM {
            [[0.0; 8]; 2]
        } else if norm.bias.is_null() {
            [eight(norm.scale, 0, 1, kk, o.k, full && norm.vec), [0.0; 8]]
        } else {
            [
                eight(norm.scale, 0, 1, kk, o.k, full && norm.vec),
                eight(norm.bias, 0, 1, kk, o.k, full && norm.vec),
            ]
        };
        Round {
            a,
            b: [
                b_tile::<0, PACKED>(o, k0, full),
                b_tile::<1, PACKED>(o, k0, full),
                b_tile::<2, PACKED>(o, k0, full),
                b_tile::<3, PACKED>(o, k0, full),
            ],
            n,
        }
    }
}

/// Normalizes a round's A values in place with the statistics of their rows, `norm.stats`.
#[inline(always)]
pub(super) fn normalize(r: &mut Round, norm: &Norm) {
    let (a, [sc, bi]) = (&mut r.a, &r.n);
    // Unrolled by hand (a rolled loop would index the registers at run time).
    macro_rules! normalize {
        ($($h:literal $q:literal),*) => {$(
            a[$h][$q] = math::fma((a[$h][$q] - norm.stats[$h].0) * norm.stats[$h].1, sc[$q], bi[$q]);
        )*};
    }
    normalize!(0 0, 0 1, 0 2, 0 3, 0 4, 0 5, 0 6, 0 7, 1 0, 1 1, 1 2, 1 3, 1 4, 1 5, 1 6, 1 7);
}
