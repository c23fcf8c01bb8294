//! Lowering of Gemm and MatMul to the GEMM kernels: parameters from operand views (strided,
//! transposed through strides, NumPy batch broadcasting), the GEMV kernel for small `m`, the
//! large-tile tensor-core kernels where their tiles fill at least half the device (split over k
//! into a workspace, summed in order by a reduction launch, where they fill less than two
//! waves), the small-m tensor-core kernel (3xTF32, k split over the warps of a block; a constant
//! B packed at plan time) for what is smaller, and otherwise the CUDA-core tiled kernel (split-K
//! likewise when the tensor-core ones are switched off). On the Hopper flavour a large-tile GEMM
//! whose B is a weight runs the `wgmma` twin of its tile (`gemm_wg_*`) on the weight packed at
//! plan time (`tc_pack::takes_wg_packed`). A
//! [`Op::FusedGemm`] lowers the same way to the `*_program_f32` twins of those kernels, whose
//! epilogue continues with its elementwise program.

use kernels_gpu::abi::{
    Activation, EW_MAX_INPUTS, EwProgramParams, GEMM_SHARED_BYTES, GEMM_TC_KC, GEMM_TC_M, GEMM_TC_MAX_WARPS,
    GEMM_TC_N, GEMM_TC_NORM_SHARED_BYTES, GEMM_TC_PAIR_NORM_SHARED_BYTES, GEMM_TC_PAIR_SHARED_BYTES,
    GEMM_TC_SHARED_BYTES, GEMM_THREADS, GEMM_TILE, GEMV_MAX_M, GEMV_WARPS, GemmNormParams, GemmParams,
    GemmTile, KernelId, gemm_wg_packed_ld,
};

use super::elementwise::broadcast_strides;
use super::lower::{bytes_of, dims, f32_only};
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Precision, Step};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;

/// Shortest reduction the GEMV kernel takes: its block's 512 threads split k 64 ways per column
/// (`GEMV_WARPS * 32 / GEMV_COLS`), so below half of that most of them idle, and a short-k GEMM
/// with many columns (Mamba2's inter-chunk state pass: m 4, k 5, n 4096, batch 8 took 100 µs)
/// runs far faster on the tiled kernel.
const GEMV_MIN_K: u32 = 32;

/// Whether `p` runs on the GEMV kernel: a few rows (`m <= GEMV_MAX_M`) and a reduction long enough
/// for its threads ([`GEMV_MIN_K`]).
pub(super) fn gemv(p: &GemmParams) -> bool {
    p.m <= GEMV_MAX_M && p.k >= GEMV_MIN_K
}

/// Split-K factor and k per split of a GEMM of parameters `p` that runs `wgmma` on a packed weight
/// (`wg_packed`: `tc_pack::takes_wg_packed`) or not: [`split_k`], except that the `wgmma` tiles
/// run unsplit unless [`PlanOptions::split_k_wgmma`]. Measured on the H200 (session 19,
/// interleaved A/B on the users' exports at batch 16, whose 2048 x 256 projections give 128 small
/// tiles): BERT-style 823 us unsplit against 936-939 us split, GPT-2-style 849 against 856-860 us
/// (the partials' round trip and the reduce launch cost more than a second block per
/// multiprocessor gives the one-warpgroup tile).
pub(super) fn splits_of(p: &GemmParams, wg_packed: bool, o: &PlanOptions) -> (u32, u32) {
    if wg_packed && !o.split_k_wgmma { (1, p.k) } else { split_k(p, o) }
}

/// Split-K factor and k per split for `p`: the large-tile kernel's ([`tile_launch`]), none on the
/// small-m tensor-core kernel, and for the CUDA-core tiled kernel: when its output tiles cannot
/// fill the device (fewer than one per multiprocessor) and k is long, k is cut into chunks (at
/// least 64 long, a multiple of the k step) so that about two blocks per multiprocessor run.
pub(super) fn split_k(p: &GemmParams, o: &PlanOptions) -> (u32, u32) {
    let sm_count = o.sm_count;
    if let Some(t) = tile_launch(p, o) {
        return (t.splits, t.k_chunk);
    }
    if tensor_core(p, o).is_some() {
        return (1, p.k);
    }
    let tiles = p.n.div_ceil(GEMM_TILE) as u64 * p.m.div_ceil(GEMM_TILE) as u64 * p.batch as u64;
    if p.m <= GEMV_MAX_M || p.k < 128 || tiles >= sm_count as u64 || tiles == 0 {
        return (1, p.k);
    }
    let want = (2 * sm_count as u64).div_ceil(tiles).min((p.k / 64) as u64).clamp(1, 32) as u32;
    let chunk = p.k.div_ceil(want).next_multiple_of(kernels_gpu::abi::GEMM_BK);
    (p.k.div_ceil(chunk), chunk)
}

/// The launch of a tensor-core GEMM ([`tensor_core`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TcLaunch {
    /// Blocks: column tiles (twice that with `pair`), row tiles, batch.
    pub grid: [u32; 3],
    /// Warps per block.
    pub warps: u32,
    /// Pairs of blocks split each column tile's k rounds (the `_pair` entries).
    pub pair: bool,
}

