//! Attention fusion: `MatMul(Q, Kᵀ) -> [score program] -> Softmax(last axis) -> MatMul(·, V)`
//! becomes one `attention_f32` launch.
//!
//! The score program is an elementwise program node (from `fuse::elementwise_programs`) or a
//! chain of single elementwise nodes reading the scores; its other inputs (masks, scales) are read
//! by the kernel with broadcast strides. Q, K and V are traced back through Transpose, reshape-like
//! ops and Split as long as each step is an offset and strides over the value it starts from, and
//! the output forward through Transpose and reshape-like ops with one reader each, so the kernel
//! reads the QKV projection and writes the final layout in place. The chain's nodes (and the
//! tracing nodes left without readers) are removed; the last one stands for the fusion as an
//! [`Op::FusedAttention`] over the operands' buffers, so the intermediates get no arena slots.
//!
//! Invariant: a pattern is fused only when every view is exactly expressible; anything else keeps
//! the unfused nodes.

use std::collections::BTreeMap;

use super::PlanOptions;

use kernels_gpu::abi::{
    ATTN_CAUSAL_SKIP, ATTN_FLASH_MAX_WARPS, ATTN_MAX_DV, ATTN_NAN_ROWS_ZERO, ATTN_ROWS, ATTN_TC_ROWS,
    ATTN_TC_THREADS, ATTN_THREADS, Activation, AttentionParams, AttnView, EW_MAX_INPUTS, EW_MAX_INSTRS,
    KernelId, attention_fits, attention_flash_fits, attention_flash_shared_bytes, attention_shared_bytes,
    attention_small_fits, attention_tc_fits, attention_tc_shared_bytes, ew_arith_only, ew_src,
};

use super::fuse::{EwProgram, Programs, compile_program, drop_values, ew_node, producers, remove_nodes};
use super::lower::bytes_of;
use super::movement::{contiguous_u64, reshape_strides};
use super::{Arg, PlannedValue, Step};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{FusedAttention, Op};
use crate::tensor_info::{DType, TensorInfo};

mod mask;
mod sdpa;
mod views;
use sdpa::{nan_guard, peel_scale, scaled_program};
use views::{View, attn_view, reshape_like};

/// Launch parameters of each fused attention, by the output value of its [`Op::FusedAttention`].
pub(super) type Attentions = BTreeMap<ValueId, AttentionParams>;

/// What the pass reads of the graph.
struct Ctx<'a> {
    g: &'a Graph,
    infos: &'a [TensorInfo],
    defs: Vec<Option<(usize, usize)>>,
    readers: Vec<usize>,
}

