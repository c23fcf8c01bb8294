//! The f32 GEMM / GEMV kernels and their epilogue.

use super::Params;

/// Elementwise function applied in a GEMM epilogue (after `alpha * A B + beta * C`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Activation {
    /// Identity.
    #[default]
    None = 0,
    /// `max(x, 0)`.
    Relu = 1,
    /// `1 / (1 + e^-x)`.
    Sigmoid = 2,
    /// `tanh(x)`.
    Tanh = 3,
    /// Gelu, erf form.
    GeluErf = 4,
    /// Gelu, tanh approximation.
    GeluTanh = 5,
    /// `x * sigmoid(x)`.
    Silu = 6,
    /// `x < 0 ? act_alpha * x : x`.
    LeakyRelu = 7,
}

impl Activation {
    /// The activation for a code read from parameters (unknown codes are the identity; the host
    /// only writes valid ones).
    pub const fn from_code(code: u32) -> Activation {
        match code {
            1 => Activation::Relu,
            2 => Activation::Sigmoid,
            3 => Activation::Tanh,
            4 => Activation::GeluErf,
            5 => Activation::GeluTanh,
            6 => Activation::Silu,
            7 => Activation::LeakyRelu,
            _ => Activation::None,
        }
    }
}

/// Parameters of the f32 GEMM kernels: for each batch `b < batch`, `i < m`, `j < n`,
/// `y[Y(b) + i*y_rs + j*y_cs] = act(alpha * sum_k A[b,i,k] B[b,k,j] + beta * C[b,i,j])`, where
/// `A[b,i,k] = a[A(b) + i*a_rs + k*a_cs]`, `B[b,k,j] = b[B(b) + k*b_rs + j*b_cs]` and
/// `C[b,i,j] = c[C(b) + i*c_rs + j*c_cs]` (only when `has_c != 0`). Strides are in elements; a
/// zero stride broadcasts (bias rows, shared weights across a batch), a transposed operand swaps
/// its row and column strides. The batch has two levels, so that an operand read through a
/// permutation whose batch dims do not merge into one (an einsum's `[batch, chunk, head]` with the
/// head inside the rows) needs no copy: batch matrix `b` is `(o, i) = (b / batch_inner,
/// b % batch_inner)` and `A(b) = o*a_bs + i*a_bs2` (likewise B, C, Y); `batch_inner` 0 or 1 is
/// one level (`A(b) = b*a_bs`). See [`GemmParams::a_at`]. `y_rs`, `y_cs` both 0 (the default) are
/// `n`, 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmParams {
    /// Rows of the output.
    pub m: u32,
    /// Columns of the output.
    pub n: u32,
    /// Reduction length.
    pub k: u32,
    /// Batch count (grid z / y).
    pub batch: u32,
    /// A row stride.
    pub a_rs: u64,
    /// A column (k) stride.
    pub a_cs: u64,
    /// A batch stride.
    pub a_bs: u64,
    /// B row (k) stride.
    pub b_rs: u64,
    /// B column stride.
    pub b_cs: u64,
    /// B batch stride.
    pub b_bs: u64,
    /// C row stride.
    pub c_rs: u64,
    /// C column stride.
    pub c_cs: u64,
    /// C batch stride.
    pub c_bs: u64,
    /// Y batch stride (rows are contiguous, `n` apart).
    pub y_bs: u64,
    /// Scale of `A B`.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// [`Activation`] code.
    pub act: u32,
    /// LeakyRelu slope.
    pub act_alpha: f32,
    /// Nonzero when `c` is read.
    pub has_c: u32,
    /// Split-K factor of `gemm_f32` (0 or 1: no split). With `splits > 1`, the launch's grid z is
    /// `batch * splits`, block `z` sums k in `[s * k_chunk, (s + 1) * k_chunk)` for
    /// `s = z % splits`, and writes the raw sums (no epilogue) to `y` as a workspace of
    /// `splits * batch * m * n` f32 (`[s][batch][i][j]`); `gemm_reduce_f32` then adds the splits in
    /// order and applies the epilogue.
    pub splits: u32,
    /// K elements per split (a multiple of the k step, 16).
    pub k_chunk: u32,
    /// Inner batch count of a two-level batch (0 or 1: one level); divides `batch`.
    pub batch_inner: u32,
    /// A inner batch stride (two-level batch only).
    pub a_bs2: u64,
    /// B inner batch stride.
    pub b_bs2: u64,
    /// C inner batch stride.
    pub c_bs2: u64,
    /// Y inner batch stride.
    pub y_bs2: u64,
    /// Y row stride, with [`GemmParams::y_cs`] (a MatMul writing its result through the transpose
    /// that reads it); both 0: rows contiguous, `n` apart. Not for split-K partials.
    pub y_rs: u64,
    /// Y column stride (0: contiguous rows, see [`GemmParams::y_rs`]).
    pub y_cs: u64,
    /// Nonzero when B is computed by an earlier step of the same run (a weight the device
    /// dequantizes and packs with hoisting off, or in the step right before): the packed
    /// tensor-core entries then load it only after waiting for the previous kernel
    /// (programmatic dependent launch), not before as they load weights.
    pub b_computed: u32,
    /// Padding (0).
    pub _pad: u32,
}

