//! Column tiles split over a pair of blocks (the `_pair` entries): a GEMM whose 16 x 32 tiles
//! fill at most half the device (GPT-2's MLP down-projection at sequence 128: 64 tiles, k 1024)
//! would leave half the multiprocessors idle, its warps walking long k loops. On the Hopper
//! flavour each tile is a thread-block cluster of two: block `2c` and block `2c + 1` take the two
//! halves of a block of twice the warps (warp `w` of the second is warp `warps + w` of the tile),
//! the second writes its partial tiles into the first's shared memory (distributed shared
//! memory, `st.async`), each store counted in by a memory barrier of the first block, and once
//! every byte has landed the first sums all of them in warp order and finishes the tile, exactly
//! as that block would. The result does not depend on the split. No fence and no second cluster
//! barrier: a cluster barrier that orders memory costs a GPU-wide fence on each side (ncu: a
//! fifth of the MLP down-projection's warp time in `MEMBAR` and the barrier's waits).
//!
//! The portable flavour has no clusters: there the second block of each pair leaves at once and
//! the first walks every round (the planner only picks these entries for the Hopper flavour).

#[cfg(ferrofuse_hopper)]
use super::LD;
use super::{NT, gemm_tc};
use crate::abi::{EwProgramParams, GemmNormParams, GemmParams};
#[cfg(ferrofuse_hopper)]
use crate::abi::{GEMM_TC_M, GEMM_TC_N, GEMM_TC_PAIR_BARRIER_AT};
use crate::gemm::program;
#[cfg(not(ferrofuse_hopper))]
use crate::intrinsics::block_idx_x;
#[cfg(ferrofuse_hopper)]
use crate::intrinsics::{
    cluster_arrive_relaxed, cluster_rank, cluster_wait, dynamic_shared_addr, map_shared_cluster,
    mbarrier_arrive_expect_tx, mbarrier_init_cluster, mbarrier_wait_parity, store_async_cluster_f32,
    thread_idx_x,
};

/// Parts a tile's rounds are split into, at most: without and with `PAIR` (shared-memory layout).
pub(super) const PARTS_MAX: [u32; 2] = [1, 2];

/// The first block's memory barrier (shared-window address) that counts the second block's
/// partial tiles in.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
fn tiles_in() -> u32 {
    dynamic_shared_addr() + GEMM_TC_PAIR_BARRIER_AT
}

/// This block's part of its tile and the number of parts, `None` for a block that has nothing to
/// do. On Hopper, the first block's thread 0 also sets up the barrier that counts the second
/// block's partial tiles in ([`collect`]), and every thread arrives at the cluster barrier
/// [`ready`] completes. Block-uniform.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub(super) fn part() -> Option<(u32, u32)> {
    let rank = cluster_rank();
    if rank == 0 && thread_idx_x() == 0 {
        // SAFETY: the barrier's 8 bytes lie past the tiles and statistics (GEMM_TC_PAIR_SHARED_BYTES),
        // used by nothing else; one arrival, [`collect`]'s.
        unsafe { mbarrier_init_cluster(tiles_in(), 1) };
    }
    // Orders nothing but the barrier's initialization (fenced above): no memory fence.
    cluster_arrive_relaxed();
    Some((rank, 2))
}
#[cfg(not(ferrofuse_hopper))]
#[inline(always)]
pub(super) fn part() -> Option<(u32, u32)> {
    if block_idx_x() % 2 == 1 { None } else { Some((0, 1)) }
}

/// Returns once both blocks of the pair have started (the first's shared memory and barrier may be
/// written).
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub(super) fn ready() {
    cluster_wait();
}
#[cfg(not(ferrofuse_hopper))]
#[inline(always)]
pub(super) fn ready() {}

/// In the first block of `warps` warps (after a block barrier): returns once the second block's
/// partial tiles have all landed in this block's shared memory, and they are visible. Thread 0
/// arrives, telling the barrier how many bytes to wait for (stores that landed before count
/// already: the transfer count may run below zero until then).
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub(super) fn collect(warps: u32) {
    // SAFETY: initialized by `part` (thread 0, before the block barrier the caller passed); its
    // only phase completes with this arrival and the second block's stores (`store_remote`, a
    // tile from every warp of it).
    unsafe {
        if thread_idx_x() == 0 {
            mbarrier_arrive_expect_tx(tiles_in(), warps * GEMM_TC_M * GEMM_TC_N * 4);
        }
        mbarrier_wait_parity(tiles_in(), 0);
    }
}
#[cfg(not(ferrofuse_hopper))]
#[inline(always)]
pub(super) fn collect(_warps: u32) {}