/// The launch of `gemm_tc_f32` for `p`, when it takes the GEMM: a non-empty output, `m` above the
/// GEMV range and the CUDA-core kernel's 64 x 64 tiles fewer than two per multiprocessor (where it
/// would need split-K, or leave the device half idle). The warps of a tile split k: a power of
/// two, at most one per 32-wide k round, so that about eight warps per multiprocessor run, and at
/// least [`GEMM_TC_EPILOGUE_WARPS`] (those past the rounds only share the epilogue). Where a
/// tile wants at least twice the warps a block holds (few tiles, long k: GPT-2's MLP
/// down-projection), a pair of blocks shares it when the target has clusters
/// ([`PlanOptions::pair_gemm`]).
pub(super) fn tensor_core(p: &GemmParams, o: &PlanOptions) -> Option<TcLaunch> {
    let old_tiles = p.n.div_ceil(GEMM_TILE) as u64 * p.m.div_ceil(GEMM_TILE) as u64 * p.batch as u64;
    let empty = p.n == 0 || p.batch == 0;
    if !o.tensor_core_gemm
        || empty
        || p.m <= GEMV_MAX_M
        || p.batch > 65535
        || old_tiles >= 2 * o.sm_count as u64
        || tile_launch(p, o).is_some()
    {
        return None;
    }
    let mut grid = [p.n.div_ceil(GEMM_TC_N), p.m.div_ceil(GEMM_TC_M), p.batch];
    let blocks = grid.iter().map(|&d| d as u64).product::<u64>().max(1);
    let want = (8 * o.sm_count as u64).div_ceil(blocks).min(p.k.div_ceil(GEMM_TC_KC) as u64);
    // A pair only where it gives the tile more warps than one block holds: from twice a
    // block's warps on (below, the pair's two halves hold no more warps than one block and add
    // the exchange of partial tiles between them: Mamba2's out-projection at 1 x 256, 256 x 256
    // x 512, wants 9 and ran 14.9 µs a step paired, 11.9 unpaired on the H100, session 48).
    let pair = o.pair_gemm && want >= 2 * GEMM_TC_MAX_WARPS as u64 && grid[0] <= i32::MAX as u32 / 2;
    let per_block = if pair { want / 2 } else { want };
    // At least GEMM_TC_EPILOGUE_WARPS: the epilogue spreads the tile over the block's threads,
    // and one warp alone issued its 16 elements each (for a k of one or two rounds, more
    // instructions than the products); warps past the k rounds only finish.
    let warps = (1..=GEMM_TC_MAX_WARPS)
        .rev()
        .find(|w| w.is_power_of_two() && *w as u64 <= per_block)
        .unwrap_or(1)
        .max(GEMM_TC_EPILOGUE_WARPS);
    if pair {
        grid[0] *= 2;
    }
    Some(TcLaunch { grid, warps, pair })
}

/// Fewest warps of a `gemm_tc_f32` block (see [`tensor_core`]).
const GEMM_TC_EPILOGUE_WARPS: u32 = 4;

/// The launch of a large-tile tensor-core GEMM ([`tile_launch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TileLaunch {
    /// The entry: its tile and B's contiguous axis.
    pub kernel: KernelId,
    /// The block tile.
    pub tile: GemmTile,
    /// Blocks: column tiles, row tiles, batch times `splits`.
    pub grid: [u32; 3],
    /// Split-K: the number of k chunks (1: none), each `k_chunk` long (a multiple of the k tile)
    /// but the last; the partials go to a workspace that a reduction launch sums and finishes.
    pub splits: u32,
    /// The k per split.
    pub k_chunk: u32,
}

/// Fewest k tiles a split-K chunk of the large-tile GEMM spans: below this the three-stage
/// pipeline's fill and the partials' round trip cost more than the added blocks give.
const TILE_SPLIT_MIN_K_TILES: u32 = 4;
/// Most k chunks a large-tile GEMM is split into.
const TILE_MAX_SPLITS: u32 = 8;

