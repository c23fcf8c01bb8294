//! f32 GEMM on the tensor cores for the small-`m` shapes of inference (a transformer's
//! projections at sequence lengths in the hundreds, BERT-sized batches): `mma.sync` m16n8k8 with
//! TF32 operands, each f32 operand split into a TF32 part and a TF32 remainder and the product
//! formed as `small·big + big·small + big·big` (3xTF32). The dropped `small·small` term is below
//! 2^-22 of the product, so the result has f32 accuracy (not TF32's 2^-11) at tensor-core speed.
//!
//! Small tiles instead of split-K launches: a block computes a 16 x 32 output tile, its warps
//! split the reduction (warp `w` takes the 32-element k rounds `w, w + warps, ...`), and the
//! block adds the warps' partial tiles in shared memory in warp order (deterministic) before the
//! epilogue. One launch fills the device where the CUDA-core kernel needed a split-K partial
//! launch and a reduction launch. Operands go straight from global memory into the fragment
//! registers: no operand value is used by two warps of a block, so shared memory would only add a
//! copy. Within a 32-wide k round the k order is permuted (lane `t` of a fragment row owns
//! elements `8t..8t+8` of the round) so that a lane's eight A values, and a B stored n-major, are
//! contiguous: two 16-byte loads when the operand is unit-stride along k and 16-byte aligned,
//! strided scalar loads otherwise. The next round's loads are issued before the current round's
//! multiplies.
//!
//! When B is a weight, the planner packs it at plan time ([`crate::abi::gemm_tc_packed_len`]):
//! already split into its TF32 big and small parts, zero-padded to whole column tiles and rounds,
//! and laid out in the order the lanes read it. The packed variants (`gemm_tc_packed_f32`,
//! `gemm_tc_packed_program_f32`) share this body (`PACKED`): each lane reads its sixteen words
//! per n tile and round with four 16-byte loads and splits only A.

use crate::abi::{
    EwProgramParams, GEMM_TC_KC, GEMM_TC_M, GEMM_TC_MAX_WARPS, GEMM_TC_N, GEMM_TC_PACK_BLOCK, GemmNormParams,
    GemmParams, gemm_tc_packed_offset,
};
use crate::gemm::{Program, finish, program};
use crate::intrinsics::{
    block_dim_x, block_idx_x, block_idx_y, block_idx_z, cvt_rna_tf32, dynamic_shared_ptr,
    grid_dependency_wait, grid_dependents_launch, lane_id, mma_m16n8k8_tf32_f32, sync_threads, thread_idx_x,
    trap,
};

mod pair;
mod round;
mod stats;
pub(crate) use round::{Norm, Operands, load};
use round::{Round, eight, load_a, load_rest, normalize};
use stats::row_statistics;

/// n8 tiles per warp.
pub(crate) const NT: usize = (GEMM_TC_N / 8) as usize;
/// Row stride of a warp's partial tile in shared memory (padded against bank conflicts).
const LD: u32 = GEMM_TC_N + 1;
/// Most partial tiles an output sums (the warps of a block, or of a pair of blocks).
const PARTIALS: usize = 16;
const _: () = assert!(PARTIALS as u32 == 2 * GEMM_TC_MAX_WARPS && pair::PARTS_MAX[1] == 2);

/// `x` as a TF32 value and the TF32 rounding of its remainder (`x ≈ big + small` to 2^-22). An
/// infinite or NaN `x` is carried by its big part alone (its remainder would be NaN).
///
/// The remainder is rounded by hand: `cvt.rna.tf32.f32` is four instructions on sm_90 (it guards
/// infinities and NaNs itself), and a finite remainder needs only the add of half a TF32 ulp and
/// the mask (ties away from zero; the magnitude cannot carry into the sign), the same bits.
#[inline(always)]
pub(crate) fn split(x: f32) -> (u32, u32) {
    let big = cvt_rna_tf32(x);
    let rest = x - f32::from_bits(big);
    let small =
        if rest.abs() < f32::INFINITY { rest.to_bits().wrapping_add(0x1000) & 0xffff_e000 } else { 0 };
    (big, small)
}

