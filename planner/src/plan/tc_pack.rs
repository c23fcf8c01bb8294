//! Packing of GEMM and convolution weights for the tensor-core kernels: a B that is a weight of a
//! GEMM taking `gemm_tc_f32` is split into its TF32 big and small parts and laid out in the order
//! the kernel's lanes read it ([`kernels_gpu::abi::gemm_tc_packed_len`] documents the layout); a
//! B of a `wgmma` GEMM, or a W of a `wgmma` convolution, is transposed and split the same way
//! ([`kernels_gpu::abi::gemm_wg_packed_len`], [`kernels_gpu::abi::conv_wg_packed_len`]). The step
//! then runs the packed entry, which reads B with 16-byte loads and splits only A; the original
//! weight is no longer read. An initializer is packed on the host at plan time (and the original
//! not uploaded); a weight the device computes from the weights (an int8 weight the model
//! dequantizes) is packed by the device right after it is computed ([`DevicePack`]): once per
//! binding when that computation is hoisted. Both follow [`kernels_gpu::abi::packed_element`].

use std::collections::BTreeMap;

use kernels_gpu::abi::{
    ConvParams, GEMM_TC_KC, GEMM_TC_PACK_LANE, GemmParams, KernelId, PackParams, conv_depth, conv_tap,
    conv_wg_packed_len, gemm_tc_packed_len, gemm_tc_packed_offset, gemm_wg_packed_ld, gemm_wg_packed_len,
    pack_layout, packed_len,
};

use super::gemm::{gemm_of, tensor_core, tile_launch};
use super::precision::Precision;
use super::{PlanOptions, PlannedValue};
use crate::ConstTensor;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use crate::tensor_info::DType;

pub(crate) use kernels_gpu::abi::{tf32_bits as tf32, tf32_split as split};

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
    /// The packed B of each node that takes `gemm_tc_packed_f32` or a `wgmma` entry.
    pub by_node: BTreeMap<NodeId, ValueId>,
    /// The packed constants, by their (new) value.
    pub constants: BTreeMap<ValueId, ConstTensor>,
    /// The weights the device computes and packs ([`DevicePack`]), their values first.
    pub device: Vec<DevicePack>,
}

/// A weight the device computes from the model's weights ([`hoist::from_weights`]: an int8
/// weight dequantized by the model, a transposed or scaled weight), packed by the device in a
/// `pack_weights_f32` step right after the steps of the node computing it. When that node is
/// hoisted, so is the packing: once per binding.
pub(super) struct DevicePack {
    /// The node computing the weight.
    pub producer: NodeId,
    /// The weight as computed.
    pub source: ValueId,
    /// The packed weight (an arena value).
    pub value: ValueId,
    /// The layout and where B lies in `source`.
    pub params: PackParams,
    /// The GEMM and Conv nodes reading `value` in place of `source`.
    pub readers: Vec<NodeId>,
}

/// How one node's weight is packed.
enum Packing {
    /// On the host, at plan time: the constant's bits.
    Host(Vec<u32>),
    /// By the device, from the value computing it ([`DevicePack`]).
    Device { producer: NodeId, source: ValueId, params: PackParams },
}