/// The launch of a large-tile tensor-core GEMM (`gemm_tile.rs`) for `p`, when it takes the GEMM:
/// A is unit-stride along k and B along k or n, with the other strides multiples of four
/// (16-byte copies; the slots are 16-byte aligned), and its 64 x 64 tiles number at least half
/// the multiprocessors. The 128 x 128 tiles when they number at least one per multiprocessor
/// (a quarter of the shared-memory and L2 traffic per product), else the 64 x 64 ones; where
/// those number fewer than two per multiprocessor (GPT-2's 2048-row projections to d 256 at
/// batch 16: 128 tiles, one block of four warps per multiprocessor), k is split so that about
/// two blocks per multiprocessor run, each chunk at least [`TILE_SPLIT_MIN_K_TILES`] k tiles
/// (the `wgmma` tiles run unsplit: [`splits_of`]). The 64 x 64 tiles also where the 128-wide
/// ones would pad `n` by an eighth more ([`large_pads`]). The small-m tensor-core kernel
/// ([`tensor_core`]) takes what is smaller.
pub(super) fn tile_launch(p: &GemmParams, o: &PlanOptions) -> Option<TileLaunch> {
    let quad = |s: u64| s.is_multiple_of(4);
    let a_ok = p.a_cs == 1 && quad(p.a_rs) && quad(p.a_bs | p.a_bs2);
    let b_n = p.b_cs == 1 && quad(p.b_rs) && quad(p.b_bs | p.b_bs2);
    let b_k = p.b_rs == 1 && quad(p.b_cs) && quad(p.b_bs | p.b_bs2);
    if !o.tile_gemm
        || !o.tensor_core_gemm
        || !a_ok
        || !(b_n || b_k)
        || p.m <= GEMV_MAX_M
        || p.n == 0
        || p.batch == 0
        || p.batch > 65535
        || !o.memory.alignment.is_multiple_of(16)
    {
        return None;
    }
    let sms = o.sm_count as u64;
    let tiles = |t: GemmTile| p.n.div_ceil(t.n) as u64 * p.m.div_ceil(t.m) as u64 * p.batch as u64;
    let tile = if tiles(GemmTile::LARGE) >= sms && !large_pads(p.n as u64) {
        GemmTile::LARGE
    } else if 2 * tiles(GemmTile::SMALL) >= sms {
        GemmTile::SMALL
    } else {
        return None;
    };
    let blocks = tiles(tile);
    let bk = kernels_gpu::abi::GEMM_TILE_BK;
    let (splits, k_chunk) = if tile == GemmTile::LARGE || blocks >= 2 * sms {
        (1, p.k)
    } else if p.n < tile.n / 2 {
        // Most of each tile's columns idle (the physics MLP's last layer, n 1): the small-m
        // kernel's 32-wide tiles waste less.
        return None;
    } else {
        let most = (p.k / (TILE_SPLIT_MIN_K_TILES * bk)).min(TILE_MAX_SPLITS).min(65535 / p.batch);
        let want = ((2 * sms).div_ceil(blocks) as u32).min(most);
        if want < 2 {
            // Too short a k to split: the small-m kernel fills the device better.
            return None;
        }
        let chunk = p.k.div_ceil(want).next_multiple_of(bk);
        (p.k.div_ceil(chunk), chunk)
    };
    use KernelId as K;
    // The entry for the tile and B's contiguous axis, by precision.
    let [exact, tf32, f16, bf16] = match (tile == GemmTile::LARGE, b_n) {
        (true, true) => [K::GemmTc128NF32, K::GemmTc128NTf32, K::GemmTc128NF16, K::GemmTc128NBf16],
        (true, false) => [K::GemmTc128KF32, K::GemmTc128KTf32, K::GemmTc128KF16, K::GemmTc128KBf16],
        (false, true) => [K::GemmTc64NF32, K::GemmTc64NTf32, K::GemmTc64NF16, K::GemmTc64NBf16],
        (false, false) => [K::GemmTc64KF32, K::GemmTc64KTf32, K::GemmTc64KF16, K::GemmTc64KBf16],
    };
    let kernel = match o.precision {
        Precision::Exact => exact,
        Precision::Tf32 => tf32,
        Precision::F16 => f16,
        Precision::Bf16 => bf16,
    };
    let grid = [p.n.div_ceil(tile.n), p.m.div_ceil(tile.m), p.batch * splits];
    Some(TileLaunch { kernel, tile, grid, splits, k_chunk })
}

/// Whether the 128-column tiles would compute over an eighth more padding columns than the
/// 64-column ones for `n` output columns (n 64: half of each 128-column tile idles; the TICL
/// GNN's edge GEMMs, 800k x 64, ran 838 µs on them).
pub(super) fn large_pads(n: u64) -> bool {
    let padded = |t: GemmTile| n.div_ceil(t.n as u64) * t.n as u64;
    8 * padded(GemmTile::LARGE) > 9 * padded(GemmTile::SMALL)
}

/// Whether [`gemm_steps`] runs a GEMM of parameters `p` on a large-tile kernel (a `wgmma` one
/// when its B is packed for it): neither the GEMV nor the small-m tensor-core kernel takes it.
pub(super) fn runs_tile(p: &GemmParams, o: &PlanOptions) -> bool {
    !gemv(p) && tensor_core(p, o).is_none() && tile_launch(p, o).is_some()
}

/// Whether a GEMM of parameters `p` reading B from `b` runs a `wgmma` entry on B packed, the path
/// that can read A as segments (`gemm_cat`).
pub(super) fn takes_cat(g: &crate::graph::Graph, p: &GemmParams, b: ValueId, o: &PlanOptions) -> bool {
    runs_tile(p, o) && super::tc_pack::takes_wg_packed(g, p, b, o)
}

/// Blocks of resident B a multiprocessor holds (`gemm_wg64_cat_resident_f32`: ~97 KiB each).
const RESIDENT_BLOCKS_PER_SM: u64 = 2;
/// Fewest row tiles each resident-B block computes for that entry to be taken: fewer, and the
/// plain entry's blocks reload B about as often.
const RESIDENT_MIN_TILES_PER_BLOCK: u64 = 4;

