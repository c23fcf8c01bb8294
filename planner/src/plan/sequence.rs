//! Lowering of the sequence operators of OPS.md (SOFIE's `MambaScan`, `GriffinRGLRU`, `RWKV_WKV6`;
//! ferrofuse's `SelectiveScan`, `SSDScan`, `RGLRU`, `LinearScan`, `WKV6`, `CausalConvWithState`)
//! to the `sequence` kernels: parallel over batch, channels and heads; sequential over time but
//! for the linear scans (RG-LRU, `LinearScan`), which are chunked over time too, and `SSDScan`,
//! which from `SSD_CHUNK` steps on (and states up to `SSD_CHUNK_MAX_STATE`) runs in its chunked
//! matrix form (`ssd_chunk_f32`).
//!
//! State: every kernel takes three state pointers after its inputs, `state_in`, `state_out` and
//! `final_state` (see `kernels_gpu::abi::sequence`), then its output:
//! - by default they are the node's initial-state input (null: a zero state), null, and the node's
//!   final-state output as an [`Arg::Output`] (null when absent or unused);
//! - with [`PlanOptions::stateful`], a node that keeps state across calls reads and writes its
//!   persistent slot ([`Arg::State`], named after the node, declared in `Plan::states`) in place,
//!   and still writes its final-state output when it has one. Such a node must not also take an
//!   initial-state input (it would be ignored); that is reported as its reason for having no
//!   kernel. SOFIE's `MambaScan` restarts from zero at every call (SOFIE's semantics), so it never
//!   gets a slot; `GriffinRGLRU` and `RWKV_WKV6` keep theirs, as SOFIE does. A conv of width 1 has
//!   no state.
//!
//! Limits (each reported as the node's reason for having no kernel): f32 operands (a bool or f32
//! reset mask); state size N <= `SCAN_MAX_STATE` (selective and SSD scans), head size <=
//! `WKV_MAX_HEAD` (WKV), conv width <= `CONV_MAX_WIDTH`; every dim fits in u32.

use kernels_gpu::abi::{
    CONV_MAX_WIDTH, CONV_ROWS_MAX_WIDTH, CausalConvParams, CausalConvRowsParams, KernelId, Params,
    RESET_BOOL, RESET_F32, RESET_NONE, RglruParams, RowView, SCAN_MAX_STATE, SELECTIVE_CHUNKED_MAX_STATE,
    SEQUENCE_THREADS, SSD_CHUNK, SSD_CHUNK_MAX_STATE, SSD_CHUNK_MAX_TILE, SSD_CHUNK_MIN_TILE,
    SSD_CHUNK_THREADS, SelectiveScanParams, SsdChunkLayout, SsdChunkParams, SsdRows, SsdScanParams,
    WKV_MAX_HEAD, WKV_SMALL_HEAD, WKV_SPAN_OUTPUTS, WKV_SPAN_STATES, WKV_WHOLE, Wkv6Params,
    causal_conv_rows_steps, linear_scan_chunks, linear_scan_shared_bytes, scan_lanes, ssd_chunk_span,
    ssd_chunk_spans, ssd_chunk_state_pad, wkv_chunks, wkv_shared_bytes, wkv_span_stride, wkv_spans,
    wkv_threads,
};

