//! f32 GEMM on Hopper's warpgroup tensor-core instructions (`wgmma.mma_async`, sm_90a) for the
//! GEMMs whose B is a weight: the large shapes of batched inference (a transformer's projections
//! at batch x sequence in the thousands, a physics MLP at batch 16384), where the `mma.sync` tiles
//! of `gemm_tile.rs` leave most of Hopper's tensor-core rate unused (each `mma.sync` is a 16 x 8 x 8
//! product issued by one warp, its operands split from shared memory fragment by fragment).
//!
//! The planner packs the weight at plan time ([`crate::abi::gemm_wg_packed_len`]): its transpose,
//! k contiguous, once as TF32 big parts and (3xTF32) once as the TF32 small parts. A block of one
//! or two warpgroups computes a `64 WGS x BN` output tile; per k tile of 32, a four-stage
//! `cp.async` pipeline brings B's planes (`BN` rows of 128 bytes each) and A's rows into shared
//! memory, each row's 16-byte chunks permuted by an XOR with the row (the 128-byte swizzle that
//! `wgmma`'s K-major operand layout reads: the stages sit on 1 KiB boundaries). In the exact
//! entries every warpgroup takes its 64 rows of A from shared memory into registers in the
//! `m16n8k8` fragment layout, splits them into TF32 big and small parts there, and issues per k
//! step of 8 the products `small(A)·big(B) + big(A)·small(B) + big(A)·big(B)` as `m64nBNk8`
//! operations reading B through a matrix descriptor (f32 accuracy, as `gemm_tc.rs`); one k
//! tile's group of products runs while the next tile's fragments are loaded and split and the
//! copies of the two after it are in flight. The `_tf32` entries issue one product per k step
//! with both operands read through descriptors, A as it lies in shared memory (the tensor cores
//! ignore its low 13 mantissa bits: truncated to TF32, as cuBLAS's TF32 GEMMs read f32 operands)
//! and B packed rounded to nearest: no instruction of the warpgroup touches A, so the products
//! issue back to back (with A in registers, ptxas serialized them: warning C7513).
//! The epilogue (`alpha`, `beta * C`, the activation and the elementwise program) stages the
//! tile in shared memory and finishes it as `gemm_tile.rs` does, split-K partials included.
//!
//! Operand requirements (the planner checks them; the kernel traps otherwise): A unit-stride along
//! k with row and batch strides multiples of four and a 16-byte aligned base; B packed (`b_rs`
//! 1, `b_cs` the packed row length, at least k, `b_bs` 0, 16-byte aligned). Any m, n, k. The
//! entries exist in both PTX flavours; on the portable one (no `wgmma`) they trap, and the planner
//! selects them only for the Hopper flavour.

#[cfg(ferrofuse_hopper)]
use crate::abi::ConvParams;
#[cfg(ferrofuse_hopper)]
use crate::abi::ConvTap;
use crate::abi::{EwProgramParams, GemmCatParams, GemmParams};
#[cfg(ferrofuse_hopper)]
use crate::abi::{GEMM_TILE_BK, GEMM_WG_RESIDENT_K_TILES, GEMM_WG_STAGES};
#[cfg(ferrofuse_hopper)]
use crate::gemm::{Program, program};
#[cfg(ferrofuse_hopper)]
use crate::gemm_tile::unroll4;
use crate::intrinsics::trap;
#[cfg(ferrofuse_hopper)]
use crate::intrinsics::{
    block_dim_x, block_idx_x, block_idx_y, block_idx_z, cp_async_4_zfill, cp_async_16_zfill, cp_async_commit,
    cp_async_wait_group, dynamic_shared_addr, dynamic_shared_ptr, fence_proxy_async_shared, grid_dim_y,
    ld_shared_u32, sync_threads, thread_idx_x, wgmma_commit_group, wgmma_fence, wgmma_m64n32k8_tf32_rs,
    wgmma_m64n32k8_tf32_ss, wgmma_m64n64k8_tf32_rs, wgmma_m64n64k8_tf32_ss, wgmma_m64n128k8_tf32_rs,
    wgmma_m64n128k8_tf32_ss, wgmma_wait_all, wgmma_wait_group,
};
#[cfg(ferrofuse_hopper)]
use conv::{ConvRow, conv_row, conv_store};

#[cfg(ferrofuse_hopper)]
const BK: u32 = GEMM_TILE_BK;
#[cfg(ferrofuse_hopper)]
const STAGES: u32 = GEMM_WG_STAGES;
#[cfg(ferrofuse_hopper)]
const _: () = assert!(BK == 32 && STAGES >= 2);

