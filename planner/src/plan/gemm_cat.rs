//! A GEMM's A operand read where it lies: rows gathered from a table and columns concatenated
//! side by side are read by the `wgmma` GEMM's loads (`gemm_wg*_cat_*`, [`GemmCatParams`])
//! instead of being written out by a gather and a concatenation first.
//!
//! Message-passing networks build each edge's input this way, `Linear(cat([h[src], h[dst]], -1))`,
//! and each node's update as `Linear(cat([h, agg], -1))`: at the TICL GNN's 800k edges the
//! gathered rows (410 MB a layer) were written by `gather_nd_b16` at 1.2 TB/s and read back by
//! the GEMM, where the table itself (25.6 MB) stays in L2.
//!
//! The A operand (read only by the GEMM, f32, two dims) is one of:
//! - a `Concat` along its last axis of two `[M, W]` values, each a value of its own or a
//!   `Gather` along axis 0 of a `[N, W]` table by `[M]` indices that only the Concat reads;
//! - a `Reshape` `[M, G, W] -> [M, G W]` (G at most two) of a `GatherND` (no batch dims) of a
//!   `[N, W]` table by `[M, G, 1]` indices or of a `Gather` along axis 0 by `[M, G]` indices
//!   (what `gather_concat` makes of `cat([x[src], x[dst]], -1)`); when those indices are the
//!   stacking of `[M]` parts that only it reads, each segment reads its part where it lies (and a
//!   part gathered as a row of an `[R, M]` edge index by a constant, that row of it), so neither
//!   the stacking nor those gathers run;
//! - a `Gather` along axis 0 of a `[N, K]` table by `[M]` indices.
//!
//! Each segment's width is a multiple of four (16-byte copies). Only GEMMs that run the `wgmma`
//! kernels on a packed weight take it ([`takes_cat`]); the others keep the gathers and copies.
//! The absorbed nodes are not lowered and their results get no memory; the GEMM's step reads the
//! tables and indices, which the memory plan keeps alive until it runs.

use std::collections::{BTreeMap, BTreeSet};

use kernels_gpu::abi::GemmCatParams;

use super::gemm::{gemm_of, takes_cat};
use super::{PlanOptions, PlannedValue};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::DType;

/// The segments a GEMM reads A from: parameters, tables and indices.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CatA {
    /// The segments' parameters.
    pub params: GemmCatParams,
    /// Each segment's table (`None`: no second segment).
    pub tables: [Option<ValueId>; 2],
    /// Each segment's indices (`None`: its rows in order).
    pub index: [Option<ValueId>; 2],
    /// The nodes whose work the GEMM's loads take over (gathers, the Concat or Reshape), in
    /// graph order.
    pub nodes: Vec<NodeId>,
}

/// The GEMMs whose A operands are read as segments, and what that removes.
#[derive(Debug, Default)]
pub(super) struct CatOperands {
    /// By GEMM node.
    pub by_node: BTreeMap<NodeId, CatA>,
    /// The gathers, concatenations and reshapes the GEMMs read through: not lowered.
    pub absorbed: BTreeSet<NodeId>,
    /// Their results: no memory.
    pub elided: Vec<ValueId>,
    /// The values each GEMM's step reads beyond its node's inputs (tables and indices).
    pub reads: Vec<(NodeId, ValueId)>,
}

/// An index read by a segment: the tensor, its stride and its offset (elements).
type IndexRead = (ValueId, u32, u32);

/// One segment as found: table, its `[rows, width]`, and the index with its stride and offset.
struct Segment {
    table: ValueId,
    rows: usize,
    width: usize,
    index: Option<IndexRead>,
}