/// Packs the B of every node of `nodes` that is a Gemm, MatMul or FusedGemm lowering to the
/// tensor-core kernel ([`tensor_core`]) or a `wgmma` GEMM, and the W of every Conv running a
/// `wgmma` convolution, with B (W) an f32 initializer or a value computed from the weights alone,
/// shared by the whole batch (`b_bs == 0`). Each packed weight becomes a value appended to
/// `values`, named `<B>/tc-packed` (`/wg-packed`, `/conv-packed`); a weight read with the same
/// shape and strides by several GEMMs is packed once. The device's packs come first (right after
/// the values `values` holds: the memory plan numbers them as scratch buffers), then the
/// host's.
pub(super) fn pack_weights(
    g: &Graph,
    nodes: &[NodeId],
    values: &mut Vec<PlannedValue>,
    perms: &super::fuse::OperandPerms,
    options_of: &dyn Fn(NodeId) -> PlanOptions,
) -> PackedWeights {
    // (B, k, n, b_rs, b_cs, for wgmma, exact) -> its index in `made`.
    type Key = (ValueId, u32, u32, u64, u64, bool, bool);
    let mut keys: BTreeMap<Key, usize> = BTreeMap::new();
    let mut made: Vec<(String, Packing, Vec<NodeId>)> = Vec::new();
    let defs = g.definitions();
    let producer = |v: ValueId| match defs.get(v.index()) {
        Some(Some(crate::graph::Definition::Node { node, .. })) => Some(*node),
        _ => None,
    };
    for &id in nodes {
        let o = &options_of(id);
        let exact = o.precision == Precision::Exact;
        if let Op::Conv(attrs) | Op::FusedConv(crate::op::FusedConv { conv: attrs, .. }) =
            &g.nodes[id.index()].op
        {
            if let Some((name, packing)) = pack_conv_node(g, id, attrs, values, o, producer) {
                made.push((name, packing, vec![id]));
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
        let key = (b, p.k, p.n, p.b_rs, p.b_cs, wg, exact);
        if let Some(&i) = keys.get(&key) {
            made[i].2.push(id);
            continue;
        }
        let packing = match g.initializers.get(&b) {
            Some(c) => {
                let data = f32s(&c.bytes);
                let bits = if wg {
                    pack_wg(&data, p.k, p.n, p.b_rs, p.b_cs, exact)
                } else {
                    pack(&data, p.k, p.n, p.b_rs, p.b_cs)
                };
                let Some(bits) = bits else { continue };
                Packing::Host(bits)
            }
            None => {
                // Through the lowering's own path only: a GEMV would still read B.
                let Some(made_by) = producer(b).filter(|_| !wg || super::gemm::runs_tile(&p, o)) else {
                    continue;
                };
                let params = PackParams {
                    rs: p.b_rs,
                    cs: p.b_cs,
                    k: p.k,
                    n: p.n,
                    groups: 1,
                    layout: if wg { pack_layout::WG } else { pack_layout::TC },
                    exact: (!wg || exact) as u32,
                    ..PackParams::default()
                };
                let Some(params) = device_params(params, &values[b.index()]) else { continue };
                Packing::Device { producer: made_by, source: b, params }
            }
        };
        let name = format!("{}/{}", values[b.index()].name, if wg { "wg-packed" } else { "tc-packed" });
        keys.insert(key, made.len());
        made.push((name, packing, vec![id]));
    }
    let mut packed = PackedWeights::default();
    // The device's packs first, then the host's.
    for (name, packing, readers) in &made {
        let Packing::Device { producer, source, params } = packing else { continue };
        let value = ValueId(values.len() as u32);
        values.push(PlannedValue {
            name: name.clone(),
            dtype: DType::F32,
            dims: Some(vec![params.len as usize]),
        });
        readers.iter().for_each(|&r| _ = packed.by_node.insert(r, value));
        let (producer, source, params, readers) = (*producer, *source, *params, readers.clone());
        packed.device.push(DevicePack { producer, source, value, params, readers });
    }
    for (name, packing, readers) in made {
        let Packing::Host(bits) = packing else { continue };
        let bytes: Vec<u8> = bits.iter().flat_map(|w| w.to_le_bytes()).collect();
        let Ok(c) = ConstTensor::new(DType::F32, vec![bits.len()], bytes) else { continue };
        let value = ValueId(values.len() as u32);
        values.push(PlannedValue { name, dtype: DType::F32, dims: Some(vec![bits.len()]) });
        readers.iter().for_each(|&r| _ = packed.by_node.insert(r, value));
        packed.constants.insert(value, c);
    }
    packed
}

/// `params` with its lengths set from the source value `source`: `None` when B reaches past it
/// (or its size is not known).
fn device_params(mut params: PackParams, source: &PlannedValue) -> Option<PackParams> {
    let src_len = source.dims.as_ref()?.iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64))?;
    let (k, n) = (params.k as u64, params.n as u64);
    let groups = params.groups.max(1) as u64;
    let last = (groups - 1) * params.group_stride + (k.max(1) - 1) * params.rs + (n.max(1) - 1) * params.cs;
    if k == 0 || n == 0 || last >= src_len {
        return None;
    }
    params.src_len = src_len;
    params.len = packed_len(&params);
    Some(params)
}

impl PackedWeights {
    /// The reads of the weights the device packs that their readers no longer make: `(reader,
    /// source)` for each reader taking the source as its B (W) operand only.
    pub fn unread(&self, g: &Graph) -> Vec<(NodeId, ValueId)> {
        let mut out = Vec::new();
        for d in &self.device {
            for &r in &d.readers {
                let node = &g.nodes[r.index()];
                let once = node.uses().iter().filter(|&&u| u == d.source).count() == 1;
                if once && node.inputs.get(1).copied().flatten() == Some(d.source) {
                    out.push((r, d.source));
                }
            }
        }
        out
    }

    /// The steps packing the device's weights computed by `producer` (after its own steps).
    pub fn steps_after(&self, g: &Graph, producer: NodeId, o: &PlanOptions) -> Vec<super::Step> {
        let own = self.device.iter().filter(|d| d.producer == producer);
        own.flat_map(|d| {
            let label = format!("pack {}", g.values[d.source.index()].name);
            let args = vec![super::Arg::Value(d.source), super::Arg::Value(d.value)];
            super::movement::step(producer, label, KernelId::PackWeightsF32, &d.params, d.params.len, o, args)
        })
        .collect()
    }
}

