//! Split-K for the GEMMs: which k chunk a block of a split launch sums, and the second launch
//! that sums the partials in split order and applies the epilogue (C, the activation, the
//! program). `gemm_f32` and the large-tile kernels of `gemm_tile.rs` write the same workspace
//! layout, `[batch][split][m][n]`, so one reduction serves both.

use crate::abi::{EwProgramParams, GemmParams};
use crate::gemm::{Program, finish, program};
use crate::intrinsics::*;

/// The batch matrix, the split and the k range `[k_begin, k_end)` of the GEMM block at grid z
/// `z`: all of k when `p.splits <= 1`, else chunk `z % splits` of `p.k_chunk` (the last one
/// cut at `p.k`) of matrix `z / splits`.
#[inline(always)]
pub(crate) fn split_of(p: &GemmParams, z: u32) -> (u64, u32, u32, u32) {
    let splits = p.splits.max(1);
    let (batch, split) = ((z / splits) as u64, z % splits);
    if splits == 1 {
        (batch, 0, 0, p.k)
    } else {
        let begin = split * p.k_chunk;
        (batch, split, begin, begin.saturating_add(p.k_chunk).min(p.k))
    }
}

/// Sums the split-K partials of a GEMM launch with `p.splits > 1` ([`crate::gemm::gemm_f32`]
/// or a large-tile kernel) in split order and applies the epilogue.
///
/// # Safety
/// `ws` holds the `p.splits * p.batch * p.m * p.n` partials a split launch with the same `p`
/// wrote; `c` as for [`crate::gemm::gemm_f32`]; `y` holds `p.batch` matrices of `p.m x p.n` at
/// the offsets [`GemmParams::y_offset`] gives and overlaps neither.
///
/// # Parameters
/// See [`GemmParams`]; `ws` is the workspace, `y` the output.
///
/// # Thread mapping
/// 2-D grid of 1-D blocks, any size: grid x strides over the `n` columns (consecutive threads,
/// consecutive columns), grid y over the `batch * m` output rows.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_reduce_f32(p: GemmParams, c: *const f32, ws: *const f32, y: *mut f32) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_reduce(&p, c, ws, y, None) }
}

/// [`gemm_reduce_f32`] with a program epilogue (see [`crate::gemm::gemm_program_f32`]).
///
/// # Safety
/// As [`gemm_reduce_f32`] and, for the program's inputs and `y`,
/// [`crate::gemm::gemm_program_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`]; `ws` is the workspace, `y` the output.
///
/// # Thread mapping
/// As [`gemm_reduce_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_reduce_program_f32(
    p: GemmParams,
    e: EwProgramParams,
    c: *const f32,
    ws: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_reduce(&p, c, ws, y, program(&e, x1, x2, x3)) }
}

/// The body of [`gemm_reduce_f32`] and [`gemm_reduce_program_f32`].
///
/// # Safety
/// As [`gemm_reduce_program_f32`].
#[inline(always)]
unsafe fn gemm_reduce(p: &GemmParams, c: *const f32, ws: *const f32, y: *mut f32, program: Program) {
    let (m, n) = (p.m as u64, p.n as u64);
    let rows = p.batch as u64 * m;
    if m == 0 || n == 0 {
        return;
    }
    let (j0, j_step) = (global_thread_x(), grid_threads_x());
    let mut row = block_idx_y() as u64;
    while row < rows {
        // One division per row (32-bit where the rows fit), none per element.
        let (batch, i) = if rows <= u32::MAX as u64 {
            let (r, m) = (row as u32, p.m);
            ((r / m) as u64, r % m)
        } else {
            (row / m, (row % m) as u32)
        };
        let (yv, cb) = (p.y_view(batch), crate::gemm::c_of(p, c, batch));
        let mut j = j0;
        while j < n {
            // Partial s of (batch, i, j): matrix `batch * splits + s` of the workspace.
            let e = ((batch * p.splits as u64) * m + i as u64) * n + j;
            // Summed in split order; four loads in flight at a time (the reduction is bound by
            // their latency, not by bandwidth).
            let (splits, mn) = (p.splits as u64, m * n);
            let at = |s: u64| (e + s * mn) as usize;
            let mut sum = 0f32;
            let mut s = 0;
            while s + 4 <= splits {
                // SAFETY: s + 3 < splits, batch < p.batch, i < m, j < n: inside the workspace.
                let v =
                    unsafe { [*ws.add(at(s)), *ws.add(at(s + 1)), *ws.add(at(s + 2)), *ws.add(at(s + 3))] };
                sum = sum + v[0] + v[1] + v[2] + v[3];
                s += 4;
            }
            while s < splits {
                // SAFETY: s < splits, as above.
                sum += unsafe { *ws.add(at(s)) };
                s += 1;
            }
            // SAFETY: the program's inputs cover the output (the contract).
            let v = unsafe { finish(p, cb, program, batch, i, j as u32, sum) };
            // SAFETY: batch < p.batch, i < m, j < n.
            unsafe { *y.add(yv.offset(i, j as u32) as usize) = v };
            j += j_step;
        }
        row += grid_dim_y() as u64;
    }
}