/// The GEMMs of `g` (of planned `values`) whose A operands are read as segments; `skip` names
/// the nodes lowered another way (MLP chains, LayerNorm folds).
pub(super) fn find(
    g: &Graph,
    values: &[PlannedValue],
    perms: &super::fuse::OperandPerms,
    skip: impl Fn(NodeId) -> bool,
    o: &PlanOptions,
) -> CatOperands {
    let mut found = CatOperands::default();
    if !o.pack_gemm_weights || !o.wgmma_gemm {
        return found;
    }
    let readers = super::fuse::reader_counts(g);
    let defs = super::fuse::producers(g);
    for (i, n) in g.nodes.iter().enumerate() {
        let id = NodeId(i as u32);
        if !matches!(n.op, Op::Gemm(_) | Op::MatMul | Op::FusedGemm(_)) || skip(id) {
            continue;
        }
        let Ok((p, a, b, _)) = gemm_of(g, id, values, perms) else { continue };
        let plain_a = p.batch == 1 && p.a_cs == 1 && p.a_rs == p.k as u64 && n.input(0) == Some(a);
        if !plain_a || !takes_cat(g, &p, b, o) {
            continue;
        }
        let Some((segments, absorbed)) = segments_of(g, a, values, &readers, &defs) else { continue };
        let fits = |s: &Segment| {
            // (The kernel keeps table rows as u32, `u32::MAX` for a row of zeros.)
            s.width.is_multiple_of(4)
                && values[s.table.index()].dtype == DType::F32
                && s.rows > 0
                && (s.rows as u64) < u32::MAX as u64
        };
        if segments.iter().map(|s| s.width).sum::<usize>() != p.k as usize || !segments.iter().all(fits) {
            continue;
        }
        let index_dtype = |s: &Segment| s.index.map(|(v, ..)| values[v.index()].dtype);
        let dtypes: BTreeSet<DType> = segments.iter().filter_map(index_dtype).collect();
        let index_bytes = match dtypes.iter().collect::<Vec<_>>()[..] {
            [] => 8,
            [DType::I64] => 8,
            [DType::I32] => 4,
            _ => continue,
        };
        let mut cat = CatA {
            params: GemmCatParams { index_bytes, ..GemmCatParams::default() },
            tables: [None; 2],
            index: [None; 2],
            nodes: Vec::new(),
        };
        for (k, s) in segments.iter().enumerate() {
            cat.params.ld[k] = s.width as u64;
            cat.params.rows[k] = s.rows as u64;
            cat.params.width[k] = s.width as u32;
            cat.tables[k] = Some(s.table);
            found.reads.push((id, s.table));
            if let Some((v, stride, offset)) = s.index {
                (cat.params.index_stride[k], cat.params.index_offset[k]) = (stride, offset);
                cat.index[k] = Some(v);
                found.reads.push((id, v));
            }
        }
        let mut absorbed = absorbed;
        absorbed.sort();
        for &node in &absorbed {
            found.elided.extend(g.nodes[node.index()].outputs.iter().flatten());
            found.absorbed.insert(node);
        }
        cat.nodes = absorbed;
        found.by_node.insert(id, cat);
    }
    found
}

