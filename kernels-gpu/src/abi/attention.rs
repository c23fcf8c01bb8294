//! Fused attention: `softmax(program(Q Kᵀ)) V` in one launch, every operand a strided view.

use super::{EW_MAX_INPUTS, EW_MAX_INSTRS, EwInstr, Params};

/// Largest value head size (`dv`) of `attention_f32`: each lane keeps `ATTN_MAX_DV / 32` output
/// accumulators in registers.
pub const ATTN_MAX_DV: u32 = 256;
/// Warps per block of `attention_f32`: they split the block's keys (32-key groups, round robin)
/// and merge their partial softmax sums at the end.
pub const ATTN_WARPS: u32 = 4;
/// Threads per block of `attention_f32`.
pub const ATTN_THREADS: u32 = ATTN_WARPS * 32;
/// Query rows per block of `attention_f32` (consecutive rows of one (batch, head)): every warp
/// scores each of its keys against all of them, so a K or V value loaded once serves them all.
pub const ATTN_ROWS: u32 = 2;
/// Dynamic shared memory the planner may give `attention_f32` (the default per-block limit).
pub const ATTN_MAX_SHARED_BYTES: u32 = 48 * 1024;

/// Dynamic shared memory of `attention_f32`: the block's query rows (`dk` f32 each, rounded up
/// to 4) and each warp's partial result per row (running maximum, sum, NaN flag, `dv` outputs).
const fn attention_bytes(dk: u32, dv: u32) -> u64 {
    let rows = ATTN_ROWS as u64;
    4 * (rows * (dk as u64).div_ceil(4) * 4 + ATTN_WARPS as u64 * rows * (dv as u64 + 3))
}

/// Whether `attention_f32` takes head sizes `dk`, `dv` (`dv <= ATTN_MAX_DV`, shared memory within
/// [`ATTN_MAX_SHARED_BYTES`]); the planner does not fuse otherwise.
pub const fn attention_fits(dk: u32, dv: u32) -> bool {
    dv <= ATTN_MAX_DV && attention_bytes(dk, dv) <= ATTN_MAX_SHARED_BYTES as u64
}

/// Dynamic shared memory of an `attention_f32` launch (0 when it does not [`attention_fits`]).
pub const fn attention_shared_bytes(dk: u32, dv: u32) -> u32 {
    if attention_fits(dk, dv) { attention_bytes(dk, dv) as u32 } else { 0 }
}

/// [`AttentionParams::causal`] bit: the score of key `j` for query row `i` gets `-inf` added
/// when `j > i + causal_offset` (the ONNX `is_causal` flag).
pub const ATTN_CAUSAL_MASK: u32 = 1;
/// [`AttentionParams::causal`] bit: every key `j > i + causal_offset` is hidden from row `i`
/// (by [`ATTN_CAUSAL_MASK`], or by the score program, which the planner checked maps it to a
/// score whose weight is exactly 0), so a block does not read the 32-key groups past its last
/// row's diagonal. What changes: a NaN or infinite key at a hidden position no longer turns the
/// rows that hide it into NaN (as the unfused softmax does), as in other fused causal attention.
pub const ATTN_CAUSAL_SKIP: u32 = 2;
/// [`AttentionParams::causal`] bit: a query row whose softmax is NaN (every key hidden by `-inf`,
/// or a NaN or `+inf` score) gets zeros instead of NaN: the `Where(IsNaN(p), 0, p)` guard that
/// PyTorch's exported scaled-dot-product attention puts between the softmax and the second MatMul,
/// absorbed into the kernel. (Unfused, those zeros then multiply V: a row of zeros for finite V.)
pub const ATTN_NAN_ROWS_ZERO: u32 = 4;

/// Query rows per block of `attention_tc_f32` (one m16 tensor-core tile of one (batch, head)).
pub const ATTN_TC_ROWS: u32 = 16;
/// Warps per block of `attention_tc_f32`: they split the keys in 32-key groups, as in
/// `attention_f32`.
pub const ATTN_TC_WARPS: u32 = 4;
/// Threads per block of `attention_tc_f32`.
pub const ATTN_TC_THREADS: u32 = ATTN_TC_WARPS * 32;
/// Largest value head size of `attention_tc_f32` (its lanes hold a 16 x `dv` output tile and a
/// key group's V values in registers).
pub const ATTN_TC_MAX_DV: u32 = 64;

/// Largest query / key and value head size of `attention_small_f32`.
pub const ATTN_SMALL_MAX_D: u32 = 16;

