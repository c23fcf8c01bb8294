//! `scan_program_f32`: a loop over time of an elementwise program with carried states, one thread
//! per channel (`abi::ScanProgramParams`). It runs the unrolled recurrences the planner lifts to
//! an ONNX `Scan` whose body is elementwise (transformers' RWKV-4 WKV loop: three carried states,
//! a running maximum among them) as one launch instead of a dozen launches per step. Sequential over time like the direct sequence kernels above; each
//! op rounds as its single-op kernel does, so the result has the bits of the unrolled steps.
//!
//! The block's step program lives in shared memory (thread 0 copies it from the parameters at
//! literal indices, so the parameters are never copied to local memory), and so do the threads'
//! registers (`regs[reg][thread]`, indexed at run time as the instructions name them): every
//! instruction runs through one loop and one dispatch.

use crate::abi::{
    EwInstr, MAX_RANK, SCAN_PROG_COPIES, SCAN_PROG_INPUTS, SCAN_PROG_INSTRS, SCAN_PROG_OUTPUTS,
    SCAN_PROG_REGS, ScanProgramParams,
};
use crate::intrinsics::{
    block_dim_x, dynamic_shared_ptr, global_thread_x, grid_threads_x, sync_threads, thread_idx_x,
};
use crate::math;

const REGS: usize = SCAN_PROG_REGS as usize;
const _: () = assert!(
    SCAN_PROG_INPUTS == 8 && SCAN_PROG_OUTPUTS == 4 && SCAN_PROG_COPIES == 8 && SCAN_PROG_INSTRS == 48,
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

/// One thread's registers: `REGS` f32 at a stride of the block's threads in shared memory.
#[derive(Clone, Copy)]
struct Regs {
    base: *mut f32,
    stride: usize,
}

impl Regs {
    /// # Safety
    /// `base` addresses this thread's register 0 of a `REGS x stride` array.
    #[inline(always)]
    unsafe fn get(self, r: u32) -> f32 {
        // SAFETY: r taken modulo REGS.
        unsafe { *self.base.add((r as usize % REGS) * self.stride) }
    }

    #[inline(always)]
    unsafe fn set(self, r: u32, v: f32) {
        // SAFETY: r taken modulo REGS.
        unsafe { *self.base.add((r as usize % REGS) * self.stride) = v };
    }

    /// Source `s` of an instruction: a register, or the immediate.
    #[inline(always)]
    unsafe fn src(self, s: u32, imm: f32) -> f32 {
        // SAFETY: forwarded.
        if (s as usize) < REGS { unsafe { self.get(s) } } else { imm }
    }
}

/// Element offset of operand `o` at step `t`, `base` being its channel offset.
#[inline(always)]
fn offset(o: &crate::abi::ScanOperand, base: u64, t: u64) -> usize {
    o.start.wrapping_add(t.wrapping_mul(o.step)).wrapping_add(base) as usize
}

/// The element offsets of channel `c` into each input and output (`ScanOperand::strides`).
#[inline(always)]
#[allow(unused_assignments)] // the quotient after the outermost dim is not read
fn channel_offsets(p: &ScanProgramParams, c: u64) -> ([u64; SCAN_PROG_INPUTS], [u64; SCAN_PROG_OUTPUTS]) {
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
    (xo, yo)
}

/// The whole time loop of channel `c`, its registers `r`, the step's instructions at `prog`.
///
/// # Safety
/// The kernel's contract: every used operand holds the elements its offsets address for every
/// channel and step; `prog` holds `n_instr` instructions.
#[inline(always)]
unsafe fn channel(
    p: &ScanProgramParams,
    c: u64,
    xs: &[*const f32; SCAN_PROG_INPUTS],
    ys: &[*mut f32; SCAN_PROG_OUTPUTS],
    prog: *const EwInstr,
    r: Regs,
) {
    let (xo, yo) = channel_offsets(p, c);
    let (n_in, n_out, n_instr) = (p.n_inputs as usize, p.n_outputs as usize, p.n_instr as usize);
    // SAFETY (every access below): the contract; registers are taken modulo REGS.
    unsafe {
        for k in 0..SCAN_PROG_REGS {
            r.set(k, 0.0);
        }
        each!(k in [0 1 2 3 4 5 6 7] => {
            let o = &p.inputs[k];
            if k < n_in && o.per_step == 0 {
                r.set(o.reg, *xs[k].add(offset(o, xo[k], 0)));
            }
        });
        let mut t = 0;
        while t < p.steps {
            each!(k in [0 1 2 3 4 5 6 7] => {
                let o = &p.inputs[k];
                if k < n_in && o.per_step != 0 {
                    r.set(o.reg, *xs[k].add(offset(o, xo[k], t)));
                }
            });
            let mut i = 0;
            while i < n_instr {
                let ins = *prog.add(i);
                let (a, b) = (r.src(ins.a, ins.imm), r.src(ins.b, ins.imm));
                // The ops recurrences are made of inline, tested in turn (a uniform branch each);
                // the rest through `math::ew_op` (the same functions, so the same bits).
                let v = match ins.op {
                    0 => math::add(a, b),
                    1 => math::sub(a, b),
                    2 => math::mul(a, b),
                    3 => math::div(a, b),
                    5 => math::max(a, b),
                    6 => math::min(a, b),
                    20 => math::exp(a),
                    op => math::ew_op(op, a, b, ins.imm),
                };
                r.set(ins.dst, v);
                i += 1;
            }
            each!(k in [0 1 2 3] => {
                let o = &p.outputs[k];
                if k < n_out && o.per_step != 0 && !ys[k].is_null() {
                    *ys[k].add(offset(o, yo[k], t)) = r.get(o.reg);
                }
            });
            // One parallel copy: every source is read before any destination is written.
            let mut moved = [0f32; SCAN_PROG_COPIES];
            each!(k in [0 1 2 3 4 5 6 7] => {
                if k < p.n_copies as usize {
                    moved[k] = r.get(p.copies[k][1]);
                }
            });
            each!(k in [0 1 2 3 4 5 6 7] => {
                if k < p.n_copies as usize {
                    r.set(p.copies[k][0], moved[k]);
                }
            });
            t += 1;
        }
        each!(k in [0 1 2 3] => {
            let o = &p.outputs[k];
            if k < n_out && o.per_step == 0 && !ys[k].is_null() {
                *ys[k].add(offset(o, yo[k], 0)) = r.get(o.reg);
            }
        });
    }
}

/// `ScanProgramParams`' program over its channels: a 1-D grid of 1-D blocks, any size, with
/// `abi::scan_program_shared_bytes(block)` bytes of dynamic shared memory; a grid-stride loop
/// over the channels, each thread running one channel's whole time loop.
///
/// # Safety
/// Inputs `k < n_inputs` and outputs `k < n_outputs` hold every element their operands address
/// for channels below `channels` and steps below `steps`; the rest may be null (a null output
/// is not written). No output overlaps an input or another output.
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
    if p.rank as usize > MAX_RANK || p.n_instr as usize > SCAN_PROG_INSTRS {
        return;
    }
    let smem = dynamic_shared_ptr();
    let prog = smem.cast::<EwInstr>();
    if thread_idx_x() == 0 {
        each!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
                    24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47] => {
            if k < p.n_instr as usize {
                // SAFETY: the shared block holds SCAN_PROG_INSTRS instructions first.
                unsafe { *prog.add(k) = p.instrs[k] };
            }
        });
    }
    sync_threads();
    let r = Regs {
        // SAFETY: after the instructions, REGS rows of block_dim_x floats (the launch contract).
        base: unsafe { smem.add(SCAN_PROG_INSTRS * core::mem::size_of::<EwInstr>()).cast::<f32>() }
            .wrapping_add(thread_idx_x() as usize),
        stride: block_dim_x() as usize,
    };
    let xs = [x0, x1, x2, x3, x4, x5, x6, x7];
    let ys = [y0, y1, y2, y3];
    let (mut c, stride) = (global_thread_x(), grid_threads_x());
    while c < p.channels {
        // SAFETY: the kernel's contract, for channel c < channels; prog holds n_instr instructions.
        unsafe { channel(&p, c, &xs, &ys, prog, r) };
        c += stride;
    }
}