/// The segments `a` is made of and the nodes that make it (module doc); `None` when it is none
/// of those forms.
fn segments_of(
    g: &Graph,
    a: ValueId,
    values: &[PlannedValue],
    readers: &[usize],
    defs: &[Option<(usize, usize)>],
) -> Option<(Vec<Segment>, Vec<NodeId>)> {
    let dims = |v: ValueId| values[v.index()].dims.clone();
    // The node defining `v` as its first output, when only one node reads `v` and it is no
    // graph output.
    let sole = |v: ValueId| -> Option<NodeId> {
        let (node, 0) = defs[v.index()]? else { return None };
        (readers[v.index()] == 1 && !g.outputs.contains(&v)).then_some(NodeId(node as u32))
    };
    // `[table, index]` of a Gather along axis 0 of a two-dim table.
    let gather = |id: NodeId| -> Option<(ValueId, ValueId, usize)> {
        let n = &g.nodes[id.index()];
        let (Op::Gather(op::Gather { axis: 0 }), Some(t), Some(ix)) = (&n.op, n.input(0), n.input(1)) else {
            return None;
        };
        let td = dims(t)?;
        (td.len() == 2).then_some((t, ix, td[0]))
    };
    let ad = dims(a)?;
    let [m, k] = ad[..] else { return None };
    let producer = sole(a)?;
    let pn = &g.nodes[producer.index()];
    match &pn.op {
        Op::Concat(c) if (c.axis == 1 || c.axis == -1) && pn.inputs.len() == 2 => {
            let mut segments = Vec::new();
            let mut absorbed = vec![producer];
            for x in pn.inputs.iter() {
                let x = (*x)?;
                let [rows, width] = dims(x)?[..] else { return None };
                let gathered = sole(x).and_then(|gid| Some((gid, gather(gid)?)));
                match gathered {
                    Some((gid, (t, ix, n))) if dims(ix)? == [m] => {
                        absorbed.push(gid);
                        segments.push(Segment { table: t, rows: n, width, index: Some((ix, 1, 0)) });
                    }
                    _ if rows == m => segments.push(Segment { table: x, rows, width, index: None }),
                    _ => return None,
                }
            }
            Some((segments, absorbed))
        }
        Op::Reshape(_) => {
            let x = pn.input(0)?;
            let gid = sole(x)?;
            let gn = &g.nodes[gid.index()];
            let (t, ix, n, groups) = match &gn.op {
                Op::GatherNd(op::GatherNd { batch_dims: 0 }) => {
                    let (t, ix) = (gn.input(0)?, gn.input(1)?);
                    let td = dims(t)?;
                    let [mm, groups, 1] = dims(ix)?[..] else { return None };
                    (td.len() == 2 && mm == m).then_some((t, ix, td[0], groups))?
                }
                _ => {
                    let (t, ix, n) = gather(gid)?;
                    let [mm, groups] = dims(ix)?[..] else { return None };
                    (mm == m).then_some((t, ix, n, groups))?
                }
            };
            let width = dims(t)?[1];
            if !(1..=2).contains(&groups) || groups * width != k || dims(x)? != [m, groups, width] {
                return None;
            }
            let mut absorbed = vec![producer, gid];
            let index: Vec<IndexRead> = match unstacked(g, ix, m, groups, values, &sole) {
                Some((parts, nodes)) => {
                    absorbed.extend(nodes);
                    parts
                }
                None => (0..groups).map(|j| (ix, groups as u32, j as u32)).collect(),
            };
            let segments =
                index.into_iter().map(|ix| Segment { table: t, rows: n, width, index: Some(ix) }).collect();
            Some((segments, absorbed))
        }
        Op::Gather(op::Gather { axis: 0 }) => {
            let (t, ix, n) = gather(producer)?;
            (dims(ix)? == [m] && dims(t)?[1] == k).then(|| {
                (vec![Segment { table: t, rows: n, width: k, index: Some((ix, 1, 0)) }], vec![producer])
            })
        }
        _ => None,
    }
}

