//! Device intrinsics, in the spirit of rust-cuda's `cuda_std`: the only module that uses `asm!` or
//! `core::arch::nvptx`.
//!
//! Each function states its contract. "Warp-collective" functions must be reached by every lane
//! named in the mask (all 32 here) with the same arguments where noted; "block-collective" ones by
//! every thread of the block. Addresses documented as "shared" are 32-bit offsets in the `.shared`
//! window (as `cp.async` and `ldmatrix` take them), not generic pointers.
#![allow(clippy::missing_safety_doc)]

use core::arch::asm;
use core::arch::nvptx;

#[cfg(ferrofuse_hopper)]
mod cluster;
#[cfg(ferrofuse_hopper)]
pub use cluster::*;
#[cfg(ferrofuse_hopper)]
mod wgmma;
#[cfg(ferrofuse_hopper)]
pub use wgmma::*;

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

// The dynamic shared memory of a launch: one array whose size is the launch's `shared_bytes`.
core::arch::global_asm!(".extern .shared .align 16 .b8 SMEM[];");

/// `threadIdx.x`
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reads a special register; no memory is touched.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// `threadIdx.y`
#[inline(always)]
pub fn thread_idx_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_thread_idx_y() as u32 }
}

/// `blockIdx.x`
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// `blockIdx.y`
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_y() as u32 }
}

/// `blockIdx.z`
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_z() as u32 }
}

/// `blockDim.x`
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_dim_x() as u32 }
}

/// `gridDim.x`
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// `gridDim.y`
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_y() as u32 }
}

/// Index of this thread in a 1-D grid: `blockIdx.x * blockDim.x + threadIdx.x`, as u64 so that it
/// never wraps.
#[inline(always)]
pub fn global_thread_x() -> u64 {
    block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64
}

/// Threads in a 1-D grid: `gridDim.x * blockDim.x` (the grid-stride step).
#[inline(always)]
pub fn grid_threads_x() -> u64 {
    grid_dim_x() as u64 * block_dim_x() as u64
}

/// `floor(x)` in f64 (`cvt.rmi.f64.f64`, exact like the host's `f64::floor`).
#[inline(always)]
pub fn floor_f64(x: f64) -> f64 {
    let r: f64;
    // SAFETY: a pure register-to-register conversion.
    unsafe {
        asm!("cvt.rmi.f64.f64 {r}, {x};", r = out(reg64) r, x = in(reg64) x, options(pure, nomem, nostack))
    };
    r
}

/// `x` rounded to an integral value in f32 by `cvt.{MODE}.f32.f32`: `rni` to nearest even, `rmi`
/// down, `rpi` up (exact, as `libm`'s `rintf`, `floorf`, `ceilf`; NaN stays NaN, infinities and
/// signed zeros stay).
macro_rules! round_f32 {
    ($(#[$doc:meta] $name:ident $mode:literal)*) => {$(
        #[$doc]
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            let r: f32;
            // SAFETY: a pure register-to-register conversion.
            unsafe {
                asm!(concat!("cvt.", $mode, ".f32.f32 {r}, {x};"), r = out(reg32) r, x = in(reg32) x,
                     options(pure, nomem, nostack))
            };
            r
        }
    )*};
}
round_f32! {
    /// `x` rounded to the nearest integer, ties to even (`cvt.rni.f32.f32`).
    rint_f32 "rni"
    /// `floor(x)` (`cvt.rmi.f32.f32`).
    floor_f32 "rmi"
    /// `ceil(x)` (`cvt.rpi.f32.f32`).
    ceil_f32 "rpi"
}

/// Loads 16 bytes at `src` as one vector load (`ld.global.v4.u32`; rustc moves a 16-byte value
/// as two 8-byte halves). Read-only, so loads of several vectors issue back to back.
///
/// # Safety
/// `src` is a 16-byte aligned global-memory address valid for 16 bytes.
#[inline(always)]
pub unsafe fn load_v4(src: *const [u32; 4]) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller's contract; generic addresses of global memory convert with cvta.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {s}; ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            s = in(reg64) src,
            a = out(reg32) a,
            b = out(reg32) b,
            c = out(reg32) c,
            d = out(reg32) d,
            options(readonly, nostack)
        )
    };
    [a, b, c, d]
}