/// One output matrix of a GEMM in Y: its offset and its row and column strides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YView {
    /// Offset of element (0, 0).
    pub at: u64,
    /// Row stride.
    pub rs: u64,
    /// Column stride.
    pub cs: u64,
}

impl YView {
    /// Offset of element `(i, j)`.
    #[inline(always)]
    pub fn offset(self, i: u32, j: u32) -> u64 {
        self.at + i as u64 * self.rs + j as u64 * self.cs
    }
}

impl GemmParams {
    /// Outer and inner index of batch matrix `b`.
    #[inline(always)]
    fn batch_index(&self, b: u64) -> (u64, u64) {
        if self.batch_inner > 1 {
            let n = self.batch_inner as u64;
            (b / n, b % n)
        } else {
            (b, 0)
        }
    }

    /// Element offset of batch matrix `b` in an operand of batch strides `outer` and `inner`.
    #[inline(always)]
    fn batch_offset(&self, b: u64, outer: u64, inner: u64) -> u64 {
        let (o, i) = self.batch_index(b);
        o * outer + i * inner
    }

    /// Element offset of batch matrix `b` in A.
    #[inline(always)]
    pub fn a_at(&self, b: u64) -> u64 {
        self.batch_offset(b, self.a_bs, self.a_bs2)
    }

    /// Element offset of batch matrix `b` in B.
    #[inline(always)]
    pub fn b_at(&self, b: u64) -> u64 {
        self.batch_offset(b, self.b_bs, self.b_bs2)
    }

    /// Element offset of batch matrix `b` in C.
    #[inline(always)]
    pub fn c_at(&self, b: u64) -> u64 {
        self.batch_offset(b, self.c_bs, self.c_bs2)
    }

    /// Element offset of batch matrix `b` in Y.
    #[inline(always)]
    pub fn y_at(&self, b: u64) -> u64 {
        self.batch_offset(b, self.y_bs, self.y_bs2)
    }

    /// Where output matrix `b` lies in Y: rows `n` apart, or the strides `y_rs`, `y_cs`. Kernels
    /// take it once, before their store loops.
    #[inline(always)]
    pub fn y_view(&self, b: u64) -> YView {
        let (rs, cs) = if self.y_cs == 0 { (self.n as u64, 1) } else { (self.y_rs, self.y_cs) };
        YView { at: self.y_at(b), rs, cs }
    }

    /// Element offset of output `(b, i, j)` in Y ([`GemmParams::y_view`]).
    #[inline(always)]
    pub fn y_offset(&self, b: u64, i: u32, j: u32) -> u64 {
        self.y_view(b).offset(i, j)
    }

    /// Whether B is one matrix for the whole batch (both batch strides 0).
    #[inline(always)]
    pub fn b_shared(&self) -> bool {
        self.b_bs == 0 && self.b_bs2 == 0
    }
}