/// The 16-byte chunk where chunk `c` (of eight per 128-byte row) of row `r` of a k-contiguous
/// tile is stored: the 128-byte swizzle (`wgmma`'s layout type 1), relative to a 1 KiB boundary.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
const fn swizzle(r: u32, c: u32) -> u32 {
    c ^ (r & 7)
}

/// The `wgmma` shared-memory matrix descriptor of a K-major operand with the 128-byte swizzle
/// whose first row starts at shared address `addr`: rows of 128 bytes, 8-row groups 1 KiB apart
/// (stride byte offset), the leading byte offset unused for a K-major swizzled operand (1, as
/// CUTLASS sets it), base offset 0 (the tile's 1 KiB blocks are aligned). A k step's descriptor
/// starts `32 s` bytes into the rows (the hardware applies the swizzle to the whole address).
#[cfg(ferrofuse_hopper)]
#[inline(always)]
fn descriptor(addr: u32) -> u64 {
    ((addr as u64 & 0x3_ffff) >> 4) | (1 << 16) | ((1024u64 >> 4) << 32) | (1 << 62)
}

/// `acc += a · B` over one k step: the `m64nBNk8` product for `BN = 2 ACC`.
///
/// # Safety
/// As [`wgmma_m64n128k8_tf32_rs`].
#[cfg(ferrofuse_hopper)]
#[inline(always)]
unsafe fn product<const ACC: usize>(acc: &mut [f32; ACC], a: [u32; 4], desc: u64) {
    // SAFETY: `ACC` is the accumulator count of the product chosen (checked by the const test);
    // the rest is the caller's contract.
    unsafe {
        if ACC == 64 {
            wgmma_m64n128k8_tf32_rs(&mut *(acc.as_mut_ptr() as *mut [f32; 64]), a, desc)
        } else if ACC == 32 {
            wgmma_m64n64k8_tf32_rs(&mut *(acc.as_mut_ptr() as *mut [f32; 32]), a, desc)
        } else if ACC == 16 {
            wgmma_m64n32k8_tf32_rs(&mut *(acc.as_mut_ptr() as *mut [f32; 16]), a, desc)
        } else {
            trap()
        }
    }
}

/// `acc += A · B` over one k step with A through the descriptor `a_desc`: the `m64nBNk8` product
/// for `BN = 2 ACC`.
///
/// # Safety
/// As [`wgmma_m64n128k8_tf32_ss`].
#[cfg(ferrofuse_hopper)]
#[inline(always)]
unsafe fn product_ss<const ACC: usize>(acc: &mut [f32; ACC], a_desc: u64, b_desc: u64) {
    // SAFETY: as `product`.
    unsafe {
        if ACC == 64 {
            wgmma_m64n128k8_tf32_ss(&mut *(acc.as_mut_ptr() as *mut [f32; 64]), a_desc, b_desc)
        } else if ACC == 32 {
            wgmma_m64n64k8_tf32_ss(&mut *(acc.as_mut_ptr() as *mut [f32; 32]), a_desc, b_desc)
        } else if ACC == 16 {
            wgmma_m64n32k8_tf32_ss(&mut *(acc.as_mut_ptr() as *mut [f32; 16]), a_desc, b_desc)
        } else {
            trap()
        }
    }
}

/// `y = program(act(alpha A B + beta C))` over one block tile of `64 WGS x BN` (`ACC = BN / 2`
/// accumulators per thread).
///
/// # Safety
/// As `gemm_program_f32`, with the operand requirements of the module doc; the launch has
/// `128 * WGS` threads and [`crate::abi::GemmTile::wg_shared_bytes`] of dynamic shared memory.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_wg<
    const WGS: u32,
    const BN: u32,
    const ACC: usize,
    const EXACT: bool,
    const CONV: bool,
    const CAT: bool,
    const RESIDENT: bool,