/// Stores 16 bytes at `dst` as one vector store (`st.global.v4.u32`).
///
/// # Safety
/// `dst` is a 16-byte aligned global-memory address valid for 16 bytes.
#[inline(always)]
pub unsafe fn store_v4(dst: *mut [u32; 4], v: [u32; 4]) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {t}; st.global.v4.u32 [g], {{{a}, {b}, {c}, {d}}}; }}",
            t = in(reg64) dst,
            a = in(reg32) v[0],
            b = in(reg32) v[1],
            c = in(reg32) v[2],
            d = in(reg32) v[3],
            options(nostack)
        )
    };
}

/// This thread's lane in its warp, `%laneid` (0..32).
#[inline(always)]
pub fn lane_id() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Block-wide barrier (`bar.sync 0`): block-collective; orders shared- and global-memory accesses of
/// the block's threads before it against those after it.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier; callers reach it from every thread of the block (contract above).
    unsafe { nvptx::_syncthreads() }
}

/// Block-wide barrier that also ORs a predicate over the block (`bar.red.or.pred`): every thread
/// gets whether any thread passed `true`. Block-collective, as [`sync_threads`].
#[inline(always)]
pub fn sync_threads_or(p: bool) -> bool {
    let r: u32;
    // SAFETY: a barrier; callers reach it from every thread of the block (contract above).
    unsafe {
        asm!(
            "{{ .reg .pred a, r; setp.ne.u32 a, {p}, 0; bar.red.or.pred r, 0, a; selp.u32 {r}, 1, 0, r; }}",
            p = in(reg32) p as u32,
            r = out(reg32) r,
            options(nostack),
        )
    };
    r != 0
}

/// Warp barrier over all 32 lanes (`bar.warp.sync 0xffffffff`): warp-collective; orders memory
/// accesses of the warp's lanes.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: a barrier; every lane of the warp reaches it (contract above).
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) };
}

/// Butterfly shuffle: returns `v` of lane `lane_id() ^ lane_mask`. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn shfl_xor_u32(v: u32, lane_mask: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp exchange; every lane participates (contract above).
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, m = in(reg32) lane_mask, options(nomem, nostack))
    };
    r
}

/// Butterfly shuffle of an f32; see [`shfl_xor_u32`].
#[inline(always)]
pub fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    f32::from_bits(shfl_xor_u32(v.to_bits(), lane_mask))
}

/// Shuffle down: returns `v` of lane `lane_id() + delta`, or this lane's own `v` when that lane is
/// past 31. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn shfl_down_u32(v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp exchange; every lane participates.
    unsafe {
        asm!("shfl.sync.down.b32 {r}, {v}, {d}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta, options(nomem, nostack))
    };
    r
}

/// Indexed shuffle: returns `v` of lane `src_lane % 32`. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn shfl_idx_u32(v: u32, src_lane: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp exchange; every lane participates.
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, s = in(reg32) src_lane, options(nomem, nostack))
    };
    r
}

/// Bit `i` set iff lane `i`'s `pred` is true. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn vote_ballot(pred: bool) -> u32 {
    let r: u32;
    // SAFETY: register-only warp vote; every lane participates.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {r}, p, 0xffffffff; }}",
             r = out(reg32) r, v = in(reg32) pred as u32, options(nomem, nostack))
    };
    r
}

/// True iff `pred` is true on every lane. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn vote_all(pred: bool) -> bool {
    vote_ballot(pred) == u32::MAX
}

/// True iff `pred` is true on some lane. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn vote_any(pred: bool) -> bool {
    vote_ballot(pred) != 0
}

/// Sum of `v` over the warp, returned to every lane (butterfly reduction: the same order on every
/// lane, so all lanes get bit-identical results). Warp-collective (all 32 lanes).
#[inline(always)]
pub fn warp_sum_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

