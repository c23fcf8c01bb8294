//! `scan_program_f32`: a loop over time of an elementwise program with carried states, one thread
//! per channel (`abi::ScanProgramParams`). It runs the unrolled recurrences the planner lifts to
//! an ONNX `Scan` whose body is elementwise (transformers' RWKV-4 WKV loop: three carried states,
//! a running maximum among them) as one launch instead of a dozen launches per step. Sequential over time like the direct sequence kernels above; each
//! op rounds as its single-op kernel does, so the result has the bits of the unrolled steps.
//!
//! The program's registers are an array indexed at run time (the instructions name them), so
//! they live in local memory (cached); the parameter arrays are read only at the literal indices
//! `each!` spells out, so the parameters are never copied.

use crate::abi::{
    MAX_RANK, SCAN_PROG_COPIES, SCAN_PROG_INPUTS, SCAN_PROG_OUTPUTS, SCAN_PROG_REGS, ScanProgramParams,
};
use crate::intrinsics::{global_thread_x, grid_threads_x};
use crate::math;

const REGS: usize = SCAN_PROG_REGS as usize;
const _: () = assert!(
    SCAN_PROG_INPUTS == 8
        && SCAN_PROG_OUTPUTS == 4
        && SCAN_PROG_COPIES == 8
        && crate::abi::SCAN_PROG_INSTRS == 48,
    "`each!` spells out these counts"
);

/// Expands `$body` once per literal index, `$k` bound to it.
macro_rules! each {
    ($k:ident in [$($i:literal)*] => $body:block) => {
        $({
            let $k: usize = $i;
            $body
        })*
    };
}

/// Source `s` of an instruction: a register, or the immediate.
#[inline(always)]
fn src(r: &[f32; REGS], s: u32, imm: f32) -> f32 {
    if (s as usize) < REGS { r[s as usize] } else { imm }
}

/// One instruction: the arithmetic ops and max / min inline (the functions `math::ew_op`
/// applies, so the same bits), the rest through it.
#[inline(always)]
fn exec(r: &mut [f32; REGS], ins: crate::abi::EwInstr) {
    let (a, b) = (src(r, ins.a, ins.imm), src(r, ins.b, ins.imm));
    let v = match ins.op {
        0 => math::add(a, b),
        1 => math::sub(a, b),
        2 => math::mul(a, b),
        3 => math::div(a, b),
        5 => math::max(a, b),
        6 => math::min(a, b),
        op => math::ew_op(op, a, b, ins.imm),
    };
    r[ins.dst as usize % REGS] = v;
}

/// Element offset of operand `o` at step `t`, `base` being its channel offset.
#[inline(always)]
fn offset(o: &crate::abi::ScanOperand, base: u64, t: u64) -> usize {
    o.start.wrapping_add(t.wrapping_mul(o.step)).wrapping_add(base) as usize
}

/// The whole time loop of channel `c`.
///
/// # Safety
/// The kernel's contract: every used operand holds the elements its offsets address for every
/// channel and step.
#[inline(always)]
unsafe fn channel(
    p: &ScanProgramParams,
    c: u64,
    xs: &[*const f32; SCAN_PROG_INPUTS],
    ys: &[*mut f32; SCAN_PROG_OUTPUTS],
) {
    let mut xo = [0u64; SCAN_PROG_INPUTS];
    let mut yo = [0u64; SCAN_PROG_OUTPUTS];
    // The channel's coordinates, last dim first; every array index a literal (a loop over the
    // dims would index the parameters at run time, which copies them to local memory).
    let first = MAX_RANK - p.rank as usize;
    let mut rem = c;
    each!(d in [7 6 5 4 3 2 1 0] => {
        if d >= first {
            let n = p.dims[d];
            let idx = rem % n;
            rem /= n;
            each!(k in [0 1 2 3 4 5 6 7] => { xo[k] = xo[k].wrapping_add(idx.wrapping_mul(p.inputs[k].strides[d])); });
            each!(k in [0 1 2 3] => { yo[k] = yo[k].wrapping_add(idx.wrapping_mul(p.outputs[k].strides[d])); });
        }
    });
    let (n_in, n_out) = (p.n_inputs as usize, p.n_outputs as usize);
    let mut r = [0f32; REGS];
    // SAFETY (every access below): the contract; registers are taken modulo REGS.
    each!(k in [0 1 2 3 4 5 6 7] => {
        let o = p.inputs[k];
        if k < n_in && o.per_step == 0 {
            r[o.reg as usize % REGS] = unsafe { *xs[k].add(offset(&o, xo[k], 0)) };
        }
    });
    let mut t = 0;
    while t < p.steps {
        each!(k in [0 1 2 3 4 5 6 7] => {
            let o = p.inputs[k];
            if k < n_in && o.per_step != 0 {
                r[o.reg as usize % REGS] = unsafe { *xs[k].add(offset(&o, xo[k], t)) };
            }
        });
        each!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
                    24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47] => {
            if k < p.n_instr as usize {
                exec(&mut r, p.instrs[k]);
            }
        });
        each!(k in [0 1 2 3] => {
            let o = p.outputs[k];
            if k < n_out && o.per_step != 0 && !ys[k].is_null() {
                unsafe { *ys[k].add(offset(&o, yo[k], t)) = r[o.reg as usize % REGS] };
            }
        });
        // One parallel copy: every source is read before any destination is written.
        let mut moved = [0f32; SCAN_PROG_COPIES];
        each!(k in [0 1 2 3 4 5 6 7] => {
            if k < p.n_copies as usize {
                moved[k] = r[p.copies[k][1] as usize % REGS];
            }
        });
        each!(k in [0 1 2 3 4 5 6 7] => {
            if k < p.n_copies as usize {
                r[p.copies[k][0] as usize % REGS] = moved[k];
            }
        });
        t += 1;
    }
    each!(k in [0 1 2 3] => {
        let o = p.outputs[k];
        if k < n_out && o.per_step == 0 && !ys[k].is_null() {
            unsafe { *ys[k].add(offset(&o, yo[k], 0)) = r[o.reg as usize % REGS] };
        }
    });
}

/// `ScanProgramParams`' program over its channels: a 1-D grid of 1-D blocks, any size, a
/// grid-stride loop over the channels, each thread running one channel's whole time loop.
///
/// # Safety
/// Inputs `k < n_inputs` and outputs `k < n_outputs` hold every element their operands address
/// for channels below `channels` and steps below `steps`; the rest may be null (a null output
/// is not written). No output
/// overlaps an input or another output.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn scan_program_f32(
    p: ScanProgramParams,
    x0: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    x4: *const f32,
    x5: *const f32,
    x6: *const f32,
    x7: *const f32,
    y0: *mut f32,
    y1: *mut f32,
    y2: *mut f32,
    y3: *mut f32,
) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    let xs = [x0, x1, x2, x3, x4, x5, x6, x7];
    let ys = [y0, y1, y2, y3];
    let (mut c, stride) = (global_thread_x(), grid_threads_x());
    while c < p.channels {
        // SAFETY: the kernel's contract, for channel c < channels.
        unsafe { channel(&p, c, &xs, &ys) };
        c += stride;
    }
}
