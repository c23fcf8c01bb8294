//! Lowering of `WKV6` and SOFIE's `RWKV_WKV6`: one launch over the whole sequence, or spans of it
//! run in parallel where its `(batch, head)` blocks leave multiprocessors idle.

use super::*;

/// SOFIE `RWKV_WKV6` (`sofie`: `[B,H,T,N]`, bonus `exp(u)`, no state input) or `WKV6` (r, k, v, w,
/// u, initial_state?).
pub(super) fn wkv6(s: &SeqNode, layout: Wkv6Layout, sofie: bool) -> Lowered {
    let (r, rd) = s.input(0, "r")?;
    let (b, t, h, n) = bthn(&rd, layout).ok_or_else(|| format!("r has shape {rd:?}, expected 4-D"))?;
    if n == 0 || n > WKV_MAX_HEAD as usize {
        return Err(format!("head size N = {n}; the direct WKV kernel takes 1..={WKV_MAX_HEAD}"));
    }
    let n = n as u32;
    let (k, _) = s.input(1, "k")?;
    let (v, _) = s.input(2, "v")?;
    let (w, _) = s.input(3, "w")?;
    let (u, _) = s.input(4, "u")?;
    let state = s.state_args((!sofie).then_some(5))?;
    let len = u32_of(t, "T")?;
    let span = wkv_span(b, h, len, s.o);
    let mut p = Wkv6Params {
        batch: u32_of(b, "B")?,
        len,
        heads: u32_of(h, "H")?,
        head: n,
        layout_bhtn: (layout == Wkv6Layout::Bhtn) as u32,
        exp_bonus: sofie as u32,
        chunks: wkv_chunks(n),
        span,
        mode: WKV_WHOLE,
        _pad: 0,
    };
    let spans = wkv_spans(len, span) as u64;
    let shape =
        (capped_grid(s.o.sm_count, (b * h) as u64 * spans), [wkv_threads(n), 1, 1], wkv_shared_bytes(n));
    let operands: Vec<Arg> = [r, k, v, w, u].into_iter().map(Arg::Value).collect();
    let wkv = if n <= WKV_SMALL_HEAD { KernelId::Wkv6F32 } else { KernelId::Wkv6WideF32 };
    if spans == 1 {
        return Ok(s.step(wkv, &p, shape, operands, state));
    }
    // Spans in parallel: each span's state change from zero, the spans' first states chained,
    // then every span from its own (the pass writes the final state).
    let &[changes, starts] = s.scratch else {
        return Err(format!("a WKV in {spans} spans needs two scratch buffers"));
    };
    let v = Arg::Value;
    let [state_in, state_out, fin] = state;
    p.mode = WKV_SPAN_STATES;
    let mut first = operands.clone();
    first.extend([Arg::Null, Arg::Null, Arg::Output(changes), Arg::Null]);
    let states = s.launch(wkv, &p, shape, first);
    let pass = s.launch(
        KernelId::Wkv6PassF32,
        &p,
        s.threads_shape((b * h * n as usize * n as usize) as u64),
        vec![v(changes), state_in, state_out, fin, v(starts)],
    );
    p.mode = WKV_SPAN_OUTPUTS;
    let mut last = operands;
    last.extend([v(starts), Arg::Null, Arg::Null, v(s.out)]);
    Ok(vec![states, pass, s.launch(wkv, &p, shape, last)])
}

/// `(B, T, H, N)` of r's dims in `layout` (`None` unless 4-D).
fn bthn(dims: &[usize], layout: Wkv6Layout) -> Option<(usize, usize, usize, usize)> {
    match (dims, layout) {
        (&[b, t, h, n], Wkv6Layout::Bthn) | (&[b, h, t, n], Wkv6Layout::Bhtn) => Some((b, t, h, n)),
        _ => None,
    }
}

/// Fewest steps in a span of a WKV run in spans: the chain of spans (`wkv6_pass_f32`) is
/// sequential too, so spans much shorter than their number only move the wait there.
const WKV_MIN_SPAN: u32 = 32;

/// Steps per span of a WKV6 of `b` sequences of `len` steps over `h` heads (0: one span, the whole
/// sequence in one launch): where its `(b, head)` blocks leave multiprocessors idle and the
/// option allows, spans enough for about four blocks a multiprocessor, at least [`WKV_MIN_SPAN`]
/// steps each.
fn wkv_span(b: usize, h: usize, len: u32, o: &PlanOptions) -> u32 {
    let blocks = (b * h).max(1) as u64;
    let sms = o.sm_count.max(1) as u64;
    if !o.wkv_spans || blocks >= sms || len < 2 * WKV_MIN_SPAN {
        return 0;
    }
    let want = (4 * sms).div_ceil(blocks);
    let span = (len as u64).div_ceil(want).max(WKV_MIN_SPAN as u64) as u32;
    if wkv_spans(len, span) <= 1 { 0 } else { span }
}

/// Scratch of a WKV6 that runs in several spans: the spans' state changes with their decays, and
/// their first states (`[B, H, spans, N² + N]`, `[B, H, spans, N, N]` f32); none for one span.
pub(in crate::plan) fn wkv6_scratch(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Vec<PlannedValue> {
    let n = &g.nodes[id.index()];
    let layout = match &n.op {
        Op::Wkv6(a) => a.layout,
        Op::RwkvWkv6 => Wkv6Layout::Bhtn,
        _ => return Vec::new(),
    };
    let Ok(dims) = operand_dims(&n.op, &n.inputs, values, 0) else { return Vec::new() };
    let Some((b, t, h, head)) = bthn(&dims, layout) else { return Vec::new() };
    let (Ok(len), Ok(head)) = (u32::try_from(t), u32::try_from(head)) else { return Vec::new() };
    if head == 0 || head > WKV_MAX_HEAD {
        return Vec::new();
    }
    let spans = wkv_spans(len, wkv_span(b, h, len, o)) as usize;
    if spans <= 1 {
        return Vec::new();
    }
    let label = g.node_label(id);
    let value = |what: &str, elems: usize| f32_scratch(&label, what, elems);
    let entries = b * h * spans;
    vec![
        value("span-changes", entries * wkv_span_stride(head) as usize),
        value("span-starts", entries * (head * head) as usize),
    ]
}
