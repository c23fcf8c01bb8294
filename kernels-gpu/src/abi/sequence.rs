//! Sequence (state-space and linear-recurrence) kernels: Mamba-1 selective scan, Mamba-2 SSD scan,
//! RG-LRU, RWKV-6 WKV and the causal depthwise conv with a carried window (OPS.md).
//!
//! Every sequence kernel takes, after its inputs, the same three state pointers and then its output:
//! `state_in` (read once at the start; null means a zero state), `state_out` and `final_state`
//! (each written once at the end when non-null). `state_in` may equal `state_out` (a persistent
//! state updated in place): every state element is read and written by the one thread that owns it.
//! States are f32 and laid out as the reference's final-state outputs.

use super::Params;

/// Threads per block of the channel-scan kernels (`selective_scan_f32`, `ssd_scan_f32`,
/// `causal_conv_f32`); a multiple of the warp size.
pub const SEQUENCE_THREADS: u32 = 256;

/// State elements one lane holds in registers in the channel scans (`selective_scan_f32`,
/// `ssd_scan_f32`): with up to 32 lanes per channel, the state size N is at most
/// `32 * SCAN_MAX_SLOTS`.
pub const SCAN_MAX_SLOTS: u32 = 8;

/// Largest state size N (`d_state`) of the channel scans.
pub const SCAN_MAX_STATE: u32 = 32 * SCAN_MAX_SLOTS;

/// Largest state size N of `selective_scan_chunked_f32` (a lane per state element).
pub const SELECTIVE_CHUNKED_MAX_STATE: u32 = 32;

/// Lanes that share one channel of a channel scan with state size `n` (`1 <= n <= SCAN_MAX_STATE`):
/// the smallest power of two at least `n`, at most a warp. Each lane then holds
/// `ceil(n / lanes) <= SCAN_MAX_SLOTS` state elements, and a warp serves `32 / lanes` channels.
pub const fn scan_lanes(n: u32) -> u32 {
    if n >= 32 { 32 } else { n.next_power_of_two() }
}

/// Most time chunks (warps) of a `rglru_f32` or `selective_scan_chunked_f32` block: a block covers
/// 32 channels (state elements) and a window of `chunks * SCAN_MAX_SLOTS` steps.
pub const SCAN_MAX_CHUNKS: u32 = 16;

/// Time chunks of a `rglru_f32` block for a sequence of `len` steps: one per `SCAN_MAX_SLOTS`
/// steps, `1..=SCAN_MAX_CHUNKS`.
pub const fn linear_scan_chunks(len: u32) -> u32 {
    let c = len.div_ceil(SCAN_MAX_SLOTS);
    if c == 0 {
        1
    } else if c > SCAN_MAX_CHUNKS {
        SCAN_MAX_CHUNKS
    } else {
        c
    }
}

/// Dynamic shared memory of a `rglru_f32` block of `chunks` time chunks: each chunk's product and
/// end value for 32 channels (f32).
pub const fn linear_scan_shared_bytes(chunks: u32) -> u32 {
    2 * chunks * 32 * 4
}

/// Rows of the WKV state one thread holds in registers (`wkv6_f32`).
pub const WKV_ROWS: u32 = 32;

/// Largest WKV head size N (`wkv6_wide_f32`): a block of `ceil(N / WKV_ROWS) * N <= 512` threads,
/// its launch bounds holding a thread to 128 registers.
pub const WKV_MAX_HEAD: u32 = 128;

/// Largest head size of `wkv6_f32` (blocks of at most 128 threads); larger heads run
/// `wkv6_wide_f32`, whose blocks of up to 512 threads leave a thread 128 registers.
pub const WKV_SMALL_HEAD: u32 = 64;

/// Row chunks of a WKV block for head size `n`: thread `c * n + j` owns rows
/// `c * WKV_ROWS .. (c + 1) * WKV_ROWS` of column `j` of the state.
pub const fn wkv_chunks(n: u32) -> u32 {
    n.div_ceil(WKV_ROWS)
}

/// Threads of a WKV block for head size `n`: the `wkv_chunks(n) * n` state owners rounded up to a
/// whole warp.
pub const fn wkv_threads(n: u32) -> u32 {
    (wkv_chunks(n) * n).next_multiple_of(32)
}