>(
    p: &GemmParams,
    a: *const f32,
    b: *const f32,
    c_ptr: *const f32,
    y: *mut f32,
    program: Program,
    conv: &ConvParams,
    taps: *const ConvTap,
    cat: &CatOperand,
) {
    const { assert!(2 * ACC == BN as usize && (BN == 32 || BN == 64 || BN == 128) && (WGS == 1 || WGS == 2)) };
    let p = *p;
    let bm = 64 * WGS;
    let threads = 128 * WGS;
    let aligned = |ptr: *const f32, s1: u64, s2: u64| (ptr as usize) % 16 == 0 && s1 % 4 == 0 && s2 % 4 == 0;
    let splits = p.splits.max(1);
    if block_dim_x() != threads
        || (splits > 1 && (p.k_chunk == 0 || p.k_chunk % BK != 0))
        || (!CONV && !CAT && (p.a_cs != 1 || !aligned(a, p.a_rs, p.a_bs | p.a_bs2)))
        || (CAT && !cat.fits(p.k, p.batch))
        || (RESIDENT && (CONV || splits > 1 || p.batch != 1 || p.k.div_ceil(BK) > GEMM_WG_RESIDENT_K_TILES))
        || p.b_rs != 1
        || !p.b_shared()
        || p.b_cs < p.k as u64
        || !aligned(b, p.b_cs, 0)
    {
        trap();
    }
    if p.m == 0 || p.n == 0 {
        return;
    }
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let z = block_idx_z();
    // A resident-B block computes row tiles `block_idx_y, + grid_dim_y, ...` (one otherwise),
    // loading its column tile's B once, with the first.
    let mut row_tile = block_idx_y();
    loop {
        let first_tile = row_tile == block_idx_y();
        let (row0, col0) = (row_tile * bm, block_idx_x() * BN);
        let (batch, split, k_begin, k_end) = crate::gemm_split::split_of(&p, z);
        let a_at = p.a_at(batch);
        let k_tiles = k_end.saturating_sub(k_begin).div_ceil(BK);
        let planes = crate::abi::gemm_wg_planes(EXACT);
        // Stage `s`: B's big-part tile, (EXACT) its small-part tile, then A's tile; each a multiple
        // of 1 KiB, from a 1 KiB boundary.
        let b_tile = BN * BK * 4;
        // RESIDENT: the stages hold A's tiles only, and B's tiles of every k tile follow them (the
        // epilogue's staged output, at the start, never reaches B).
        let a_tile = bm * BK * 4;
        let stage_bytes = if RESIDENT { a_tile } else { planes * b_tile + a_tile };
        let window = dynamic_shared_addr();
        let smem = window.next_multiple_of(1024);
        // Shared addresses of k tile `kt`'s B tile (big parts; the small parts `b_tile` after) and A
        // tile.
        let b_stage = |kt: u32| {
            if RESIDENT {
                smem + STAGES * a_tile + kt * planes * b_tile
            } else {
                smem + (kt % STAGES) * stage_bytes
            }
        };
        let a_stage = |kt: u32| {
            if RESIDENT {
                smem + (kt % STAGES) * stage_bytes
            } else {
                smem + (kt % STAGES) * stage_bytes + planes * b_tile
            }
        };
        // The plane of small parts follows the `n` rows of big parts.
        let small_plane = p.n as u64 * p.b_cs;

        // The copies of k tile `kt` into its stage. Every thread copies chunk `kc = tid % 8` (k
        // `4 kc ..`) of rows `tid / 8 + pass j` (j = 0..4) of each tile: B's rows (output columns,
        // per plane) and A's rows, `pass = threads / 8 = 16 WGS` rows apart (`BN = 64 WGS` rows: four
        // passes each). The rows keep their swizzle (`pass` is a multiple of 8), so each copy's
        // source and destination step by constants from the thread's first; only the bytes inside
        // k (the same for all of a thread's copies of a tile) and the rows inside m or n vary.
        let pass = threads / 8;
        // B's rows take BN / pass of the four passes (all four but for the 32-column convolutions).
        const { assert!(BN == 64 * WGS || (CONV && BN == 32 && WGS == 1)) };
        let (kc, r_first) = (tid % 8, tid / 8);
        let dst_first = (r_first * BK + 4 * swizzle(r_first, kc)) * 4;
        let b_first = (col0 + r_first) as u64 * p.b_cs + 4 * kc as u64;
        let a_first = a_at + (row0 + r_first) as u64 * p.a_rs + 4 * kc as u64;
        let (b_pass, a_pass) = (pass as u64 * p.b_cs, pass as u64 * p.a_rs);
        // A convolution's rows are output positions, gathered element by element: thread `tid` fills
        // row `tid % bm` of A's tile (a warp, 32 consecutive positions: one transaction per element
        // at unit stride), chunks `4 (tid / bm) ..` of it; its row is decoded once.
        let conv_r = tid % bm;
        let conv_chunk0 = 4 * (tid / bm);
        let row = if CONV { conv_row(conv, row0 + conv_r, p.m, batch as u32) } else { ConvRow::OUTSIDE };
        // A segmented A's table rows for the thread's four rows, their indices loaded once here (all
        // eight in flight together) rather than before every k tile's copies (a dependent load each).
        let mut cat_rows = [[u32::MAX; 2]; 4];
        if CAT {
            unroll4!(J => {
                cat_rows[J] = cat.rows_of(row0 + r_first + pass * J as u32, p.m);
            });
        }
        // (The closures are inlined at every call: outlined, their arrays would pass through memory.)
        // The copies of k tile `kt`'s B tile (`with_b`) and A tile (`with_a`), not committed.
        let copy = #[inline(always)]
        |kt: u32, with_b: bool, with_a: bool| {
            let k0 = k_begin + kt * BK;
            let (b_base, a_base) =
                (b_stage(kt) + dst_first, if RESIDENT { a_stage(kt) + dst_first } else { 0 });
            // The bytes of the thread's chunks that lie inside its k range.
            let k = k0 + 4 * kc;
            let k_bytes = if k >= k_end { 0 } else { (k_end - k).min(4) * 4 };
            unroll4!(J => {
                let j = J as u32;
                let in_n = col0 + r_first + pass * j < p.n;
                let n_bytes = if in_n { k_bytes } else { 0 };
                let at = b_first + J as u64 * b_pass + k0 as u64;
                let dst = b_base + j * pass * BK * 4;
            // (Written as before resident B for the other entries: the same code for them.)
            let a_dst = if RESIDENT { a_base + j * pass * BK * 4 } else { dst + planes * b_tile };
                if with_b && j * pass < BN {
                    for plane in 0..planes {
                        let src =
                            if n_bytes == 0 { b } else { b.wrapping_add((at + plane as u64 * small_plane) as usize) };
                        // SAFETY: `src` holds `n_bytes` bytes of the packed B (column < n, k < k_end
                        // <= b_cs) or nothing is read; the destination is inside this stage's tile of
                        // the plane (row `r_first + j pass < BN`), 16-byte aligned.
                        unsafe { cp_async_16_zfill(dst + plane * b_tile, src.cast(), n_bytes) };
                    }
                }
                if !with_a {
                } else if CAT {
                    let source = if k_bytes > 0 { cat.at(cat_rows[J], k) } else { None };
                    let (src, n_bytes) = match source {
                        Some(src) => (src, k_bytes),
                        None => (a, 0),
                    };
                    // SAFETY: `src` is inside row `row_s(r)` of the segment's table (`fits`, an
                    // index in range) or nothing is read; the destination as below.
                    unsafe { cp_async_16_zfill(a_dst, src.cast(), n_bytes) };
                } else if !CONV {
                    let in_m = row0 + r_first + pass * j < p.m;
                    let n_bytes = if in_m { k_bytes } else { 0 };
                    let src = if n_bytes == 0 {
                        a
                    } else {
                        a.wrapping_add((a_first + J as u64 * a_pass + k0 as u64) as usize)
                    };
                    // SAFETY: as for B (row < m, k < k_end <= k, the planner's strides).
                    unsafe { cp_async_16_zfill(a_dst, src.cast(), n_bytes) };
                }
            });
            if CONV && with_a {
                // The thread's sixteen depths of its row: one f32 per copy, zero in the padding and
                // past k or m.
                let a_row = a_stage(kt) + conv_r * BK * 4;
                // (A rolled loop over the chunks: unrolled, the sixteen table loads were hoisted
                // together and the two-warpgroup exact entry spilled.)
                for c in 0..4 {
                    let chunk = conv_chunk0 + c;
                    let first = k0 + 4 * chunk;
                    // The chunk's four entries, read unconditionally (depths past k read the last
                    // one and copy nothing) so that the four loads issue together and no branch
                    // waits on one.
                    let tap = |e: u32| {
                        // SAFETY: the table holds an entry per depth below k_end <= k (the launch
                        // contract; a block with k tiles has k_end >= 1).
                        unsafe { *taps.add((first + e).min(k_end - 1) as usize) }
                    };
                    let depth = [tap(0), tap(1), tap(2), tap(3)];
                    unroll4!(E => {
                        let (src, n_bytes) = row.source(conv, &depth[E], first + (E as u32) < k_end);
                        let dst = a_row + (4 * swizzle(conv_r, chunk) + E as u32) * 4;
                        // SAFETY: `src` is an element of X (inside the image, the channel of the
                        // group: the launch contract) or nothing is read; the destination is inside
                        // this stage's A tile.
                        unsafe { cp_async_4_zfill(dst, a.wrapping_offset(src).cast(), n_bytes) };
                    });
                }
            }
        };
        // Tile `kt`'s copies as one group: A's tile, and B's unless it is resident.
        let load = #[inline(always)]
        |kt: u32| {
            copy(kt, !RESIDENT, true);
            cp_async_commit();
        };
        if RESIDENT && first_tile {
            // Every k tile of B, in the first tile's first group (landed with its A tile).
            for kt in 0..k_tiles {
                copy(kt, true, false);
            }
        }

        // The lane's rows of A: `16 w + g` and 8 below it within its warpgroup's 64 (both `g`
        // modulo 8, so their swizzle is the XOR with `g`).
        let a_row = (warp / 4) * 64 + (warp % 4) * 16 + g;
        // The lane's A fragments of k tile `kt`'s four k steps, split into (big, small) parts (exact
        // entries; the TF32 ones read A through descriptors and take none).
        // (Steps and elements const-indexed: a rolled loop would move the arrays to local memory.)
        let fragments = #[inline(always)]
        |kt: u32| {
            let mut f = [[[0u32; 4]; 4]; 2];
            if !EXACT {
                return f;
            }
            let a_s = a_stage(kt);
            let ld = |at: u32| {
                // SAFETY: inside the stage's A tile, written by copies waited for before a barrier.
                f32::from_bits(unsafe { ld_shared_u32(a_s + 4 * at) })
            };
            unroll4!(S => {
                let s = S as u32;
                // Fragment k `t` of step `s` is chunk `2s` of the row, k `t + 4` chunk `2s + 1`.
                let (x0, x1) = (4 * swizzle(g, 2 * s) + t, 4 * swizzle(g, 2 * s + 1) + t);
                let (r0, r1) = (a_row * BK, (a_row + 8) * BK);
                let v = [ld(r0 + x0), ld(r1 + x0), ld(r0 + x1), ld(r1 + x1)];
                unroll4!(E => {
                    (f[0][S][E], f[1][S][E]) = crate::gemm_tc::split(v[E]);
                });
            });
            f
        };
        // Issues k tile `kt`'s products as one wgmma group: per k step, exact: small(A)·big(B),
        // big(A)·small(B), then big(A)·big(B) (small terms first, as `gemm_tc`); TF32: A·B with A
        // through a descriptor of the warpgroup's 64 rows of the stage's A tile (8 KiB apart, on
        // 1 KiB boundaries, so their swizzle is the tile's).
        let issue = #[inline(always)]
        |acc: &mut [f32; ACC], kt: u32, f: &[[[u32; 4]; 4]; 2]| {
            let stage = b_stage(kt);
            let a_rows = a_stage(kt) + (warp / 4) * 64 * BK * 4;
            wgmma_fence();
            unroll4!(S => {
                let big_b = descriptor(stage + 32 * S as u32);
                // SAFETY: the whole warpgroup issues the same products on a stage whose copies were
                // waited for and handed to the async proxy before a barrier; the accumulators are
                // read only after the final wait.
                unsafe {
                    if EXACT {
                        product(acc, f[1][S], big_b);
                        product(acc, f[0][S], descriptor(stage + b_tile + 32 * S as u32));
                        product(acc, f[0][S], big_b);
                    } else {
                        product_ss(acc, descriptor(a_rows + 32 * S as u32), big_b);
                    }
                }
            });
            wgmma_commit_group();
        };
        let mut acc = [0f32; ACC];
        // The pipeline: tiles kt + 1 and kt + 2 in flight (copies) while tile kt's products run, and
        // tile kt + 1's fragments loaded and split as they run. Stage `kt % STAGES` is refilled
        // (tile kt + 4) only at iteration kt + 2, after every warpgroup waited for group kt and
        // passed the barrier of iteration kt + 1.
        //
        // A group reads its A fragments from registers until it completes (PTX: writing them before
        // the `wgmma.wait_group` that retires the group is undefined), so tile kt + 1's fragments go
        // to the other of two register sets: `fa` holds even tiles, `fb` odd ones, the loop takes two
        // tiles per turn, and each set is written only after the wait that retired the group that
        // read it last (`fb` after group kt - 1's, `fa` after group kt's). One set carried around
        // the loop made its copy at the back edge overwrite group kt's operands while it ran (wrong
        // results from ptxas 13.0's offline build; host/src/device/ptx.rs checks every entry).
        const { assert!(STAGES == 4) };
        for st in 0..2 {
            if st < k_tiles {
                load(st);
            } else {
                cp_async_commit();
            }
        }
        // Issues tile `kt`'s group on `f`, starts tile kt + 2's copies, and unless kt is the last
        // tile waits until tile kt + 1 has landed and group kt - 1 has finished (the barrier hands
        // the stages over; only tile kt + 2's copies and group kt may still be in flight). Evaluates
        // to whether kt was the last tile. (A macro: a closure called twice is outlined, and the
        // accumulators would then cross a call in memory.)
        macro_rules! step {
            ($kt:expr, $f:expr) => {{
                let kt = $kt;
                issue(&mut acc, kt, $f);
                if kt + 2 < k_tiles {
                    load(kt + 2);
                } else {
                    cp_async_commit();
                }
                let last = kt + 1 == k_tiles;
                if !last {
                    cp_async_wait_group::<1>();
                    wgmma_wait_group::<1>();
                    fence_proxy_async_shared();
                    sync_threads();
                }
                last
            }};
        }
        if k_tiles > 0 {
            cp_async_wait_group::<1>();
            fence_proxy_async_shared();
            sync_threads();
            let mut fa = fragments(0);
            let mut kt = 0;
            loop {
                if step!(kt, &fa) {
                    break;
                }
                let fb = fragments(kt + 1);
                if step!(kt + 1, &fb) {
                    break;
                }
                fa = fragments(kt + 2);
                kt += 2;
            }
            wgmma_wait_all();
        }

        // The epilogue stages the block's tile in shared memory (the pipeline's, once every copy has
        // landed and every warp has left its last k tile), row stride `BN + 8`, then finishes it as
        // `gemm_tile.rs` does: one rolled loop, one copy of the epilogue (finishing each accumulator
        // from registers would inline it, activations and program, once per accumulator).
        cp_async_wait_group::<0>();
        sync_threads();
        if CONV {
            // SAFETY: `smem - window` is below 1 KiB; the transposed tile fits the stages.
            let tile = unsafe { dynamic_shared_ptr().add((smem - window) as usize) } as *mut f32;
            // SAFETY: forwarded (the launch contract).
            unsafe {
                conv_store::<ACC>(
                    conv,
                    &acc,
                    tile,
                    (a_row, t),
                    (row0, col0, batch as u32, split),
                    bm,
                    BN,
                    c_ptr,
                    y,
                    (tid, threads),
                    program,
                )
            };
            return;
        }
        let ld_tile = BN + 8;
        // SAFETY: `smem - window` is below 1 KiB, inside the launch's shared memory.
        let tile = unsafe { dynamic_shared_ptr().add((smem - window) as usize) } as *mut f32;
        for j in 0..ACC / 4 {
            // Accumulator `4j + e` is row `a_row + 8 (e / 2)`, column `8j + 2t + e % 2`.
            let c = 8 * j as u32 + 2 * t;
            // SAFETY: inside the tile (bm x ld_tile f32 fit the stages).
            unsafe {
                let at = tile.add((a_row * ld_tile + c) as usize);
                *at = acc[4 * j];
                *at.add(1) = acc[4 * j + 1];
                let at = at.add(8 * ld_tile as usize);
                *at = acc[4 * j + 2];
                *at.add(1) = acc[4 * j + 3];
            }
        }
        sync_threads();
        // SAFETY: forwarded (the tile and the launch contract).
        unsafe {
            crate::gemm_tile::finish_tile(
                &p,
                c_ptr,
                program,
                y,
                tile,
                (row0, col0, z, batch),
                (bm, BN, ld_tile),
                tid,
                threads,
            )
        };
        if !RESIDENT {
            break;
        }
        row_tile += grid_dim_y();
        if row_tile as u64 * bm as u64 >= p.m as u64 {
            break;
        }
        // The next tile's copies overwrite the staged output: every thread has finished it.
        sync_threads();
    }
}

