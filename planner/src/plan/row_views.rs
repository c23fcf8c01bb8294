//! Operands read where they lie, through row strides, instead of copied into place first.
//!
//! Two rewrites, for the ops whose kernels read their per-step operands through row views
//! (`kernels_gpu::abi::RowView`: `SSDScan`, and `CausalConvWithState` in its channels-last form):
//!
//! - [`channels_last`]: a `CausalConvWithState` between `Transpose(perm [0, 2, 1])`s, from and back
//!   to `(B, L, D)` (PyTorch's `conv1d(x.transpose(1, 2))[..., :L].transpose(1, 2)`, as
//!   transformers' Mamba-2 writes it; at one step the transposes are views), becomes the conv in
//!   the channels-last layout: neither transpose runs, and a thread per channel reads a step's
//!   channels side by side.
//! - [`windows`]: an input of those ops that is a part of a last-axis `Split` (or a `Slice` of the
//!   last axis with unit steps) of a wider tensor, possibly under views that keep the leading dims
//!   (`Reshape (B, L, H P) -> (B, L, H, P)`), is read from the wider tensor through a
//!   [`ColumnWindow`]: the part's copy does not run (a `Split` whose parts are all read this way
//!   goes entirely). Mamba-2's in-projection is split into the gate, the conv's input and dt, and
//!   the conv's output into x, B and C: six copies a layer.
//!
//! Both keep every value the graph's outputs read and change no result: the CPU reference reads
//! a window as the columns it names (`host::reference`).

use crate::graph::{Definition, Graph, Node, NodeId, ValueId};
use crate::memory::is_view;
use crate::op::{ColumnWindow, Op};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with every `CausalConvWithState` between transposes to and from
/// `(B, L, D)` in the channels-last layout (module doc), and how many; `None` when none.
pub(super) fn channels_last(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    let readers = super::fuse::reader_counts(graph);
    let consumers = graph.consumers();
    let defs = graph.definitions();
    let dims = |v: ValueId| infos.get(v.index())?.shape.as_known();
    // `n` takes (B, L, D) to (B, D, L) or back: a transpose of the last two axes, or a view where
    // the axis swapped with D has one element (canonicalization makes such transposes views).
    let swaps_last_two = |n: &Node| match &n.op {
        Op::Transpose(t) => t.axes(3) == [0, 2, 1],
        op if is_view(op) => {
            n.input(0).zip(n.output(0)).and_then(|(a, b)| Some((dims(a)?, dims(b)?))).is_some_and(|(a, b)| {
                a.len() == 3
                    && b.len() == 3
                    && a[0] == b[0]
                    && a[1] == b[2]
                    && a[2] == b[1]
                    && (a[1] == 1 || a[2] == 1)
            })
        }
        _ => false,
    };
    let only_read_by = |v: ValueId, node: NodeId| {
        readers[v.index()] == 1 && !graph.outputs.contains(&v) && consumers[v.index()] == [node]
    };
    let f32_3d = |v: ValueId| infos.get(v.index()).is_some_and(|i| i.dtype == DType::F32 && i.rank() == 3);
    let mut g = graph.clone();
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let Op::CausalConvWithState(attrs) = &n.op else { continue };
        let width = n.inputs.get(1).copied().flatten().and_then(|w| infos.get(w.index())?.shape.as_known());
        let narrow = width
            .is_some_and(|w| w.get(1).is_some_and(|&k| k <= kernels_gpu::abi::CONV_ROWS_MAX_WIDTH as usize));
        if attrs.channels_last || !attrs.windows.is_empty() || !narrow {
            continue;
        }
        let (Some(x), Some(y)) = (n.input(0), n.output(0)) else { continue };
        // x is the transpose of a (B, L, D) value, read only here.
        let Some(Definition::Node { node: t1, .. }) = defs[x.index()] else { continue };
        let t1n = &graph.nodes[t1.index()];
        let Some(source) = t1n.input(0) else { continue };
        if !swaps_last_two(t1n) || !only_read_by(x, NodeId(i as u32)) || !f32_3d(source) {
            continue;
        }
        // y is read only by its transpose back.
        let Some(&t2) = consumers[y.index()].first() else { continue };
        let t2n = &graph.nodes[t2.index()];
        let Some(out) = t2n.output(0) else { continue };
        if !swaps_last_two(t2n) || !only_read_by(y, t2) || t2n.input(0) != Some(y) {
            continue;
        }
        let mut conv = attrs.clone();
        conv.channels_last = true;
        let mut inputs = n.inputs.clone();
        inputs[0] = Some(source);
        let mut outputs = n.outputs.clone();
        outputs[0] = Some(out);
        // The conv moves to the second transpose's place; what is left of the first goes.
        g.nodes[t2.index()] =
            Node { name: n.name.clone(), op: Op::CausalConvWithState(conv), inputs, outputs };
        g.nodes[i].outputs.truncate(1);
        count += 1;
    }
    (count > 0).then(|| (crate::dce::eliminate(&g), count))
}