/// `acc += A B` over one round (four k8 steps, 3xTF32). Within step `s`, fragment k `t` is the
/// round's k `8t + 2s` and fragment k `t + 4` is `8t + 2s + 1` (the same permutation for A and B).
/// `PACKED`: the round's B is already split.
#[inline(always)]
pub(crate) fn multiply<const PACKED: bool>(acc: &mut [[f32; 4]; NT], r: &Round) {
    // Steps and tiles are const-indexed: a rolled loop would index the round's arrays at run time
    // and move them to local memory.
    step::<0, PACKED>(acc, r);
    step::<1, PACKED>(acc, r);
    step::<2, PACKED>(acc, r);
    step::<3, PACKED>(acc, r);
}

/// Step `S` of [`multiply`] on the four n tiles.
#[inline(always)]
fn step<const S: usize, const PACKED: bool>(acc: &mut [[f32; 4]; NT], r: &Round) {
    let (a0, a0s) = split(r.a[0][2 * S]);
    let (a1, a1s) = split(r.a[1][2 * S]);
    let (a2, a2s) = split(r.a[0][2 * S + 1]);
    let (a3, a3s) = split(r.a[1][2 * S + 1]);
    let a = ([a0, a1, a2, a3], [a0s, a1s, a2s, a3s]);
    let [c0, c1, c2, c3] = acc;
    tile::<S, PACKED>(c0, a, &r.b[0]);
    tile::<S, PACKED>(c1, a, &r.b[1]);
    tile::<S, PACKED>(c2, a, &r.b[2]);
    tile::<S, PACKED>(c3, a, &r.b[3]);
}

/// One m16n8k8 step of an n tile in 3xTF32: `c += A B` with `a` the (big, small) A fragments and
/// `b` the tile's round of B ([`Round::b`]: split here, or already split when `PACKED`).
#[inline(always)]
fn tile<const S: usize, const PACKED: bool>(
    c: &mut [f32; 4],
    (ab, asm): ([u32; 4], [u32; 4]),
    b: &[u32; 16],
) {
    let ((b0, b0s), (b1, b1s)) = if PACKED {
        ((b[2 * S], b[8 + 2 * S]), (b[2 * S + 1], b[8 + 2 * S + 1]))
    } else {
        (split(f32::from_bits(b[2 * S])), split(f32::from_bits(b[2 * S + 1])))
    };
    let d = mma_m16n8k8_tf32_f32(asm, [b0, b1], *c);
    let d = mma_m16n8k8_tf32_f32(ab, [b0s, b1s], d);
    *c = mma_m16n8k8_tf32_f32(ab, [b0, b1], d);
}

/// Tensor-core f32 GEMM: the same operation, operands and epilogue as `gemm_f32` (3xTF32
/// products, f32 accumulation; no split-K partials: `p.splits` must be 0 or 1).
///
/// # Safety
/// As `gemm_f32`.
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// Grid (ceil(n / 32), ceil(m / 16), batch); block `32 * warps` threads, `warps` in
/// `1..=GEMM_TC_MAX_WARPS` (the warps split k); [`crate::abi::GEMM_TC_SHARED_BYTES`] of dynamic
/// shared memory. Warp `w` accumulates the block's 16 x 32 tile (four m16n8 tiles) over k rounds
/// `w, w + warps, ...` (none when `w` is past the rounds); after a barrier, thread `x` finishes
/// outputs `x, x + 32 warps, ...` of the tile (row-major), summing in warp order the partials of
/// the warps that had a round. Warps beyond the k rounds are worth launching for the epilogue
/// alone: one warp finishing all 512 elements issued more than the products of a short k.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_f32(
    p: GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<false, false, false>(&p, a, b, c, y, None, None) }
}