/// Largest `m` the GEMV kernel handles (one accumulator register per row).
pub const GEMV_MAX_M: u32 = 8;

/// Output tile edge of `gemm_f32` (a block computes `GEMM_TILE x GEMM_TILE` outputs with
/// `GEMM_THREADS x GEMM_THREADS` threads).
pub const GEMM_TILE: u32 = 64;
/// Threads per edge of a `gemm_f32` block.
pub const GEMM_THREADS: u32 = 16;
/// Warps per `gemv_f32` block (they split the reduction, or own one column each).
pub const GEMV_WARPS: u32 = 16;
/// Columns a `gemv_f32` block owns when B's columns are contiguous (a divisor of 32).
pub const GEMV_COLS: u32 = 8;
/// Dynamic shared memory of `gemm_f32` (its A and B tiles) and of `gemv_f32` (partial sums).
pub const GEMM_SHARED_BYTES: u32 = 16384;
/// K step of `gemm_f32` (split-K chunks are multiples of it).
pub const GEMM_BK: u32 = 16;

/// Output tile of `gemm_tc_f32`: `GEMM_TC_M x GEMM_TC_N` per block (one m16n8k8 row of four
/// n tiles per warp).
pub const GEMM_TC_M: u32 = 16;
/// See [`GEMM_TC_M`].
pub const GEMM_TC_N: u32 = 32;
/// K elements a `gemm_tc_f32` warp loads per round (four m16n8k8 steps).
pub const GEMM_TC_KC: u32 = 32;
/// Most warps of a `gemm_tc_f32` block (they split the reduction; launch `32 * warps` threads).
pub const GEMM_TC_MAX_WARPS: u32 = 8;
/// Dynamic shared memory of `gemm_tc_f32`: each warp's partial tile `[GEMM_TC_M][GEMM_TC_N + 1]`.
pub const GEMM_TC_SHARED_BYTES: u32 = GEMM_TC_MAX_WARPS * GEMM_TC_M * (GEMM_TC_N + 1) * 4;
/// Dynamic shared memory of `gemm_tc_packed_norm_f32`: [`GEMM_TC_SHARED_BYTES`], then the block's
/// row statistics (mean and `1 / sqrt(var + eps)` of each of its `GEMM_TC_M` rows).
pub const GEMM_TC_NORM_SHARED_BYTES: u32 = GEMM_TC_SHARED_BYTES + 2 * GEMM_TC_M * 4;
/// Byte offset, in the dynamic shared memory of the `_pair` entries of `gemm_tc_f32` (a column
/// tile split over two blocks), of the first block's memory barrier (`mbarrier`, 8 bytes) that
/// counts the second block's partial tiles in. Before it: both blocks' partial tiles, then the
/// row statistics (the LayerNorm entry's).
pub const GEMM_TC_PAIR_BARRIER_AT: u32 = 2 * GEMM_TC_SHARED_BYTES + 2 * GEMM_TC_M * 4;
/// Dynamic shared memory of the `_pair` entries (see [`GEMM_TC_PAIR_BARRIER_AT`]).
pub const GEMM_TC_PAIR_SHARED_BYTES: u32 = GEMM_TC_PAIR_BARRIER_AT + 8;
/// Dynamic shared memory of `gemm_tc_packed_norm_pair_f32` (the layout of
/// [`GEMM_TC_PAIR_SHARED_BYTES`], statistics included).
pub const GEMM_TC_PAIR_NORM_SHARED_BYTES: u32 = GEMM_TC_PAIR_SHARED_BYTES;
const _: () = assert!(GEMM_TC_PAIR_BARRIER_AT.is_multiple_of(8));

/// K elements per pipeline stage of the large-tile tensor-core GEMMs (`gemm_tile.rs`:
/// `gemm_tc128_*_f32`, `gemm_tc64_*_f32`).
pub const GEMM_TILE_BK: u32 = 32;
/// Pipeline stages (k tiles in flight through `cp.async`) of the large-tile tensor-core GEMMs.
pub const GEMM_TILE_STAGES: u32 = 3;