/// Dynamic shared memory of a WKV block for head size `n`: r, k, decay and bonus of one step
/// (`4 n` f32) and one partial output per state owner (`wkv_chunks(n) * n` f32).
pub const fn wkv_shared_bytes(n: u32) -> u32 {
    (4 * n + wkv_chunks(n) * n) * 4
}

/// Largest conv width K of `causal_conv_f32` (the window of the last K - 1 inputs is held in
/// registers).
pub const CONV_MAX_WIDTH: u32 = 16;

/// Largest conv width K of `causal_conv_rows_f32` (a thread keeps the window and the taps in
/// registers; wider convs run channels-first on `causal_conv_f32`).
pub const CONV_ROWS_MAX_WIDTH: u32 = 8;

/// Parameters of `sequence::selective_scan_f32` (ferrofuse `SelectiveScan`, SOFIE `MambaScan`).
///
/// u, delta, z and the output are `(batch, channels, len)`; A is `(channels, state)`; Bm and Cm
/// are `(batch, groups, state, len)` (a `(batch, state, len)` tensor is `groups == 1`), channel d
/// reading group `d / (channels / groups)`; D and delta_bias are `(channels)`; the state is
/// `(batch, channels, state)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SelectiveScanParams {
    /// B.
    pub batch: u32,
    /// D (channels); a multiple of `groups`.
    pub channels: u32,
    /// L (time steps).
    pub len: u32,
    /// N (state size per channel), `1..=SCAN_MAX_STATE`.
    pub state: u32,
    /// G (groups of B and C), at least 1.
    pub groups: u32,
    /// Lanes per channel: [`scan_lanes`]`(state)`.
    pub lanes: u32,
    /// 1: `delta <- softplus(delta + delta_bias)`; 0: `delta + delta_bias`.
    pub delta_softplus: u32,
    /// `selective_scan_chunked_f32`: time chunks (warps) per block, `1..=SCAN_MAX_CHUNKS`
    /// ([`linear_scan_chunks`]`(len)`); 0 for `selective_scan_f32`, which ignores it.
    pub chunks: u32,
}

/// Where a sequence kernel reads an operand's steps: the values of step `t` of sequence `b` start
/// at element `offset + (b * len + t) * row`. A dense operand has offset 0 and `row` its own
/// width; a window of a wider tensor's columns (a part of a last-axis Split read where it lies)
/// has the window's first column as offset and the wider tensor's width as `row`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowView {
    /// Element offset of step 0 of sequence 0.
    pub offset: u32,
    /// Elements from one step to the next.
    pub row: u32,
}

impl RowView {
    /// An operand of `width` values a step, stored densely.
    pub const fn dense(width: u32) -> Self {
        Self { offset: 0, row: width }
    }
}

/// Where `sequence::ssd_scan_f32` and `ssd_chunk_f32` read their per-step operands ([`RowView`]s
/// over x's `heads * head_dim`, dt's `heads`, B's and C's `groups * state` and z's
/// `heads * head_dim` values a step).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SsdRows {
    /// x.
    pub x: RowView,
    /// dt.
    pub dt: RowView,
    /// Bm.
    pub bm: RowView,
    /// Cm.
    pub cm: RowView,
    /// z (ignored when z is null).
    pub z: RowView,
}

impl SsdRows {
    /// Every operand dense, for `heads` heads of `head_dim` and `groups` groups of `state`.
    pub const fn dense(heads: u32, head_dim: u32, groups: u32, state: u32) -> Self {
        let (x, bc) = (RowView::dense(heads * head_dim), RowView::dense(groups * state));
        Self { x, dt: RowView::dense(heads), bm: bc, cm: bc, z: x }
    }
}

