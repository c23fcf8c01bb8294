//! Lowering of `SSDScan`: the recurrent form (`ssd_scan_f32`) or, from `SSD_CHUNK` steps on, the
//! chunked matrix form (`ssd_chunk_f32`), in spans where its blocks leave multiprocessors idle.

use super::*;

/// `SSDScan`: inputs x, dt, A, Bm, Cm, D?, z?, dt_bias?, initial_state?.
pub(super) fn ssd_scan(s: &SeqNode, attrs: &SsdScan) -> Lowered {
    let (x, xd) = s.input(0, "x")?;
    let &[b, l, h, pd] = xd.as_slice() else {
        return Err(format!("x has shape {xd:?}, expected (B, L, H, P)"));
    };
    let (dt, _) = s.input(1, "dt")?;
    let (a, _) = s.input(2, "A")?;
    let (bm, bd) = s.input(3, "Bm")?;
    let (cm, _) = s.input(4, "Cm")?;
    let &[_, _, groups, n] = bd.as_slice() else {
        return Err(format!("Bm has shape {bd:?}, expected (B, L, G, N)"));
    };
    let n = state_limit(n)?;
    if groups == 0 || h % groups != 0 {
        return Err(format!("{groups} groups of B and C do not divide {h} heads"));
    }
    let (dskip, d_per_channel) = match s.ins.get(5).copied().flatten() {
        None => (Arg::Null, false),
        Some(v) => match s.dims_of(v, &[])? {
            dd if dd == [h] => (Arg::Value(v), false),
            dd if dd == [h * pd] => (Arg::Value(v), true),
            dd => return Err(format!("D has shape {dd:?}, expected ({h}) or ({})", h * pd)),
        },
    };
    let z = s.optional(6, "z", &xd)?;
    let bias = s.optional(7, "dt_bias", &[h])?;
    let state = s.state_args(Some(8))?;
    let lanes = scan_lanes(n);
    let scan = SsdScanParams {
        batch: u32_of(b, "B")?,
        len: u32_of(l, "L")?,
        heads: u32_of(h, "H")?,
        head_dim: u32_of(pd, "P")?,
        groups: u32_of(groups, "G")?,
        state: n,
        lanes,
        d_per_channel: d_per_channel as u32,
        dt_softplus: attrs.dt_softplus as u32,
        dt_min: attrs.dt_min.unwrap_or(f32::NEG_INFINITY),
        dt_max: attrs.dt_max.unwrap_or(f32::INFINITY),
        _pad: 0,
        rows: SsdRows {
            x: s.rows(0, h * pd)?,
            dt: s.rows(1, h)?,
            bm: s.rows(3, groups * n as usize)?,
            cm: s.rows(4, groups * n as usize)?,
            z: s.rows(6, h * pd)?,
        },
    };
    let operands = [x, dt, a, bm, cm].into_iter().map(Arg::Value).chain([dskip, z, bias.clone()]).collect();
    if l < SSD_CHUNK as usize || n > SSD_CHUNK_MAX_STATE {
        // Short sequences (decode steps) and the largest states: the recurrent form.
        return Ok(s.step(
            KernelId::SsdScanF32,
            &scan,
            s.scan_shape((b * h * pd) as u64, lanes),
            operands,
            state,
        ));
    }
    let Chunked { p_tile, items, span, spans } = ssd_chunked(b, l, h, pd, n, s.o);
    let state_pad = ssd_chunk_state_pad(n);
    let p = SsdChunkParams { scan, p_tile, state_pad, vector: (n % 4 == 0) as u32, span };
    let shape = (
        capped_grid(s.o.sm_count, items * spans),
        [SSD_CHUNK_THREADS, 1, 1],
        SsdChunkLayout::new(state_pad, p_tile).bytes(),
    );
    if spans == 1 {
        return Ok(s.step(KernelId::SsdChunkF32, &p, shape, operands, state));
    }
    // Spans in parallel: each span's state change from zero, the spans' first states chained,
    // then every span from its own (the pass writes the final state).
    let &[deltas, decays, starts] = s.scratch else {
        return Err(format!("a scan in {spans} spans needs three scratch buffers"));
    };
    let kernel = |kernel, shape, args| s.launch(kernel, &p, shape, args);
    let v = Arg::Value;
    let states = vec![v(x), v(dt), v(a), v(bm), bias, v(deltas), v(decays)];
    let [state_in, state_out, fin] = state;
    let mut full = operands;
    full.extend([v(starts), Arg::Null, Arg::Null, v(s.out)]);
    Ok(vec![
        kernel(KernelId::SsdChunkStatesF32, shape, states),
        kernel(
            KernelId::SsdChunkPassF32,
            s.threads_shape((b * h * pd) as u64 * n as u64),
            vec![v(deltas), v(decays), state_in, state_out, fin, v(starts)],
        ),
        kernel(KernelId::SsdChunkF32, shape, full),
    ])
}