impl super::KernelId {
    /// Whether the host gives this kernel all of the unified L1 / shared memory as shared memory
    /// (the carveout preference): the `wgmma` GEMMs, whose 3xTF32 one-warpgroup tile (97 KiB)
    /// lets a second block onto a multiprocessor only with most of it as shared memory (the
    /// driver's own choice may leave room for one), and which read their operands through
    /// `cp.async.cg` (L2, not L1). Not the
    /// convolutions: their gathers go through L1 (`cp.async.ca`), which reuses each input
    /// element across the taps.
    pub const fn prefers_shared_carveout(self) -> bool {
        matches!(
            self,
            Self::GemmWg128F32
                | Self::GemmWg64F32
                | Self::GemmWg128Tf32
                | Self::GemmWg64Tf32
                | Self::GemmWg128CatF32
                | Self::GemmWg64CatF32
                | Self::GemmWg64CatResidentF32
                | Self::GemmWg128CatTf32
                | Self::GemmWg64CatTf32
        )
    }

    /// The dynamic shared memory a launch of this kernel may take beyond the default 48 KiB, which
    /// the host allows the function when it loads it (the 128 x 128 large-tile GEMMs).
    pub const fn large_shared_bytes(self) -> Option<u32> {
        match self {
            Self::GemmTc128NF32
            | Self::GemmTc128KF32
            | Self::GemmTc128NTf32
            | Self::GemmTc128KTf32
            | Self::GemmTc128NF16
            | Self::GemmTc128KF16
            | Self::GemmTc128NBf16
            | Self::GemmTc128KBf16 => Some(GemmTile::LARGE.shared_bytes()),
            Self::GemmWg128F32 => Some(GemmTile::LARGE.wg_shared_bytes(true)),
            Self::GemmWg64F32 => Some(GemmTile::SMALL.wg_shared_bytes(true)),
            Self::GemmWg128Tf32 => Some(GemmTile::LARGE.wg_shared_bytes(false)),
            Self::GemmWg64Tf32 => Some(GemmTile::SMALL.wg_shared_bytes(false)),
            Self::GemmWg128CatF32 => Some(GemmTile::LARGE.wg_shared_bytes(true)),
            Self::GemmWg64CatF32 => Some(GemmTile::SMALL.wg_shared_bytes(true)),
            Self::GemmWg64CatResidentF32 => {
                Some(GemmTile::SMALL.wg_resident_shared_bytes(true, GEMM_WG_RESIDENT_K_TILES))
            }
            Self::GemmWg128CatTf32 => Some(GemmTile::LARGE.wg_shared_bytes(false)),
            Self::GemmWg64CatTf32 => Some(GemmTile::SMALL.wg_shared_bytes(false)),
            Self::ConvWg128F32 => Some(GemmTile::LARGE.wg_shared_bytes(true)),
            Self::ConvWg64F32 => Some(GemmTile::SMALL.wg_shared_bytes(true)),
            Self::ConvWg128Tf32 => Some(GemmTile::LARGE.wg_shared_bytes(false)),
            Self::ConvWg64Tf32 => Some(GemmTile::SMALL.wg_shared_bytes(false)),
            Self::ConvWg32F32 => Some(GemmTile::NARROW.wg_shared_bytes(true)),
            Self::ConvWg32Tf32 => Some(GemmTile::NARROW.wg_shared_bytes(false)),
            Self::SsdChunkF32 | Self::SsdChunkStatesF32 => Some(super::SSD_CHUNK_MAX_SHARED),
            _ => None,
        }
    }
}

/// Pipeline stages of the `wgmma` GEMMs (`gemm_wg.rs`).
pub const GEMM_WG_STAGES: u32 = 4;
/// Most k tiles (of [`GEMM_TILE_BK`]) of a resident-B `wgmma` GEMM (`gemm_wg64_cat_resident_f32`):
/// its B, both planes of 64 columns, then takes 64 KiB of shared memory, and with the A stages two
/// blocks still fit a multiprocessor.
pub const GEMM_WG_RESIDENT_K_TILES: u32 = 4;