/// Parameters of `sequence::ssd_scan_f32` (ferrofuse `SSDScan`, recurrent form).
///
/// x, z and the output are `(batch, len, heads, head_dim)`; dt is `(batch, len, heads)`; A and
/// dt_bias are `(heads)`; Bm and Cm are `(batch, len, groups, state)`, head h reading group
/// `h / (heads / groups)`; D is `(heads)` or, with `d_per_channel`, `(heads * head_dim)`; the
/// state is `(batch, heads, head_dim, state)`. x, dt, Bm, Cm and z are read through `rows` (each
/// may be a window of a wider tensor's columns); the output is dense.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SsdScanParams {
    /// B.
    pub batch: u32,
    /// L (time steps).
    pub len: u32,
    /// H (heads); a multiple of `groups`.
    pub heads: u32,
    /// P (head dim).
    pub head_dim: u32,
    /// G (groups of B and C), at least 1.
    pub groups: u32,
    /// N (state size), `1..=SCAN_MAX_STATE`.
    pub state: u32,
    /// Lanes per state row: [`scan_lanes`]`(state)`.
    pub lanes: u32,
    /// 1: D has one value per channel `(heads * head_dim)`; 0: one per head.
    pub d_per_channel: u32,
    /// 1: `dt <- softplus(dt + dt_bias)`; 0: `dt + dt_bias`.
    pub dt_softplus: u32,
    /// Lower clamp of dt (after softplus); `-inf` for none.
    pub dt_min: f32,
    /// Upper clamp of dt; `+inf` for none.
    pub dt_max: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Where x, dt, Bm, Cm and z are read.
    pub rows: SsdRows,
}

/// Time steps of one chunk of `sequence::ssd_chunk_f32` (a warp's lanes: the chunk's cumulative
/// decay is one warp scan).
pub const SSD_CHUNK: u32 = 32;

/// Threads per block of `sequence::ssd_chunk_f32` (a 16 × 8 grid of threads over each product's
/// output tile).
pub const SSD_CHUNK_THREADS: u32 = 128;

/// Largest state size N `sequence::ssd_chunk_f32` takes (larger states run on `ssd_scan_f32`).
pub const SSD_CHUNK_MAX_STATE: u32 = 128;

/// Largest `p_tile * state_pad` of `sequence::ssd_chunk_f32`: the state tile a block keeps in
/// shared memory (twice) and updates, 16 values a thread.
pub const SSD_CHUNK_MAX_TILE: u32 = 2048;

/// Smallest `p_tile` of `sequence::ssd_chunk_f32` (a block owns at least this many head channels
/// of one `(b, h)`; the tiles are it times 1, 2, 4 or 8).
pub const SSD_CHUNK_MIN_TILE: u32 = 8;

/// N padded for `sequence::ssd_chunk_f32`: a multiple of 32 (two 16-row passes of its thread grid).
pub const fn ssd_chunk_state_pad(n: u32) -> u32 {
    n.div_ceil(32) * 32
}

/// Parameters of `sequence::ssd_chunk_f32`: the SSD scan of [`SsdScanParams`] (its `lanes`
/// unused), computed `SSD_CHUNK` steps at a time in the chunked (matrix) form; a block owns the
/// state rows `p_tile` head channels of one `(b, h)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SsdChunkParams {
    /// Shapes, dt's transform, D's kind: as for `ssd_scan_f32`.
    pub scan: SsdScanParams,
    /// Head channels a block owns: 8, 16, 32 or 64, with `p_tile * state_pad <=
    /// SSD_CHUNK_MAX_TILE`.
    pub p_tile: u32,
    /// [`ssd_chunk_state_pad`]`(state)`, at most [`SSD_CHUNK_MAX_STATE`].
    pub state_pad: u32,
    /// 1: N is a multiple of 4, so B and C are read 16 bytes at a time where both are 16-byte
    /// aligned.
    pub vector: u32,
    /// Chunks of a span, at least 1: the sequence's `ceil(len / SSD_CHUNK)` chunks fall into
    /// `spans = ceil(chunks / span)` spans a block each ([`ssd_chunk_spans`]). With one span the
    /// launch is the whole scan; with more, `ssd_chunk_states_f32` computes each span's state
    /// change from zero, `ssd_chunk_pass_f32` chains them into each span's first state, and
    /// `ssd_chunk_f32` runs every span from its own.
    pub span: u32,
}

/// Chunks of a span of `sequence::ssd_chunk_f32` for `items` `(b, h, tile)` blocks of a
/// sequence of `chunks` chunks on `sm_count` multiprocessors: all of them (one span) where the
/// items give every multiprocessor a block; else the fewest spans that give it four (spans run
/// in parallel; each costs a state pass and the state-only walk of its chunks first). Measured
/// on the H200 (Mamba2, 8 heads of 64, session 41): spans at 64 items (batch 1) 346 → 296 µs at
/// 256 steps, 1958 (unlifted) → 1172 at 2048; at 512 items (batch 8) they cost 771 → 1054.
pub const fn ssd_chunk_span(items: u64, chunks: u64, sm_count: u32) -> u32 {
    let want = 4 * sm_count as u64;
    if chunks <= 1 || items == 0 || items >= sm_count as u64 {
        return if chunks == 0 { 1 } else { chunks as u32 };
    }
    let spans = want.div_ceil(items);
    let spans = if spans < chunks { spans } else { chunks };
    chunks.div_ceil(spans) as u32
}