/// Stores the lane's share of its warp's partial tile (`acc`, the m16n8 accumulators of the four
/// n tiles; `g = lane / 4`, `t = lane % 4`) at f32 offset `at` of the first block's shared memory,
/// each store counted in by that block's barrier ([`collect`]).
///
/// # Safety
/// The tile (`GEMM_TC_M` rows of `LD` f32 from `at`) lies inside the launch's dynamic shared
/// memory, [`ready`] has returned, and every lane of every warp of the second block stores its
/// tile exactly once (the bytes the barrier expects).
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub(super) unsafe fn store_remote(acc: &[[f32; 4]; NT], at: u32, g: u32, t: u32) {
    let (base, bar) =
        (map_shared_cluster(dynamic_shared_addr() + 4 * at, 0), map_shared_cluster(tiles_in(), 0));
    for (j, d) in acc.iter().enumerate() {
        for (q, v) in d.iter().enumerate() {
            let (i, cc) = (g + 8 * (q as u32 / 2), 8 * j as u32 + 2 * t + q as u32 % 2);
            // SAFETY: i < 16, cc < 32: inside the tile, in the first block, which waits for these
            // bytes (the contract).
            unsafe { store_async_cluster_f32(base + 4 * (i * LD + cc), *v, bar) };
        }
    }
}
#[cfg(not(ferrofuse_hopper))]
#[inline(always)]
pub(super) unsafe fn store_remote(_: &[[f32; 4]; NT], _: u32, _: u32, _: u32) {
    // Never reached: without clusters every block is the first of its pair.
    crate::intrinsics::trap()
}

/// [`super::gemm_tc_f32`] with each column tile split over a pair of blocks.
///
/// # Safety
/// As [`super::gemm_tc_f32`].
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// As [`super::gemm_tc_f32`] with the grid's x doubled: blocks `2c` and `2c + 1` (a cluster of
/// two on Hopper) take column tile `c`, warp `w` of block `2c + h` the k rounds `h * warps + w`,
/// then every `2 * warps`-th; `crate::abi::GEMM_TC_PAIR_SHARED_BYTES` of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_pair_f32(
    p: GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<false, false, true>(&p, a, b, c, y, None, None) }
}

/// [`super::gemm_tc_program_f32`] with each column tile split over a pair of blocks.
///
/// # Safety
/// As [`super::gemm_tc_program_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemm_tc_pair_f32`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gemm_tc_program_pair_f32(
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
    unsafe { gemm_tc::<false, false, true>(&p, a, b, c, y, program(&e, x1, x2, x3), None) }
}

/// [`super::gemm_tc_packed_f32`] with each column tile split over a pair of blocks.
///
/// # Safety
/// As [`super::gemm_tc_packed_f32`].
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// As [`gemm_tc_pair_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_pair_f32(
    p: GemmParams,
    a: *const f32,
    bp: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tc::<true, false, true>(&p, a, bp, c, y, None, None) }
}

/// [`super::gemm_tc_packed_program_f32`] with each column tile split over a pair of blocks.
///
/// # Safety
/// As [`super::gemm_tc_packed_program_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemm_tc_pair_f32`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_program_pair_f32(
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
    unsafe { gemm_tc::<true, false, true>(&p, a, bp, c, y, program(&e, x1, x2, x3), None) }
}

/// [`super::gemm_tc_packed_norm_f32`] with each column tile split over a pair of blocks (both
/// compute their rows' statistics).
///
/// # Safety
/// As [`super::gemm_tc_packed_norm_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`GemmNormParams`].
///
/// # Thread mapping
/// As [`gemm_tc_pair_f32`], with `crate::abi::GEMM_TC_PAIR_NORM_SHARED_BYTES` of dynamic shared
/// memory.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gemm_tc_packed_norm_pair_f32(
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
    unsafe { gemm_tc::<true, true, true>(&p, a, bp, c, y, None, Some((n.epsilon, scale, bias))) }
}
