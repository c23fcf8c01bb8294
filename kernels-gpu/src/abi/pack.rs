//! Packed GEMM and convolution weights: the layouts the tensor-core kernels read in place of B,
//! element by element. The planner packs a weight that is an initializer on the host
//! (`planner::plan::tc_pack`); a weight the device computes once per binding (an int8 weight
//! dequantized by the model, a transposed or scaled weight) is packed by `pack::pack_weights_f32`
//! on the device, right after the step that computes it. Both follow [`packed_element`], so the two
//! agree bit for bit.

use super::{
    ConvParams, GEMM_TC_KC, GEMM_TC_PACK_LANE, Params, conv_tap, gemm_tc_packed_len, gemm_wg_packed_ld,
    gemm_wg_packed_len,
};

/// The layouts [`PackParams::layout`] names.
pub mod pack_layout {
    /// `gemm_tc_packed_f32`'s B ([`super::super::gemm_tc_packed_len`]).
    pub const TC: u32 = 0;
    /// The `wgmma` GEMMs' B ([`super::super::gemm_wg_packed_len`]), once per group.
    pub const WG: u32 = 1;
    /// A `wgmma` convolution's W ([`super::super::conv_wg_packed_len`]): [`WG`] per group, then
    /// the tap table of [`super::PackParams::conv`].
    pub const CONV_WG: u32 = 2;
}

/// Parameters of `pack::pack_weights_f32`: the `k x n` matrix of group `g` is
/// `B[kk][j] = src[g · group_stride + kk · rs + j · cs]`, written to `dst` (`len` f32) in
/// `layout` ([`pack_layout`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PackParams {
    /// Stride of B's rows (k) in `src`, in elements.
    pub rs: u64,
    /// Stride of B's columns (n) in `src`, in elements.
    pub cs: u64,
    /// Stride of the groups in `src`, in elements.
    pub group_stride: u64,
    /// f32 elements of `dst` ([`packed_len`]).
    pub len: u64,
    /// Elements of `src` (the kernel reads no further).
    pub src_len: u64,
    /// Depth of each group's B.
    pub k: u32,
    /// Columns of each group's B.
    pub n: u32,
    /// Groups (at least 1; more only for [`pack_layout::CONV_WG`]).
    pub groups: u32,
    /// [`pack_layout`] code.
    pub layout: u32,
    /// 1: the big and the small TF32 parts (3xTF32 entries); 0: only the values rounded to TF32
    /// ([`pack_layout::WG`] and [`pack_layout::CONV_WG`]; [`pack_layout::TC`] always splits).
    pub exact: u32,
    /// Explicit padding.
    pub _pad: u32,
    /// The convolution whose tap table [`pack_layout::CONV_WG`] appends (else unused).
    pub conv: ConvParams,
}

// SAFETY: #[repr(C)], five u64, six u32, then ConvParams (u32 / i32 / f32 fields only).
unsafe impl Params for PackParams {}

/// The f32 length of the packed form `p` describes (ignoring [`PackParams::len`]).
pub const fn packed_len(p: &PackParams) -> u64 {
    let groups = if p.groups == 0 { 1 } else { p.groups } as u64;
    let exact = p.exact != 0;
    match p.layout {
        pack_layout::TC => gemm_tc_packed_len(p.k, p.n),
        pack_layout::WG => groups * gemm_wg_packed_len(p.k, p.n, exact),
        _ => groups * gemm_wg_packed_len(p.k, p.n, exact) + 4 * p.k as u64,
    }
}

/// What one f32 of a packed weight holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packed {
    /// Zero (padding past k or n).
    Zero,
    /// The TF32 big part ([`tf32_bits`]) of `src[i]`.
    Big(u64),
    /// The TF32 small part ([`tf32_split`]) of `src[i]`.
    Small(u64),
    /// These bits (a tap table entry).
    Word(u32),
}