/// The planes of a weight packed for the `wgmma` GEMMs: the TF32 big parts, and (`exact`, the
/// 3xTF32 entries) the small parts.
pub const fn gemm_wg_planes(exact: bool) -> u32 {
    if exact { 2 } else { 1 }
}

/// The row length (in f32, a multiple of four: 16-byte rows) of a weight packed for the `wgmma`
/// GEMMs: `k` rounded up to a multiple of four.
pub const fn gemm_wg_packed_ld(k: u32) -> u32 {
    k.div_ceil(4) * 4
}

/// The f32 length of a `k x n` weight B packed for the `wgmma` GEMMs (`gemm_wg_*`): its
/// transpose, `n` rows of [`gemm_wg_packed_ld`] f32 (k contiguous, zero past k), once with the
/// TF32 big parts and (`exact`: the 3xTF32 entries) once more with the TF32 small parts (the plane
/// of small parts follows the big one), as `tc_pack::split` forms them. The kernels take it with
/// `b_rs = 1`, `b_cs =` [`gemm_wg_packed_ld`], `b_bs = 0`.
pub const fn gemm_wg_packed_len(k: u32, n: u32, exact: bool) -> u64 {
    gemm_wg_planes(exact) as u64 * n as u64 * gemm_wg_packed_ld(k) as u64
}

/// The block tile of a large-tile tensor-core GEMM entry: (rows, columns, threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTile {
    /// Output rows per block.
    pub m: u32,
    /// Output columns per block.
    pub n: u32,
    /// Threads per block.
    pub threads: u32,
}

impl GemmTile {
    /// 128 x 128 tiles, 8 warps (`gemm_tc128_*_f32`).
    pub const LARGE: GemmTile = GemmTile { m: 128, n: 128, threads: 256 };
    /// 64 x 64 tiles, 4 warps (`gemm_tc64_*_f32`).
    pub const SMALL: GemmTile = GemmTile { m: 64, n: 64, threads: 128 };
    /// 64 x 32, one warpgroup: the `wgmma` convolutions of at most 32 output channels per group.
    pub const NARROW: GemmTile = GemmTile { m: 64, n: 32, threads: 128 };

    /// Dynamic shared memory of a `wgmma` GEMM launch (`gemm_wg_*`) with this tile:
    /// [`GEMM_WG_STAGES`] stages of B's tile (`n x GEMM_TILE_BK` f32, k contiguous) per plane
    /// (two when `exact`) and A's (`m x GEMM_TILE_BK`), plus 1 KiB to align the stages to the
    /// 1 KiB the 128-byte swizzle of `wgmma`'s operand layout works in. The epilogue's output tile
    /// (`m x (n + 8)` f32) fits in the stages, as does the convolutions' transposed one
    /// (`n x (m + 4)`).
    pub const fn wg_shared_bytes(self, exact: bool) -> u32 {
        GEMM_WG_STAGES * (gemm_wg_planes(exact) * self.n + self.m) * GEMM_TILE_BK * 4 + 1024
    }

    /// Dynamic shared memory of a resident-B `wgmma` GEMM launch with this tile and `k_tiles` k
    /// tiles (at most [`GEMM_WG_RESIDENT_K_TILES`]): [`GEMM_WG_STAGES`] stages of A's tile, then
    /// every k tile of B's planes, plus the 1 KiB of alignment. The epilogue's output tile fits in
    /// A's stages.
    pub const fn wg_resident_shared_bytes(self, exact: bool, k_tiles: u32) -> u32 {
        (GEMM_WG_STAGES * self.m + k_tiles * gemm_wg_planes(exact) * self.n) * GEMM_TILE_BK * 4 + 1024
    }

    /// Dynamic shared memory of a launch: [`GEMM_TILE_STAGES`] stages of the A tile
    /// (`m x GEMM_TILE_BK` f32) and the B tile (`GEMM_TILE_BK x n` f32), reused by the epilogue
    /// for the output tile (`m x (n + 8)` f32).
    pub const fn shared_bytes(self) -> u32 {
        let pipeline = GEMM_TILE_STAGES * (self.m + self.n) * GEMM_TILE_BK * 4;
        let epilogue = self.m * (self.n + 8) * 4;
        if pipeline > epilogue { pipeline } else { epilogue }
    }
}