/// Operand slots of `wkv4_f32` (in `ScanProgramParams::inputs`): the initial numerator,
/// denominator and running maximum, `time_first` (u), the decay (w, already `-exp(time_decay)`),
/// then the step inputs k and v. Outputs: the final numerator, denominator and maximum (each
/// skipped when null), then the per-step output.
const WKV4_NUM: usize = 0;

/// RWKV-4's WKV recurrence (transformers' `rwkv_linear_attention_cpu`) over `ScanProgramParams`'
/// operands by role (`WKV4_NUM` above), its `instrs` unused: per channel and step
/// `q = max(p, k + u)`, `y = (e^(p - q) a + e^(k + u - q) v) / (e^(p - q) b + e^(k + u - q))`, then
/// `q = max(p + w, k)`, `a = e^(p + w - q) a + e^(k - q) v`, `b = e^(p + w - q) b + e^(k - q)`,
/// `p = q`; the same ops in the same order as that function, so the same bits as its unrolled
/// export. The planner picks it for a lifted Scan whose program computes this
/// (`plan::scan_program`). Launch as `scan_program_f32`, without shared memory.
///
/// # Safety
/// As `scan_program_f32`, with the seven inputs and the per-step output present.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn wkv4_f32(
    p: ScanProgramParams,
    x0: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    x4: *const f32,
    x5: *const f32,
    x6: *const f32,
    _x7: *const f32,
    y0: *mut f32,
    y1: *mut f32,
    y2: *mut f32,
    y3: *mut f32,
) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    let xs = [x0, x1, x2, x3, x4, x5, x6];
    let ys = [y0, y1, y2, y3];
    let (mut c, stride) = (global_thread_x(), grid_threads_x());
    while c < p.channels {
        let (xo, yo) = channel_offsets(&p, c);
        // SAFETY (every access below): the kernel's contract, for channel c < channels.
        unsafe {
            let once = |k: usize| *xs[k].add(offset(&p.inputs[k], xo[k], 0));
            let (mut a, mut b, mut pp) = (once(WKV4_NUM), once(WKV4_NUM + 1), once(WKV4_NUM + 2));
            let (u, w) = (once(3), once(4));
            let mut t = 0;
            while t < p.steps {
                let k = *xs[5].add(offset(&p.inputs[5], xo[5], t));
                let v = *xs[6].add(offset(&p.inputs[6], xo[6], t));
                let ww = math::add(k, u);
                let q = math::max(pp, ww);
                let (e1, e2) = (math::exp(math::sub(pp, q)), math::exp(math::sub(ww, q)));
                let num = math::add(math::mul(e1, a), math::mul(e2, v));
                let den = math::add(math::mul(e1, b), e2);
                *ys[3].add(offset(&p.outputs[3], yo[3], t)) = math::div(num, den);
                let ww = math::add(pp, w);
                let q = math::max(ww, k);
                let (e1, e2) = (math::exp(math::sub(ww, q)), math::exp(math::sub(k, q)));
                a = math::add(math::mul(e1, a), math::mul(e2, v));
                b = math::add(math::mul(e1, b), e2);
                pp = q;
                t += 1;
            }
            let fin = [a, b, pp];
            each!(k in [0 1 2] => {
                if !ys[k].is_null() {
                    *ys[k].add(offset(&p.outputs[k], yo[k], 0)) = fin[k];
                }
            });
        }
        c += stride;
    }
}
