//! Elementwise programs (`ew_program_f32`): several f32 elementwise ops fused into one pass over
//! the output. The planner compiles a chain of ops into at most 16 instructions over four registers,
//! four broadcast inputs and per-instruction immediates ([`EwProgramParams`]); each instruction
//! applies the same scalar function as its single-op kernel, so a program gives the same bits.

use crate::abi::{EW_MAX_INSTRS, EwInstr, EwProgramParams, MAX_RANK};
use crate::intrinsics::global_thread_x;
use crate::math;
use crate::movement::{at, unravel};

/// `a op b` for the arithmetic codes (`0..=3`: add, sub, mul, div), as `math::ew_op` computes them.
#[inline(always)]
fn arith(op: u32, a: f32, b: f32) -> f32 {
    match op {
        0 => math::add(a, b),
        1 => math::sub(a, b),
        2 => math::mul(a, b),
        _ => math::div(a, b),
    }
}

/// The ops of `math::ew_op` that are one or two instructions (a ReLU or clamp after a
/// convolution, the rounding of a requantization), inline rather than through its call; the same
/// functions, so the same bits.
#[inline(always)]
fn one_instruction(op: u32, a: f32, b: f32) -> Option<f32> {
    use crate::abi::ew_extra;
    Some(match op {
        5 => math::max(a, b),
        6 => math::min(a, b),
        16 => math::relu(a),
        23 => math::abs(a),
        24 => math::neg(a),
        ew_extra::FLOOR => crate::intrinsics::floor_f32(a),
        ew_extra::CEIL => crate::intrinsics::ceil_f32(a),
        ew_extra::ROUND => crate::intrinsics::rint_f32(a),
        _ => return None,
    })
}

/// The registers and inputs of one element of an elementwise program (scalars, not arrays, so
/// they stay in registers). Also the score program of `attention::attention_f32`.
#[derive(Clone, Copy, Default)]
pub(crate) struct EwState {
    r0: f32,
    r1: f32,
    r2: f32,
    r3: f32,
    /// Input 0.
    pub x0: f32,
    /// Input 1.
    pub x1: f32,
    /// Input 2.
    pub x2: f32,
    /// Input 3.
    pub x3: f32,
}

impl EwState {
    /// Source `s` ([`crate::abi::ew_src`]) of instruction `ins`; constant-index arms only.
    #[inline(always)]
    fn src(&self, s: u32, ins: &EwInstr) -> f32 {
        match s {
            0 => self.r0,
            1 => self.r1,
            2 => self.r2,
            3 => self.r3,
            4 => self.x0,
            5 => self.x1,
            6 => self.x2,
            7 => self.x3,
            _ => ins.imm,
        }
    }

    #[inline(always)]
    fn set(&mut self, d: u32, v: f32) {
        match d {
            0 => self.r0 = v,
            1 => self.r1 = v,
            2 => self.r2 = v,
            _ => self.r3 = v,
        }
    }

    /// One instruction. With `ARITH`, the program holds arithmetic ops only
    /// ([`crate::abi::ew_arith_only`]) and nothing calls `math::ew_op`: a caller holding many
    /// values in registers then keeps them there (a call makes ptxas spill them around it).
    #[inline(always)]
    fn step<const ARITH: bool>(&mut self, ins: &EwInstr) {
        let (a, b) = (self.src(ins.a, ins), self.src(ins.b, ins));
        // The arithmetic ops inline (a residual or bias add, a scale): no call. The same
        // functions as `math::ew_op`'s, so the results are the same bits.
        let v = if ARITH || ins.op <= 3 {
            arith(ins.op, a, b)
        } else if ins.op == crate::abi::ew_extra::QUANTIZE {
            // Inline: a QDQ model quantizes after nearly every op.
            math::quantize_centred(a, b, ins.aux)
        } else if let Some(v) = one_instruction(ins.op, a, b) {
            v
        } else {
            math::ew_op(ins.op, a, b, ins.imm)
        };
        self.set(ins.dst, v);
    }

    /// Runs the first `n_instr` instructions of `instrs` (unrolled; each checks `k < n_instr`, a
    /// uniform branch) and returns source `out_reg` ([`crate::abi::ew_src`]) afterwards.
    #[inline(always)]
    pub(crate) fn run(&mut self, instrs: &[EwInstr; EW_MAX_INSTRS], n_instr: u32, out_reg: u32) -> f32 {
        self.run_ops::<false>(instrs, n_instr, out_reg)
    }

