//! Plan-time packing of constant GEMM weights for the tensor-core kernel: a B that is a weight of a
//! GEMM taking `gemm_tc_f32` is split into its TF32 big and small parts on the host and laid out
//! in the order the kernel's lanes read it ([`kernels_gpu::abi::gemm_tc_packed_len`] documents
//! the layout). The step then runs `gemm_tc_packed_f32` on that constant, which reads B with
//! 16-byte loads and splits only A; the original weight is no longer read, so not uploaded.

use std::collections::BTreeMap;

use kernels_gpu::abi::{
    ConvParams, GEMM_TC_KC, GEMM_TC_PACK_LANE, GemmParams, conv_depth, conv_tap, conv_wg_packed_len,
    gemm_tc_packed_len, gemm_tc_packed_offset, gemm_wg_packed_ld, gemm_wg_packed_len,
};

use super::gemm::{gemm_of, tensor_core, tile_launch};
use super::precision::Precision;
use super::{PlanOptions, PlannedValue};
use crate::ConstTensor;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use crate::tensor_info::DType;

/// `x` rounded to TF32 as `cvt.rna.tf32.f32` rounds it, as f32 bits: to nearest with ties away
/// from zero, keeping 10 explicit mantissa bits (the low 13 bits cleared); a finite value that
/// rounds past the largest TF32 becomes infinite. Infinities are kept; a NaN is kept with its quiet
/// bit set, so that it is still a NaN when the tensor cores ignore its low 13 bits.
pub(crate) fn tf32(x: f32) -> u32 {
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
/// as the kernel's `split` forms them: the small part is zero where the remainder is not finite
/// (an infinite or NaN `x`, or a finite one rounding to infinity), the big part carrying `x`.
pub(crate) fn split(x: f32) -> (u32, u32) {
    let big = tf32(x);
    let rest = x - f32::from_bits(big);
    (big, if rest.is_finite() { tf32(rest) } else { 0 })
}

/// Whether `b` holds every element of the `k x n` matrix `B[kk][j] = b[kk * rs + j * cs]`.
fn holds(b: &[f32], k: u32, n: u32, rs: u64, cs: u64) -> bool {
    k == 0 || n == 0 || (k as u64 - 1) * rs + (n as u64 - 1) * cs < b.len() as u64
}

/// The packed form (f32 bits) of the `k x n` matrix `B[kk][j] = b[kk * rs + j * cs]`, in the
/// layout of [`gemm_tc_packed_len`] (zero past k and n). `None` when `b` does not hold every
/// element the strides address.
pub(crate) fn pack(b: &[f32], k: u32, n: u32, rs: u64, cs: u64) -> Option<Vec<u32>> {
    if !holds(b, k, n, rs, cs) {
        return None;
    }
    let (k64, n64) = (k as u64, n as u64);
    let rounds = k.div_ceil(GEMM_TC_KC) as u64;
    let mut out = vec![0u32; gemm_tc_packed_len(k, n) as usize];
    let half = GEMM_TC_PACK_LANE as usize / 2;
    for ct in 0..n64.div_ceil(8) {
        for r in 0..rounds {
            for lane in 0..32u64 {
                let (g, t) = (lane / 4, lane % 4);
                let at = gemm_tc_packed_offset(ct, r, rounds, lane) as usize;
                let j = 8 * ct + g;
                for q in 0..half {
                    let kk = GEMM_TC_KC as u64 * r + 8 * t + q as u64;
                    if kk < k64 && j < n64 {
                        let (big, small) = split(b[(kk * rs + j * cs) as usize]);
                        (out[at + q], out[at + half + q]) = (big, small);
                    }
                }
            }
        }
    }
    Some(out)
}

/// The packed form (f32 bits) of the `k x n` matrix `B[kk][j] = b[kk * rs + j * cs]` for the
/// `wgmma` GEMMs ([`kernels_gpu::abi::gemm_wg_packed_len`]): its transpose, a row of
/// [`gemm_wg_packed_ld`] per column `j` (zero past k), as TF32 big parts and, when `exact`, a
/// second plane of the small parts ([`split`]); else the values rounded to TF32 ([`tf32`]). `None`
/// when `b` does not hold every element the strides address.
pub(crate) fn pack_wg(b: &[f32], k: u32, n: u32, rs: u64, cs: u64, exact: bool) -> Option<Vec<u32>> {
    if !holds(b, k, n, rs, cs) {
        return None;
    }
    let ld = gemm_wg_packed_ld(k) as usize;
    let plane = n as usize * ld;
    let mut out = vec![0u32; gemm_wg_packed_len(k, n, exact) as usize];
    for j in 0..n as usize {
        for kk in 0..k as usize {
            let x = b[kk * rs as usize + j * cs as usize];
            if exact {
                (out[j * ld + kk], out[plane + j * ld + kk]) = split(x);
            } else {
                out[j * ld + kk] = tf32(x);
            }
        }
    }
    Some(out)
}

/// The packed weights of a plan: for each GEMM node that reads one, the value standing for it.
#[derive(Default)]
pub(super) struct PackedWeights {
    /// The packed B of each node that takes `gemm_tc_packed_f32`.
    pub by_node: BTreeMap<NodeId, ValueId>,
    /// The packed constants, by their (new) value.
    pub constants: BTreeMap<ValueId, ConstTensor>,
}

/// Packs the B of every node of `nodes` that is a Gemm, MatMul or FusedGemm lowering to the
/// tensor-core kernel ([`tensor_core`]) with B an f32 initializer shared by the whole batch
/// (`b_bs == 0`). Each packed B becomes a value appended to `values`, named `<B>/tc-packed`; a
/// weight read with the same shape and strides by several GEMMs is packed once.
pub(super) fn pack_weights(
    g: &Graph,
    nodes: &[NodeId],
    values: &mut Vec<PlannedValue>,
    perms: &super::fuse::OperandPerms,
    o: &PlanOptions,
) -> PackedWeights {
    let mut packed = PackedWeights::default();
    // (B, k, n, b_rs, b_cs, for wgmma) -> its packed value.
    let mut made: BTreeMap<(ValueId, u32, u32, u64, u64, bool), ValueId> = BTreeMap::new();
    let exact = o.precision == Precision::Exact;
    for &id in nodes {
        if let Op::Conv(attrs) = &g.nodes[id.index()].op {
            if let Some((name, bits)) = pack_conv_node(g, id, attrs, values, o) {
                packed.add(values, id, name, bits);
            }
            continue;
        }
        if !matches!(g.nodes[id.index()].op, Op::Gemm(_) | Op::MatMul | Op::FusedGemm(_)) {
            continue;
        }
        let Ok((p, _, b, _)) = gemm_of(g, id, values, perms) else { continue };
        let wg = takes_wg_packed(g, &p, b, o);
        if !wg && !takes_packed(g, &p, b, o) {
            continue;
        }
        let key = (b, p.k, p.n, p.b_rs, p.b_cs, wg);
        if let Some(&v) = made.get(&key) {
            packed.by_node.insert(id, v);
            continue;
        }
        let Some(data) = g.initializers.get(&b).map(|c| f32s(&c.bytes)) else { continue };
        let bits = if wg {
            pack_wg(&data, p.k, p.n, p.b_rs, p.b_cs, exact)
        } else {
            pack(&data, p.k, p.n, p.b_rs, p.b_cs)
        };
        let Some(bits) = bits else { continue };
        let name = format!("{}/{}", values[b.index()].name, if wg { "wg-packed" } else { "tc-packed" });
        if let Some(v) = packed.add(values, id, name, bits) {
            made.insert(key, v);
        }
    }
    packed
}

impl PackedWeights {
    /// Adds `bits` as the packed constant of node `id`: a new f32 value named `name` appended to
    /// `values`. `None` (nothing added) when the constant cannot be formed.
    fn add(
        &mut self,
        values: &mut Vec<PlannedValue>,
        id: NodeId,
        name: String,
        bits: Vec<u32>,
    ) -> Option<ValueId> {
        let bytes: Vec<u8> = bits.iter().flat_map(|w| w.to_le_bytes()).collect();
        let c = ConstTensor::new(DType::F32, vec![bits.len()], bytes).ok()?;
        let v = ValueId(values.len() as u32);
        values.push(PlannedValue { name, dtype: DType::F32, dims: Some(vec![bits.len()]) });
        self.by_node.insert(id, v);
        self.constants.insert(v, c);
        Some(v)
    }
}

/// The name and bits of the packed constant of Conv node `id` (`conv_wg_packed_len`: each group's
/// weights packed for `wgmma`, then the tap table), when the node runs a `wgmma` convolution
/// (`conv::wg_launch`) on an f32 weight.
fn pack_conv_node(
    g: &Graph,
    id: NodeId,
    attrs: &crate::op::Conv,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Option<(String, Vec<u32>)> {
    let node = &g.nodes[id.index()];
    let n = super::conv::ConvNode { id, label: String::new(), ins: &node.inputs, outs: &node.outputs };
    let p = super::conv::conv_params(&n, values, attrs).ok()?;
    super::conv::wg_launch(&p, o)?;
    let w = node.inputs.get(1).copied().flatten()?;
    let c = g.initializers.get(&w).filter(|c| c.dtype == DType::F32)?;
    let bits = pack_conv(&f32s(&c.bytes), &p, !o.precision.tf32_convolutions())?;
    Some((format!("{}/conv-packed", values[w.index()].name), bits))
}

/// The constant of `conv_wg_packed_len` for Conv `p` with weights `w` (`M x C/G x taps`,
/// contiguous): per group, its `C/G · taps x M/G` GEMM operand (`B[k][j] = w[(g M/G + j) K + k]`)
/// packed as [`pack_wg`] packs it, then the tap table ([`kernels_gpu::abi::conv_tap`] per depth).
/// `None` when `w` does not hold the weights.
pub(crate) fn pack_conv(w: &[f32], p: &ConvParams, exact: bool) -> Option<Vec<u32>> {
    let groups = p.groups.max(1);
    let (k, n) = (conv_depth(p), p.out_channels / groups);
    let group_len = k as usize * n as usize;
    if w.len() != group_len * groups as usize {
        return None;
    }
    let mut out = Vec::with_capacity(conv_wg_packed_len(p, exact) as usize);
    for g in 0..groups as usize {
        out.extend(pack_wg(&w[g * group_len..(g + 1) * group_len], k, n, 1, k as u64, exact)?);
    }
    for d in 0..k {
        let t = conv_tap(p, d);
        out.extend([t.delta, t.dz, t.dy, t.dx].map(|v| v as u32));
    }
    debug_assert_eq!(out.len() as u64, conv_wg_packed_len(p, exact));
    Some(out)
}

/// Whether a GEMM of parameters `p` reading B from `b` runs `gemm_tc_packed_f32`: it takes the
/// tensor-core kernel, B is an f32 weight, one for the whole batch, and k is not empty.
fn takes_packed(g: &Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    packable(g, p, b) && tensor_core(p, o).is_some()
}

/// Whether B of a GEMM of parameters `p`, read from `b`, can be packed: an f32 weight, one for the
/// whole batch, k and n not empty.
fn packable(g: &Graph, p: &GemmParams, b: ValueId) -> bool {
    let weight = g.initializers.get(&b).is_some_and(|c| c.dtype == DType::F32);
    weight && p.b_shared() && p.k > 0 && p.n > 0
}

/// Whether a GEMM of parameters `p` reading B from `b` runs a `wgmma` GEMM (`gemm_wg_*`, the
/// Hopper flavour): it takes a large-tile kernel ([`tile_launch`]), B is an f32 weight, one for
/// the whole batch, and k is not empty.
pub(super) fn takes_wg_packed(g: &Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    o.wgmma_gemm && o.precision.has_wgmma() && packable(g, p, b) && tile_launch(p, o).is_some()
}

/// Little-endian f32 bytes as values.
fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.as_chunks::<4>().0.iter().map(|w| f32::from_le_bytes(*w)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_rounds_to_nearest_with_ties_away_from_zero() {
        // (input bits, big, small)
        let cases: [(u32, u32, u32); 12] = [
            // Exact TF32 values: no remainder.
            (0x3f80_0000, 0x3f80_0000, 0),
            (0xc040_0000, 0xc040_0000, 0),
            (0, 0, 0),
            (0x8000_0000, 0x8000_0000, 0),
            // Below half an ulp: down, the remainder exact in TF32.
            (0x3f80_0123, 0x3f80_0000, 0x3811_8000),
            // A tie: away from zero, for either sign; the remainder is minus half an ulp.
            (0x3f80_1000, 0x3f80_2000, 0xba00_0000),
            (0xbf80_1000, 0xbf80_2000, 0x3a00_0000),
            // Above half an ulp: up; the remainder (-0xfff ulps) is a tie of its own, away from zero.
            (0x3f80_1001, 0x3f80_2000, 0xba00_0000),
            // The largest finite f32 rounds to infinity; its remainder is not finite.
            (0x7f7f_ffff, 0x7f80_0000, 0),
            // Infinities are kept; NaNs too, quieted.
            (0xff80_0000, 0xff80_0000, 0),
            (0x7fc0_0000, 0x7fc0_0000, 0),
            (0x7f80_0001, 0x7fc0_0001, 0),
        ];
        for (x, big, small) in cases {
            assert_eq!(split(f32::from_bits(x)), (big, small), "{x:#010x}");
        }
        // Subnormals round in their bits like normals (ties away from zero too); a remainder
        // below TF32's reach rounds to a signed zero.
        assert_eq!(split(f32::from_bits(0x0000_1fff)), (0x0000_2000, 0x8000_0000));
        assert_eq!(split(f32::from_bits(0x8000_0fff)), (0x8000_0000, 0x8000_0000));
        assert_eq!(split(f32::from_bits(0x0001_5000)), (0x0001_6000, 0x8000_2000));
        // A normal whose remainder is subnormal.
        assert_eq!(split(f32::from_bits(0x0080_0fff)), (0x0080_0000, 0));
    }

    #[test]
    fn big_plus_small_is_the_value_to_2_pow_minus_22() {
        let mut s = 0x2545_f491u64;
        for _ in 0..10_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = f32::from_bits((s >> 16) as u32 & 0x7fff_ffff | ((s as u32) & 0x8000_0000));
            if !x.is_finite() || x.abs() > 1e30 {
                continue;
            }
            let (big, small) = split(x);
            assert_eq!(big & 0x1fff, 0);
            assert_eq!(small & 0x1fff, 0);
            let sum = f32::from_bits(big) as f64 + f32::from_bits(small) as f64;
            let tol = (x.abs() as f64 * 2f64.powi(-21)).max(f64::from(f32::from_bits(1)) * 8192.0);
            assert!((sum - x as f64).abs() <= tol, "{x:e}: {sum:e}");
        }
    }

    #[test]
    fn wgmma_packing_transposes_pads_and_splits() {
        // B 5 x 3 (k x n) read with transposed strides (B[kk][j] = b[kk + 5 j]); rows padded to 8.
        let b: Vec<f32> = (0..15).map(|i| 1.0 + i as f32 / 3.0).collect();
        let at = |kk: usize, j: usize| b[kk + 5 * j];
        let exact = pack_wg(&b, 5, 3, 1, 5, true).unwrap();
        assert_eq!(exact.len(), 2 * 3 * 8);
        let rounded = pack_wg(&b, 5, 3, 1, 5, false).unwrap();
        assert_eq!(rounded.len(), 3 * 8);
        for j in 0..3 {
            for kk in 0..8 {
                let (big, small) = if kk < 5 { split(at(kk, j)) } else { (0, 0) };
                assert_eq!((exact[8 * j + kk], exact[24 + 8 * j + kk]), (big, small), "({kk}, {j})");
                assert_eq!(rounded[8 * j + kk], if kk < 5 { tf32(at(kk, j)) } else { 0 }, "({kk}, {j})");
            }
        }
        // Strides past the data: refused.
        assert!(pack_wg(&b, 5, 4, 1, 5, true).is_none());
    }

    /// `B[kk][j]` of the packed `bits` (a `k x n` matrix), read back through the layout.
    fn unpack(bits: &[u32], k: u32, n: u32) -> Vec<Vec<(u32, u32)>> {
        let rounds = k.div_ceil(GEMM_TC_KC) as u64;
        let (kp, np) = (rounds as usize * 32, n.div_ceil(8) as usize * 8);
        let mut out = vec![vec![(u32::MAX, u32::MAX); np]; kp];
        for ct in 0..n.div_ceil(8) as u64 {
            for r in 0..rounds {
                for lane in 0..32u64 {
                    let (g, t) = (lane / 4, lane % 4);
                    let at = gemm_tc_packed_offset(ct, r, rounds, lane) as usize;
                    for q in 0..8 {
                        let (kk, j) = ((32 * r + 8 * t + q) as usize, (8 * ct + g) as usize);
                        assert_eq!(out[kk][j], (u32::MAX, u32::MAX), "({kk}, {j}) packed twice");
                        out[kk][j] = (bits[at + q as usize], bits[at + 8 + q as usize]);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn unpacking_reproduces_b_with_zero_padding_in_both_layouts() {
        let (k, n) = (45u32, 13u32);
        let value = |kk: u32, j: u32| ((kk * 31 + j * 17) % 23) as f32 * 0.173 - 1.9 + kk as f32 * 1e-3;
        // Row-major [k, n] (MatMul, Gemm without transB) and transposed [n, k] (transB).
        let row_major: Vec<f32> = (0..k * n).map(|i| value(i / n, i % n)).collect();
        let transposed: Vec<f32> = (0..k * n).map(|i| value(i % k, i / k)).collect();
        for (data, rs, cs) in [(&row_major, n as u64, 1u64), (&transposed, 1, k as u64)] {
            let bits = pack(data, k, n, rs, cs).unwrap();
            assert_eq!(bits.len() as u64, gemm_tc_packed_len(k, n));
            assert_eq!(bits.len(), 2 * 2 * 512);
            let b = unpack(&bits, k, n);
            for (kk, row) in b.iter().enumerate() {
                for (j, &(big, small)) in row.iter().enumerate() {
                    if kk < k as usize && j < n as usize {
                        let x = value(kk as u32, j as u32);
                        assert_eq!((big, small), split(x), "({kk}, {j}) rs {rs}");
                        let sum = f32::from_bits(big) as f64 + f32::from_bits(small) as f64;
                        assert!((sum - x as f64).abs() <= x.abs() as f64 * 2f64.powi(-21), "({kk}, {j})");
                    } else {
                        assert_eq!((big, small), (0, 0), "padding ({kk}, {j}) rs {rs}");
                    }
                }
            }
        }
        // Strides past the data: not packed.
        assert_eq!(pack(&row_major, k + 1, n, n as u64, 1), None);
    }
}