use super::{Arg, PlanOptions, PlannedValue, StateSlot, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{CausalConvWithState, ConvActivation, Op, SelectiveScan, SsdScan, Wkv6Layout};
use crate::tensor_info::DType;

use ssd::ssd_scan;
pub(super) use ssd::ssd_scratch;
use wkv::wkv6;
pub(super) use wkv::wkv6_scratch;

type Lowered = Result<Vec<Step>, String>;

/// The state dims of a sequence node (its final-state shape), `None` for any other op.
fn state_dims(
    op: &Op,
    ins: &[Option<ValueId>],
    values: &[PlannedValue],
) -> Result<Option<Vec<usize>>, String> {
    let d = |slot: usize| operand_dims(op, ins, values, slot);
    let bad = |what: &str, dims: &[usize]| format!("{what} has shape {dims:?}");
    Ok(Some(match op {
        Op::MambaScan | Op::SelectiveScan(_) => match (d(0)?.as_slice(), d(2)?.as_slice()) {
            (&[b, dd, _], &[_, n]) => vec![b, dd, n],
            (u, _) => return Err(bad("u", u)),
        },
        Op::SsdScan(_) => match (d(0)?.as_slice(), d(3)?.as_slice()) {
            (&[b, _, h, p], &[_, _, _, n]) => vec![b, h, p, n],
            (x, _) => return Err(bad("x", x)),
        },
        Op::GriffinRglru | Op::Rglru | Op::LinearScan => match d(0)?.as_slice() {
            &[b, _, w] => vec![b, w],
            x => return Err(bad("x", x)),
        },
        Op::RwkvWkv6 | Op::Wkv6(_) => {
            let layout = if let Op::Wkv6(a) = op { a.layout } else { Wkv6Layout::Bhtn };
            match (d(0)?.as_slice(), layout) {
                (&[b, _, h, n], Wkv6Layout::Bthn) | (&[b, h, _, n], Wkv6Layout::Bhtn) => vec![b, h, n, n],
                (r, _) => return Err(bad("r", r)),
            }
        }
        Op::CausalConvWithState(a) => match (d(0)?.as_slice(), d(1)?.as_slice()) {
            (&[b, _, dd], &[_, k]) if k > 0 && a.channels_last => vec![b, dd, k - 1],
            (&[b, dd, _], &[_, k]) if k > 0 && !a.channels_last => vec![b, dd, k - 1],
            (x, _) => return Err(bad("x", x)),
        },
        _ => return Ok(None),
    }))
}

/// Dims of input `slot` of a node of `op` as the op reads it: through its column window, if it
/// has one (the input's leading dims, then the window's).
fn operand_dims(
    op: &Op,
    ins: &[Option<ValueId>],
    values: &[PlannedValue],
    slot: usize,
) -> Result<Vec<usize>, String> {
    let v = ins.get(slot).copied().flatten().ok_or_else(|| format!("input {slot} is missing"))?;
    let pv = &values[v.index()];
    let dims = pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))?;
    Ok(match op.input_windows().and_then(|w| w.get(slot)) {
        Some(w) => w.operand_dims(dims),
        None => dims.to_vec(),
    })
}

/// The persistent state slot of node `id` under `o`: `Some` only for stateful plans, for sequence
/// ops that keep state across calls (all but SOFIE's `MambaScan`), when the state is not empty.
pub(super) fn persistent_state(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Result<Option<StateSlot>, String> {
    let n = &g.nodes[id.index()];
    if !o.stateful || matches!(n.op, Op::MambaScan) {
        return Ok(None);
    }
    Ok(match state_dims(&n.op, &n.inputs, values)? {
        Some(dims) if !dims.contains(&0) => Some(StateSlot { name: g.node_label(id), dims }),
        _ => None,
    })
}

/// A sequence node being lowered, with its state placement decided.
struct SeqNode<'a> {
    id: NodeId,
    label: String,
    op: &'a Op,
    ins: &'a [Option<ValueId>],
    /// The node's scratch buffers (`lower::scratch`).
    scratch: &'a [ValueId],
    values: &'a [PlannedValue],
    o: &'a PlanOptions,
    /// The node's output y.
    out: ValueId,
    /// Its final-state output, when present and read by anything.
    final_state: Option<ValueId>,
    /// Its persistent slot (stateful plans).
    slot: Option<StateSlot>,
    /// Its state dims.
    state: Vec<usize>,
}

fn u32_of(v: usize, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} = {v} does not fit the kernels' u32 sizes"))
}