    /// [`EwState::run`] of a program of arithmetic ops only ([`crate::abi::ew_arith_only`]; any
    /// other op computes as a division): no call to `math::ew_op`.
    #[inline(always)]
    pub(crate) fn run_arith(&mut self, instrs: &[EwInstr; EW_MAX_INSTRS], n_instr: u32, out_reg: u32) -> f32 {
        self.run_ops::<true>(instrs, n_instr, out_reg)
    }

    #[inline(always)]
    fn run_ops<const ARITH: bool>(
        &mut self,
        instrs: &[EwInstr; EW_MAX_INSTRS],
        n_instr: u32,
        out_reg: u32,
    ) -> f32 {
        macro_rules! run {
            ($($k:literal)*) => {$(
                if $k < n_instr {
                    self.step::<ARITH>(&instrs[$k]);
                }
            )*};
        }
        // The two shapes of most programs run without the interpreter's operand and op switches:
        // `x0 op x1` (a residual or bias add after a GEMM) and `(x0 op imm) op x1` (an attention
        // score scaled, then masked), for the arithmetic ops.
        if let Some(short) = ShortProgram::of(instrs, n_instr, out_reg).filter(|s| s.reads_x1()) {
            return short.eval(self.x0, self.x1);
        }
        // Other short programs run straight through: the sixteen guarded steps below cost their
        // guards and selects whatever the length.
        match n_instr {
            1 => self.step::<ARITH>(&instrs[0]),
            2 => {
                self.step::<ARITH>(&instrs[0]);
                self.step::<ARITH>(&instrs[1]);
            }
            3 => {
                self.step::<ARITH>(&instrs[0]);
                self.step::<ARITH>(&instrs[1]);
                self.step::<ARITH>(&instrs[2]);
            }
            _ => {
                run!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            }
        }
        self.src(out_reg, &EwInstr::default())
    }
}

/// A program of at most two arithmetic steps on input 0, an immediate and input 1: the identity,
/// `x0 op imm`, `x0 op x1` or `(x0 op imm) op x1` (an attention score scaled, then masked; a bias
/// or residual add). [`ShortProgram::eval`] computes it with the interpreter's functions in its
/// order, so the same bits, without its operand and op switches.
#[derive(Clone, Copy, Default)]
pub(crate) struct ShortProgram {
    op0: u32,
    /// The first step's right operand: `imm` (else input 1).
    on_imm: bool,
    imm: f32,
    /// The second step's op, applied to input 1 (`NO_STEP`: none).
    op1: u32,
}

const NO_STEP: u32 = u32::MAX;

impl ShortProgram {
    /// The program as a short one, or `None` for any other.
    #[inline(always)]
    pub(crate) fn of(instrs: &[EwInstr; EW_MAX_INSTRS], n_instr: u32, out_reg: u32) -> Option<ShortProgram> {
        use crate::abi::ew_src::{IMM, INPUT0};
        let x1 = INPUT0 + 1;
        let (i0, i1) = (&instrs[0], &instrs[1]);
        let first = |on_imm: bool| i0.op <= 3 && i0.a == INPUT0 && i0.b == if on_imm { IMM } else { x1 };
        match n_instr {
            // x0 · 1 is x0 (signed zeros included; a NaN stays a NaN).
            0 if out_reg == INPUT0 => Some(ShortProgram { op0: 2, on_imm: true, imm: 1.0, op1: NO_STEP }),
            1 if i0.dst == out_reg && (first(true) || first(false)) => {
                Some(ShortProgram { op0: i0.op, on_imm: i0.b == IMM, imm: i0.imm, op1: NO_STEP })
            }
            2 if first(true) && i1.op <= 3 && i1.a == i0.dst && i1.b == x1 && i1.dst == out_reg => {
                Some(ShortProgram { op0: i0.op, on_imm: true, imm: i0.imm, op1: i1.op })
            }
            _ => None,
        }
    }

    /// Whether the program reads input 1.
    #[inline(always)]
    pub(crate) fn reads_x1(&self) -> bool {
        !self.on_imm || self.op1 != NO_STEP
    }

    /// Whether the program is `x0 + x1` (a residual add).
    #[inline(always)]
    pub(crate) fn adds_x1(&self) -> bool {
        self.op0 == 0 && !self.on_imm && self.op1 == NO_STEP
    }

    /// The program's result for inputs `x0` and `x1`.
    #[inline(always)]
    pub(crate) fn eval(&self, x0: f32, x1: f32) -> f32 {
        let t = arith(self.op0, x0, if self.on_imm { self.imm } else { x1 });
        if self.op1 == NO_STEP { t } else { arith(self.op1, t, x1) }
    }
}