/// Spans of a sequence of `chunks` chunks in spans of `span`.
pub const fn ssd_chunk_spans(chunks: u64, span: u32) -> u64 {
    if span == 0 { 0 } else { chunks.div_ceil(span as u64) }
}

/// Where `sequence::ssd_chunk_f32` keeps each array in its dynamic shared memory (f32 offsets,
/// each a multiple of 4, so every row starts 16-byte aligned). Rows over the state are
/// `state_pad + 4` apart and rows over the chunk's steps `SSD_CHUNK + 4`: a row stride of 4 banks
/// mod 32, so eight threads reading eight neighbouring rows 16 bytes each never conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsdChunkLayout {
    /// Row stride of rows over the state.
    pub sn: u32,
    /// Row stride of rows over the chunk's steps.
    pub qs: u32,
    /// B, two buffers `[SSD_CHUNK][sn]` (the next chunk's lands while this one is used).
    pub b: u32,
    /// C, two buffers `[SSD_CHUNK][sn]`.
    pub c: u32,
    /// x transposed, two buffers `[p_tile][qs]`.
    pub xt: u32,
    /// The state, two buffers `[p_tile][sn]` (read from one, the next written to the other).
    pub s: u32,
    /// The chunk's masked, decayed `C Bᵀ`, `[SSD_CHUNK][qs]`.
    pub g: u32,
    /// B transposed and weighted by each step's decay to the chunk's end, `[state_pad][qs]`.
    pub bw: u32,
    /// dt as read, two buffers `[SSD_CHUNK]`.
    pub dt_raw: u32,
    /// dt transformed, its cumulative `dt A`, `exp` of that, the steps' weights `[SSD_CHUNK]` each.
    pub dt: u32,
    /// Cumulative `dt A` over the chunk.
    pub cum: u32,
    /// `exp(cum)`.
    pub ecum: u32,
    /// `exp(cum[last] - cum[t]) dt[t]`.
    pub w: u32,
    /// Total f32 values.
    pub floats: u32,
}

impl SsdChunkLayout {
    /// The layout for `state_pad` and `p_tile`.
    pub const fn new(state_pad: u32, p_tile: u32) -> Self {
        let (q, sn, qs) = (SSD_CHUNK, state_pad + 4, SSD_CHUNK + 4);
        let b = 0;
        let c = b + 2 * q * sn;
        let xt = c + 2 * q * sn;
        let s = xt + 2 * p_tile * qs;
        let g = s + 2 * p_tile * sn;
        let bw = g + q * qs;
        let dt_raw = bw + state_pad * qs;
        let dt = dt_raw + 2 * q;
        let (cum, ecum, w) = (dt + q, dt + 2 * q, dt + 3 * q);
        Self { sn, qs, b, c, xt, s, g, bw, dt_raw, dt, cum, ecum, w, floats: w + q }
    }

    /// Dynamic shared memory bytes.
    pub const fn bytes(self) -> u32 {
        4 * self.floats
    }
}

/// The most dynamic shared memory any launch of `sequence::ssd_chunk_f32` takes: the largest
/// layout over every padded state and tile its contract allows.
pub const SSD_CHUNK_MAX_SHARED: u32 = {
    let mut most = 0;
    let mut pad = 32;
    while pad <= SSD_CHUNK_MAX_STATE {
        let mut tile = SSD_CHUNK_MIN_TILE;
        while tile <= 8 * SSD_CHUNK_MIN_TILE && tile * pad <= SSD_CHUNK_MAX_TILE {
            let bytes = SsdChunkLayout::new(pad, tile).bytes();
            if bytes > most {
                most = bytes;
            }
            tile *= 2;
        }
        pad += 32;
    }
    most
};

/// `RglruParams::reset`: no reset mask.
pub const RESET_NONE: u32 = 0;
/// `RglruParams::reset`: an f32 mask, nonzero = reset.
pub const RESET_F32: u32 = 1;
/// `RglruParams::reset`: a bool mask (one byte per element, nonzero = reset).
pub const RESET_BOOL: u32 = 2;