/// How a chunked `SSDScan` runs: shared by the lowering and its scratch.
struct Chunked {
    /// `SsdChunkParams::p_tile`.
    p_tile: u32,
    /// Its `(b, h, tile)` blocks.
    items: u64,
    /// `SsdChunkParams::span`.
    span: u32,
    /// Spans of the sequence (1: the whole scan in one launch).
    spans: u64,
}

/// [`Chunked`] for `b` sequences of `l` steps, `h` heads of `pd` channels, state `n`.
fn ssd_chunked(b: usize, l: usize, h: usize, pd: usize, n: u32, o: &PlanOptions) -> Chunked {
    let p_tile = ssd_chunk_tile(b * h, pd, ssd_chunk_state_pad(n), o.sm_count);
    let items = (b * h * pd.div_ceil(p_tile as usize)) as u64;
    let chunks = l.div_ceil(SSD_CHUNK as usize) as u64;
    let span = if o.ssd_spans { ssd_chunk_span(items, chunks, o.sm_count) } else { chunks.max(1) as u32 };
    Chunked { p_tile, items, span, spans: ssd_chunk_spans(chunks, span) }
}

/// Scratch of an `SSDScan` that runs in several spans: the spans' state changes, their decays and
/// their first states (`[spans, B, H, P, N]`, `[spans, B, H]`, `[spans, B, H, P, N]` f32); none
/// for one span or the recurrent form.
pub(in crate::plan) fn ssd_scratch(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Vec<PlannedValue> {
    let n = &g.nodes[id.index()];
    let dims = |slot| operand_dims(&n.op, &n.inputs, values, slot).ok();
    let (Some(&[b, l, h, pd]), Some(&[_, _, _, state])) = (dims(0).as_deref(), dims(3).as_deref()) else {
        return Vec::new();
    };
    if l < SSD_CHUNK as usize || state > SSD_CHUNK_MAX_STATE as usize || state == 0 {
        return Vec::new();
    }
    let spans = ssd_chunked(b, l, h, pd, state as u32, o).spans as usize;
    if spans <= 1 {
        return Vec::new();
    }
    let label = g.node_label(id);
    let value = |what: &str, elems: usize| f32_scratch(&label, what, elems);
    let states = spans * b * h * pd * state;
    vec![value("span-deltas", states), value("span-decays", spans * b * h), value("span-starts", states)]
}

/// Head channels a block of `ssd_chunk_f32` owns, for `heads` `(b, h)` pairs of `head_dim`
/// channels: the smallest tile (`SSD_CHUNK_MIN_TILE`) unless a larger one still gives every multiprocessor a block;
/// then the largest such, within `SSD_CHUNK_MAX_TILE` and the head. Each block computes its
/// chunk's `C Bᵀ` whatever its tile, so small tiles spread a short batch over the device and
/// large tiles save that work where blocks are plenty.
fn ssd_chunk_tile(heads: usize, head_dim: usize, state_pad: u32, sm_count: u32) -> u32 {
    let blocks = |tile: u32| heads * head_dim.div_ceil(tile as usize);
    let mut tile = SSD_CHUNK_MIN_TILE;
    while tile < 8 * SSD_CHUNK_MIN_TILE
        && 2 * tile * state_pad <= SSD_CHUNK_MAX_TILE
        && (tile as usize) < head_dim
        && blocks(2 * tile) >= sm_count as usize
    {
        tile *= 2;
    }
    tile
}