impl Ctx<'_> {
    fn f32_dims(&self, v: ValueId) -> Option<Vec<usize>> {
        let i = self.infos.get(v.index())?;
        if i.dtype != DType::F32 {
            return None;
        }
        i.shape.as_known()
    }

    /// `v` as a view of the value it is traced back to, and the nodes traced through.
    fn trace_back(&self, v: ValueId) -> Option<(View, Vec<usize>)> {
        let dims = self.f32_dims(v)?;
        let own =
            View { base: v, offset: 0, strides: contiguous_u64(&dims), dims: dims.clone(), group: None };
        let Some((ni, slot)) = self.defs[v.index()] else { return Some((own, Vec::new())) };
        let node = &self.g.nodes[ni];
        let Some(Some(x)) = node.inputs.first().copied() else { return Some((own, Vec::new())) };
        let traced = match &node.op {
            Op::Transpose(t) => self.trace_back(x).and_then(|(xv, nodes)| {
                let perm = t.axes(xv.dims.len());
                if perm.len() != xv.dims.len() || perm.iter().any(|&p| p >= perm.len()) {
                    return None;
                }
                let strides = perm.iter().map(|&p| xv.strides[p]).collect();
                let group = match xv.group {
                    Some((axis, g)) => Some((perm.iter().position(|&p| p == axis)?, g)),
                    None => None,
                };
                Some((View { strides, dims: dims.clone(), group, ..xv }, nodes))
            }),
            op if reshape_like(op) && slot == 0 => self.trace_back(x).and_then(|(xv, nodes)| {
                if xv.group.is_some() {
                    return (xv.dims == dims).then_some((xv, nodes));
                }
                match reshape_strides(&xv.dims, &xv.strides, &dims) {
                    Some(strides) => Some((View { strides, dims: dims.clone(), ..xv }, nodes)),
                    None => Some((views::grouped(&xv, &dims)?, nodes)),
                }
            }),
            // A broadcast (stride 0 along the dims it repeats): grouped-query attention's
            // repeated K and V, merged into the heads by the Reshape after it.
            Op::Expand if slot == 0 => self.trace_back(x).and_then(|(xv, nodes)| {
                let lead = dims.len().checked_sub(xv.dims.len())?;
                if xv.group.is_some() {
                    return None;
                }
                let mut strides = vec![0u64; dims.len()];
                for (j, (&d, &s)) in xv.dims.iter().zip(&xv.strides).enumerate() {
                    match d {
                        _ if d == dims[lead + j] => strides[lead + j] = s,
                        1 => {}
                        _ => return None,
                    }
                }
                Some((View { strides, dims: dims.clone(), ..xv }, nodes))
            }),
            // One index along an axis (a `select`, as `unbind` of a packed QKV projection
            // exports): an offset, the axis dropped (or kept at 1 for a one-element index).
            Op::Gather(ga) if slot == 0 => {
                self.trace_back(x).filter(|(xv, _)| xv.group.is_none()).and_then(|(xv, nodes)| {
                    let index = self.g.constant(node.inputs.get(1).copied().flatten()?)?;
                    let [k] = index.to_i64s()?[..] else { return None };
                    let axis = super::reduce::axis_index(ga.axis, xv.dims.len()).ok()?;
                    let len = xv.dims[axis] as i64;
                    let k = if k < 0 { k + len } else { k };
                    if !(0..len).contains(&k) || index.dims.len() > 1 {
                        return None;
                    }
                    let offset = xv.offset + k as u64 * xv.strides[axis];
                    let mut strides = xv.strides.clone();
                    let mut kept = xv.dims.clone();
                    if index.dims.is_empty() {
                        strides.remove(axis);
                        kept.remove(axis);
                    } else {
                        kept[axis] = 1;
                    }
                    (kept == dims).then(|| (View { offset, strides, dims: dims.clone(), ..xv }, nodes))
                })
            }
            Op::Split(s) => {
                self.trace_back(x).filter(|(xv, _)| xv.group.is_none()).and_then(|(xv, nodes)| {
                    let rank = xv.dims.len() as i64;
                    let axis = if s.axis < 0 { s.axis + rank } else { s.axis };
                    if !(0..rank).contains(&axis) {
                        return None;
                    }
                    let axis = axis as usize;
                    let mut start = 0u64;
                    for o in &node.outputs[..slot] {
                        start += self.f32_dims((*o)?)?.get(axis).copied()? as u64;
                    }
                    let offset = xv.offset + start * xv.strides[axis];
                    Some((View { offset, dims: dims.clone(), ..xv }, nodes))
                })
            }
            _ => None,
        };
        Some(match traced {
            Some((view, mut nodes)) => {
                nodes.push(ni);
                (view, nodes)
            }
            None => (own, Vec::new()),
        })
    }

    /// Whether `v` is read by exactly `n` nodes and is no graph output: the fusion may absorb
    /// them, and `v` with them.
    fn private(&self, v: ValueId, n: usize) -> bool {
        self.readers[v.index()] == n && !self.g.outputs.contains(&v)
    }

    /// The single reader of `v` when it has exactly one and `v` is not a graph output.
    fn sole_reader(&self, v: ValueId) -> Option<usize> {
        if !self.private(v, 1) {
            return None;
        }
        self.g.nodes.iter().position(|n| n.inputs.contains(&Some(v)))
    }

    /// The value `o` is finally written to (through single-reader transposes and reshapes), the
    /// nodes passed, and `o`'s dims as a view of that value.
    fn trace_forward(&self, o: ValueId) -> Option<(ValueId, Vec<usize>, View)> {
        let mut chain = Vec::new();
        let mut cur = o;
        while let Some(n) = self.sole_reader(cur) {
            let node = &self.g.nodes[n];
            let movable = matches!(node.op, Op::Transpose(_)) || reshape_like(&node.op);
            let Some(y) = node.output(0) else { break };
            if !movable || node.inputs.first() != Some(&Some(cur)) || node.outputs.len() != 1 {
                break;
            }
            if self.f32_dims(y).is_none() {
                break;
            }
            chain.push(n);
            cur = y;
        }
        // The longest prefix of the chain whose layout maps back onto `o`.
        loop {
            let last = chain.last().map_or(o, |&n| self.g.nodes[n].output(0).expect("checked above"));
            let dims = self.f32_dims(last)?;
            let mut view = View { base: last, offset: 0, strides: contiguous_u64(&dims), dims, group: None };
            let mut ok = true;
            for &n in chain.iter().rev() {
                let node = &self.g.nodes[n];
                let x = node.inputs[0].expect("chain nodes read their predecessor");
                let xd = self.f32_dims(x)?;
                let strides = match &node.op {
                    Op::Transpose(t) => {
                        let perm = t.axes(xd.len());
                        let mut s = vec![0u64; xd.len()];
                        for (i, &p) in perm.iter().enumerate() {
                            *s.get_mut(p)? = view.strides[i];
                        }
                        Some(s)
                    }
                    _ => reshape_strides(&view.dims, &view.strides, &xd),
                };
                match strides {
                    Some(s) => view = View { strides: s, dims: xd, ..view },
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                return Some((last, chain, view));
            }
            chain.pop();
        }
    }
}