/// Parameters of `sequence::rglru_f32` (ferrofuse `RGLRU` and `LinearScan`, SOFIE `GriffinRGLRU`).
///
/// x, a and the output are `(batch, len, width)`; the reset mask is `(batch, len)`; the state is
/// `(batch, width)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RglruParams {
    /// B.
    pub batch: u32,
    /// L (time steps).
    pub len: u32,
    /// W (channels).
    pub width: u32,
    /// Reset mask kind: [`RESET_NONE`], [`RESET_F32`] or [`RESET_BOOL`].
    pub reset: u32,
    /// 1: the RG-LRU's `sqrt(1 - a²)` input scale; 0: a plain linear scan (`LinearScan`).
    pub normalized: u32,
    /// Time chunks (warps) per block, `1..=SCAN_MAX_CHUNKS`: [`linear_scan_chunks`]`(len)`.
    pub chunks: u32,
}

/// Parameters of `sequence::wkv6_f32` (ferrofuse `WKV6`, SOFIE `RWKV_WKV6`).
///
/// r, k, v, w and the output are `(batch, len, heads, head)` or, with `layout_bhtn`,
/// `(batch, heads, len, head)`; u is `(heads, head)`; the state is `(batch, heads, head, head)`
/// indexed [key i, value j].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wkv6Params {
    /// B.
    pub batch: u32,
    /// T (time steps).
    pub len: u32,
    /// H (heads).
    pub heads: u32,
    /// N (head size), `1..=WKV_MAX_HEAD`.
    pub head: u32,
    /// 1: `[B, H, T, N]`; 0: `[B, T, H, N]`.
    pub layout_bhtn: u32,
    /// 1: the bonus is `exp(u)` (SOFIE); 0: `u` (RWKV-6).
    pub exp_bonus: u32,
    /// Row chunks per column: [`wkv_chunks`]`(head)`.
    pub chunks: u32,
    /// Steps per span of the sequence (0: the whole sequence, one span); the sequence runs in
    /// `ceil(len / span)` spans, a block per `(b, head, span)`.
    pub span: u32,
    /// What a launch does: [`WKV_WHOLE`], [`WKV_SPAN_STATES`] or [`WKV_SPAN_OUTPUTS`].
    pub mode: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// `wkv6_f32` over whole sequences: from `state_in`, y and the final states written.
pub const WKV_WHOLE: u32 = 0;

/// `wkv6_f32` over spans, first pass: each span from a zero state, no y; `final_state` is the
/// spans' scratch ([`wkv_span_stride`] f32 a `(b, head, span)`: the state change `head × head`,
/// then the decay product of each key over the span).
pub const WKV_SPAN_STATES: u32 = 1;

/// `wkv6_f32` over spans, last pass: each span from its first state (`state_in`, `head × head`
/// f32 a `(b, head, span)`, as `wkv6_pass_f32` writes them), y written, no states.
pub const WKV_SPAN_OUTPUTS: u32 = 2;

/// Spans of a sequence of `len` steps in spans of `span` (0: one).
pub const fn wkv_spans(len: u32, span: u32) -> u32 {
    if span == 0 || len == 0 { 1 } else { len.div_ceil(span) }
}

/// f32 of a span's entry in the [`WKV_SPAN_STATES`] scratch: its state change and its decays.
pub const fn wkv_span_stride(head: u32) -> u32 {
    head * head + head
}