macro_rules! wg_entries {
    ($($(#[$doc:meta])* $name:ident: $wgs:literal warpgroups, $bn:literal columns, $exact:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As `gemm_program_f32`, with the operand requirements of the module doc (B packed). A
        /// plain GEMM passes the identity program (one input, no instructions; `x1..x3` null).
        /// With `p.splits > 1` (`p.k_chunk` a multiple of 32) the block at grid z `batch * splits
        /// + split` sums k chunk `split` into matrix z of `y`, the workspace of raw partials, as
        /// the `gemm_tile.rs` entries do.
        ///
        /// # Parameters
        /// See [`GemmParams`] and [`EwProgramParams`].
        ///
        /// # Thread mapping
        /// Grid (ceil(n / BN), ceil(m / (64 WGS)), batch * splits), block `128 * WGS` threads,
        /// [`crate::abi::GemmTile::wg_shared_bytes`] of dynamic shared memory; warpgroup `w`
        /// computes rows `64 w ..` of the block's tile, all its columns.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
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
            #[cfg(ferrofuse_hopper)]
            // SAFETY: forwarded (the kernel's contract).
            unsafe {
                gemm_wg::<$wgs, $bn, { $bn / 2 }, $exact, false, false, false>(
                    &p,
                    a,
                    b,
                    c,
                    y,
                    program(&e, x1, x2, x3),
                    &ConvParams::default(),
                    core::ptr::null(),
                    &CatOperand::NONE,
                )
            }
            #[cfg(not(ferrofuse_hopper))]
            {
                let _ = (p, e, a, b, c, x1, x2, x3, y);
                trap()
            }
        }
    )*};
}