impl SeqNode<'_> {
    /// Dims of operand `v`, which must be f32 (or one of `also`).
    fn dims_of(&self, v: ValueId, also: &[DType]) -> Result<&[usize], String> {
        let pv = &self.values[v.index()];
        if pv.dtype != DType::F32 && !also.contains(&pv.dtype) {
            return Err(format!("`{}` is {}; the sequence kernels take f32 so far", pv.name, pv.dtype));
        }
        pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
    }

    /// Required input `slot`, f32, with its dims as the op reads it (through its column window,
    /// if it has one).
    fn input(&self, slot: usize, what: &str) -> Result<(ValueId, Vec<usize>), String> {
        let v = self.ins.get(slot).copied().flatten().ok_or_else(|| format!("input `{what}` is missing"))?;
        self.dims_of(v, &[])?;
        Ok((v, operand_dims(self.op, self.ins, self.values, slot)?))
    }

    /// Optional f32 input `slot` whose dims (as the op reads it) must be `want` (shape inference
    /// checked them already).
    fn optional(&self, slot: usize, what: &str, want: &[usize]) -> Result<Arg, String> {
        match self.ins.get(slot).copied().flatten() {
            None => Ok(Arg::Null),
            Some(v) => match self.input(slot, what)?.1 {
                d if d == want => Ok(Arg::Value(v)),
                d => Err(format!("`{what}` has shape {d:?}, expected {want:?}")),
            },
        }
    }

    /// Where the kernel reads input `slot`, `width` values a step: its column window's
    /// ([`RowView`] with the window's first column and the input's row), or dense.
    fn rows(&self, slot: usize, width: usize) -> Result<RowView, String> {
        let window = self.op.input_windows().and_then(|w| w.get(slot));
        let Some((w, v)) = window.zip(self.ins.get(slot).copied().flatten()) else {
            return Ok(RowView::dense(u32_of(width, "a step's values")?));
        };
        let row = self.dims_of(v, &[])?.last().copied().unwrap_or(0);
        Ok(RowView { offset: u32_of(w.start, "a window's column")?, row: u32_of(row, "a row")? })
    }

    /// Refuses column windows on inputs other than `slots` (kernels read only those through row
    /// views).
    fn windows_only_on(&self, slots: &[usize]) -> Result<(), String> {
        let windows = self.op.input_windows().map(|w| w.0.as_slice()).unwrap_or_default();
        match windows.iter().find(|(i, _)| !slots.contains(i)) {
            Some((i, _)) => {
                Err(format!("input {i} is read through a column window, which its kernel cannot do"))
            }
            None => Ok(()),
        }
    }

    /// `state_in`, `state_out`, `final_state` (module doc), with the initial state at input
    /// `init_slot` (`None` for SOFIE's ops, which have none).
    fn state_args(&self, init_slot: Option<usize>) -> Result<[Arg; 3], String> {
        let init = init_slot.and_then(|s| self.ins.get(s).copied().flatten());
        for v in init.into_iter().chain(self.final_state) {
            let d = self.dims_of(v, &[])?;
            if d != self.state.as_slice() {
                let name = &self.values[v.index()].name;
                return Err(format!("state `{name}` has shape {d:?}, expected {:?}", self.state));
            }
        }
        let fin = self.final_state.map_or(Arg::Null, Arg::Output);
        Ok(match (&self.slot, init) {
            (Some(_), Some(v)) => {
                return Err(format!(
                    "stateful mode keeps this node's state on the device, so its initial_state input \
                     `{}` would be ignored: drop the input or run without stateful mode",
                    self.values[v.index()].name
                ));
            }
            (Some(slot), None) => [Arg::State(slot.name.clone()), Arg::State(slot.name.clone()), fin],
            (None, init) => [init.map_or(Arg::Null, Arg::Value), Arg::Null, fin],
        })
    }

    /// The launch: `p`, the operands, the state pointers, then y.
    fn step(
        &self,
        kernel: KernelId,
        p: &impl Params,
        shape: ([u32; 3], [u32; 3], u32),
        operands: Vec<Arg>,
        state: [Arg; 3],
    ) -> Vec<Step> {
        let mut args = operands;
        args.extend(state);
        args.push(Arg::Value(self.out));
        vec![self.launch(kernel, p, shape, args)]
    }

    /// A launch of `kernel` with `p` and then `args` (the steps of a scan run in spans).
    fn launch(
        &self,
        kernel: KernelId,
        p: &impl Params,
        shape: ([u32; 3], [u32; 3], u32),
        args: Vec<Arg>,
    ) -> Step {
        let (grid, block, shared_bytes) = shape;
        Step::Kernel {
            nodes: vec![self.id],
            label: self.label.clone(),
            kernel,
            grid,
            block,
            shared_bytes,
            args: [Arg::Params(p.as_bytes().to_vec())].into_iter().chain(args).collect(),
        }
    }

    /// A grid of `SEQUENCE_THREADS`-thread blocks for `threads` threads (capped; the kernels
    /// grid-stride).
    fn threads_shape(&self, threads: u64) -> ([u32; 3], [u32; 3], u32) {
        let blocks = threads.div_ceil(SEQUENCE_THREADS as u64);
        (capped_grid(self.o.sm_count, blocks), [SEQUENCE_THREADS, 1, 1], 0)
    }

    /// The launch shape of a channel scan: `channels` channels, `lanes` lanes each.
    fn scan_shape(&self, channels: u64, lanes: u32) -> ([u32; 3], [u32; 3], u32) {
        let per_warp = (32 / lanes) as u64;
        self.threads_shape(channels.div_ceil(per_warp) * 32)
    }
}