/// Element offsets of output index `i` into the program's four inputs.
#[inline(always)]
pub(crate) fn ew_offsets(p: &EwProgramParams, i: u64) -> [u64; 4] {
    if p.rank == 0 {
        return [i; 4];
    }
    let mut o = [0u64; 4];
    unravel(
        i,
        p.rank,
        |d| at(&p.out_shape, d),
        |d, idx| {
            o[0] += idx * at(&p.strides[0], d);
            o[1] += idx * at(&p.strides[1], d);
            o[2] += idx * at(&p.strides[2], d);
            o[3] += idx * at(&p.strides[3], d);
        },
    );
    o
}

/// Output element `i` of program `p`: the inputs at their offsets for `i`, the instructions in
/// order, the result register. `first`, when given, is input 0's value (a GEMM epilogue holds it
/// in a register; `x[0]` is then not read).
///
/// # Safety
/// Each input `k < p.n_inputs` read from memory holds the element its strides address for `i`;
/// `p.rank <= MAX_RANK`.
#[inline(always)]
pub(crate) unsafe fn ew_element(p: &EwProgramParams, i: u64, first: Option<f32>, x: [*const f32; 4]) -> f32 {
    // SAFETY: forwarded; the offsets are those of element i.
    unsafe { ew_element_at(p, ew_offsets(p, i), first, x) }
}

/// [`ew_element`] with the inputs' element offsets `o` already known (a GEMM epilogue computes
/// them from its row and column, without dividing).
///
/// # Safety
/// As [`ew_element`], `o` being the offsets of the element computed.
#[inline(always)]
pub(crate) unsafe fn ew_element_at(
    p: &EwProgramParams,
    o: [u64; 4],
    first: Option<f32>,
    x: [*const f32; 4],
) -> f32 {
    let mut st = EwState::default();
    // SAFETY: offsets inside each used input (the contract); unused inputs are not read.
    unsafe {
        if p.n_inputs > 0 {
            st.x0 = match first {
                Some(v) => v,
                None => *x[0].add(o[0] as usize),
            };
        }
        if p.n_inputs > 1 {
            st.x1 = *x[1].add(o[1] as usize);
        }
        if p.n_inputs > 2 {
            st.x2 = *x[2].add(o[2] as usize);
        }
        if p.n_inputs > 3 {
            st.x3 = *x[3].add(o[3] as usize);
        }
    }
    st.run(&p.instrs, p.n_instr, p.out_reg)
}

/// An elementwise program ([`EwProgramParams`]): several f32 elementwise ops fused into one pass
/// over the output, with broadcast inputs and immediates; the intermediate values live in four
/// registers and never touch memory.
///
/// # Safety
/// Inputs `k < p.n_inputs` hold every element their strides address (the host builds the strides
/// from their shapes); `y` holds `p.elems` f32 and may equal an input of the output's shape (each
/// element is read before it is written), but overlaps no other input; unused input pointers may
/// be null. `p.rank <= MAX_RANK`, `p.n_instr <= EW_MAX_INSTRS`, `p.n_inputs <= EW_MAX_INPUTS`.
///
/// # Parameters
/// `p`: shape, strides and the program; `x0`..`x3`: inputs; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks of at most 256 threads covering `p.elems` threads: one output element a
/// thread. Straight-line code, not a grid-stride loop: in a loop the compiler hoists every
/// parameter the program reads (each instruction's fields, each dim's divisor and strides) into
/// registers (102 to 188 a thread); straight-line, each is read from the parameter bank where it
/// is used (54). The program's instructions are unrolled (each checks `k < n_instr`, a uniform
/// branch). Below 2^31 elements with broadcast inputs the offsets are 32-bit, through the host's
/// divisors ([`EwProgramParams::with_fast_division`]); otherwise 64-bit.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ew_program_f32(
    p: EwProgramParams,
    x0: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    let i = global_thread_x();
    if p.rank as usize > MAX_RANK || i >= p.elems {
        return;
    }
    let o = if p.fast_div != 0 { p.fast_offsets(i as u32).map(u64::from) } else { ew_offsets(&p, i) };
    // SAFETY: the contract covers every input for every output index below elems; `o` are the
    // offsets of element i.
    let out = unsafe { ew_element_at(&p, o, None, [x0, x1, x2, x3]) };
    // SAFETY: i < elems.
    unsafe { *y.add(i as usize) = out };
}