/// The name and packing of the weights of Conv node `id` (`conv_wg_packed_len`: each group's
/// weights packed for `wgmma`, then the tap table), when the node runs a `wgmma` convolution
/// (`conv::wg_launch`) on an f32 weight: an initializer, or a value `producer` computes.
fn pack_conv_node(
    g: &Graph,
    id: NodeId,
    attrs: &crate::op::Conv,
    values: &[PlannedValue],
    o: &PlanOptions,
    producer: impl Fn(ValueId) -> Option<NodeId>,
) -> Option<(String, Packing)> {
    let node = &g.nodes[id.index()];
    let n = super::conv::ConvNode { id, label: String::new(), ins: &node.inputs, outs: &node.outputs };
    let p = super::conv::conv_params(&n, values, attrs).ok()?;
    super::conv::wg_launch(&p, o)?;
    let w = node.inputs.get(1).copied().flatten()?;
    let exact = !o.precision.tf32_convolutions();
    let name = format!("{}/conv-packed", values[w.index()].name);
    if let Some(c) = g.initializers.get(&w) {
        if c.dtype != DType::F32 {
            return None;
        }
        let bits = pack_conv(&f32s(&c.bytes), &p, exact)?;
        return Some((name, Packing::Host(bits)));
    }
    if !o.pack_computed_weights || values[w.index()].dtype != DType::F32 || !super::hoist::from_weights(g, w)
    {
        return None;
    }
    let groups = p.groups.max(1);
    let (k, n) = (conv_depth(&p), p.out_channels / groups);
    let params = PackParams {
        rs: 1,
        cs: k as u64,
        group_stride: k as u64 * n as u64,
        k,
        n,
        groups,
        layout: pack_layout::CONV_WG,
        exact: exact as u32,
        conv: p,
        ..PackParams::default()
    };
    let params = device_params(params, &values[w.index()])?;
    Some((name, Packing::Device { producer: producer(w)?, source: w, params }))
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
/// tensor-core kernel and B can be packed ([`packable`]).
fn takes_packed(g: &Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    packable(g, p, b, o) && tensor_core(p, o).is_some()
}

/// Whether B of a GEMM of parameters `p` (of f32 operands), read from `b`, can be packed: an f32
/// weight or a value computed from the weights alone ([`super::hoist::from_weights`]), one for the
/// whole batch, k and n not empty.
fn packable(g: &Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    let weight = match g.initializers.get(&b) {
        Some(c) => c.dtype == DType::F32,
        None => o.pack_computed_weights && super::hoist::from_weights(g, b),
    };
    p.b_shared() && p.k > 0 && p.n > 0 && weight
}

/// Whether a GEMM of parameters `p` reading B from `b` runs a `wgmma` GEMM (`gemm_wg_*`, the
/// Hopper flavour): it takes a large-tile kernel ([`tile_launch`]) and B can be packed
/// ([`packable`]).
pub(super) fn takes_wg_packed(g: &Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    o.wgmma_gemm && o.precision.has_wgmma() && packable(g, p, b, o) && tile_launch(p, o).is_some()
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

    /// The host's packers write, word for word, what the device's packer writes
    /// ([`kernels_gpu::abi::packed_element`]) for every layout: the small-m kernel's lanes, the
    /// `wgmma` transpose (split and rounded), and a grouped convolution's planes and tap table.
    #[test]
    fn host_packing_is_the_shared_layout() {
        use kernels_gpu::abi::packed_bits;
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.0173 + i as f32 * 1e-5;
        let device = |p: PackParams, src: &[f32]| -> Vec<u32> {
            let p = device_params(
                p,
                &PlannedValue { name: String::new(), dtype: DType::F32, dims: Some(vec![src.len()]) },
            )
            .expect("B lies in src");
            (0..p.len).map(|i| packed_bits(&p, src, i).expect("reads inside src")).collect()
        };
        for (k, n) in [(45u32, 13u32), (32, 8), (7, 70), (1, 1)] {
            let b: Vec<f32> = (0..(k * n) as usize).map(value).collect();
            for (rs, cs) in [(n as u64, 1u64), (1, k as u64)] {
                let base = PackParams { rs, cs, k, n, groups: 1, ..PackParams::default() };
                let tc = PackParams { layout: pack_layout::TC, exact: 1, ..base };
                assert_eq!(pack(&b, k, n, rs, cs).unwrap(), device(tc, &b), "tc {k}x{n} rs {rs}");
                for exact in [true, false] {
                    let wg = PackParams { layout: pack_layout::WG, exact: exact as u32, ..base };
                    let host = pack_wg(&b, k, n, rs, cs, exact).unwrap();
                    assert_eq!(host, device(wg, &b), "wg {k}x{n} rs {rs} exact {exact}");
                }
            }
        }
        // A grouped 3x3 convolution: 2 groups of 6 output channels over 4 input channels each.
        let p = ConvParams {
            batch: 2,
            in_channels: 8,
            out_channels: 12,
            groups: 2,
            in_size: [1, 9, 7],
            out_size: [1, 9, 7],
            kernel: [1, 3, 3],
            strides: [1; 3],
            dilations: [1, 2, 1],
            pad_begin: [0, 2, 1],
            ..ConvParams::default()
        };
        let (k, n) = (conv_depth(&p), 6);
        let w: Vec<f32> = (0..(2 * k * n) as usize).map(value).collect();
        for exact in [true, false] {
            let params = PackParams {
                rs: 1,
                cs: k as u64,
                group_stride: (k * n) as u64,
                k,
                n,
                groups: 2,
                layout: pack_layout::CONV_WG,
                exact: exact as u32,
                conv: p,
                ..PackParams::default()
            };
            assert_eq!(pack_conv(&w, &p, exact).unwrap(), device(params, &w), "conv exact {exact}");
        }
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