/// The row blocks of a resident-B launch (`gemm_wg64_cat_resident_f32`) of the `wgmma` GEMM `p`
/// (B packed) on `tile`, when it takes it: exact, A as segments without a program epilogue
/// (`cat`: the entry has none), the 64 x 64 tile, one
/// matrix unsplit, k of at most `GEMM_WG_RESIDENT_K_TILES` tiles, and enough row tiles that
/// every block of a full device computes [`RESIDENT_MIN_TILES_PER_BLOCK`].
fn resident_rows(p: &GemmParams, tile: GemmTile, exact: bool, cat: bool, o: &PlanOptions) -> Option<u32> {
    let k_tiles = p.k.div_ceil(kernels_gpu::abi::GEMM_TILE_BK);
    let (col_tiles, row_tiles) = (p.n.div_ceil(tile.n) as u64, p.m.div_ceil(tile.m) as u64);
    let blocks = (RESIDENT_BLOCKS_PER_SM * o.sm_count as u64).div_ceil(col_tiles).max(1);
    let takes = exact
        && o.resident_b
        && cat
        && tile == GemmTile::SMALL
        && p.batch == 1
        && p.splits <= 1
        && (1..=kernels_gpu::abi::GEMM_WG_RESIDENT_K_TILES).contains(&k_tiles)
        && row_tiles >= RESIDENT_MIN_TILES_PER_BLOCK * blocks;
    takes.then(|| blocks.min(65535) as u32)
}

/// The `wgmma` entry (`gemm_wg_*`) of a large-tile GEMM's tile, exact (3xTF32) or TF32.
fn wg_kernel(tile: GemmTile, exact: bool, cat: bool) -> KernelId {
    use KernelId as K;
    match (tile == GemmTile::LARGE, exact, cat) {
        (true, true, false) => K::GemmWg128F32,
        (true, false, false) => K::GemmWg128Tf32,
        (false, true, false) => K::GemmWg64F32,
        (false, false, false) => K::GemmWg64Tf32,
        (true, true, true) => K::GemmWg128CatF32,
        (true, false, true) => K::GemmWg128CatTf32,
        (false, true, true) => K::GemmWg64CatF32,
        (false, false, true) => K::GemmWg64CatTf32,
    }
}

/// The identity elementwise program (one input, no instructions): the program parameters of a
/// large-tile GEMM without an epilogue program.
pub(super) fn identity_program() -> EwProgramParams {
    EwProgramParams { n_inputs: 1, out_reg: kernels_gpu::abi::ew_src::INPUT0, ..EwProgramParams::default() }
}