wg_entries! {
    /// Tensor-core f32 GEMM through `wgmma` (3xTF32), 128 x 128 block tiles (two warpgroups).
    gemm_wg128_f32: 2 warpgroups, 128 columns, true;
    /// Tensor-core f32 GEMM through `wgmma` (3xTF32), 64 x 64 block tiles (one warpgroup).
    gemm_wg64_f32: 1 warpgroups, 64 columns, true;
    /// `gemm_wg128_f32` in TF32: A read from shared memory (truncated to TF32), B packed rounded,
    /// one product per step.
    gemm_wg128_tf32: 2 warpgroups, 128 columns, false;
    /// `gemm_wg64_f32` in TF32.
    gemm_wg64_tf32: 1 warpgroups, 64 columns, false;
}

macro_rules! wg_cat_entries {
    ($($(#[$doc:meta])* $name:ident: $wgs:literal warpgroups, $bn:literal columns, $exact:literal, $resident:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As the `gemm_wg*` entries of the same tile, with A given as [`GemmCatParams`]
        /// segments: `t0` / `t1` hold `s.rows[i]` rows of `s.ld[i]` f32 (16-byte aligned, at
        /// least `s.width[i]` used), `i0` / `i1` (where `s.index_stride[i]` is nonzero) the
        /// index of every row of A (`(m - 1) * index_stride + index_offset` and below) in
        /// `s.index_bytes`-byte integers; `p.batch` 1. Unused pointers may be null.
        ///
        /// # Parameters
        /// See [`GemmParams`], [`EwProgramParams`] and [`GemmCatParams`].
        ///
        /// # Thread mapping
        /// As the `gemm_wg*` entry of the same tile.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: GemmParams,
            e: EwProgramParams,
            s: GemmCatParams,
            t0: *const f32,
            t1: *const f32,
            i0: *const u8,
            i1: *const u8,
            b: *const f32,
            c: *const f32,
            x1: *const f32,
            x2: *const f32,
            x3: *const f32,
            y: *mut f32,
        ) {
            #[cfg(ferrofuse_hopper)]
            // SAFETY: forwarded (the kernel's contract).
            unsafe {
                gemm_wg::<$wgs, $bn, { $bn / 2 }, $exact, false, true, $resident>(
                    &p,
                    t0,
                    b,
                    c,
                    y,
                    // The resident entry finishes without a program (its loop kept
                    // the program's parameters in registers across the k tiles).
                    if $resident { None } else { program(&e, x1, x2, x3) },
                    &ConvParams::default(),
                    core::ptr::null(),
                    &CatOperand { s, tables: [t0, t1], index: [i0, i1] },
                )
            }
            #[cfg(not(ferrofuse_hopper))]
            {
                let _ = (p, e, s, t0, t1, i0, i1, b, c, x1, x2, x3, y);
                trap()
            }
        }
    )*};
}