/// One matched attention.
struct Match {
    /// Nodes removed (the anchor excluded).
    removed: Vec<usize>,
    /// The node that becomes the [`Op::FusedAttention`].
    anchor: usize,
    /// Its inputs: Q, K, V buffers, then the score program's other inputs.
    inputs: Vec<ValueId>,
    /// Nodes traced through backwards (removed if nothing else reads them).
    traced: Vec<usize>,
    out: ValueId,
    out_dims: Vec<usize>,
    params: AttentionParams,
    /// The program node whose entry in `Programs` goes away.
    program_value: Option<ValueId>,
}

/// The score program between the scores `x` of softmax and the first MatMul: its nodes, the
/// program (input 0 the raw scores), its other inputs, and the raw scores.
fn score_program(
    c: &Ctx,
    programs: &Programs,
    x: ValueId,
) -> Option<(Vec<usize>, EwProgram, Vec<ValueId>, ValueId)> {
    let is_matmul =
        |v: ValueId| c.defs[v.index()].is_some_and(|(n, s)| s == 0 && c.g.nodes[n].op == Op::MatMul);
    if is_matmul(x) {
        let program = EwProgram { instrs: Vec::new(), out_reg: ew_src::INPUT0 };
        return Some((Vec::new(), program, Vec::new(), x));
    }
    let (xn, _) = c.defs[x.index()]?;
    let (members, program, inputs) = if let Some(p) = programs.get(&x) {
        let inputs: Vec<ValueId> = c.g.nodes[xn].inputs.iter().copied().collect::<Option<_>>()?;
        (vec![xn], p.clone(), inputs)
    } else {
        // A chain of single elementwise nodes back to the MatMul.
        let mut members = vec![xn];
        let mut cur = xn;
        loop {
            let node = &c.g.nodes[cur];
            ew_node(c.g, node)?;
            let next: Vec<usize> = node
                .inputs
                .iter()
                .take(2)
                .flatten()
                .filter(|v| !is_matmul(**v))
                .filter_map(|v| {
                    let (p, _) = c.defs[v.index()]?;
                    let fits = ew_node(c.g, &c.g.nodes[p]).is_some()
                        && !programs.contains_key(v)
                        && c.private(*v, 1);
                    fits.then_some(p)
                })
                .collect();
            if node.inputs.iter().take(2).flatten().any(|v| is_matmul(*v)) {
                break;
            }
            match next.as_slice() {
                [p] if members.len() < EW_MAX_INSTRS => {
                    members.push(*p);
                    cur = *p;
                }
                _ => return None,
            }
        }
        members.reverse();
        let (program, inputs) = compile_program(c.g, &members)?;
        (members, program, inputs)
    };
    let scores: Vec<ValueId> = inputs.iter().copied().filter(|v| is_matmul(*v)).collect();
    let [s] = scores.as_slice() else { return None };
    if inputs.iter().filter(|v| *v == s).count() != 1 || !c.private(*s, 1) {
        return None;
    }
    // Renumber the inputs: the scores first, the others after in order.
    let slot = inputs.iter().position(|v| v == s)? as u32;
    let remap = |code: u32| {
        if (ew_src::INPUT0..ew_src::IMM).contains(&code) {
            let k = code - ew_src::INPUT0;
            ew_src::INPUT0
                + if k == slot {
                    0
                } else if k < slot {
                    k + 1
                } else {
                    k
                }
        } else {
            code
        }
    };
    let instrs = program
        .instrs
        .iter()
        .map(|i| kernels_gpu::abi::EwInstr { a: remap(i.a), b: remap(i.b), ..*i })
        .collect();
    let extras = inputs.iter().copied().filter(|v| v != s).collect();
    Some((members, EwProgram { instrs, out_reg: remap(program.out_reg) }, extras, *s))
}