/// The LayerNormalization `gemm_tc_packed_norm_f32` applies to A's rows (over all k) as it loads
/// them: `A'[i, k] = (A[i, k] - mean_i) / sqrt(var_i + epsilon) * scale[k] + bias[k]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmNormParams {
    /// LayerNormalization's epsilon.
    pub epsilon: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], two 4-byte fields.
unsafe impl Params for GemmNormParams {}

/// The A operand of the `gemm_wg*_cat_*` entries: A's k columns as up to two segments side by
/// side (`torch.cat([x[src], x[dst]], -1)`, `torch.cat([h, agg], -1)` feeding a Linear), each
/// the rows of its own table, taken in order or through an index (a row gather), so that neither
/// the gathered rows nor the concatenation is ever written:
/// `A[r, k] = T_s[row_s(r), k - k_s]` for the segment `s` holding `k` (`k_0 = 0`,
/// `k_1 = width[0]`), `row_s(r) = r` without an index, else `I_s[r * index_stride[s] +
/// index_offset[s]]` (negative indices count from `rows[s]`; one outside `[0, rows[s])` reads a
/// row of zeros, as the gather kernels do).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmCatParams {
    /// Row stride of each segment's table, in elements (a multiple of 4).
    pub ld: [u64; 2],
    /// Rows of each segment's table (the range its indices address).
    pub rows: [u64; 2],
    /// k columns of each segment (multiples of 4; they add up to the GEMM's k; `width[1]` 0: one
    /// segment).
    pub width: [u32; 2],
    /// Index elements between consecutive rows of A, per segment (0: no index, row `r` of the
    /// table).
    pub index_stride: [u32; 2],
    /// The index element of A's row 0, per segment.
    pub index_offset: [u32; 2],
    /// Bytes of an index element: 4 (int32) or 8 (int64).
    pub index_bytes: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], 8-byte fields then 4-byte ones in pairs: no implicit padding.
unsafe impl Params for GemmCatParams {}

/// f32 a lane reads per n8 column tile and k round from a packed B (`gemm_tc_packed_f32`): the
/// eight TF32 big parts, then the eight small parts, of its eight B values.
pub const GEMM_TC_PACK_LANE: u32 = 16;
/// f32 of one (column tile, k round) block of a packed B: [`GEMM_TC_PACK_LANE`] for each of the
/// 32 lanes.
pub const GEMM_TC_PACK_BLOCK: u32 = 32 * GEMM_TC_PACK_LANE;

/// f32 elements of the packed B of a `k x n` GEMM (`gemm_tc_packed_f32`):
/// `ceil(n / 8) * ceil(k / GEMM_TC_KC) * GEMM_TC_PACK_BLOCK`.
///
/// The layout, prepared on the host from a constant B (a weight) so that the kernel neither splits
/// nor bounds-checks B and reads it with 16-byte loads: for column tile `ct < ceil(n / 8)` (columns
/// `8 ct .. 8 ct + 8`), k round `r < ceil(k / GEMM_TC_KC)` and lane `l` (`g = l / 4`, `t = l % 4`),
/// the [`GEMM_TC_PACK_LANE`] f32 at offset [`gemm_tc_packed_offset`]`(ct, r, l)` are
/// `big(B[32 r + 8 t + q][8 ct + g])` for `q = 0..8`, then `small(...)` of the same eight values:
/// `big(x)` is `x` rounded to TF32 as `cvt.rna.tf32.f32` does (to nearest, ties away from zero,
/// 10 explicit mantissa bits, the low 13 bits zero), `small(x)` the TF32 rounding of `x - big(x)`
/// computed in f32 (zero where that is not finite: an infinite or NaN `x` is carried by its big
/// part; a NaN is kept a NaN in TF32 by setting its quiet bit). Entries for `k >= K` or
/// `column >= N` are zero. These are exactly the fragments the kernel's lanes would otherwise load
/// and split (see `gemm_tc.rs` for the k order within a round).
pub const fn gemm_tc_packed_len(k: u32, n: u32) -> u64 {
    n.div_ceil(8) as u64 * k.div_ceil(GEMM_TC_KC) as u64 * GEMM_TC_PACK_BLOCK as u64
}