/// Maximum of `v` over the warp, returned to every lane. Warp-collective (all 32 lanes).
#[inline(always)]
pub fn warp_max_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v = crate::math::max(v, shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// Atomically adds `v` to `*addr` (global or shared, generic address), returning nothing: a
/// reduction the thread does not wait for, unlike [`atomic_add_f32`].
///
/// # Safety
/// As [`atomic_add_f32`].
#[inline(always)]
pub unsafe fn red_add_f32(addr: *mut f32, v: f32) {
    // SAFETY: the caller guarantees `addr` is valid and aligned (contract above).
    unsafe { asm!("red.add.f32 [{a}], {v};", a = in(reg64) addr, v = in(reg32) v, options(nostack)) };
}

/// Atomically adds `v[j]` to `addr[j]` for `j < 4`, each element on its own: one 16-byte vector
/// reduction on Hopper (`red.global.v4.f32.add`, sm_90), four [`red_add_f32`] elsewhere.
///
/// # Safety
/// `addr` is a 16-byte aligned location of four f32 in global memory, each updated by
/// concurrent writers only through atomics.
#[inline(always)]
pub unsafe fn red_add_f32x4(addr: *mut f32, v: [f32; 4]) {
    #[cfg(ferrofuse_hopper)]
    // SAFETY: the caller guarantees a global, 16-byte aligned location (contract above).
    unsafe {
        asm!(
            "red.global.v4.f32.add [{a}], {{{v0}, {v1}, {v2}, {v3}}};",
            a = in(reg64) addr,
            v0 = in(reg32) v[0],
            v1 = in(reg32) v[1],
            v2 = in(reg32) v[2],
            v3 = in(reg32) v[3],
            options(nostack)
        )
    };
    #[cfg(not(ferrofuse_hopper))]
    for (j, &x) in v.iter().enumerate() {
        // SAFETY: as above, element by element.
        unsafe { red_add_f32(addr.add(j), x) };
    }
}

/// Atomically adds `v` to `*addr` (global or shared, generic address) and returns the old value.
///
/// # Safety
/// `addr` must be a valid, 4-byte aligned f32 location that every concurrent writer updates only
/// through atomics.
#[inline(always)]
pub unsafe fn atomic_add_f32(addr: *mut f32, v: f32) -> f32 {
    let r: f32;
    // SAFETY: the caller guarantees `addr` is valid and aligned (contract above).
    unsafe {
        asm!("atom.add.f32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg64) addr, v = in(reg32) v, options(nostack))
    };
    r
}

/// Atomically adds `v` to `*addr` (generic address) and returns the old value.
///
/// # Safety
/// As [`atomic_add_f32`], for a u32 location.
#[inline(always)]
pub unsafe fn atomic_add_u32(addr: *mut u32, v: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees `addr` is valid and aligned.
    unsafe {
        asm!("atom.add.u32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg64) addr, v = in(reg32) v, options(nostack))
    };
    r
}

/// Atomically stores `max(*addr, v)` (unsigned) and returns the old value.
///
/// # Safety
/// As [`atomic_add_u32`].
#[inline(always)]
pub unsafe fn atomic_max_u32(addr: *mut u32, v: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees `addr` is valid and aligned.
    unsafe {
        asm!("atom.max.u32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg64) addr, v = in(reg32) v, options(nostack))
    };
    r
}

/// Atomic compare-and-swap: if `*addr == expected` store `new`; returns the old value either way.
///
/// # Safety
/// As [`atomic_add_u32`].
#[inline(always)]
pub unsafe fn atomic_cas_u32(addr: *mut u32, expected: u32, new: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees `addr` is valid and aligned.
    unsafe {
        asm!("atom.cas.b32 {r}, [{a}], {e}, {n};", r = out(reg32) r, a = in(reg64) addr,
             e = in(reg32) expected, n = in(reg32) new, options(nostack))
    };
    r
}

/// Four f32 at a 16-byte boundary: reading or writing one through a pointer is a single 16-byte
/// access (`ld.v4` / `st.v4`). Bit patterns (a packed TF32 operand) read the same way and convert
/// with `to_bits`, which costs nothing.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct F32x4(pub [f32; 4]);

/// Generic pointer to the start of this launch's dynamic shared memory (16-byte aligned; as many
/// bytes as the launch's `shared_bytes`).
#[inline(always)]
pub fn dynamic_shared_ptr() -> *mut u8 {
    let r: u64;
    // SAFETY: takes the address of the `SMEM` symbol declared above; nothing is dereferenced.
    unsafe {
        asm!("mov.u64 {r}, SMEM; cvta.shared.u64 {r}, {r};", r = out(reg64) r, options(pure, nomem, nostack))
    };
    r as *mut u8
}

/// Shared-window address (what `cp.async` and `ldmatrix` take) of the start of dynamic shared memory.
#[inline(always)]
pub fn dynamic_shared_addr() -> u32 {
    let r: u32;
    // SAFETY: takes the address of the `SMEM` symbol; nothing is dereferenced.
    unsafe { asm!("mov.u32 {r}, SMEM;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Programmatic dependent launch (Hopper): returns once the grids this one depends on have
/// finished and their writes are visible (`griddepcontrol.wait`). The build inserts it at the start
/// of every entry of the Hopper flavour that does not call it itself; an entry that does may first
/// compute from its parameters and read weights (memory no kernel writes) while the previous
/// kernel finishes. Nothing written by an earlier kernel may be read, and nothing written, before
/// it. Does nothing on a launch without the programmatic attribute, and on the portable flavour.
#[inline(always)]
pub fn grid_dependency_wait() {
    #[cfg(ferrofuse_hopper)]
    // SAFETY: a synchronisation instruction; it touches no memory itself.
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack))
    };
}

/// Programmatic dependent launch (Hopper): lets the grid that depends on this one launch once
/// every block of this grid has executed this or exited (`griddepcontrol.launch_dependents`),
/// instead of once they have all exited. Its blocks still wait in [`grid_dependency_wait`] for
/// this grid to finish: this only moves their launch earlier. Does nothing on the portable flavour.
#[inline(always)]
pub fn grid_dependents_launch() {
    #[cfg(ferrofuse_hopper)]
    // SAFETY: a scheduling hint; it touches no memory.
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
}

/// Starts an asynchronous 16-byte copy from global memory to shared memory (`cp.async.cg`, bypassing
/// L1). Completes at a later [`cp_async_wait_all`] after [`cp_async_commit`].
///
/// # Safety
/// `src` must be a 16-byte aligned global address with 16 readable bytes; `dst_shared` a 16-byte
/// aligned shared address inside the launch's shared memory, not read before the wait.
#[inline(always)]
pub unsafe fn cp_async_16(dst_shared: u32, src: *const u8) {
    // SAFETY: the caller guarantees both addresses (contract above).
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst_shared, s = in(reg64) src, options(nostack))
    };
}

/// [`cp_async_16`] copying only the first `src_bytes` (0..=16) bytes of `src` and zero-filling the
/// rest of the 16 (`cp.async.cg ... 16, src_bytes`): the loads of a tile's edge, past a matrix's
/// rows or columns, need no branch. With `src_bytes == 0` nothing is read.
///
/// # Safety
/// `src` must be a 16-byte aligned global address with `src_bytes` readable bytes; `dst_shared` as
/// for [`cp_async_16`].
#[inline(always)]
pub unsafe fn cp_async_16_zfill(dst_shared: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: the caller guarantees both addresses and the readable length (contract above).
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst_shared, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack))
    };
}