/// The attention ending at MatMul node `mm2`, if it matches and every operand is expressible.
fn match_at(c: &Ctx, programs: &Programs, mm2: usize) -> Option<Match> {
    let node = &c.g.nodes[mm2];
    let (Op::MatMul, [Some(pv), Some(vv)], Some(o2)) = (&node.op, node.inputs.as_slice(), node.output(0))
    else {
        return None;
    };
    let (pv, vv) = (*pv, *vv);
    if pv == vv || !c.private(pv, 1) {
        return None;
    }
    // The probabilities, through a NaN guard when there is one (absorbed: NaN rows become zeros).
    let (pv, guard) = match nan_guard(c, pv) {
        Some((p, nodes)) if p != vv => (p, Some(nodes)),
        _ => (pv, None),
    };
    let (sm, _) = c.defs[pv.index()]?;
    let Op::Softmax(a) = &c.g.nodes[sm].op else { return None };
    let x = c.g.nodes[sm].inputs.first().copied().flatten()?;
    let xd = c.f32_dims(x)?;
    if a.axis != -1 && a.axis != xd.len() as i64 - 1 {
        return None;
    }
    if !c.private(x, 1) {
        return None;
    }
    let (members, program, extras, s) = score_program(c, programs, x)?;
    let sd = c.f32_dims(s)?;
    if sd != xd {
        return None;
    }
    let (mm1, _) = c.defs[s.index()]?;
    let [Some(qa), Some(kb)] = c.g.nodes[mm1].inputs.as_slice() else { return None };
    // Scalar scales of Q and Kᵀ move into the score program, so Q and K are traced to the
    // projection they are views of.
    let (qa, q_scale, q_mul) = peel_scale(c, *qa);
    let (kb, k_scale, k_mul) = peel_scale(c, *kb);
    let (program, scales) = match (q_mul, k_mul) {
        (None, None) => (program, Vec::new()),
        _ => (scaled_program(&program, q_scale * k_scale)?, q_mul.into_iter().chain(k_mul).collect()),
    };
    let (qv, qn) = c.trace_back(qa)?;
    let (mut kv, kn) = c.trace_back(kb)?;
    let (vw, vn) = c.trace_back(vv)?;
    let od = c.f32_dims(o2)?;
    let (out, fwd, ov) = c.trace_forward(o2)?;
    // Kᵀ's last two dims, swapped back: K as [.., kv_len, dk].
    let r = kv.dims.len();
    if r < 2 {
        return None;
    }
    kv.dims.swap(r - 2, r - 1);
    kv.strides.swap(r - 2, r - 1);
    let ro = od.len();
    if !(2..=4).contains(&ro) || sd.len() != ro || sd[..ro - 2] != od[..ro - 2] {
        return None;
    }
    // K and V repeated over groups of query heads (grouped-query attention) are read per key
    // head: the kernel's `kv_group`. Both alike, along the head dim, and nothing else grouped.
    let kv_group = match (kv.group, vw.group) {
        (None, None) => 1,
        (Some((ka, g)), Some((va, h))) if ro == 4 && ka == 1 && va == 1 && g == h => g,
        _ => return None,
    };
    if qv.group.is_some() || ov.group.is_some() {
        return None;
    }
    let mut batch = [1usize; 2];
    batch[4 - ro..].copy_from_slice(&od[..ro - 2]);
    let (q_len, dv) = (od[ro - 2], od[ro - 1]);
    let (kv_len, dk) = (sd[ro - 1], *qv.dims.last()?);
    // Program inputs, broadcast against the scores.
    let mut extra = [AttnView::default(); EW_MAX_INPUTS - 1];
    for (slot, &e) in extras.iter().enumerate() {
        let ed = c.f32_dims(e)?;
        if ed.len() > sd.len() {
            return None;
        }
        let es = contiguous_u64(&ed);
        let mut dims = vec![1usize; sd.len() - ed.len()];
        dims.extend(&ed);
        let mut strides = vec![0u64; sd.len() - ed.len()];
        strides.extend(ed.iter().zip(&es).map(|(&d, &st)| if d == 1 { 0 } else { st }));
        if dims.iter().zip(&sd).any(|(&d, &want)| d != want && d != 1) {
            return None;
        }
        // Broadcast row / column dims read stride 0 in `attn_view`'s last two slots too.
        let view = View { base: e, offset: 0, dims: sd.clone(), strides, group: None };
        *extra.get_mut(slot)? = attn_view(&view, batch)?;
    }
    let fits = |n: usize| n > 0 && n <= u32::MAX as usize;
    let blocks = (batch[0] * batch[1]) as u64 * q_len.div_ceil(ATTN_ROWS as usize) as u64;
    if ![batch[0], batch[1], q_len, kv_len, dk, dv].into_iter().all(fits)
        || dv > ATTN_MAX_DV as usize
        || !attention_fits(dk as u32, dv as u32)
        || blocks > i32::MAX as u64
        || program.instrs.len() > EW_MAX_INSTRS
        || extras.len() >= EW_MAX_INPUTS
    {
        return None;
    }
    let mut instrs = [kernels_gpu::abi::EwInstr::default(); EW_MAX_INSTRS];
    instrs[..program.instrs.len()].copy_from_slice(&program.instrs);
    // A constant causal mask: the keys it hides need not be read.
    let hidden = extras
        .iter()
        .zip(1..)
        .find_map(|(&e, slot)| mask::hidden_keys_offset(c.g.constant(e)?, &program, slot, q_len, kv_len));
    let params = AttentionParams {
        batch: batch[0] as u32,
        heads: batch[1] as u32,
        q_len: q_len as u32,
        kv_len: kv_len as u32,
        dk: dk as u32,
        dv: dv as u32,
        kv_group: kv_group as u32,
        causal: if hidden.is_some() { ATTN_CAUSAL_SKIP } else { 0 }
            | if guard.is_some() { ATTN_NAN_ROWS_ZERO } else { 0 },
        causal_offset: hidden.unwrap_or(0),
        n_instr: program.instrs.len() as u32,
        n_inputs: 1 + extras.len() as u32,
        out_reg: program.out_reg,
        q: attn_view(&qv, batch)?,
        k: attn_view(&kv, batch)?,
        v: attn_view(&vw, batch)?,
        y: attn_view(&ov, batch)?,
        extra,
        instrs,
    };
    let anchor = fwd.last().copied().unwrap_or(mm2);
    let mut removed: Vec<usize> = members
        .iter()
        .copied()
        .chain([mm1, sm, mm2])
        .chain(guard.into_iter().flatten())
        .chain(scales)
        .chain(fwd)
        .collect();
    removed.retain(|&n| n != anchor);
    let mut inputs = vec![qv.base, kv.base, vw.base];
    inputs.extend(extras);
    let traced = qn.into_iter().chain(kn).chain(vn).collect();
    let out_dims = c.f32_dims(out)?;
    let program_value = programs.contains_key(&x).then_some(x);
    Some(Match { removed, anchor, inputs, traced, out, out_dims, params, program_value })
}