/// The parts `ix` (`[m, groups]` or `[m, groups, 1]` indices) was stacked from, when it is
/// `Concat` along its second axis of `groups` `Reshape`s of `[m]` (or `[m, 1]`) indices, each
/// read only there (what `gather_concat` builds of `cat([x[src], x[dst]], -1)`): each part read
/// where it lies (stride 1), or at its row of the `[r, m]` tensor it is `Gather`ed from by a
/// constant along axis 0 (`edge_index[0]`, `edge_index[1]`: offset `row · m`), and the nodes
/// that then need not run (the Concat, the Reshapes, the Gathers read nowhere else).
fn unstacked(
    g: &Graph,
    ix: ValueId,
    m: usize,
    groups: usize,
    values: &[PlannedValue],
    sole: &impl Fn(ValueId) -> Option<NodeId>,
) -> Option<(Vec<IndexRead>, Vec<NodeId>)> {
    let dims = |v: ValueId| values[v.index()].dims.clone();
    let cid = sole(ix)?;
    let cn = &g.nodes[cid.index()];
    let rank = dims(ix)?.len();
    let Op::Concat(c) = &cn.op else { return None };
    if cn.inputs.len() != groups || (c.axis != 1 && c.axis != 1 - rank as i64) {
        return None;
    }
    let mut nodes = vec![cid];
    let mut parts = Vec::new();
    for p in &cn.inputs {
        let rid = sole((*p)?)?;
        let rn = &g.nodes[rid.index()];
        let x = rn.input(0)?;
        let xd = dims(x)?;
        if !matches!(rn.op, Op::Reshape(_) | Op::Unsqueeze(_)) || (xd != [m] && xd != [m, 1]) {
            return None;
        }
        nodes.push(rid);
        // `x` gathered as one row of a `[r, m]` tensor: read that row where it lies.
        let row = sole(x).and_then(|gid| {
            let gn = &g.nodes[gid.index()];
            let (Op::Gather(op::Gather { axis: 0 }), Some(t), Some(kv)) = (&gn.op, gn.input(0), gn.input(1))
            else {
                return None;
            };
            let [r, mm] = dims(t)?[..] else { return None };
            let [k] = super::movement::const_ints(g, kv, "").ok()?[..] else { return None };
            let k = if k < 0 { k + r as i64 } else { k };
            let offset = u32::try_from(k.checked_mul(m as i64)?).ok()?;
            (xd == [m] && mm == m && (0..r as i64).contains(&k) && dims(kv)?.is_empty())
                .then_some((gid, (t, 1, offset)))
        });
        match row {
            Some((gid, part)) => {
                nodes.push(gid);
                parts.push(part);
            }
            None => parts.push((x, 1, 0)),
        }
    }
    Some((parts, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Arg, Step, compile};
    use crate::tensor_info::Dim;
    use crate::{Binding, ConstTensor};
    use kernels_gpu::abi::KernelId;

    fn known(shape: &[usize]) -> Vec<Dim> {
        shape.iter().map(|&d| Dim::Known(d)).collect()
    }

    fn weight(g: &mut Graph, name: &str, shape: &[usize]) -> ValueId {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        g.initializer(name, ConstTensor::from_f32(shape, &data).unwrap())
    }

    /// A message-passing layer over `m` edges of `rows` nodes with `w`-wide features: the edge
    /// MLP reads `cat([h[src], h[dst]])` (the stacked GatherND `gather_concat` makes), the node
    /// update `cat([h, messages])`.
    fn layer(m: usize, rows: usize, w: usize) -> Graph {
        let mut g = Graph::new();
        let h = g.input("h", DType::F32, known(&[rows, w]));
        let ix = g.input("ix", DType::I64, known(&[m, 2, 1]));
        let gathered = g.op1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[h, ix]);
        let shape = g.initializer("shape", ConstTensor::from_i64(&[2], &[m as i64, 2 * w as i64]).unwrap());
        let a = g.op1(Op::Reshape(op::Reshape::default()), &[gathered, shape]);
        let we = weight(&mut g, "we", &[2 * w, w]);
        let msg = g.matmul(a, we);
        let msg = g.op1(Op::Relu, &[msg]);
        // (The messages as the node update's second segment: `m` rows, as many as h here.)
        let cat = g.op1(Op::Concat(op::Concat { axis: 1 }), &[h, msg]);
        let wn = weight(&mut g, "wn", &[2 * w, w]);
        let y = g.matmul(cat, wn);
        g.output(y);
        g
    }

    fn launches(g: &Graph, o: &PlanOptions) -> Vec<(KernelId, Vec<Arg>)> {
        let plan = compile(g, &Binding::new(), o).unwrap();
        (plan.steps.iter())
            .filter_map(|s| match s {
                Step::Kernel { kernel, args, .. } => Some((*kernel, args.clone())),
                Step::Copy { .. } => None,
            })
            .collect()
    }

    #[test]
    fn gathered_and_concatenated_operands_are_read_by_the_wgmma_gemm() {
        let g = layer(20_000, 20_000, 64);
        let o = PlanOptions::default();
        let steps = launches(&g, &o);
        let kernels: Vec<KernelId> = steps.iter().map(|s| s.0).collect();
        assert_eq!(kernels, [KernelId::GemmWg64CatF32, KernelId::GemmWg64CatF32], "{steps:?}");
        // The steps name the nodes they took over.
        let text = compile(&g, &Binding::new(), &o).unwrap().to_string();
        assert!(text.contains("GatherND+Reshape+MatMul") && text.contains("Concat+MatMul"), "{text}");
        // The edge GEMM: `[p, e, s, t0, t1, i0, i1, b, c, x1, x2, x3, y]`, both segments rows of h
        // through the stacked indices (stride 2, offsets 0 and 1).
        let (h, ix) = (ValueId(0), ValueId(1));
        let edge = &steps[0].1;
        assert_eq!(edge[3..7], [Arg::Value(h), Arg::Value(h), Arg::Value(ix), Arg::Value(ix)]);
        let Arg::Params(bytes) = &edge[2] else { panic!("{edge:?}") };
        let want = GemmCatParams {
            ld: [64, 64],
            rows: [20_000, 20_000],
            width: [64, 64],
            index_stride: [2, 2],
            index_offset: [0, 1],
            index_bytes: 8,
            _pad: 0,
        };
        assert_eq!(bytes, &kernels_gpu::abi::Params::as_bytes(&want).to_vec());
        // The node update: h and the messages in order, no indices.
        let node = &steps[1].1;
        assert!(
            matches!(node[3..7], [Arg::Value(a), Arg::Value(_), Arg::Null, Arg::Null] if a == h),
            "{node:?}"
        );

        // Without wgmma (or on the portable flavour), a width no multiple of four, or too few
        // rows for the large tiles: the gather and the concatenation run as before.
        let portable = PlanOptions { wgmma_gemm: false, ..o };
        for (g, o) in
            [(layer(20_000, 20_000, 64), portable), (layer(20_000, 20_000, 62), o), (layer(256, 256, 64), o)]
        {
            let kernels: Vec<KernelId> = launches(&g, &o).iter().map(|s| s.0).collect();
            assert!(!kernels.iter().any(|k| format!("{k:?}").contains("Cat")), "{kernels:?}");
            assert!(kernels.iter().any(|k| format!("{k:?}").contains("GatherNd")), "{kernels:?}");
        }
    }

    /// `cat([h[ei[0]], h[ei[-1]]], -1) · W` of an `[2, m]` edge index, as a user writes it: after
    /// `gather_concat` stacks the two index rows, the GEMM reads each row of `ei` where it lies
    /// (stride 1, offsets 0 and m) and neither the index gathers nor the stacking runs.
    #[test]
    fn the_rows_of_an_edge_index_are_read_where_they_lie() {
        let (m, rows, w) = (20_000, 5_000, 64);
        let mut g = Graph::new();
        let h = g.input("h", DType::F32, known(&[rows, w]));
        let ei = g.input("ei", DType::I64, known(&[2, m]));
        let gathered: Vec<ValueId> = [0i64, -1]
            .iter()
            .map(|&r| {
                let k = g.initializer(&format!("k{r}"), ConstTensor::from_i64(&[], &[r]).unwrap());
                let ix = g.op1(Op::Gather(op::Gather { axis: 0 }), &[ei, k]);
                g.op1(Op::Gather(op::Gather { axis: 0 }), &[h, ix])
            })
            .collect();
        let a = g.op1(Op::Concat(op::Concat { axis: -1 }), &gathered);
        let we = weight(&mut g, "we", &[2 * w, w]);
        let y = g.matmul(a, we);
        g.output(y);
        let steps = launches(&g, &PlanOptions::default());
        let kernels: Vec<KernelId> = steps.iter().map(|s| s.0).collect();
        assert_eq!(kernels, [KernelId::GemmWg64CatF32], "{steps:?}");
        let edge = &steps[0].1;
        assert_eq!(edge[3..7], [Arg::Value(h), Arg::Value(h), Arg::Value(ei), Arg::Value(ei)]);
        let Arg::Params(bytes) = &edge[2] else { panic!("{edge:?}") };
        let want = GemmCatParams {
            ld: [64, 64],
            rows: [5_000, 5_000],
            width: [64, 64],
            index_stride: [1, 1],
            index_offset: [0, m as u32],
            index_bytes: 8,
            _pad: 0,
        };
        assert_eq!(bytes, &kernels_gpu::abi::Params::as_bytes(&want).to_vec());
    }

    /// A residual node update, `softmax(cat([h, agg]) · W + h)` with `h` dying there: the GEMM reads
    /// `h` as A's first segment while it writes its result, so the result never takes `h`'s
    /// buffer in place (its epilogue input `h` alone would allow it).
    #[test]
    fn a_segment_is_never_overwritten_in_place_by_the_gemm_reading_it() {
        let (m, w) = (20_000, 64);
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[m, w]));
        let agg = g.input("agg", DType::F32, known(&[m, w]));
        let h = g.op1(Op::Relu, &[x]);
        let cat = g.op1(Op::Concat(op::Concat { axis: 1 }), &[h, agg]);
        let wn = weight(&mut g, "wn", &[2 * w, w]);
        let y = g.matmul(cat, wn);
        let y = g.op1(Op::Add, &[y, h]);
        let z = g.op1(Op::Softmax(op::Softmax { axis: -1 }), &[y]);
        g.output(z);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let gemm = text.lines().find(|l| l.contains("cat_f32")).unwrap_or_else(|| panic!("{text}"));
        // `[t0, t1, b, c, x1, y]` as printed: t0 (h) and the result in different places.
        let places: Vec<&str> =
            gemm.split(['[', ',', ']']).map(str::trim).filter(|a| a.contains('@')).collect();
        let (t0, out) = (places[0], places[places.len() - 1]);
        assert!(t0.contains("arena") && out.contains("arena"), "{gemm}");
        assert_ne!(t0.split('@').nth(1), out.split('@').nth(1), "{gemm}");
    }
}