/// [`gemm_tc_f32`] with a program epilogue, as `gemm_program_f32` is to `gemm_f32`.
///
/// # Safety
/// As `gemm_program_f32`: `y` may equal a program input of the output's shape read without
/// broadcast (each output element's input is read by the thread that writes it, right before).
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemm_tc_f32`]; the program runs in the rolled epilogue loop (one copy of the interpreter).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_program_f32(
    p: GemmParams,
    e: EwProgramParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<false, false, false>(&p, a, b, c, y, program(&e, x1, x2, x3), None) }
}

/// [`gemm_tc_f32`] with B a weight packed on the host: `bp` holds
/// [`crate::abi::gemm_tc_packed_len`]`(p.k, p.n)` f32 in the layout documented there (B's TF32
/// big and small parts, in the lanes' order), read with 16-byte loads and not split. The host
/// rounds as `cvt.rna.tf32.f32`, so the products are those [`gemm_tc_f32`] forms from the unpacked
/// B.
///
/// # Safety
/// As `gemm_f32` for A, C and Y; `bp` is 16-byte aligned and holds the packed B of `p.k x p.n`
/// (traps when misaligned). `p.b_rs` and `p.b_cs` are not read; `p.b_bs` must be 0 (one B for the
/// whole batch; traps otherwise).
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// As [`gemm_tc_f32`]; lane `l` of a warp reads, per n tile and round, the sixteen f32 of its
/// entry (`gemm_tc_packed_offset`) as four 16-byte loads. Column tiles past `n` read the last
/// one (their results are not stored).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_f32(
    p: GemmParams,
    a: *const f32,
    bp: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<true, false, false>(&p, a, bp, c, y, None, None) }
}

/// [`gemm_tc_packed_f32`] with a program epilogue, as [`gemm_tc_program_f32`] is to
/// [`gemm_tc_f32`].
///
/// # Safety
/// As [`gemm_tc_packed_f32`] and [`gemm_tc_program_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemm_tc_packed_f32`]; the program runs in the rolled epilogue loop.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_program_f32(
    p: GemmParams,
    e: EwProgramParams,
    a: *const f32,
    bp: *const f32,
    c: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<true, false, false>(&p, a, bp, c, y, program(&e, x1, x2, x3), None) }
}

/// [`gemm_tc_packed_f32`] whose A operand is the LayerNormalization of the rows of `a` over k
/// (`A'[i, k] = (a[i, k] - mean_i) / sqrt(var_i + n.epsilon) * scale[k] + bias[k]`, the mean and
/// variance over the row's `p.k` elements, as `layer_norm_f32` computes them), applied as A is
/// loaded: the normalized rows never exist in memory.
///
/// # Safety
/// As [`gemm_tc_packed_f32`], `a` holding the rows to normalize; `scale` (and `bias` unless null)
/// hold `p.k` f32.
///
/// # Parameters
/// See [`GemmParams`] and [`GemmNormParams`].
///
/// # Thread mapping
/// As [`gemm_tc_packed_f32`], with [`crate::abi::GEMM_TC_NORM_SHARED_BYTES`] of dynamic shared
/// memory. The first k round's loads issue, then the block's warps compute the statistics of its
/// 16 rows into shared memory (warp `w` rows `w, w + warps, ...`, each lane eight consecutive k of
/// every 256, merged as moments), then a barrier; A is normalized in registers before each round's
/// multiplies.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_norm_f32(
    p: GemmParams,
    n: GemmNormParams,
    a: *const f32,
    bp: *const f32,
    c: *const f32,
    scale: *const f32,
    bias: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<true, true, false>(&p, a, bp, c, y, None, Some((n.epsilon, scale, bias))) }
}