/// Attention fusion over `g` (see the module doc). Returns the graph, the epilogues and programs
/// re-keyed to its ids, and the fused attentions.
pub(super) fn fuse(
    g: Graph,
    infos: &[TensorInfo],
    epilogues: Vec<(NodeId, Activation, f32)>,
    programs: Programs,
) -> (Graph, Vec<(NodeId, Activation, f32)>, Programs, Attentions) {
    let readers = super::fuse::reader_counts(&g);
    let c = Ctx { g: &g, infos, defs: producers(&g), readers };
    let mut matches: Vec<Match> = Vec::new();
    let mut taken = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let Some(m) = match_at(&c, &programs, i) else { continue };
        let nodes = || m.removed.iter().chain([&m.anchor]);
        let has_epilogue = nodes().any(|&n| epilogues.iter().any(|(e, ..)| e.index() == n));
        if has_epilogue || nodes().any(|&n| taken[n]) {
            continue;
        }
        nodes().for_each(|&n| taken[n] = true);
        matches.push(m);
    }
    if matches.is_empty() {
        return (g, epilogues, programs, Attentions::new());
    }
    let mut readers = c.readers.clone();
    let mut out = g.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut programs = programs;
    let drop_node = |n: usize, readers: &mut Vec<usize>, removed: &mut Vec<bool>| {
        removed[n] = true;
        for u in g.nodes[n].uses() {
            readers[u.index()] -= 1;
        }
    };
    let mut anchors = Vec::new();
    for m in &matches {
        for &n in m.removed.iter().chain([&m.anchor]) {
            drop_node(n, &mut readers, &mut removed);
        }
        removed[m.anchor] = false;
        for v in &m.inputs {
            readers[v.index()] += 1;
        }
        let a = &mut out.nodes[m.anchor];
        a.op = Op::FusedAttention(FusedAttention { dims: m.out_dims.clone() });
        a.inputs = m.inputs.iter().map(|&v| Some(v)).collect();
        a.outputs = vec![Some(m.out)];
        if let Some(x) = m.program_value {
            programs.remove(&x);
        }
        anchors.push((m.anchor, m.params));
    }
    // Tracing nodes nothing reads any more (repeat: a Transpose may feed a Reshape).
    let traced: Vec<usize> = matches.iter().flat_map(|m| m.traced.iter().copied()).collect();
    loop {
        let dead = traced.iter().copied().find(|&n| {
            !removed[n]
                && g.nodes[n]
                    .outputs
                    .iter()
                    .flatten()
                    .all(|v| readers[v.index()] == 0 && !g.outputs.contains(v))
        });
        match dead {
            Some(n) => drop_node(n, &mut readers, &mut removed),
            None => break,
        }
    }
    let mut dead = vec![false; g.values.len()];
    for (n, node) in g.nodes.iter().enumerate() {
        if removed[n] {
            node.outputs.iter().flatten().for_each(|v| dead[v.index()] = true);
        }
    }
    // The anchors' own old outputs (their first output is now the fused output).
    for m in &matches {
        for v in g.nodes[m.anchor].outputs.iter().flatten() {
            dead[v.index()] |= *v != m.out;
        }
    }
    let new_node = remove_nodes(&mut out, &removed);
    let mut new_value = vec![None; g.values.len()];
    let mut next = 0u32;
    for (i, d) in dead.iter().enumerate() {
        if !d {
            new_value[i] = Some(ValueId(next));
            next += 1;
        }
    }
    let out = drop_values(out, &dead);
    let attentions = anchors
        .into_iter()
        .filter_map(|(a, p)| Some((out.nodes[new_node[a]?.index()].output(0)?, p)))
        .collect();
    let programs = programs.into_iter().filter_map(|(v, p)| Some((new_value[v.index()]?, p))).collect();
    let epilogues =
        epilogues.into_iter().filter_map(|(n, a, alpha)| Some((new_node[n.index()]?, a, alpha))).collect();
    (out, epilogues, programs, attentions)
}