wg_cat_entries! {
    /// `gemm_wg128_f32` with A read as segments of row tables (`GemmCatParams`).
    gemm_wg128_cat_f32: 2 warpgroups, 128 columns, true, false;
    /// `gemm_wg64_f32` with A read as segments of row tables.
    gemm_wg64_cat_f32: 1 warpgroups, 64 columns, true, false;
    /// `gemm_wg128_cat_f32` in TF32.
    gemm_wg128_cat_tf32: 2 warpgroups, 128 columns, false, false;
    /// `gemm_wg64_cat_f32` in TF32.
    gemm_wg64_cat_tf32: 1 warpgroups, 64 columns, false, false;
    /// `gemm_wg64_cat_f32` with B resident: a block loads its column tile's B (every k tile, at
    /// most [`crate::abi::GEMM_WG_RESIDENT_K_TILES`]) into shared memory once and computes row
    /// tiles `block_idx_y, + grid_dim_y, ...` with it, A alone through the stages: for the many
    /// row tiles of a short k (a GNN's edge GEMM, 800k x 128 -> 64, re-read B's two planes, twice
    /// its A, per 64 rows). Shared memory: [`crate::abi::GemmTile::wg_resident_shared_bytes`].
    /// No program epilogue (`e` and `x1..x3` are not read): alpha, beta C and the activation.
    gemm_wg64_cat_resident_f32: 1 warpgroups, 64 columns, true, true;
}