/// The body of [`gemm_tc_f32`] and [`gemm_tc_program_f32`], and with `PACKED` (`b` the packed B)
/// of [`gemm_tc_packed_f32`] and [`gemm_tc_packed_program_f32`].
///
/// # Safety
/// As [`gemm_tc_program_f32`], or [`gemm_tc_packed_program_f32`] when `PACKED`.
/// With `NORM`, `norm` holds (epsilon, scale, bias) of [`gemm_tc_packed_norm_f32`].
///
/// With `PAIR` (the `_pair` entries, [`pair`]), blocks `2c` and `2c + 1` share column tile `c` and
/// split its k rounds as the two halves of one block of twice the warps would.
#[inline(always)]
pub(crate) unsafe fn gemm_tc<const PACKED: bool, const NORM: bool, const PAIR: bool>(
    p: &GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
    program: Program,
    norm: Option<(f32, *const f32, *const f32)>,
) {
    let p = *p;
    let threads = block_dim_x();
    let warps = threads / 32;
    if p.splits > 1 || threads % 32 != 0 || warps == 0 || warps > GEMM_TC_MAX_WARPS {
        trap();
    }
    if PACKED && (!p.b_shared() || (b as usize) % 16 != 0) {
        trap();
    }
    // Every block waits for the previous kernel before it leaves, also when it has nothing to do:
    // a grid whose blocks all left without waiting would let the next kernel's wait return before
    // that kernel finished.
    if p.m == 0 || p.n == 0 {
        grid_dependency_wait();
        return;
    }
    // This block's part of the column tile's k rounds, and how many parts share the tile.
    let Some((part, parts)) = (if PAIR { pair::part() } else { Some((0, 1)) }) else {
        grid_dependency_wait();
        return;
    };
    let (tid, lane) = (thread_idx_x(), lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let tile_x = if PAIR { block_idx_x() / 2 } else { block_idx_x() };
    let (row0, col0, batch) = (block_idx_y() * GEMM_TC_M, tile_x * GEMM_TC_N, block_idx_z() as u64);
    let (a0, b0) = (p.a_at(batch), p.b_at(batch));
    // Rows and columns past the matrix read the last one (valid memory; their results are not
    // stored), so that the loads need no condition.
    let row = |h: u32| (row0 + g + 8 * h).min(p.m - 1) as u64;
    let col = |j: u32| (col0 + 8 * j + g).min(p.n - 1) as u64;
    let aligned = |ptr: *const f32, s1: u64, s2: u64| (ptr as usize) % 16 == 0 && s1 % 4 == 0 && s2 % 4 == 0;
    let rounds = p.k.div_ceil(GEMM_TC_KC);
    let (b_base, b_stride, b_vec) = if PACKED {
        // Column tiles past n read the last one, as columns do below.
        let last = p.n.div_ceil(8) - 1;
        let at =
            |j: u32| gemm_tc_packed_offset((col0 / 8 + j).min(last) as u64, 0, rounds as u64, lane as u64);
        ([at(0), at(1), at(2), at(3)], GEMM_TC_PACK_BLOCK as u64, false)
    } else {
        let at = |j: u32| b0 + col(j) * p.b_cs;
        ([at(0), at(1), at(2), at(3)], p.b_rs, p.b_rs == 1 && aligned(b, p.b_cs, p.b_bs | p.b_bs2))
    };
    let ops = Operands {
        a,
        b,
        k: p.k,
        a_base: [a0 + row(0) * p.a_rs, a0 + row(1) * p.a_rs],
        a_stride: p.a_cs,
        a_vec: p.a_cs == 1 && aligned(a, p.a_rs, p.a_bs | p.a_bs2),
        b_base,
        b_stride,
        b_vec,
        lane_k: 8 * t,
    };
    let smem = dynamic_shared_ptr() as *mut f32;
    let mut ln = Norm::NONE;
    if NORM {
        let Some((_, scale, bias)) = norm else { trap() };
        let vec = (scale as usize) % 16 == 0 && (bias.is_null() || (bias as usize) % 16 == 0);
        ln = Norm { scale, bias, stats: [(0.0, 1.0); 2], vec };
    }
    // Warp w of part c is warp `c * warps + w` of the tile: rounds `c * warps + w`, then every
    // `parts * warps`-th.
    let slot = part * warps + tid / 32;
    let step = parts * warps;
    let mut r = slot;
    // The first round's loads issue before the LayerNorm statistics' (they do not need them).
    // Weights (a packed B, the LayerNorm's scale and bias) do not depend on the previous kernel:
    // they load before waiting for it (programmatic dependent launch), A after; a B the run
    // computes (`b_computed`: packed on the device from a dequantized weight) loads after.
    // SAFETY (the loads): the operands cover every k below p.k (the contract).
    let mut first = if PACKED && p.b_computed == 0 && r < rounds {
        Some(unsafe { load_rest::<PACKED, NORM>(&ops, r * GEMM_TC_KC, &ln) })
    } else {
        None
    };
    grid_dependency_wait();
    match first.as_mut() {
        Some(f) => unsafe { load_a(&ops, r * GEMM_TC_KC, f) },
        None if r < rounds => first = Some(unsafe { load::<PACKED, NORM>(&ops, r * GEMM_TC_KC, &ln) }),
        None => {}
    }
    if NORM {
        let Some((eps, _, _)) = norm else { trap() };
        // The statistics of the block's rows, after the partial tiles in shared memory.
        // SAFETY: GEMM_TC_NORM_SHARED_BYTES (GEMM_TC_PAIR_NORM_SHARED_BYTES) holds the tiles and
        // 2 * GEMM_TC_M f32 more.
        let stats = unsafe {
            smem.add((pair::PARTS_MAX[PAIR as usize] * GEMM_TC_MAX_WARPS * GEMM_TC_M * LD) as usize)
        };
        // SAFETY: A as above; the statistics fit (same).
        unsafe { row_statistics(&ops, &p, a0, row0, eps, stats) };
        sync_threads();
        // SAFETY: g + 8h < GEMM_TC_M: written before the barrier.
        let stat = |h: u32| unsafe {
            (*stats.add(2 * (g + 8 * h) as usize), *stats.add(2 * (g + 8 * h) as usize + 1))
        };
        ln.stats = [stat(0), stat(1)];
    }
    let mut acc = [[0f32; 4]; NT];
    // Two rounds' registers in turn: round `r` is multiplied while round `r + step` loads into the
    // other set, and no round is copied from one set to the other (a rolled loop carrying one
    // round moved every register of it each time).
    let mut round = |cur: &mut Round| {
        if NORM {
            normalize(cur, &ln);
        }
        multiply::<PACKED>(&mut acc, cur);
    };
    if let Some(mut a) = first {
        loop {
            if r + step >= rounds {
                round(&mut a);
                break;
            }
            // SAFETY (both loads): a round below `rounds`; the operands cover it (as above).
            let mut b = unsafe { load::<PACKED, NORM>(&ops, (r + step) * GEMM_TC_KC, &ln) };
            round(&mut a);
            r += step;
            if r + step >= rounds {
                round(&mut b);
                break;
            }
            a = unsafe { load::<PACKED, NORM>(&ops, (r + step) * GEMM_TC_KC, &ln) };
            round(&mut b);
            r += step;
        }
    }
    if PAIR {
        // Both blocks of the pair have started (the second writes into the first's memory).
        pair::ready();
    }
    if PAIR && part != 0 {
        // The second part's partial tiles go to the first block's shared memory, after its own.
        // SAFETY: the slot's tile lies inside GEMM_TC_PAIR_SHARED_BYTES; every warp of this block
        // stores its tile once; the first block runs until they have landed (`pair::collect`).
        unsafe { pair::store_remote(&acc, slot * GEMM_TC_M * LD, g, t) };
        return;
    }
    // SAFETY: warp w's partial tile lies inside the GEMM_TC_SHARED_BYTES the launch provides.
    let tile = unsafe { smem.add((slot * GEMM_TC_M * LD) as usize) };
    for (j, d) in acc.iter().enumerate() {
        for (q, v) in d.iter().enumerate() {
            let (i, cc) = (g + 8 * (q as u32 / 2), 8 * j as u32 + 2 * t + q as u32 % 2);
            // SAFETY: i < 16, cc < 32: inside the warp's tile.
            unsafe { *tile.add((i * LD + cc) as usize) = *v };
        }
    }
    sync_threads();
    // Only the epilogue is left: the next kernel may launch (its blocks wait for this grid).
    grid_dependents_launch();
    if PAIR {
        pair::collect(warps);
    }
    let (yv, cb) = (p.y_view(batch), crate::gemm::c_of(&p, c, batch));
    // The partial tiles that hold a k round (warps past the rounds only help finish).
    let live = step.min(rounds);
    let mut o = tid;
    while o < GEMM_TC_M * GEMM_TC_N {
        let (li, lj) = (o / GEMM_TC_N, o % GEMM_TC_N);
        let (i, j) = (row0 + li, col0 + lj);
        if i < p.m && j < p.n {
            // Every partial's load issues before the first add (a rolled loop waited for each in
            // turn), then they are summed in warp order. By literal: the array stays in registers.
            // Blocks of at most four warps (the small GEMMs) test only four guards.
            let mut part = [0.0f32; PARTIALS];
            macro_rules! partials {
                ($($w:literal)*) => {{
                    $(
                        if $w < live {
                            // SAFETY: w < parts * warps: a partial tile written before the barrier.
                            part[$w] = unsafe { *smem.add((($w * GEMM_TC_M + li) * LD + lj) as usize) };
                        }
                    )*
                    let mut v = 0.0f32;
                    $(
                        if $w < live {
                            v += part[$w];
                        }
                    )*
                    v
                }};
            }
            let v =
                if live <= 4 { partials!(0 1 2 3) } else { partials!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15) };
            // SAFETY: the program's inputs and C cover the output (the contract).
            let out = unsafe { finish(&p, cb, program, batch, i, j, v) };
            // SAFETY: i < m, j < n: inside output matrix `batch`.
            unsafe { *y.add(yv.offset(i, j) as usize) = out };
        }
        o += threads;
    }
}