/// The launch of fused attention node `id` with parameters `p`.
pub(super) fn lower(
    g: &Graph,
    id: NodeId,
    p: &AttentionParams,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Result<Vec<Step>, String> {
    let n = &g.nodes[id.index()];
    let out = n.output(0).ok_or("the fused attention's output is omitted")?;
    let ins: Vec<ValueId> = n.inputs.iter().copied().collect::<Option<_>>().ok_or("an omitted operand")?;
    super::lower::f32_only(values, &ins)?;
    let mut args: Vec<Arg> = ins[..3].iter().map(|&v| Arg::Value(v)).collect();
    for k in 3..3 + EW_MAX_INPUTS - 1 {
        args.push(ins.get(k).map_or(Arg::Null, |&v| Arg::Value(v)));
    }
    args.push(Arg::Value(out));
    launch(id, p, args, o)
}

/// The attention launch of node `id` with parameters `p` and the kernel's other arguments
/// `operands` (Q, K, V, the score program's three extra inputs, Y): `attention_flash_f32` where
/// [`flash_warps`] takes it (an option, off by default), else `attention_tc_f32` (a block per
/// batch, head and 16 query rows) where [`tensor_core_attention`] takes it, else
/// `attention_f32` (a block per batch, head and `ATTN_ROWS` query rows). Hidden keys are skipped
/// ([`ATTN_CAUSAL_SKIP`]) only with [`PlanOptions::skip_hidden_keys`].
pub(super) fn launch(
    id: NodeId,
    p: &AttentionParams,
    operands: Vec<Arg>,
    o: &PlanOptions,
) -> Result<Vec<Step>, String> {
    let mut p = *p;
    if !o.skip_hidden_keys {
        p.causal &= !ATTN_CAUSAL_SKIP;
    }
    let p = &p;
    let args: Vec<Arg> = [Arg::Params(bytes_of(p))].into_iter().chain(operands).collect();
    let (kernel, rows, threads, shared_bytes) = if let Some(warps) = flash_warps(p, o) {
        (KernelId::AttentionFlashF32, 16 * warps, 32 * warps, attention_flash_shared_bytes(p.dk, p.dv))
    } else if tensor_core_attention(p, o) {
        // Heads up to 16 take the entry that forms their scores from the head's k steps only.
        let small = attention_small_fits(p.dk, p.dv);
        let kernel = if small { KernelId::AttentionSmallF32 } else { KernelId::AttentionTcF32 };
        (kernel, ATTN_TC_ROWS, ATTN_TC_THREADS, attention_tc_shared_bytes(p.dv))
    } else {
        (KernelId::AttentionF32, ATTN_ROWS, ATTN_THREADS, attention_shared_bytes(p.dk, p.dv))
    };
    let blocks = p.batch as u64 * p.heads as u64 * p.q_len.div_ceil(rows) as u64;
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label: "Attention".into(),
        kernel,
        grid: [u32::try_from(blocks).map_err(|_| "too many query blocks")?, 1, 1],
        block: [threads, 1, 1],
        shared_bytes,
        args,
    }])
}