/// `graph` (of shapes `infos`) with the inputs of `SSDScan`s and channels-last convs that are
/// parts of a last-axis `Split` or `Slice` read through column windows (module doc), and how
/// many inputs; `None` when none.
pub(super) fn windows(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    let defs = graph.definitions();
    let mut g = graph.clone();
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        for &slot in n.op.windowable_inputs() {
            let already = n.op.input_windows().is_some_and(|w| w.get(slot).is_some());
            let Some(v) = n.inputs.get(slot).copied().flatten() else { continue };
            if already {
                continue;
            }
            let Some((source, window)) = part_of(graph, infos, &defs, v) else { continue };
            g.nodes[i].inputs[slot] = Some(source);
            if let Some(w) = g.nodes[i].op.input_windows_mut() {
                w.set(slot, window);
            }
            count += 1;
        }
    }
    (count > 0).then(|| (crate::dce::eliminate(&g), count))
}

/// The wider tensor `v` is a column window of, and the window: `v` is a part of a last-axis
/// `Split` or `Slice` (unit steps) of an f32 tensor, possibly under views whose leading dims are
/// the tensor's.
fn part_of(
    g: &Graph,
    infos: &[TensorInfo],
    defs: &[Option<Definition>],
    v: ValueId,
) -> Option<(ValueId, ColumnWindow)> {
    let known = |v: ValueId| infos.get(v.index()).filter(|i| i.dtype == DType::F32)?.shape.as_known();
    let want = known(v)?;
    // Through views (at most a few) to the part itself.
    let mut part = v;
    for _ in 0..4 {
        let Some(Definition::Node { node, .. }) = defs[part.index()] else { return None };
        let n = &g.nodes[node.index()];
        if !is_view(&n.op) {
            break;
        }
        part = n.input(0)?;
    }
    let Some(Definition::Node { node, slot }) = defs[part.index()] else { return None };
    let n = &g.nodes[node.index()];
    let source = n.input(0)?;
    let (src, part_dims) = (known(source)?, known(part)?);
    let last = src.len().checked_sub(1)?;
    let start = last_axis_start(g, n, slot, &src, |o| known(o)?.last().copied())?;
    // The part keeps the source's leading dims, and so does the operand; its columns fill the
    // operand's trailing dims.
    let width = *part_dims.last()?;
    let lead = &src[..last];
    let fits = part_dims.len() == src.len()
        && part_dims[..last] == *lead
        && want.len() > last
        && want[..last] == *lead
        && want[last..].iter().product::<usize>() == width
        && start + width <= src[last];
    fits.then(|| (source, ColumnWindow { start, dims: want[last..].to_vec() }))
}

/// The first column of output `slot` of `n` where it is a part of the last axis of `n`'s input (of
/// dims `src`): a `Split` of that axis (after the parts before it, each output present, their
/// widths from `width`) or a `Slice` of it with unit steps; `None` for anything else.
pub(super) fn last_axis_start(
    g: &Graph,
    n: &Node,
    slot: usize,
    src: &[usize],
    width: impl Fn(ValueId) -> Option<usize>,
) -> Option<usize> {
    let last = src.len().checked_sub(1)?;
    match &n.op {
        Op::Split(s) if s.axis == last as i64 || s.axis == -1 => {
            n.outputs[..slot].iter().map(|o| width((*o)?)).sum()
        }
        Op::Slice(_) if slot == 0 => slice_start(g, n, src.len(), src[last]),
        _ => None,
    }
}