/// Lowers sequence node `id`.
pub(super) fn lower(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    scratch: &[ValueId],
    o: &PlanOptions,
) -> Lowered {
    let n = &g.nodes[id.index()];
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    let used = |v: &ValueId| g.outputs.contains(v) || g.nodes.iter().any(|m| m.uses().contains(v));
    let s = SeqNode {
        id,
        label: n.op.name().to_string(),
        op: &n.op,
        ins: &n.inputs,
        scratch,
        values,
        o,
        out,
        final_state: n.output(1).filter(used),
        slot: persistent_state(g, id, values, o)?,
        state: state_dims(&n.op, &n.inputs, values)?.ok_or("not a sequence operator")?,
    };
    s.dims_of(out, &[])?;
    s.windows_only_on(n.op.windowable_inputs())?;
    match &n.op {
        Op::MambaScan => selective_scan(&s, None),
        Op::SelectiveScan(a) => selective_scan(&s, Some(a)),
        Op::SsdScan(a) => ssd_scan(&s, a),
        Op::GriffinRglru => rglru(&s, LinearScanKind::Griffin),
        Op::Rglru => rglru(&s, LinearScanKind::Rglru),
        Op::LinearScan => rglru(&s, LinearScanKind::Linear),
        Op::RwkvWkv6 => wkv6(&s, Wkv6Layout::Bhtn, true),
        Op::Wkv6(a) => wkv6(&s, a.layout, false),
        Op::CausalConvWithState(a) => causal_conv(&s, a),
        _ => Err("not a sequence operator".into()),
    }
}

fn state_limit(n: usize) -> Result<u32, String> {
    if n == 0 || n > SCAN_MAX_STATE as usize {
        return Err(format!(
            "state size N = {n}; the direct scan kernels hold 1..={SCAN_MAX_STATE} in registers"
        ));
    }
    Ok(n as u32)
}

/// SOFIE `MambaScan` (`attrs == None`: inputs u, delta, A, Bm, Cm, Dskip; zero state, no output
/// state) or `SelectiveScan` (inputs u, delta, A, Bm, Cm, D?, z?, delta_bias?, initial_state?).
fn selective_scan(s: &SeqNode, attrs: Option<&SelectiveScan>) -> Lowered {
    let (u, ud) = s.input(0, "u")?;
    let &[b, d, l] = ud.as_slice() else { return Err(format!("u has shape {ud:?}, expected (B, D, L)")) };
    let (delta, _) = s.input(1, "delta")?;
    let (a, ad) = s.input(2, "A")?;
    let n = state_limit(ad.get(1).copied().unwrap_or(0))?;
    let (bm, bd) = s.input(3, "Bm")?;
    let (cm, _) = s.input(4, "Cm")?;
    let groups = if bd.len() == 4 { bd[1] } else { 1 };
    if groups == 0 || d % groups != 0 {
        return Err(format!("{groups} groups of B and C do not divide {d} channels"));
    }
    let (dskip, z, bias, init) = match attrs {
        None => (Arg::Value(s.input(5, "Dskip")?.0), Arg::Null, Arg::Null, None),
        Some(_) => {
            (s.optional(5, "D", &[d])?, s.optional(6, "z", &ud)?, s.optional(7, "delta_bias", &[d])?, Some(8))
        }
    };
    let state = s.state_args(init)?;
    let lanes = scan_lanes(n);
    let len = u32_of(l, "L")?;
    let mut p = SelectiveScanParams {
        batch: u32_of(b, "B")?,
        channels: u32_of(d, "D")?,
        len,
        state: n,
        groups: u32_of(groups, "G")?,
        lanes,
        delta_softplus: attrs.is_some_and(|a| a.delta_softplus) as u32,
        chunks: 0,
    };
    let operands = [u, delta, a, bm, cm].into_iter().map(Arg::Value).chain([dskip, z, bias]).collect();
    if s.o.chunked_selective_scan && len > 1 && n <= SELECTIVE_CHUNKED_MAX_STATE {
        // Prefill: the steps of a window in parallel, a warp per time chunk.
        p.chunks = linear_scan_chunks(len);
        let tasks = ((b * d) as u64).div_ceil((32 / lanes) as u64);
        let shape =
            (capped_grid(s.o.sm_count, tasks), [32 * p.chunks, 1, 1], linear_scan_shared_bytes(p.chunks));
        return Ok(s.step(KernelId::SelectiveScanChunkedF32, &p, shape, operands, state));
    }
    Ok(s.step(KernelId::SelectiveScanF32, &p, s.scan_shape((b * d) as u64, lanes), operands, state))
}

/// A scratch buffer of node `label`: `elems` f32, named `label/what`.
fn f32_scratch(label: &str, what: &str, elems: usize) -> PlannedValue {
    PlannedValue { name: format!("{label}/{what}"), dtype: DType::F32, dims: Some(vec![elems]) }
}