/// The warps per block of `attention_flash_f32` for attention with parameters `p` (16 query rows
/// each), when it takes the launch: the option is on ([`PlanOptions::flash_attention`], off by
/// default: slower where measured), both heads fit it, and the score program is
/// arithmetic only (a scale and an additive mask, as for `attention_tc_f32`). Four warps (64 rows
/// sharing each K and V tile) where those blocks fill the device, else the fewest rows per block
/// down to 16 that fill it (GPT-2 at batch 1: 4 heads at sequence 128, 32 blocks of one warp).
pub(super) fn flash_warps(p: &AttentionParams, o: &PlanOptions) -> Option<u32> {
    if !(o.tensor_core_attention
        && o.flash_attention
        && attention_flash_fits(p.dk, p.dv)
        && ew_arith_only(&p.instrs, p.n_instr as usize))
    {
        return None;
    }
    let blocks = |warps: u32| p.batch as u64 * p.heads as u64 * p.q_len.div_ceil(16 * warps) as u64;
    let warps = [ATTN_FLASH_MAX_WARPS, 2].into_iter().find(|&w| blocks(w) >= o.sm_count as u64).unwrap_or(1);
    Some(warps)
}

/// Whether attention with parameters `p` runs on the tensor cores: the option is on, the value
/// head fits `attention_tc_f32`, the score program is arithmetic only (a scale and an additive
/// mask; a softcap's tanh stays on the CUDA cores), and its grid of 16-row tiles fills at least
/// half the device. A block's warps then carry eight times `attention_f32`'s rows each, which
/// only pays when there are enough blocks. Measured on the H200 (132 SMs, GPT-2-style model, 4
/// heads of 64, one attention launch): sequence 128 (32 tensor-core blocks) 31.7 us against
/// 17.9 us on the CUDA cores, 512 (128 blocks) 79.0 against 119.4, 1024 (256 blocks) 162 against
/// 435.
pub(super) fn tensor_core_attention(p: &AttentionParams, o: &PlanOptions) -> bool {
    let blocks = p.batch as u64 * p.heads as u64 * p.q_len.div_ceil(ATTN_TC_ROWS) as u64;
    o.tensor_core_attention
        && attention_tc_fits(p.dk, p.dv)
        && ew_arith_only(&p.instrs, p.n_instr as usize)
        && 2 * blocks >= o.sm_count as u64
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