/// Whether `attention_small_f32` takes head sizes `dk`, `dv` (its launch is `attention_tc_f32`'s).
pub const fn attention_small_fits(dk: u32, dv: u32) -> bool {
    dk > 0 && dv > 0 && dk <= ATTN_SMALL_MAX_D && dv <= ATTN_SMALL_MAX_D
}

/// Whether `attention_tc_f32` takes head sizes `dk`, `dv` (any `dk`, `dv <= ATTN_TC_MAX_DV`).
pub const fn attention_tc_fits(dk: u32, dv: u32) -> bool {
    dk > 0 && dv > 0 && dv <= ATTN_TC_MAX_DV
}

/// Dynamic shared memory of an `attention_tc_f32` launch: each warp's partial result per query row
/// (running maximum, sum, NaN flag, `dv` outputs).
pub const fn attention_tc_shared_bytes(dv: u32) -> u32 {
    4 * ATTN_TC_WARPS * ATTN_TC_ROWS * (dv + 3)
}

/// Largest query / key and value head size of `attention_flash_f32` (its lanes hold their Q
/// fragments and a 16 x `dv` output tile in registers).
pub const ATTN_FLASH_MAX_D: u32 = 64;
/// Keys per tile of `attention_flash_f32` (the block's shared K and V tiles).
pub const ATTN_FLASH_KEYS: u32 = 32;
/// Most warps per block of `attention_flash_f32` (16 query rows each).
pub const ATTN_FLASH_MAX_WARPS: u32 = 4;

/// Whether `attention_flash_f32` takes head sizes `dk`, `dv` (both at most [`ATTN_FLASH_MAX_D`]).
pub const fn attention_flash_fits(dk: u32, dv: u32) -> bool {
    dk > 0 && dv > 0 && dk <= ATTN_FLASH_MAX_D && dv <= ATTN_FLASH_MAX_D
}

/// Row stride (f32) of `attention_flash_f32`'s shared tile of a head of `d`: `ceil8(d) + 4` (4
/// modulo 8 words: the rows a fragment load touches fall on distinct banks).
pub const fn attention_flash_tile_stride(d: u32) -> u32 {
    d.div_ceil(8) * 8 + 4
}

/// Dynamic shared memory of an `attention_flash_f32` launch: the K tile, [`ATTN_FLASH_KEYS`] rows
/// of [`attention_flash_tile_stride`]`(dk)` f32, then the V tile, as many rows of the `dv` stride
/// (0 when it does not [`attention_flash_fits`]).
pub const fn attention_flash_shared_bytes(dk: u32, dv: u32) -> u32 {
    if attention_flash_fits(dk, dv) {
        4 * ATTN_FLASH_KEYS * (attention_flash_tile_stride(dk) + attention_flash_tile_stride(dv))
    } else {
        0
    }
}

/// A strided 4-D view `[batch, head, row, col]` of an f32 operand: element `(b, h, r, c)` is at
/// `offset + b * strides[0] + h * strides[1] + r * strides[2] + c * strides[3]` from the
/// operand's pointer (a stride of 0 broadcasts).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttnView {
    /// Element offset of `(0, 0, 0, 0)`.
    pub offset: u64,
    /// Element strides of batch, head, row and column.
    pub strides: [u64; 4],
}