/// Offset (f32 elements) of lane `lane`'s entry for column tile `ct` and k round `r` in the packed
/// B of a GEMM with `rounds = ceil(k / GEMM_TC_KC)` ([`gemm_tc_packed_len`]).
pub const fn gemm_tc_packed_offset(ct: u64, r: u64, rounds: u64, lane: u64) -> u64 {
    ((ct * rounds + r) * 32 + lane) * GEMM_TC_PACK_LANE as u64
}

// SAFETY: #[repr(C)], four u32, ten u64, then six 4-byte fields (the last an explicit `_pad`).
unsafe impl Params for GemmParams {}

/// Most layers one `mlp_f32` launch runs (longer chains take several launches).
pub const MLP_MAX_LAYERS: usize = 8;
/// Largest `m` (activation rows) of `mlp_f32`.
pub const MLP_MAX_M: u32 = 4;
/// Largest `m * width` of an activation `mlp_f32` keeps in shared memory (f32 elements), for the
/// chain's input, every hidden layer and (through the k loop) the last layer's input.
pub const MLP_MAX_ACTIVATIONS: u32 = 4096;
/// Blocks of one `mlp_f32` launch: a single thread-block cluster on the Hopper flavour (the
/// blocks exchange each layer's output through distributed shared memory). The portable flavour
/// has no clusters: its kernel runs as one block (launch it with one).
pub const MLP_CLUSTER: u32 = 8;
/// Threads per `mlp_f32` block.
pub const MLP_THREADS: u32 = 256;
/// Dynamic shared memory of `mlp_f32`: two activation buffers and the partial sums of its
/// column-contiguous mode (`[warps][32][MLP_MAX_M]`).
pub const MLP_SHARED_BYTES: u32 = 2 * MLP_MAX_ACTIVATIONS * 4 + (MLP_THREADS / 32) * 32 * MLP_MAX_M * 4;

/// One layer of `mlp_f32`: `h'[i, j] = act(alpha * sum_k h[i, k] W[k, j] + beta * C[i, j])` for
/// `i < m`, `j < n`, with `W[k, j] = w[k * b_rs + j * b_cs]` (one of the two strides is 1) and
/// `C[i, j] = c[i * c_rs + j * c_cs]` when `has_c != 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MlpLayer {
    /// Input width.
    pub k: u32,
    /// Output width.
    pub n: u32,
    /// [`Activation`] code.
    pub act: u32,
    /// Nonzero when `c` is read.
    pub has_c: u32,
    /// Scale of `h W`.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// LeakyRelu slope.
    pub act_alpha: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// W row (k) stride.
    pub b_rs: u64,
    /// W column stride.
    pub b_cs: u64,
    /// C row stride.
    pub c_rs: u64,
    /// C column stride.
    pub c_cs: u64,
}

/// Parameters of `mlp_f32`: `layers` layers ([`MlpLayer`]) applied to `m` contiguous input rows
/// of `layer[0].k` elements; the output is `m` contiguous rows of `layer[layers - 1].n`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MlpParams {
    /// Layers used (1 to [`MLP_MAX_LAYERS`]).
    pub layers: u32,
    /// Rows (1 to [`MLP_MAX_M`]).
    pub m: u32,
    /// Explicit padding; always 0.
    pub _pad: [u32; 2],
    /// The layers; entries past `layers` are ignored.
    pub layer: [MlpLayer; MLP_MAX_LAYERS],
}

// SAFETY: #[repr(C)]: eight 4-byte fields (the last an explicit `_pad`), then four u64.
unsafe impl Params for MlpLayer {}
// SAFETY: #[repr(C)]: four u32 (two of them explicit padding), then an array of `MlpLayer`
// (64 bytes each, 8-aligned, itself without implicit padding).
unsafe impl Params for MlpParams {}