/// The first column of a `Slice` of the last axis (of a rank-`rank` tensor of `cols` columns)
/// with unit steps and constant bounds; `None` for any other slice.
fn slice_start(g: &Graph, n: &Node, rank: usize, cols: usize) -> Option<usize> {
    let int = |i: usize| n.inputs.get(i).copied().flatten().and_then(|v| g.constant(v)?.to_i64s());
    let (starts, axes) = (int(1)?, int(3)?);
    let unit = n.inputs.get(4).copied().flatten().is_none() || int(4).is_some_and(|s| s == [1]);
    let last = axes.len() == 1 && (axes[0] == -1 || axes[0] == rank as i64 - 1);
    if starts.len() != 1 || !unit || !last {
        return None;
    }
    let (s, cols) = (starts[0], i64::try_from(cols).ok()?);
    usize::try_from(if s < 0 { (s + cols).max(0) } else { s.min(cols) }).ok()
}

#[cfg(test)]
mod tests {
    use kernels_gpu::abi::{CausalConvRowsParams, KernelId, Params, RowView, SsdRows};

    use crate::constant::ConstTensor;
    use crate::graph::{Graph, ValueId};
    use crate::op::{self, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};

    /// Mamba-2's mixer as transformers writes it around its lifted ops: the in-projection's
    /// output `(B, L, 2E + 2GN + H)` split into z, the conv's input and dt; the conv between
    /// transposes; its output split into x, B and C, each reshaped to heads / groups for the scan.
    fn mixer(b: usize, l: usize) -> (Graph, [usize; 4]) {
        let (h, p, g_, n, k) = (4, 8, 1, 16, 4);
        let e = h * p;
        let conv = e + 2 * g_ * n;
        let mut g = Graph::new();
        let proj = g.input("proj", DType::F32, [b, l, e + conv + h].map(Dim::Known));
        let sizes = g.const_i64("sizes", &[3], &[e as i64, conv as i64, h as i64]);
        let split = |axis| Op::Split(op::Split { axis, split: None, num_outputs: None });
        let zxd = g.push(split(2), &[proj, sizes], 3);
        let perm = || Op::Transpose(op::Transpose { perm: Some(vec![0, 2, 1]) });
        let xt = g.op1(perm(), &[zxd[1]]);
        let weight = g.initializer("w", ConstTensor::from_f32(&[conv, k], &vec![0.5; conv * k]).unwrap());
        let silu = op::CausalConvWithState { activation: op::ConvActivation::Silu, ..Default::default() };
        let yc = g.op1(Op::CausalConvWithState(silu), &[xt, weight]);
        let y = g.op1(perm(), &[yc]);
        let sizes2 = g.const_i64("sizes2", &[3], &[e as i64, (g_ * n) as i64, (g_ * n) as i64]);
        let xbc = g.push(split(-1), &[y, sizes2], 3);
        let reshape = |g: &mut Graph, v: ValueId, dims: [i64; 4], name: &str| {
            let s = g.const_i64(name, &[4], &dims);
            g.op1(Op::Reshape(op::Reshape { allowzero: false }), &[v, s])
        };
        let (bi, li) = (b as i64, l as i64);
        let x = reshape(&mut g, xbc[0], [bi, li, h as i64, p as i64], "xs");
        let bm = reshape(&mut g, xbc[1], [bi, li, g_ as i64, n as i64], "bs");
        let cm = reshape(&mut g, xbc[2], [bi, li, g_ as i64, n as i64], "cs");
        let z = reshape(&mut g, zxd[0], [bi, li, h as i64, p as i64], "zs");
        let a = g.initializer("A", ConstTensor::from_f32(&[h], &vec![-1.0; h]).unwrap());
        let ins = vec![Some(x), Some(zxd[2]), Some(a), Some(bm), Some(cm), None, Some(z)];
        let scan = op::SsdScan { dt_softplus: true, ..Default::default() };
        let out = g.push_opt(Op::SsdScan(scan), ins, 1);
        g.output(out[0]);
        (g, [e, conv, h, n])
    }

