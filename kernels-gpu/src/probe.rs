//! Self-test kernels for the device intrinsics. `ferrofuse doctor` and the GPU tests launch them and
//! compare every word they write with values computed on the host, so a wrong `asm!` template,
//! fragment layout or shared-memory declaration shows up as a named mismatch.

use crate::abi::ProbeParams;
use crate::intrinsics::*;

/// Words `probe_warp` writes per thread.
pub const WARP_WORDS_PER_THREAD: u32 = 10;

/// Indices, lane id, warp shuffles and votes, warp reductions, barriers, dynamic shared memory and
/// atomics.
///
/// # Safety
/// `out` holds `p.out_words >= p.threads * 10 + 5` u32.
///
/// # Parameters
/// `p.threads`: block size (a multiple of 32); `out`: per thread `t`, words `t*10 .. t*10+10`
/// (see the host test for their expected values), then 5 block-wide counters.
///
/// # Thread mapping
/// One block of `p.threads` threads; `p.threads * 4` bytes of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_warp(p: ProbeParams, out: *mut u32) {
    let t = thread_idx_x();
    let lane = lane_id();
    let n = p.threads;
    if block_idx_x() != 0 || n * WARP_WORDS_PER_THREAD + 5 > p.out_words || t >= n {
        trap();
    }
    let counters = n * WARP_WORDS_PER_THREAD;
    let smem = dynamic_shared_ptr() as *mut u32;
    // SAFETY: t < n words of shared memory (launch contract); counters lie inside `out`.
    unsafe {
        *smem.add(t as usize) = t * 7;
        if t == 0 {
            for k in 0..5 {
                *out.add((counters + k) as usize) = 0;
            }
        }
    }
    sync_threads();
    let words = [
        t,
        lane,
        warp_sum_f32((lane + 1) as f32).to_bits(),
        vote_ballot(lane % 2 == 1),
        shfl_idx_u32(t * 10, 3),
        shfl_down_u32(t, 1),
        // SAFETY: (t + 1) % n < n, written before the barrier above.
        unsafe { *smem.add(((t + 1) % n) as usize) },
        (vote_all(true) && !vote_all(lane < 31) && vote_any(lane == 5) && !vote_any(false)) as u32,
        warp_max_f32(lane as f32).to_bits(),
        shfl_xor_u32(lane, 1),
    ];
    for (k, w) in words.iter().enumerate() {
        // SAFETY: t * 10 + k < counters <= out_words.
        unsafe { *out.add((t * WARP_WORDS_PER_THREAD) as usize + k) = *w };
    }
    // SAFETY: the counters lie inside `out` and are only updated atomically after the barrier.
    unsafe {
        let c = out.add(counters as usize);
        atomic_add_u32(c, 1);
        atomic_add_f32(c.add(1) as *mut f32, 0.5);
        atomic_max_u32(c.add(2), t);
        let won = atomic_cas_u32(c.add(3), 0, t + 1) == 0;
        atomic_add_u32(c.add(4), won as u32);
    }
}

/// One `mma.sync` m16n8k16 bf16 tile fed by `cp.async` and `ldmatrix`: `c = a * b`.
///
/// # Safety
/// `a`: 256 bf16 (16x16 row-major), `bt`: 128 bf16 (B transposed: 8x16 row-major), both 16-byte
/// aligned; `c`: 128 f32 (16x8 row-major).
///
/// # Parameters
/// `p.threads` must be 32.
///
/// # Thread mapping
/// One warp; 768 bytes of dynamic shared memory (A at 0, B^T at 512).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma(p: ProbeParams, a: *const u16, bt: *const u16, c: *mut f32) {
    let l = lane_id();
    if p.threads != 32 || thread_idx_x() >= 32 {
        trap();
    }
    let base = dynamic_shared_addr();
    // SAFETY: 32 chunks of 16 bytes cover A's 512 bytes, 16 cover B^T's 256; destinations lie in
    // the 768 bytes of shared memory the launch provides.
    unsafe {
        cp_async_16(base + l * 16, (a as *const u8).add(l as usize * 16));
        if l < 16 {
            cp_async_16(base + 512 + l * 16, (bt as *const u8).add(l as usize * 16));
        }
    }
    cp_async_commit();
    cp_async_wait_all();
    sync_threads();
    // SAFETY: rows are 32 bytes apart and 16-byte aligned, inside the tiles copied above.
    let (fa, fb) = unsafe {
        (
            ldmatrix_x4(base + (l % 16) * 32 + (l / 16) * 16),
            ldmatrix_x2(base + 512 + (l % 8) * 32 + ((l / 8) % 2) * 16),
        )
    };
    let d = mma_m16n8k16_bf16_f32(fa, fb, [0.0; 4]);
    let (g, t) = (l / 4, l % 4);
    // SAFETY: g < 8, t < 4: every index < 128.
    unsafe {
        *c.add((g * 8 + 2 * t) as usize) = d[0];
        *c.add((g * 8 + 2 * t + 1) as usize) = d[1];
        *c.add(((g + 8) * 8 + 2 * t) as usize) = d[2];
        *c.add(((g + 8) * 8 + 2 * t + 1) as usize) = d[3];
    }
}

/// Runs the sm_90a `wgmma` fence / commit / wait sequence and the async-proxy fence on one
/// warpgroup, then writes 1 per thread; in a flavour built without them (portable, sm_80) it writes
/// 0, so the host can tell which flavour it loaded.
///
/// # Safety
/// `out` holds `p.threads` u32.
///
/// # Parameters
/// `p.threads` must be 128 (one warpgroup).
///
/// # Thread mapping
/// One block of 128 threads with 4 KiB of dynamic shared memory: the wgmma wait is modelled (by
/// compute-sanitizer, at least) as reading the warpgroup's shared operand tiles, which a real
/// wgmma kernel keeps there.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_hopper(p: ProbeParams, out: *mut u32) {
    let t = thread_idx_x();
    if p.threads != 128 || t >= 128 || p.out_words < 128 {
        trap();
    }
    #[cfg(ferrofuse_hopper)]
    let ran = {
        wgmma_fence();
        wgmma_commit_group();
        wgmma_wait_all();
        fence_proxy_async_shared();
        1
    };
    #[cfg(not(ferrofuse_hopper))]
    let ran = 0;
    // SAFETY: t < 128 <= out_words.
    unsafe { *out.add(t as usize) = ran };
}