/// Parameters of `attention::attention_f32`: for every batch `b < batch`, head `h < heads` and
/// query row `i < q_len`:
///
/// - `s[j] = sum_c Q[b, h, i, c] K[b, h / kv_group, j, c]` for `j < kv_len`, `c < dk`;
/// - the *score program* (an elementwise program, see `EwProgramParams`) maps each `s[j]` to a
///   score: input 0 is `s[j]`, inputs `1..n_inputs` are read at `extra[k - 1]`'s offset and
///   strides over `(b, h, i, j)` (the view's row and column are `i` and `j`); with no
///   instructions (`n_instr == 0`) the score is `s[j]` (`out_reg` must then be `ew_src::INPUT0`);
/// - `causal != 0` adds `-inf` to the scores of `j > i + causal_offset`;
/// - `Y[b, h, i, c] = sum_j softmax(score)[j] V[b, h / kv_group, j, c]` for `c < dv`.
///
/// The softmax follows the unfused `Softmax`: a row whose scores hold a NaN or `+inf`, or are all
/// `-inf`, gives NaN everywhere.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionParams {
    /// Batch extent.
    pub batch: u32,
    /// Query heads.
    pub heads: u32,
    /// Query rows per (batch, head).
    pub q_len: u32,
    /// Key / value rows per (batch, head).
    pub kv_len: u32,
    /// Query / key head size.
    pub dk: u32,
    /// Value head size (at most [`ATTN_MAX_DV`]).
    pub dv: u32,
    /// Query heads per key / value head (K and V head index is `h / kv_group`), at least 1.
    pub kv_group: u32,
    /// Causal bits: [`ATTN_CAUSAL_MASK`] masks keys `j > i + causal_offset` with `-inf`;
    /// [`ATTN_CAUSAL_SKIP`] lets the kernels skip the key groups that hide;
    /// [`ATTN_NAN_ROWS_ZERO`] writes zeros for the rows whose softmax is NaN.
    pub causal: u32,
    /// Causal diagonal offset (keys before the first query row, e.g. a past).
    pub causal_offset: u32,
    /// Instructions of the score program.
    pub n_instr: u32,
    /// Inputs of the score program, the score included (1..=EW_MAX_INPUTS).
    pub n_inputs: u32,
    /// Register (or source code) holding the program's result.
    pub out_reg: u32,
    /// Q `[batch, head, q_len, dk]`.
    pub q: AttnView,
    /// K `[batch, kv head, kv_len, dk]`.
    pub k: AttnView,
    /// V `[batch, kv head, kv_len, dv]`.
    pub v: AttnView,
    /// Y `[batch, head, q_len, dv]` (written).
    pub y: AttnView,
    /// Program inputs `1..n_inputs` over `[batch, head, q row, k row]`.
    pub extra: [AttnView; EW_MAX_INPUTS - 1],
    /// The score program.
    pub instrs: [EwInstr; EW_MAX_INSTRS],
}

// SAFETY: #[repr(C)]: twelve u32 (48 bytes), then u64-only views and 24-byte instructions of
// u32/f32 fields: no padding.
unsafe impl Params for AttnView {}
// SAFETY: as above.
unsafe impl Params for AttentionParams {}

/// `RotaryParams::mode`: where a token's row of the cos / sin caches is.
pub mod rotary_mode {
    /// Row `position_ids[b, s]` of a `(rows, rot / 2)` cache (a position outside it gives NaN).
    pub const POSITIONS: u32 = 0;
    /// Row `s` of a `(rows, rot / 2)` cache (no position ids; `seq <= rows`).
    pub const SEQUENCE: u32 = 1;
    /// Row `(b, s)` of a `(batch, seq, rot / 2)` cache.
    pub const PER_TOKEN: u32 = 2;
    /// Full-width caches (a value per rotated feature, read at the feature's own index) at
    /// `b * cache_strides[0] + h * cache_strides[1] + s * cache_strides[2] + d`: an exporter's
    /// spelled-out `x cos + rotate_half(x) sin`, each product rounded, then the sum.
    pub const FULL: u32 = 3;
}

/// Parameters of `rotary::rotary_f32` (ONNX RotaryEmbedding): element `(b, s, h, d)` of X and Y
/// sits at `b * batch_stride + s * seq_stride + h * head_stride + d`; the first `rot` features of
/// each head turn by the angle of the token's cache row, in pairs `(d, d + rot / 2)` or, with
/// `interleaved`, `(2k, 2k + 1)`: `(cos x1 - sin x2, sin x1 + cos x2)`; the others pass through.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotaryParams {
    /// Batch size.
    pub batch: u64,
    /// Sequence length.
    pub seq: u64,
    /// Heads.
    pub heads: u64,
    /// Features per head.
    pub size: u64,
    /// Element stride of the batch index.
    pub batch_stride: u64,
    /// Element stride of the sequence index.
    pub seq_stride: u64,
    /// Element stride of the head index.
    pub head_stride: u64,
    /// Rotated features per head (even, at most `size`).
    pub rot: u64,
    /// Rows of a 2-D cache.
    pub cache_rows: u64,
    /// Element strides of b, h and s in full-width caches ([`rotary_mode::FULL`]; 0 where they
    /// broadcast).
    pub cache_strides: [u64; 3],
    /// One of [`rotary_mode`].
    pub mode: u32,
    /// Non-zero: interleaved pairs.
    pub interleaved: u32,
}

// SAFETY: #[repr(C)], twelve u64, two u32: no padding.
unsafe impl Params for RotaryParams {}