    /// Compiles `g` and returns its kernel launches: (kernel, params bytes).
    fn launches(g: &Graph, row_views: bool) -> Vec<(KernelId, Vec<u8>)> {
        let options = PlanOptions { row_views, sm_count: 132, ssd_spans: false, ..PlanOptions::default() };
        let plan = compile(g, &Binding::new(), &options).unwrap();
        (plan.steps.iter())
            .filter_map(|s| match s {
                Step::Kernel { kernel, args, .. } => match &args[0] {
                    Arg::Params(p) => Some((*kernel, p.clone())),
                    _ => Some((*kernel, Vec::new())),
                },
                Step::Copy { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_decode_step_reads_its_splits_where_they_lie_too() {
        // At one step the transposes around the conv are views; it still runs channels-last.
        let (g, _) = mixer(1, 1);
        let kernels: Vec<KernelId> = launches(&g, true).into_iter().map(|k| k.0).collect();
        assert_eq!(kernels, [KernelId::CausalConvRowsF32, KernelId::SsdScanF32]);
    }

    #[test]
    fn the_mixer_reads_its_splits_where_they_lie_and_convolves_channels_last() {
        let (b, l) = (2, 40);
        let (g, [e, conv, h, n]) = mixer(b, l);
        let on = launches(&g, true);
        let kernels: Vec<KernelId> = on.iter().map(|k| k.0).collect();
        assert_eq!(kernels, [KernelId::CausalConvRowsF32, KernelId::SsdChunkF32], "{on:?}");
        let wide = (e + conv + h) as u32;
        let steps = kernels_gpu::abi::causal_conv_rows_steps((b * conv) as u64, l as u64, 132);
        let x = RowView { offset: e as u32, row: wide };
        let p =
            CausalConvRowsParams { batch: 2, channels: conv as u32, len: 40, width: 4, silu: 1, steps, x };
        assert_eq!(on[0].1, p.as_bytes());
        // x, B, C from the conv's output (row `conv`); dt and z from the projection's.
        let rows = SsdRows {
            x: RowView { offset: 0, row: conv as u32 },
            dt: RowView { offset: (e + conv) as u32, row: wide },
            bm: RowView { offset: e as u32, row: conv as u32 },
            cm: RowView { offset: (e + n) as u32, row: conv as u32 },
            z: RowView { offset: 0, row: wide },
        };
        assert_eq!(on[1].1[48..88], *rows_bytes(&rows));
        // Off: the two transposes, the channels-first conv and the six Split copies run.
        let off: Vec<KernelId> = launches(&g, false).into_iter().map(|k| k.0).collect();
        assert!(off.contains(&KernelId::CausalConvF32) && off.len() >= 9, "{off:?}");
    }

    fn rows_bytes(r: &SsdRows) -> Vec<u8> {
        [r.x, r.dt, r.bm, r.cm, r.z]
            .iter()
            .flat_map(|v| [v.offset, v.row])
            .flat_map(u32::to_le_bytes)
            .collect()
    }

    #[test]
    fn parts_read_elsewhere_or_cut_on_another_axis_stay_copies() {
        // A Split along the time axis is no column window.
        let mut g = Graph::new();
        let (b, l, h, p, n) = (1, 8, 2, 4, 8);
        let x = g.input("x", DType::F32, [b, 2 * l, h, p].map(Dim::Known));
        let sizes = g.const_i64("s", &[2], &[l as i64, l as i64]);
        let halves = g.push(Op::Split(op::Split { axis: 1, split: None, num_outputs: None }), &[x, sizes], 2);
        let dt = g.input("dt", DType::F32, [b, l, h].map(Dim::Known));
        let a = g.input("A", DType::F32, [h].map(Dim::Known));
        let bm = g.input("B", DType::F32, [b, l, 1, n].map(Dim::Known));
        let ins = vec![Some(halves[0]), Some(dt), Some(a), Some(bm), Some(bm)];
        let y = g.push_opt(Op::SsdScan(op::SsdScan::default()), ins, 1);
        g.output(y[0]);
        g.output(halves[1]);
        let infos = crate::shape_infer::infer(&g).unwrap();
        assert!(super::windows(&g, &infos).is_none());
        // A conv whose output is also read before its transpose back keeps its layout.
        let (mut g, _) = mixer(1, 8);
        let conv = g.nodes.iter().position(|n| matches!(n.op, Op::CausalConvWithState(_))).unwrap();
        let yc = g.nodes[conv].outputs[0].unwrap();
        g.output(yc);
        let infos = crate::shape_infer::infer(&g).unwrap();
        assert!(super::channels_last(&g, &infos).is_none());
    }
}