/// A [`GemmCatParams`] operand with its tables and indices.
#[cfg(ferrofuse_hopper)]
#[derive(Clone, Copy)]
pub(crate) struct CatOperand {
    pub s: GemmCatParams,
    pub tables: [*const f32; 2],
    pub index: [*const u8; 2],
}

#[cfg(ferrofuse_hopper)]
impl CatOperand {
    /// No segments (the entries that read A as one strided matrix).
    pub const NONE: CatOperand = CatOperand {
        s: GemmCatParams {
            ld: [0; 2],
            rows: [0; 2],
            width: [0; 2],
            index_stride: [0; 2],
            index_offset: [0; 2],
            index_bytes: 0,
            _pad: 0,
        },
        tables: [core::ptr::null(); 2],
        index: [core::ptr::null(); 2],
    };

    /// Whether the segments make a `k`-column A of one batch that the 16-byte copies can read:
    /// widths and row strides multiples of four, tables 16-byte aligned and of fewer than
    /// `u32::MAX` rows, indices of 4 or 8 bytes.
    #[cfg_attr(not(ferrofuse_hopper), allow(dead_code))]
    fn fits(&self, k: u32, batch: u32) -> bool {
        let s = &self.s;
        let seg_ok = |i: usize| {
            s.width[i] == 0
                || (s.width[i] % 4 == 0
                    && s.ld[i] % 4 == 0
                    && s.ld[i] >= s.width[i] as u64
                    && (self.tables[i] as usize) % 16 == 0
                    && s.rows[i] < u32::MAX as u64
                    && (s.index_stride[i] == 0 || s.index_bytes == 4 || s.index_bytes == 8))
        };
        batch == 1 && s.width[0] as u64 + s.width[1] as u64 == k as u64 && seg_ok(0) && seg_ok(1)
    }