/// Parameters of `sequence::causal_conv_f32` (ferrofuse `CausalConvWithState`).
///
/// x and the output are `(batch, channels, len)`; the weight is `(channels, width)`; the bias is
/// `(channels)`; the state is `(batch, channels, width - 1)`, oldest input first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CausalConvParams {
    /// B.
    pub batch: u32,
    /// D (channels).
    pub channels: u32,
    /// L (time steps).
    pub len: u32,
    /// K (conv width), `1..=CONV_MAX_WIDTH`.
    pub width: u32,
    /// 1: `y <- silu(y)`; 0: no activation.
    pub silu: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Parameters of `sequence::causal_conv_rows_f32` (ferrofuse `CausalConvWithState` in the
/// channels-last layout).
///
/// x is read through `x` ([`RowView`] over `channels` values a step: a window of a wider tensor's
/// columns, or dense); the output is `(batch, len, channels)`, dense; the weight is
/// `(channels, width)`; the bias is `(channels)`; the state is `(batch, channels, width - 1)`,
/// oldest input first (the layout of `causal_conv_f32`'s).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CausalConvRowsParams {
    /// B.
    pub batch: u32,
    /// D (channels).
    pub channels: u32,
    /// L (time steps).
    pub len: u32,
    /// K (conv width), `1..=CONV_ROWS_MAX_WIDTH`.
    pub width: u32,
    /// 1: `y <- silu(y)`; 0: no activation.
    pub silu: u32,
    /// Consecutive time steps a thread computes, at least 1: [`causal_conv_rows_steps`].
    pub steps: u32,
    /// Where x is read.
    pub x: RowView,
}

/// Time steps a thread of `causal_conv_rows_f32` computes for `batch * channels` channels of
/// `len` steps on `sm_count` multiprocessors: the most, from 64 down to 4, that still give every
/// multiprocessor two blocks of `SEQUENCE_THREADS` (each thread rereads the `width - 1` inputs
/// before its first step, so longer runs read less).
pub const fn causal_conv_rows_steps(channels: u64, len: u64, sm_count: u32) -> u32 {
    let mut steps = 64u32;
    while steps > 4 {
        let threads = channels * len.div_ceil(steps as u64);
        if threads >= 2 * sm_count as u64 * SEQUENCE_THREADS as u64 {
            break;
        }
        steps /= 2;
    }
    steps
}

// SAFETY: #[repr(C)], eight u32 (the last an explicit `_pad`).
unsafe impl Params for SelectiveScanParams {}
// SAFETY: #[repr(C)], nine u32, two f32, one u32 `_pad`, then ten u32: 88 bytes, no padding.
unsafe impl Params for SsdScanParams {}
// SAFETY: #[repr(C)], SsdScanParams (88 bytes, no padding) then four u32: 104 bytes.
unsafe impl Params for SsdChunkParams {}
// SAFETY: #[repr(C)], six u32.
unsafe impl Params for RglruParams {}
// SAFETY: #[repr(C)], eight u32 (the last an explicit `_pad`).
unsafe impl Params for Wkv6Params {}
// SAFETY: #[repr(C)], six u32 (the last an explicit `_pad`).
unsafe impl Params for CausalConvParams {}
// SAFETY: #[repr(C)], six u32 then a RowView (two u32): 32 bytes, no padding.
unsafe impl Params for CausalConvRowsParams {}

/// Parameters of `linear_attention::linear_attention_f32` (ONNX LinearAttention, opset 27): query
/// `(batch, len, q_heads * dk)`, key `(batch, len, kv_heads * dk)`, value and the output's per-head
/// columns `(batch, len, kv_heads * dv)` / `(batch, len, q_heads * dv)`; the state
/// `(batch, kv_heads, dk, dv)`. Per step: `S <- exp(g) S` (gated; `decay_width` kv_heads: one
/// gate per head, kv_heads * dk: one per key row), `v <- beta (v - S^T k)` (delta; `beta_width`
/// kv_heads or 1), `S <- S + k v^T`, then each query head of the group reads `scale * S^T q`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinearAttentionParams {
    /// Batch.
    pub batch: u32,
    /// Time steps.
    pub len: u32,
    /// Query heads (a multiple of `kv_heads`).
    pub q_heads: u32,
    /// Key / value heads.
    pub kv_heads: u32,
    /// Key head size.
    pub dk: u32,
    /// Value head size.
    pub dv: u32,
    /// Gates per (batch, step) row: 0 (not gated), `kv_heads` or `kv_heads * dk`.
    pub decay_width: u32,
    /// Betas per (batch, step) row: 0 (no delta rule), 1 or `kv_heads`.
    pub beta_width: u32,
    /// Output scale.
    pub scale: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], nine u32 and an f32 (the last field explicit padding): no padding.
unsafe impl Params for LinearAttentionParams {}