/// [`cp_async_16_zfill`] for one f32 (`cp.async.ca ... 4, src_bytes`, through L1: the gathers
/// of an implicit-GEMM convolution read each input element once per tap): copies the 4 bytes at
/// `src` when `src_bytes` is 4, writes zero when it is 0 (then nothing is read).
///
/// # Safety
/// `src` must be a 4-byte aligned global address with `src_bytes` readable bytes; `dst_shared` a
/// 4-byte aligned shared-window address inside the launch's shared memory.
#[inline(always)]
pub unsafe fn cp_async_4_zfill(dst_shared: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: the caller guarantees both addresses and the readable length (contract above).
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst_shared, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack))
    };
}

/// Waits until at most `N` of this thread's committed `cp.async` groups are still in flight (the
/// older ones have landed). Other threads' copies become visible only after a following barrier.
#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    // SAFETY: waits on this thread's own copies.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

/// Reads the f32 at shared-window address `addr` (`ld.shared.f32`) as its bits.
///
/// # Safety
/// `addr` is a 4-byte aligned address inside the launch's shared memory, written before (and
/// ordered by a barrier with) this load.
#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees the address (contract above).
    unsafe {
        asm!("ld.shared.b32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(nostack, readonly))
    };
    r
}

/// Closes the group of `cp.async` copies this thread issued since the last commit.
#[inline(always)]
pub fn cp_async_commit() {
    // SAFETY: affects only this thread's async-copy bookkeeping.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until every committed `cp.async` group of this thread has landed. Other threads' copies
/// become visible only after a following barrier.
#[inline(always)]
pub fn cp_async_wait_all() {
    // SAFETY: waits on this thread's own copies.
    unsafe { asm!("cp.async.wait_group 0;", options(nostack)) };
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: loads four 8x8 b16 matrices. Lane `l` supplies the
/// shared address of row `l % 8` of matrix `l / 8`; lane `l` receives, in register `i`, the two
/// elements at row `l / 4`, columns `2 (l % 4)` and `2 (l % 4) + 1` of matrix `i`. Warp-collective.
///
/// # Safety
/// Each row address must be 16-byte aligned, in shared memory, and written before (and ordered by a
/// barrier with) this load.
#[inline(always)]
pub unsafe fn ldmatrix_x4(row_addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees the row addresses (contract above).
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{a}, {b}, {c}, {d}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg32) row_addr,
             options(nostack))
    };
    [a, b, c, d]
}