/// What element `i < packed_len(p)` of the packed form of `p` holds.
pub const fn packed_element(p: &PackParams, i: u64) -> Packed {
    let (k, n) = (p.k as u64, p.n as u64);
    if p.layout == pack_layout::TC {
        // ((ct · rounds + r) · 32 + lane) · 16 + e: lane (g, t) = (lane / 4, lane % 4) holds
        // B[32 r + 8 t + q][8 ct + g] for q = e % 8, big parts first.
        let lane_len = GEMM_TC_PACK_LANE as u64;
        let rounds = k.div_ceil(GEMM_TC_KC as u64);
        let e = i % lane_len;
        let lane = i / lane_len % 32;
        let block = i / (32 * lane_len);
        let (ct, r) = (block / rounds, block % rounds);
        let (g, t, q) = (lane / 4, lane % 4, e % (lane_len / 2));
        let kk = GEMM_TC_KC as u64 * r + 8 * t + q;
        let j = 8 * ct + g;
        if kk >= k || j >= n {
            return Packed::Zero;
        }
        let at = kk * p.rs + j * p.cs;
        return if e < lane_len / 2 { Packed::Big(at) } else { Packed::Small(at) };
    }
    let exact = p.exact != 0;
    let group_len = gemm_wg_packed_len(p.k, p.n, exact);
    let groups = if p.groups == 0 { 1 } else { p.groups } as u64;
    if i >= groups * group_len {
        // The tap table: four words (delta, dz, dy, dx) per depth.
        let d = (i - groups * group_len) / 4;
        let t = conv_tap(&p.conv, d as u32);
        let word = match (i - groups * group_len) % 4 {
            0 => t.delta,
            1 => t.dz,
            2 => t.dy,
            _ => t.dx,
        };
        return Packed::Word(word as u32);
    }
    // Per group: planes of n rows of ld (k contiguous, zero past k), the big parts first.
    let ld = gemm_wg_packed_ld(p.k) as u64;
    let (g, rest) = (i / group_len, i % group_len);
    let plane = rest / (n * ld);
    let (j, kk) = (rest % (n * ld) / ld, rest % ld);
    if kk >= k {
        return Packed::Zero;
    }
    let at = g * p.group_stride + kk * p.rs + j * p.cs;
    if plane == 0 { Packed::Big(at) } else { Packed::Small(at) }
}

/// `x` rounded to TF32 as `cvt.rna.tf32.f32` rounds it, as f32 bits: to nearest with ties away
/// from zero, keeping 10 explicit mantissa bits (the low 13 bits cleared); a finite value that
/// rounds past the largest TF32 becomes infinite. Infinities are kept; a NaN is kept with its quiet
/// bit set, so that it is still a NaN when the tensor cores ignore its low 13 bits.
pub fn tf32_bits(x: f32) -> u32 {
    let bits = x.to_bits();
    if x.is_nan() {
        return bits | 0x0040_0000;
    }
    if x.is_infinite() {
        return bits;
    }
    let magnitude = ((bits & 0x7fff_ffff) + 0x1000) & !0x1fff;
    (bits & 0x8000_0000) | magnitude
}

/// `x` as the TF32 big part and the TF32 rounding of the remainder `x - big` (computed in f32),
/// as the kernels' `split` forms them: the small part is zero where the remainder is not finite
/// (an infinite or NaN `x`, or a finite one rounding to infinity), the big part carrying `x`.
pub fn tf32_split(x: f32) -> (u32, u32) {
    let big = tf32_bits(x);
    let rest = x - f32::from_bits(big);
    (big, if rest.is_finite() { tf32_bits(rest) } else { 0 })
}

/// The bits of element `i` of the packed form of `p` over `src` ([`packed_element`]); `None` when
/// it would read past `src`.
pub fn packed_bits(p: &PackParams, src: &[f32], i: u64) -> Option<u32> {
    Some(match packed_element(p, i) {
        Packed::Zero => 0,
        Packed::Big(at) => tf32_bits(*src.get(at as usize)?),
        Packed::Small(at) => tf32_split(*src.get(at as usize)?).1,
        Packed::Word(w) => w,
    })
}