/// Operands (inputs) of a `scan_program_f32` launch.
pub const SCAN_PROG_INPUTS: usize = 8;
/// Outputs of a `scan_program_f32` launch.
pub const SCAN_PROG_OUTPUTS: usize = 4;
/// Instructions of a scan program's step.
pub const SCAN_PROG_INSTRS: usize = 48;
/// Registers of a scan program; source code `SCAN_PROG_REGS` is the instruction's immediate.
pub const SCAN_PROG_REGS: u32 = 32;
/// Register copies after each step of a scan program (its carried states).
pub const SCAN_PROG_COPIES: usize = 8;

/// Dynamic shared memory of a `scan_program_f32` block of `threads` threads: the step's
/// instructions, then each thread's registers.
pub const fn scan_program_shared_bytes(threads: u32) -> u32 {
    SCAN_PROG_INSTRS as u32 * core::mem::size_of::<super::EwInstr>() as u32 + SCAN_PROG_REGS * threads * 4
}

/// One input or output of a scan program: element `c` of the channel shape at step `t` is at
/// `start + t * step + sum_d idx[d] * strides[d]` (wrapping: `step` may be negative in two's
/// complement, a reverse scan; 0 broadcasts), held in register `reg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScanOperand {
    /// Element strides over the channel dims, right-aligned like [`ScanProgramParams::dims`].
    pub strides: [u64; crate::abi::MAX_RANK],
    /// Element offset of step 0.
    pub start: u64,
    /// Element stride per step (two's complement).
    pub step: u64,
    /// The register it is loaded into (input) or stored from (output).
    pub reg: u32,
    /// 1: read (input) or written (output) at every step; 0: an input read once before the first
    /// step (a loop-invariant value or a carried state's initial value), an output written once
    /// after the last (a carried state's final value).
    pub per_step: u32,
}

/// Parameters of `sequence::scan_program_f32`: a loop over `steps` steps of an elementwise
/// program, one thread per element of the channel shape `dims[MAX_RANK - rank..]` (rank 0: one
/// channel). Before the first step each once-input is loaded into its register; each step loads
/// the per-step inputs of that step, runs `n_instr` instructions (`reg[dst] = op(a, b)`, as
/// [`super::EwInstr`] with sources `0..SCAN_PROG_REGS` registers and `SCAN_PROG_REGS` the
/// immediate, each op rounding as its single-op kernel does), stores the per-step outputs and
/// then applies the `n_copies` register copies `reg[dst] = reg[src]` as one parallel copy (the
/// carried states). After the last step the once-outputs are stored. Registers start at 0; a
/// null output pointer is not written.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScanProgramParams {
    /// Channels (elements of the channel shape).
    pub channels: u64,
    /// Steps.
    pub steps: u64,
    /// Used channel dims.
    pub rank: u32,
    /// Inputs used.
    pub n_inputs: u32,
    /// Outputs used.
    pub n_outputs: u32,
    /// Instructions per step.
    pub n_instr: u32,
    /// Copies after each step.
    pub n_copies: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Channel shape, right-aligned.
    pub dims: [u64; crate::abi::MAX_RANK],
    /// The inputs.
    pub inputs: [ScanOperand; SCAN_PROG_INPUTS],
    /// The outputs.
    pub outputs: [ScanOperand; SCAN_PROG_OUTPUTS],
    /// `[dst, src]` register copies after each step.
    pub copies: [[u32; 2]; SCAN_PROG_COPIES],
    /// One step's instructions.
    pub instrs: [super::EwInstr; SCAN_PROG_INSTRS],
}

impl Default for ScanProgramParams {
    fn default() -> Self {
        ScanProgramParams {
            channels: 0,
            steps: 0,
            rank: 0,
            n_inputs: 0,
            n_outputs: 0,
            n_instr: 0,
            n_copies: 0,
            _pad: 0,
            dims: [0; crate::abi::MAX_RANK],
            inputs: [ScanOperand::default(); SCAN_PROG_INPUTS],
            outputs: [ScanOperand::default(); SCAN_PROG_OUTPUTS],
            copies: [[0; 2]; SCAN_PROG_COPIES],
            instrs: [super::EwInstr::default(); SCAN_PROG_INSTRS],
        }
    }
}

// SAFETY: #[repr(C)], u64 arrays, then two u32 (no padding): 88 bytes.
unsafe impl Params for ScanOperand {}
// SAFETY: #[repr(C)], two u64, six u32, u64 arrays, 88-byte operands, u32 pairs (64 bytes) and
// 24-byte instructions: no padding.
unsafe impl Params for ScanProgramParams {}