/// `ldmatrix ... .x2`: as [`ldmatrix_x4`] for two matrices; lanes 0..16 supply the row addresses.
///
/// # Safety
/// As [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x2(row_addr: u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: the caller guarantees the row addresses.
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{a}, {b}}}, [{p}];",
             a = out(reg32) a, b = out(reg32) b, p = in(reg32) row_addr, options(nostack))
    };
    [a, b]
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: `D = A (16x16) * B (16x8) + C`, operands
/// in the standard fragment layouts (lane `l`, `g = l / 4`, `t = l % 4`):
/// `a[0] = A[g][2t..2t+2]`, `a[1] = A[g+8][2t..]`, `a[2] = A[g][2t+8..]`, `a[3] = A[g+8][2t+8..]`;
/// `b[0] = B[2t..2t+2][g]`, `b[1] = B[2t+8..2t+10][g]`; `c[0..2] = C[g][2t..2t+2]`,
/// `c[2..4] = C[g+8][2t..2t+2]`. Pairs are packed low element first. Warp-collective.
#[inline(always)]
pub fn mma_m16n8k16_bf16_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: register-only tensor-core operation; every lane participates (contract above).
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, \
              {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
             d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
             a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
             b0 = in(reg32) b[0], b1 = in(reg32) b[1],
             c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
             options(nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// `ex2.approx.ftz.f32`: `2^x` on the special-function unit, within 2 ulp (the CUDA guide's bound
/// for `exp2f`, which is this instruction); a subnormal result is flushed to zero, -inf gives +0,
/// +inf +inf and NaN NaN.
#[inline(always)]
pub fn ex2_approx_ftz(x: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// `cvt.rna.tf32.f32`: `x` rounded to TF32 (10 explicit mantissa bits, to nearest, ties away from
/// zero), returned as the bits of an f32 whose low 13 mantissa bits are zero.
#[inline(always)]
pub fn cvt_rna_tf32(x: f32) -> u32 {
    let r: u32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rna.tf32.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`: `D = A (16x8) * B (8x8) + C` with TF32
/// operands (f32 bits, low 13 mantissa bits ignored), in the standard fragment layouts (lane `l`,
/// `g = l / 4`, `t = l % 4`): `a = [A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]]`,
/// `b = [B[t][g], B[t+4][g]]`, `c = [C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]]`.
/// Warp-collective.
#[inline(always)]
pub fn mma_m16n8k8_tf32_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: register-only tensor-core operation; every lane participates (contract above).
    unsafe {
        asm!("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, \
              {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
             d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
             a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
             b0 = in(reg32) b[0], b1 = in(reg32) b[1],
             c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
             options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// `lo` and `hi` rounded to nearest even and packed as two halves of one register, `lo` in the low
/// 16 bits: `cvt.rn.f16x2.f32` when `BF16` is false, `cvt.rn.bf16x2.f32` when true (NaN stays
/// NaN; beyond the format's range, infinity for f16, the rounded value for bf16).
#[inline(always)]
pub fn cvt_rn_half2<const BF16: bool>(lo: f32, hi: f32) -> u32 {
    let r: u32;
    // SAFETY: register-only conversion (PTX takes the high half's source first).
    unsafe {
        if BF16 {
            asm!("cvt.rn.bf16x2.f32 {r}, {h}, {l};", r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo,
                 options(pure, nomem, nostack))
        } else {
            asm!("cvt.rn.f16x2.f32 {r}, {h}, {l};", r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo,
                 options(pure, nomem, nostack))
        }
    };
    r
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32` (bf16 when `BF16`):
/// `D = A (16x16) * B (16x8) + C` with f32 accumulation, each register two halves (the lower k in
/// the low bits), lane `l`, `g = l / 4`, `t = l % 4`: `a = [A[g][2t..], A[g+8][2t..],
/// A[g][2t+8..], A[g+8][2t+8..]]`, `b = [B[2t..][g], B[2t+8..][g]]`, `c` as in
/// [`mma_m16n8k8_tf32_f32`]. Warp-collective.
#[inline(always)]
pub fn mma_m16n8k16_half_f32<const BF16: bool>(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // The instruction for operand type `$t`.
    macro_rules! mma {
        ($t:literal) => {
            asm!(concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $t, ".", $t, ".f32 {{{d0}, {d1}, {d2}, {d3}}}, \
                  {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                 d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                 a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                 b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                 c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                 options(pure, nomem, nostack))
        };
    }
    // SAFETY: register-only tensor-core operation; every lane participates (contract above).
    unsafe { if BF16 { mma!("bf16") } else { mma!("f16") } };
    [d0, d1, d2, d3]
}

/// `wgmma.fence.sync.aligned` (sm_90a): orders register and shared-memory accesses before the next
/// `wgmma.mma_async`. Warpgroup-collective (4 consecutive warps starting at a multiple of 4).
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub fn wgmma_fence() {
    // SAFETY: a fence; the warpgroup reaches it together (contract above).
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
}

/// `wgmma.commit_group.sync.aligned` (sm_90a): closes the group of issued `wgmma.mma_async`
/// operations. Warpgroup-collective.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub fn wgmma_commit_group() {
    // SAFETY: bookkeeping for the warpgroup's async matrix operations.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
}

/// `wgmma.wait_group.sync.aligned 0` (sm_90a): waits until every committed wgmma group finished.
/// Warpgroup-collective.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub fn wgmma_wait_all() {
    // SAFETY: waits on the warpgroup's own operations.
    unsafe { asm!("wgmma.wait_group.sync.aligned 0;", options(nostack)) };
}

/// `wgmma.wait_group.sync.aligned N` (sm_90a): waits until at most `N` of the warpgroup's
/// committed wgmma groups are still in flight (the older ones finished). Warpgroup-collective.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub fn wgmma_wait_group<const N: u32>() {
    // SAFETY: waits on the warpgroup's own operations.
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) };
}

/// `fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes visible to the
/// async proxy (tensor cores reading through `wgmma`, the bulk copy engine). Needed before the
/// barrier that precedes such a read.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub fn fence_proxy_async_shared() {
    // SAFETY: a memory fence.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// Correctly rounded f32 square root (`sqrt.rn.f32`).
#[inline(always)]
pub fn sqrt_rn(x: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("sqrt.rn.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// Correctly rounded f64 square root (`sqrt.rn.f64`).
#[inline(always)]
pub fn sqrt_rn_f64(x: f64) -> f64 {
    let r: f64;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("sqrt.rn.f64 {r}, {x};", r = out(reg64) r, x = in(reg64) x, options(pure, nomem, nostack))
    };
    r
}

/// `a * b + c` rounded once (`fma.rn.f32`).
#[inline(always)]
pub fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
             options(pure, nomem, nostack))
    };
    r
}

/// Aborts the kernel (`trap`); the launch fails with `CUDA_ERROR_LAUNCH_FAILED`.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: ends the thread; nothing after it runs.
    unsafe { asm!("trap;", options(noreturn, nostack)) }
}