/// The first-order linear scans `rglru_f32` computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LinearScanKind {
    /// SOFIE `GriffinRGLRU` (x, a): normalized, no reset, no initial state.
    Griffin,
    /// `RGLRU` (x, a, reset?, initial_state?): normalized.
    Rglru,
    /// `LinearScan` (x, a, initial_state?).
    Linear,
}

/// SOFIE `GriffinRGLRU`, `RGLRU` or `LinearScan` (see [`LinearScanKind`]).
fn rglru(s: &SeqNode, kind: LinearScanKind) -> Lowered {
    let (x, xd) = s.input(0, "x")?;
    let &[b, l, w] = xd.as_slice() else { return Err(format!("x has shape {xd:?}, expected (B, L, W)")) };
    let (a, _) = s.input(1, "a")?;
    let (reset, reset_kind) = match s.ins.get(2).copied().flatten().filter(|_| kind == LinearScanKind::Rglru)
    {
        None => (Arg::Null, RESET_NONE),
        Some(v) => {
            let dims = s.dims_of(v, &[DType::Bool])?;
            if dims != [b, l] {
                return Err(format!("reset has shape {dims:?}, expected ({b}, {l})"));
            }
            let k = if s.values[v.index()].dtype == DType::Bool { RESET_BOOL } else { RESET_F32 };
            (Arg::Value(v), k)
        }
    };
    let state = s.state_args(match kind {
        LinearScanKind::Griffin => None,
        LinearScanKind::Rglru => Some(3),
        LinearScanKind::Linear => Some(2),
    })?;
    let len = u32_of(l, "L")?;
    let chunks = linear_scan_chunks(len);
    let p = RglruParams {
        batch: u32_of(b, "B")?,
        len,
        width: u32_of(w, "W")?,
        reset: reset_kind,
        normalized: u32::from(kind != LinearScanKind::Linear),
        chunks,
    };
    let groups = ((b * w) as u64).div_ceil(32);
    let shape = (capped_grid(s.o.sm_count, groups), [32 * chunks, 1, 1], linear_scan_shared_bytes(chunks));
    let operands = vec![Arg::Value(x), Arg::Value(a), reset];
    Ok(s.step(KernelId::RglruF32, &p, shape, operands, state))
}

/// `CausalConvWithState`: x, weight, bias?, initial_state?; channels-first on `causal_conv_f32`
/// (a block per channel), channels-last on `causal_conv_rows_f32` (a thread per channel and run of
/// steps, x through its row view).
fn causal_conv(s: &SeqNode, attrs: &CausalConvWithState) -> Lowered {
    let (x, xd) = s.input(0, "x")?;
    let (b, d, l) = match (xd.as_slice(), attrs.channels_last) {
        (&[b, d, l], false) => (b, d, l),
        (&[b, l, d], true) => (b, d, l),
        _ => return Err(format!("x has shape {xd:?}, expected 3-D")),
    };
    let (weight, wd) = s.input(1, "weight")?;
    let k = wd.get(1).copied().unwrap_or(0);
    let most = if attrs.channels_last { CONV_ROWS_MAX_WIDTH } else { CONV_MAX_WIDTH };
    if k == 0 || k > most as usize {
        return Err(format!("conv width K = {k}; the direct conv kernel takes 1..={most}"));
    }
    let bias = s.optional(2, "bias", &[d])?;
    let state = s.state_args(Some(3))?;
    let (batch, channels, len) = (u32_of(b, "B")?, u32_of(d, "D")?, u32_of(l, "L")?);
    let (width, silu) = (k as u32, (attrs.activation == ConvActivation::Silu) as u32);
    let operands = vec![Arg::Value(x), Arg::Value(weight), bias];
    if attrs.channels_last {
        let steps = causal_conv_rows_steps((b * d) as u64, l as u64, s.o.sm_count);
        let p = CausalConvRowsParams { batch, channels, len, width, silu, steps, x: s.rows(0, d)? };
        let threads = (b * d) as u64 * (l as u64).div_ceil(steps as u64);
        return Ok(s.step(KernelId::CausalConvRowsF32, &p, s.threads_shape(threads), operands, state));
    }
    let p = CausalConvParams { batch, channels, len, width, silu, _pad: 0 };
    // A block per channel, its threads over the time steps (at least the carried window's).
    let block = (l.div_ceil(32) * 32).clamp(32, SEQUENCE_THREADS as usize) as u32;
    let shape = (capped_grid(s.o.sm_count, (b * d) as u64), [block, 1, 1], 0);
    Ok(s.step(KernelId::CausalConvF32, &p, shape, operands, state))
}

mod ssd;
mod wkv;

#[cfg(test)]
#[path = "sequence_tests.rs"]
mod tests;