/// The GEMM parameters and operands (A, B, optional C) of a Gemm or MatMul node.
pub(super) fn gemm_of(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    perms: &super::fuse::OperandPerms,
) -> Result<(GemmParams, ValueId, ValueId, Option<ValueId>), String> {
    let n = &g.nodes[id.index()];
    let out = n.output(0).ok_or("the node's first output is omitted")?;
    // A fused MatMul's C slot holds the bias row peeled off its program (`epilogue::peel_bias`).
    let mut bias = None;
    let (op, ins) = match &n.op {
        // The fused node's GEMM operands are its first three inputs.
        Op::FusedGemm(f) => match &f.gemm {
            Some(attrs) => (Op::Gemm(attrs.clone()), &n.inputs[..n.inputs.len().min(3)]),
            None => {
                bias = n.inputs.get(2).copied().flatten();
                (Op::MatMul, &n.inputs[..n.inputs.len().min(2)])
            }
        },
        op => (op.clone(), n.inputs.as_slice()),
    };
    match &op {
        Op::Gemm(attrs) => {
            let (a, b) = match ins {
                [Some(a), Some(b), ..] => (*a, *b),
                _ => return Err("missing A or B".into()),
            };
            let c = ins.get(2).copied().flatten();
            f32_only(values, &[a, b, out])?;
            let (ad, bd) = (dims(values, a)?.0, dims(values, b)?.0);
            let (m, k) = if attrs.trans_a { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
            let nn = if attrs.trans_b { bd[0] } else { bd[1] };
            let mut p = GemmParams {
                m: m as u32,
                n: nn as u32,
                k: k as u32,
                batch: 1,
                a_rs: if attrs.trans_a { 1 } else { k as u64 },
                a_cs: if attrs.trans_a { m as u64 } else { 1 },
                b_rs: if attrs.trans_b { 1 } else { nn as u64 },
                b_cs: if attrs.trans_b { k as u64 } else { 1 },
                alpha: attrs.alpha,
                beta: attrs.beta,
                ..GemmParams::default()
            };
            if let Some(c) = c {
                f32_only(values, &[c])?;
                let cs = broadcast_strides(dims(values, c)?.0, 2);
                (p.c_rs, p.c_cs, p.has_c) = (cs[0] as u64, cs[1] as u64, 1);
            }
            Ok((p, a, b, c))
        }
        Op::MatMul => {
            let [Some(a), Some(b)] = ins else { return Err("missing input".into()) };
            f32_only(values, &[*a, *b, out])?;
            let [pa, pb, py] = perms.get(&out).cloned().unwrap_or([None, None, None]);
            let mut p = matmul_params(
                operand_view(dims(values, *a)?.0, pa.as_ref().map(|(st, _)| st.as_slice()), true),
                operand_view(dims(values, *b)?.0, pb.as_ref().map(|(st, _)| st.as_slice()), false),
                py.as_ref().map(|(st, _)| st.as_slice()),
            )?;
            if let Some(c) = bias {
                // One row of n, added to every row of every batch matrix.
                f32_only(values, &[c])?;
                let cd = dims(values, c)?.0;
                if cd.last().copied() != Some(p.n as usize) || cd.iter().product::<usize>() != p.n as usize {
                    return Err(format!("the bias row has shape {cd:?}, not one row of {}", p.n));
                }
                (p.has_c, p.beta, p.c_rs, p.c_cs, p.c_bs) = (1, 1.0, 0, 1, 0);
            }
            // An absorbed transpose is read in its source's layout, from its source.
            let source =
                |t: ValueId, absorbed: Option<(Vec<u64>, ValueId)>| absorbed.map_or(t, |(_, src)| src);
            Ok((p, source(*a, pa), source(*b, pb), bias))
        }
        _ => Err("not a GEMM".into()),
    }
}

/// The element strides of a MatMul result of `dims` written in the layout of its transpose by
/// `perm` (result dim `perm[d]` is the transpose's dim `d`, which is contiguous).
pub(super) fn output_strides(dims: &[usize], perm: &[usize]) -> Vec<u64> {
    let transposed: Vec<usize> = perm.iter().map(|&a| dims[a]).collect();
    let ts = super::movement::contiguous_u64(&transposed);
    let mut st = vec![0u64; dims.len()];
    for (d, &a) in perm.iter().enumerate() {
        st[a] = ts[d];
    }
    st
}

/// A MatMul operand of `dims` as the kernel walks it: dims and element strides (an absorbed
/// transpose's, read in its source's layout, or contiguous); a 1-D A gains a leading 1, a 1-D B
/// a trailing 1.
pub(super) fn operand_view(dims: &[usize], strides: Option<&[u64]>, is_a: bool) -> (Vec<usize>, Vec<u64>) {
    let mut d = dims.to_vec();
    let mut st = strides.map_or_else(|| super::movement::contiguous_u64(dims), <[u64]>::to_vec);
    if d.len() == 1 {
        if is_a {
            d.insert(0, 1);
            st.insert(0, 0);
        } else {
            d.push(1);
            st.push(0);
        }
    }
    (d, st)
}

/// GEMM parameters of `A @ B` for operand views `(dims, strides)` with NumPy batch broadcasting,
/// writing a contiguous output, or (`y`: the element strides of the output's `[batch.., m, n]`
/// dims, both operands at least 2-D) the output read through the transpose that reads it. The
/// broadcast batch must collapse to at most two strided levels, or fold into the rows when B is
/// shared across it and the output is contiguous.
pub(super) fn matmul_params(
    a: (Vec<usize>, Vec<u64>),
    b: (Vec<usize>, Vec<u64>),
    y: Option<&[u64]>,
) -> Result<GemmParams, String> {
    let ((ad, ast), (bd, bst)) = (a, b);
    let (ra, rb) = (ad.len(), bd.len());
    let (m, k, n) = (ad[ra - 2], ad[ra - 1], bd[rb - 1]);
    if bd[rb - 2] != k {
        return Err(format!("inner dims {k} and {} differ", bd[rb - 2]));
    }
    let batch_rank = (ra - 2).max(rb - 2);
    if y.is_some_and(|y| y.len() != batch_rank + 2) {
        return Err("the output view's rank is not the product's".into());
    }
    // Right-aligned batch dims: (extent, a stride, b stride); broadcast dims read stride 0.
    let mut dims: Vec<(usize, u64, u64)> = Vec::with_capacity(batch_rank);
    for i in 0..batch_rank {
        let at = |d: &[usize], st: &[u64], r: usize| {
            let off = batch_rank - (r - 2);
            if i < off { (1, 0) } else { (d[i - off], st[i - off]) }
        };
        let ((na, sa), (nb, sb)) = (at(&ad, &ast, ra), at(&bd, &bst, rb));
        let e = na.max(nb);
        if (na != e && na != 1) || (nb != e && nb != 1) {
            return Err(format!("batch dims {na} and {nb} do not broadcast"));
        }
        dims.push((e, if na == 1 { 0 } else { sa }, if nb == 1 { 0 } else { sb }));
    }
    // The output's batch strides: the view's, or a contiguous output's (m n apart, nested).
    let mut y_strides = vec![0u64; batch_rank];
    let mut inner = (m * n) as u64;
    for i in (0..batch_rank).rev() {
        y_strides[i] = y.map_or(inner, |y| y[i]);
        inner *= dims[i].0 as u64;
    }
    let batch: Vec<(usize, u64, u64, u64)> = (dims.iter().zip(&y_strides))
        .filter(|(d, _)| d.0 != 1)
        .map(|(&(e, sa, sb), &sy)| (e, sa, sb, sy))
        .collect();
    let mut p = GemmParams {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        batch: 1,
        a_rs: ast[ra - 2],
        a_cs: ast[ra - 1],
        b_rs: bst[rb - 2],
        b_cs: bst[rb - 1],
        alpha: 1.0,
        beta: 0.0,
        y_bs: (m * n) as u64,
        ..GemmParams::default()
    };
    if let Some(y) = y
        && (y[batch_rank], y[batch_rank + 1]) != (n as u64, 1)
    {
        (p.y_rs, p.y_cs) = (y[batch_rank], y[batch_rank + 1]);
    }
    let total: usize = batch.iter().map(|b| b.0).product();
    // A single row has no row stride to keep: take the innermost batch stride, so that a batch
    // of rows read through a transpose (torch's `nn.MultiheadAttention` projects `[seq, 1, d]`,
    // the transpose of its batch-first input) folds into one GEMM of `seq` rows below.
    if m == 1
        && y.is_none()
        && let Some(&(_, sa, _, _)) = batch.last()
        && sa != 0
    {
        p.a_rs = sa;
    }
    // B shared across the batch and A's rows contiguous across it: one GEMM with more rows.
    let a_folds = {
        let mut stride = p.a_rs * m as u64;
        batch.iter().rev().all(|&(e, sa, _, _)| {
            let ok = sa == stride;
            stride *= e as u64;
            ok
        })
    };
    if batch.iter().all(|&(_, _, sb, _)| sb == 0) && a_folds && total > 1 && y.is_none() {
        p.m = (total * m) as u32;
        return Ok(p);
    }
    // Collapse the batch dims (each outer stride = inner stride * inner extent, in every operand).
    let mut collapsed: Vec<(usize, u64, u64, u64)> = Vec::new();
    for (e, sa, sb, sy) in batch {
        let x = e as u64;
        match collapsed.last_mut() {
            Some(l) if l.1 == sa * x && l.2 == sb * x && l.3 == sy * x => *l = (l.0 * e, sa, sb, sy),
            _ => collapsed.push((e, sa, sb, sy)),
        }
    }
    match collapsed.as_slice() {
        [] => {}
        &[(e, sa, sb, sy)] => (p.batch, p.a_bs, p.b_bs, p.y_bs) = (e as u32, sa, sb, sy),
        // Two levels: the kernels split the batch index (an einsum's operands read through their
        // permutations, `[batch, chunk]` outside and the heads inside).
        &[(e1, sa1, sb1, sy1), (e2, sa2, sb2, sy2)] => {
            let total = u32::try_from(e1 * e2).map_err(|_| format!("a batch of {e1} x {e2} matrices"))?;
            (p.batch, p.a_bs, p.b_bs, p.y_bs) = (total, sa1, sb1, sy1);
            (p.batch_inner, p.a_bs2, p.b_bs2, p.y_bs2) = (e2 as u32, sa2, sb2, sy2);
        }
        _ => {
            return Err(format!(
                "the batch dims collapse to {} strided dims (the kernels walk two)",
                collapsed.len()
            ));
        }
    }
    Ok(p)
}

/// `e` (program parameters over a GEMM output of `batch x m x n` elements) rewritten over the
/// dims `[batch, m, n]` when every input's offset is linear in the batch, the row and the column
/// (each of the three spans a part of one collapsed dim), so that the GEMM epilogue computes the
/// offsets from its indices without dividing; `e` as it was otherwise (the kernels then unravel
/// the flat index). Both forms address the same elements.
pub(super) fn gemm_aligned(e: EwProgramParams, batch: u32, m: u32, n: u32) -> EwProgramParams {
    use kernels_gpu::abi::MAX_RANK;
    if e.rank == 0 || e.rank as usize > MAX_RANK {
        return e;
    }
    // The collapsed dims, innermost first: (extent, stride of each input).
    let first = MAX_RANK - e.rank as usize;
    let dims: Vec<(u64, [u64; EW_MAX_INPUTS])> =
        (first..MAX_RANK).rev().map(|d| (e.out_shape[d], std::array::from_fn(|k| e.strides[k][d]))).collect();
    let (mut d, mut used) = (0usize, 1u64);
    let mut axes = [[0u64; EW_MAX_INPUTS]; 3];
    for (slot, extent) in [(2, n as u64), (1, m as u64), (0, batch as u64)] {
        if extent == 0 {
            return e; // an empty result: nothing to address
        }
        if extent == 1 {
            continue;
        }
        while d < dims.len() && used == dims[d].0 {
            (d, used) = (d + 1, 1);
        }
        let Some(&(size, strides)) = dims.get(d) else { return e };
        if size % (used * extent) != 0 {
            return e;
        }
        axes[slot] = std::array::from_fn(|k| strides[k] * used);
        used *= extent;
    }
    let consumed = |from: usize| dims[from..].iter().all(|&(size, _)| size == 1);
    if !(d == dims.len() || (used == dims[d].0 && consumed(d + 1))) {
        return e;
    }
    let mut out =
        EwProgramParams { rank: 3, out_shape: [0; MAX_RANK], strides: [[0; MAX_RANK]; EW_MAX_INPUTS], ..e };
    out.out_shape[MAX_RANK - 3..].copy_from_slice(&[batch as u64, m as u64, n as u64]);
    for k in 0..EW_MAX_INPUTS {
        for (a, axis) in axes.iter().enumerate() {
            out.strides[k][MAX_RANK - 3 + a] = axis[k];
        }
    }
    out.with_fast_division()
}

/// What a GEMM applies after `alpha A B + beta C`.
pub(super) struct Epilogue {
    /// An activation.
    pub act: Option<(Activation, f32)>,
    /// Then an elementwise program (its parameters over the output, input 0 the GEMM result)
    /// and its other inputs, in slot order from 1.
    pub program: Option<(EwProgramParams, Vec<ValueId>)>,
    /// A LayerNormalization of A's rows, applied as A is loaded (only on the packed tensor-core
    /// path, which `norm_gemm` checks before folding).
    pub norm: Option<super::norm_gemm::NormGemm>,
    /// A read as segments of row tables (only on the `wgmma` path, which `gemm_cat` checks).
    pub cat: Option<super::gemm_cat::CatA>,
}

impl Epilogue {
    /// Nothing after the product.
    pub const NONE: Epilogue = Epilogue { act: None, program: None, norm: None, cat: None };
}

/// The launches computing `out = program(act(alpha A B + beta C))` from `p`: the GEMV kernel where
/// [`gemv`] takes it, else the tiled kernel — split over k into `workspace` and reduced by a
/// second launch when [`split_k`] asks for it and a workspace was planned ([`scratch`]). With a
/// program the kernels are the `*_program_f32` twins (the split-K partials need none). A label
/// with a program already names the whole fusion. B comes with its packed form when the planner
/// packed it (`tc_pack`): the tensor-core kernel then reads that (`gemm_tc_packed_f32`).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_steps(
    id: NodeId,
    label: String,
    mut p: GemmParams,
    (a, (b, packed_b), c): (ValueId, (ValueId, Option<ValueId>), Option<ValueId>),
    out: ValueId,
    epi: Epilogue,
    workspace: Option<ValueId>,
    o: &PlanOptions,
) -> Vec<Step> {
    let Epilogue { act, program, norm, cat } = epi;
    let label = match act {
        Some((a, _)) if program.is_none() => format!("{label}+{a:?}"),
        _ => label,
    };
    // The program's parameters and its inputs 1.. (null where unused) after A, B, C.
    let program = program.map(|(e, extras)| {
        let xs: Vec<Arg> =
            (1..EW_MAX_INPUTS).map(|k| extras.get(k - 1).map_or(Arg::Null, |&v| Arg::Value(v))).collect();
        (Arg::Params(bytes_of(&e)), xs)
    });
    // `[p, (e,) a, b, c, (x1, x2, x3,) out]`.
    let operands_with = |p: &GemmParams, b: ValueId| {
        let mut args = vec![Arg::Params(bytes_of(p))];
        if let Some((e, _)) = &program {
            args.push(e.clone());
        }
        args.extend([Arg::Value(a), Arg::Value(b), c.map_or(Arg::Null, Arg::Value)]);
        if let Some((_, xs)) = &program {
            args.extend(xs.iter().cloned());
        }
        args.push(Arg::Value(out));
        args
    };
    let operands = |p: &GemmParams| operands_with(p, b);
    if let Some((a, alpha)) = act {
        (p.act, p.act_alpha) = (a as u32, alpha);
    }
    if p.y_bs == 0 {
        p.y_bs = p.m as u64 * p.n as u64;
    }
    let c_arg = c.map_or(Arg::Null, Arg::Value);
    let launch = |label: String, kernel, grid, block, shared_bytes, args| Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid,
        block,
        shared_bytes,
        args,
    };
    if gemv(&p) {
        let cols = if p.b_cs == 1 { kernels_gpu::abi::GEMV_COLS } else { 1 };
        let args = operands(&p);
        let grid = [p.n.div_ceil(cols).max(1), p.batch, 1];
        let kernel = if program.is_some() { KernelId::GemvProgramF32 } else { KernelId::GemvF32 };
        return vec![launch(label, kernel, grid, [GEMV_WARPS * 32, 1, 1], GEMM_SHARED_BYTES, args)];
    }
    if let Some(TcLaunch { grid, warps, pair }) = tensor_core(&p, o) {
        let block = [32 * warps, 1, 1];
        let (shared, norm_shared) = if pair {
            (GEMM_TC_PAIR_SHARED_BYTES, GEMM_TC_PAIR_NORM_SHARED_BYTES)
        } else {
            (GEMM_TC_SHARED_BYTES, GEMM_TC_NORM_SHARED_BYTES)
        };
        if let (Some(nm), Some(pb), None) = (norm, packed_b, &program) {
            let np = GemmNormParams { epsilon: nm.epsilon, _pad: 0 };
            let args = vec![
                Arg::Params(bytes_of(&p)),
                Arg::Params(bytes_of(&np)),
                Arg::Value(a),
                Arg::Value(pb),
                c_arg.clone(),
                Arg::Value(nm.scale),
                nm.bias.map_or(Arg::Null, Arg::Value),
                Arg::Value(out),
            ];
            let label = format!("LayerNorm+{label}");
            let kernel = if pair { KernelId::GemmTcPackedNormPairF32 } else { KernelId::GemmTcPackedNormF32 };
            return vec![launch(label, kernel, grid, block, norm_shared, args)];
        }
        use KernelId as K;
        let ((kernel, paired), args) = match (packed_b, program.is_some()) {
            (Some(pb), false) => ((K::GemmTcPackedF32, K::GemmTcPackedPairF32), operands_with(&p, pb)),
            (Some(pb), true) => {
                ((K::GemmTcPackedProgramF32, K::GemmTcPackedProgramPairF32), operands_with(&p, pb))
            }
            (None, false) => ((K::GemmTcF32, K::GemmTcPairF32), operands(&p)),
            (None, true) => ((K::GemmTcProgramF32, K::GemmTcProgramPairF32), operands(&p)),
        };
        let kernel = if pair { paired } else { kernel };
        return vec![launch(label, kernel, grid, block, shared, args)];
    }
    let (splits, chunk) = splits_of(&p, packed_b.is_some(), o);
    let workspace = workspace.filter(|_| splits > 1);
    // With split-K: the launch of the partial sums (`p` with the splits) into the workspace.
    let split = workspace.map(|ws| {
        let mut q = p;
        (q.splits, q.k_chunk) = (splits, chunk);
        (q, ws)
    });
    let (partial, ws) = if let Some(TileLaunch { kernel, tile, mut grid, .. }) = tile_launch(&p, o) {
        // `[p, e, a, b, c, x1, x2, x3, y]`: the identity program without one, and for the
        // partials, which go to the workspace raw (alpha 1, no C, no activation, `m x n`
        // matrices: the tile kernel's epilogue stores them unchanged).
        let identity = (Arg::Params(bytes_of(&identity_program())), vec![Arg::Null; EW_MAX_INPUTS - 1]);
        let (q, (e, xs), y, c) = match split {
            Some((q, ws)) => {
                let raw = GemmParams {
                    alpha: 1.0,
                    beta: 0.0,
                    has_c: 0,
                    act: Activation::None as u32,
                    act_alpha: 0.0,
                    y_bs: q.m as u64 * q.n as u64,
                    ..q
                };
                (raw, &identity, ws, Arg::Null)
            }
            None => (p, program.as_ref().unwrap_or(&identity), out, c_arg.clone()),
        };
        // A weight packed for `wgmma` (`tc_pack::takes_wg_packed`): the entry of the same tile,
        // reading the packed transpose.
        let (kernel, q, b, shared) = match packed_b {
            Some(pb) => {
                let q = GemmParams { b_rs: 1, b_cs: gemm_wg_packed_ld(q.k) as u64, b_bs: 0, ..q };
                let exact = o.precision == Precision::Exact;
                match resident_rows(&q, tile, exact, cat.is_some() && program.is_none(), o) {
                    Some(blocks) => {
                        grid[1] = blocks;
                        let k_tiles = q.k.div_ceil(kernels_gpu::abi::GEMM_TILE_BK);
                        let shared = tile.wg_resident_shared_bytes(exact, k_tiles);
                        (KernelId::GemmWg64CatResidentF32, q, pb, shared)
                    }
                    None => (wg_kernel(tile, exact, cat.is_some()), q, pb, tile.wg_shared_bytes(exact)),
                }
            }
            None => (kernel, q, b, tile.shared_bytes()),
        };
        let mut args = vec![Arg::Params(bytes_of(&q)), e.clone()];
        match &cat {
            // `[p, e, s, t0, t1, i0, i1, b, c, ...]`: the segments' tables and indices for A.
            Some(cat) if packed_b.is_some() => {
                let or_null = |v: Option<ValueId>| v.map_or(Arg::Null, Arg::Value);
                args.push(Arg::Params(bytes_of(&cat.params)));
                args.extend(cat.tables.iter().chain(&cat.index).map(|&v| or_null(v)));
            }
            _ => args.push(Arg::Value(a)),
        }
        args.extend([Arg::Value(b), c]);
        args.extend(xs.iter().cloned());
        args.push(Arg::Value(y));
        let block = [tile.threads, 1, 1];
        let Some((_, ws)) = split else {
            grid[2] = p.batch;
            return vec![launch(label, kernel, grid, block, shared, args)];
        };
        (launch(format!("{label} split-k x{splits}"), kernel, grid, block, shared, args), ws)
    } else {
        let tiles = [p.n.div_ceil(GEMM_TILE).max(1), p.m.div_ceil(GEMM_TILE), p.batch];
        let block = [GEMM_THREADS, GEMM_THREADS, 1];
        let Some((q, ws)) = split else {
            let kernel = if program.is_some() { KernelId::GemmProgramF32 } else { KernelId::GemmF32 };
            return vec![launch(label, kernel, tiles, block, GEMM_SHARED_BYTES, operands(&p))];
        };
        let args =
            vec![Arg::Params(bytes_of(&q)), Arg::Value(a), Arg::Value(b), c_arg.clone(), Arg::Value(ws)];
        let grid = [tiles[0], tiles[1], p.batch * splits];
        (
            launch(
                format!("{label} split-k x{splits}"),
                KernelId::GemmF32,
                grid,
                block,
                GEMM_SHARED_BYTES,
                args,
            ),
            ws,
        )
    };
    (p.splits, p.k_chunk) = (splits, chunk);
    let reduce_grid = reduce_grid(&p);
    let (reduce_kernel, reduce) = match &program {
        None => {
            (KernelId::GemmReduceF32, vec![Arg::Params(bytes_of(&p)), c_arg, Arg::Value(ws), Arg::Value(out)])
        }
        Some((e, xs)) => {
            let mut args = vec![Arg::Params(bytes_of(&p)), e.clone(), c_arg, Arg::Value(ws)];
            args.extend(xs.iter().cloned());
            args.push(Arg::Value(out));
            (KernelId::GemmReduceProgramF32, args)
        }
    };
    vec![
        partial,
        launch(format!("{label} split-k reduce"), reduce_kernel, reduce_grid, [THREADS, 1, 1], 0, reduce),
    ]
}

/// The grid of `gemm_reduce_f32` (and its program twin) for `p`, with [`THREADS`]-thread blocks:
/// threads over the columns, blocks over them and the rows (`gemm_reduce`'s 2-D mapping), a row
/// per block up to the grid's limit (a thread looping over rows waits out the latency of each
/// row's loads in turn).
pub(super) fn reduce_grid(p: &GemmParams) -> [u32; 3] {
    let rows = (p.batch as u64 * p.m as u64).clamp(1, 65535) as u32;
    [p.n.div_ceil(THREADS).clamp(1, 65535), rows, 1]
}

#[cfg(test)]
#[path = "gemm_tests.rs"]
mod tests;