    /// The table row of A's row `r` in each segment: `r` without an index, else its index
    /// (negative ones counted from the table's end); `u32::MAX` for a row past `m`, an unused
    /// segment or an index outside the table (the row reads zeros).
    #[cfg_attr(not(ferrofuse_hopper), allow(dead_code))]
    #[inline(always)]
    fn rows_of(&self, r: u32, m: u32) -> [u32; 2] {
        let s = &self.s;
        // (Segment by constant: an array indexed at run time would go through memory.)
        let seg = |i: usize| {
            if r >= m || s.width[i] == 0 {
                return u32::MAX;
            }
            if s.index_stride[i] == 0 {
                return r;
            }
            let at = r as u64 * s.index_stride[i] as u64 + s.index_offset[i] as u64;
            // SAFETY: the launch contract (an index per row of A below m).
            let raw = unsafe { crate::indexing::load_index(self.index[i], s.index_bytes, at) };
            let rows = s.rows[i];
            let row = if raw < 0 { raw.wrapping_add(rows as i64) } else { raw };
            if row < 0 || row as u64 >= rows { u32::MAX } else { row as u32 }
        };
        [seg(0), seg(1)]
    }

    /// Where A's row at column `k` (a multiple of four) starts, from the row's table rows
    /// ([`CatOperand::rows_of`]); `None` where the row reads zeros.
    #[cfg_attr(not(ferrofuse_hopper), allow(dead_code))]
    #[inline(always)]
    fn at(&self, rows: [u32; 2], k: u32) -> Option<*const f32> {
        let s = &self.s;
        // (Selected field by field: an array indexed by the segment would go through memory.)
        let second = k >= s.width[0];
        let row = if second { rows[1] } else { rows[0] };
        if row == u32::MAX {
            return None;
        }
        let column = k - if second { s.width[0] } else { 0 };
        let ld = if second { s.ld[1] } else { s.ld[0] };
        let table = if second { self.tables[1] } else { self.tables[0] };
        Some(table.wrapping_add((row as u64 * ld + column as u64) as usize))
    }
}

mod conv;
