//! Kernels on any element type: Cast, comparisons, boolean logic and IsNaN / IsInf (bool output),
//! integer arithmetic, bitwise ops and shifts, Where, OneHot.
//!
//! Element types travel as [`scalar`] codes — every ONNX numeric type: the IEEE floats, integers
//! of every width, bool, and the coded narrow types (float8, float4, int4, int2: one code a byte,
//! decoded and encoded by [`crate::math::coded`], the host's own codec). The kernel branches on
//! the source type once per launch (the branch is uniform) and runs a grid-stride loop
//! monomorphized for the common types (one loop shared by the rest). Every thread handles one
//! output element at a time, so writes are coalesced.

use crate::abi::{
    CastParams, CompareParams, MAX_RANK, OneHotParams, WhereParams, compare_op, int_op, round_mode, scalar,
};
use crate::elementwise::broadcast_offsets;
use crate::intrinsics::{atomic_max_u32, global_thread_x, grid_threads_x};
use crate::math;
use crate::math::coded;
use crate::movement::unravel;

/// An element type as read: widened to f64 (floats), i64 (integers of up to 32 bits, signed
/// 64-bit integers, bools, the coded integers) or u64 (unsigned 64-bit integers).
#[derive(Clone, Copy)]
enum Wide {
    F(f64),
    I(i64),
    U(u64),
}

/// `v` converted by `as` to the machine type `$t`: to an integer type floats truncate toward zero
/// and saturate (NaN gives 0) and integers wrap; to a float type every value rounds once.
macro_rules! convert {
    ($v:expr, $t:ty) => {
        match $v {
            Wide::F(f) => f as $t,
            Wide::I(n) => n as $t,
            Wide::U(n) => n as $t,
        }
    };
}

impl Wide {
    #[inline(always)]
    fn f64(self) -> f64 {
        convert!(self, f64)
    }

    #[inline(always)]
    fn i64(self) -> i64 {
        convert!(self, i64)
    }

    #[inline(always)]
    fn nonzero(self) -> bool {
        match self {
            Wide::F(v) => v != 0.0,
            Wide::I(v) => v != 0,
            Wide::U(v) => v != 0,
        }
    }
}

/// How a store converts to a coded float type: Cast's `saturate` and `round_mode`
/// ([`crate::abi::round_mode`]).
#[derive(Clone, Copy)]
struct Rules {
    saturate: bool,
    round: u32,
}

/// The rules that store a value read from the same coded type as its own code again.
const EXACT: Rules = Rules { saturate: false, round: round_mode::NEAREST };

/// Element `i` of `x` (element type `ty`), widened.
///
/// # Safety
/// `x` holds more than `i` elements of type `ty`.
#[inline(always)]
unsafe fn load(ty: u32, x: *const u8, i: usize) -> Wide {
    // SAFETY: the caller's contract; each arm reads one element of its size at index i.
    unsafe {
        match ty {
            scalar::F32 => Wide::F(*x.cast::<f32>().add(i) as f64),
            scalar::F64 => Wide::F(*x.cast::<f64>().add(i)),
            scalar::I64 => Wide::I(*x.cast::<i64>().add(i)),
            scalar::I32 => Wide::I(*x.cast::<i32>().add(i) as i64),
            scalar::I8 => Wide::I(*x.cast::<i8>().add(i) as i64),
            scalar::U8 => Wide::I(*x.add(i) as i64),
            scalar::BOOL => Wide::I((*x.add(i) != 0) as i64),
            scalar::F16 => Wide::F(math::f16_to_f32(*x.cast::<u16>().add(i)) as f64),
            scalar::BF16 => Wide::F(math::bf16_to_f32(*x.cast::<u16>().add(i)) as f64),
            scalar::I16 => Wide::I(*x.cast::<i16>().add(i) as i64),
            scalar::U16 => Wide::I(*x.cast::<u16>().add(i) as i64),
            scalar::U32 => Wide::I(*x.cast::<u32>().add(i) as i64),
            scalar::U64 => Wide::U(*x.cast::<u64>().add(i)),
            ty if coded::is_float(ty) => Wide::F(coded::decode(ty, *x.add(i))),
            ty => Wide::I(coded::decode_int(ty, *x.add(i))),
        }
    }
}

/// Stores `v` as element `i` of `y` (element type `ty`; a coded float type encodes by `rules`).
///
/// # Safety
/// `y` holds more than `i` elements of type `ty`.
#[inline(always)]
unsafe fn store(ty: u32, y: *mut u8, i: usize, v: Wide, rules: Rules) {
    // SAFETY: the caller's contract; each arm writes one element of its size at index i.
    unsafe {
        match ty {
            // f64 -> f32 rounds once; an integer source goes straight to f32 (one rounding).
            scalar::F32 => *y.cast::<f32>().add(i) = narrow(v),
            scalar::F64 => *y.cast::<f64>().add(i) = v.f64(),
            scalar::I64 => *y.cast::<i64>().add(i) = convert!(v, i64),
            scalar::I32 => *y.cast::<i32>().add(i) = convert!(v, i32),
            scalar::I8 => *y.cast::<i8>().add(i) = convert!(v, i8),
            scalar::U8 => *y.add(i) = convert!(v, u8),
            scalar::BOOL => *y.add(i) = v.nonzero() as u8,
            scalar::F16 => *y.cast::<u16>().add(i) = math::f32_to_f16(narrow(v)),
            scalar::BF16 => *y.cast::<u16>().add(i) = math::f32_to_bf16(narrow(v)),
            scalar::I16 => *y.cast::<i16>().add(i) = convert!(v, i16),
            scalar::U16 => *y.cast::<u16>().add(i) = convert!(v, u16),
            scalar::U32 => *y.cast::<u32>().add(i) = convert!(v, u32),
            scalar::U64 => *y.cast::<u64>().add(i) = convert!(v, u64),
            ty if coded::is_float(ty) => *y.add(i) = coded::encode(ty, v.f64(), rules.saturate, rules.round),
            ty => {
                *y.add(i) = match v {
                    Wide::F(f) => coded::encode(ty, f, rules.saturate, rules.round),
                    _ => coded::encode_int(ty, v.i64()),
                }
            }
        }
    }
}

/// `v` as f32, rounded once (f32 itself; the half types round from it).
#[inline(always)]
fn narrow(v: Wide) -> f32 {
    convert!(v, f32)
}

/// # Safety
/// The [`cast`] contract, with `from` equal to `p.from` (a constant where the caller
/// monomorphizes the loop for one source type).
#[inline(always)]
unsafe fn cast_from(from: u32, p: &CastParams, x: *const u8, y: *mut u8) {
    let rules = Rules { saturate: p.saturate != 0, round: p.round };
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        // SAFETY: i < elems, the length of both buffers. (`p.to` is uniform across the launch, so
        // its branch in `store` costs no divergence.)
        unsafe { store(p.to, y, i as usize, load(from, x, i as usize), rules) };
        i += stride;
    }
}

/// ONNX Cast: `y[i] = x[i]` converted from `p.from` to `p.to` ([`CastParams`]), between every
/// type of [`scalar`] (the coded ones by [`coded`], with Cast's `saturate` and `round_mode`).
///
/// # Safety
/// `x` holds `p.elems` elements of type `p.from`, `y` holds `p.elems` of type `p.to` and does not
/// overlap `x` unless both types have the same size (then `y == x` is allowed: each thread reads
/// its element before writing it). Unknown type codes read and write as the integer coded types.
///
/// # Parameters
/// `p`: count, types and rules; `x`: the input; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cast(p: CastParams, x: *const u8, y: *mut u8) {
    // SAFETY: forwarded from the contract. The common source types get a loop of their own; the
    // rest share one that branches on the (uniform) source type per element.
    unsafe {
        match p.from {
            scalar::F32 => cast_from(scalar::F32, &p, x, y),
            scalar::F64 => cast_from(scalar::F64, &p, x, y),
            scalar::I64 => cast_from(scalar::I64, &p, x, y),
            scalar::I32 => cast_from(scalar::I32, &p, x, y),
            scalar::I8 => cast_from(scalar::I8, &p, x, y),
            scalar::U8 => cast_from(scalar::U8, &p, x, y),
            scalar::BOOL => cast_from(scalar::BOOL, &p, x, y),
            scalar::F16 => cast_from(scalar::F16, &p, x, y),
            scalar::BF16 => cast_from(scalar::BF16, &p, x, y),
            from => cast_from(from, &p, x, y),
        }
    }
}

/// # Safety
/// The [`one_hot`] contract, with `IDX` equal to `p.index_type`.
#[inline(always)]
unsafe fn one_hot_typed<const IDX: u32>(p: &OneHotParams, idx: *const u8, values: *const u8, y: *mut u8) {
    let elems = p.outer * p.depth * p.inner;
    // SAFETY: `values` holds two elements of `value_type` (the contract).
    let (off, on) = unsafe { (load(p.value_type, values, 0), load(p.value_type, values, 1)) };
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < elems {
        let (o, rest) = (i / (p.depth * p.inner), i % (p.depth * p.inner));
        let (d, k) = (rest / p.inner, rest % p.inner);
        // SAFETY: o < outer and k < inner: inside the `outer * inner` indices.
        let raw = match unsafe { load(IDX, idx, (o * p.inner + k) as usize) } {
            Wide::F(v) => libm::trunc(v) as i64,
            w => w.i64(),
        };
        let a = if raw < 0 { raw.wrapping_add(p.depth as i64) } else { raw };
        // SAFETY: i < elems, the output's length. (`value_type` is uniform over the launch.)
        unsafe { store(p.value_type, y, i as usize, if a == d as i64 { on } else { off }, EXACT) };
        i += stride;
    }
}

/// ONNX OneHot ([`OneHotParams`]): `values[1]` where an index names the position on the new axis,
/// `values[0]` elsewhere; indices of any numeric type (floats truncate), values and output of any
/// type.
///
/// # Safety
/// `idx` holds `outer * inner` elements of `p.index_type`, `values` two of `p.value_type`, `y`
/// `outer * depth * inner` of `p.value_type`, overlapping neither. `p.inner` and `p.depth` are
/// non-zero when the output is not empty.
///
/// # Parameters
/// `p`: sizes and types; `idx`: the indices; `values`: `[off, on]`; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements (neighbouring
/// threads read neighbouring indices along `inner`).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn one_hot(p: OneHotParams, idx: *const u8, values: *const u8, y: *mut u8) {
    if p.inner == 0 || p.depth == 0 {
        return;
    }
    // SAFETY: forwarded from the contract.
    unsafe {
        match p.index_type {
            scalar::F32 => one_hot_typed::<{ scalar::F32 }>(&p, idx, values, y),
            scalar::F64 => one_hot_typed::<{ scalar::F64 }>(&p, idx, values, y),
            scalar::I64 => one_hot_typed::<{ scalar::I64 }>(&p, idx, values, y),
            scalar::I32 => one_hot_typed::<{ scalar::I32 }>(&p, idx, values, y),
            scalar::I8 => one_hot_typed::<{ scalar::I8 }>(&p, idx, values, y),
            scalar::U8 => one_hot_typed::<{ scalar::U8 }>(&p, idx, values, y),
            _ => {}
        }
    }
}

/// Element offsets of output `i` into both operands (rank 0: contiguous).
#[inline(always)]
fn offsets(p: &CompareParams, i: u64) -> (u64, u64) {
    if p.bin.rank == 0 {
        (i, i)
    } else if p.bin.elems <= u32::MAX as u64 {
        let (a, b) = broadcast_offsets::<u32>(&p.bin, i as u32);
        (a as u64, b as u64)
    } else {
        broadcast_offsets::<u64>(&p.bin, i)
    }
}

/// `op(x, y)` of a comparison or logic op on integers of one kind (`zero`: that kind's 0).
#[inline(always)]
fn int_compare<T: Ord>(op: u32, x: T, y: T, zero: T) -> bool {
    match op {
        compare_op::EQUAL => x == y,
        compare_op::LESS => x < y,
        compare_op::GREATER => x > y,
        compare_op::LESS_OR_EQUAL => x <= y,
        compare_op::GREATER_OR_EQUAL => x >= y,
        compare_op::AND => x != zero && y != zero,
        compare_op::OR => x != zero || y != zero,
        compare_op::XOR => (x != zero) != (y != zero),
        compare_op::NOT => x == zero,
        compare_op::TRUE => true,
        _ => false,
    }
}

/// `op(a, b)` on widened operands.
#[inline(always)]
fn apply(op: u32, a: Wide, b: Wide) -> bool {
    match (a, b) {
        (Wide::I(x), Wide::I(y)) => int_compare(op, x, y, 0),
        (Wide::U(x), Wide::U(y)) => int_compare(op, x, y, 0),
        _ => {
            let (x, y) = (a.f64(), b.f64());
            match op {
                compare_op::EQUAL => x == y,
                compare_op::LESS => x < y,
                compare_op::GREATER => x > y,
                compare_op::LESS_OR_EQUAL => x <= y,
                compare_op::GREATER_OR_EQUAL => x >= y,
                compare_op::AND => x != 0.0 && y != 0.0,
                compare_op::OR => x != 0.0 || y != 0.0,
                compare_op::XOR => (x != 0.0) != (y != 0.0),
                compare_op::NOT => x == 0.0,
                compare_op::IS_NAN => x.is_nan(),
                compare_op::IS_INF => x.is_infinite(),
                compare_op::IS_POS_INF => x == f64::INFINITY,
                compare_op::IS_NEG_INF => x == f64::NEG_INFINITY,
                compare_op::TRUE => true,
                _ => false,
            }
        }
    }
}

/// # Safety
/// The [`compare`] contract, with `ty` equal to `p.dtype` (a constant where the caller
/// monomorphizes the loop for one type).
#[inline(always)]
unsafe fn compare_typed(ty: u32, p: &CompareParams, a: *const u8, b: *const u8, y: *mut u8) {
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.bin.elems {
        let (ia, ib) = offsets(p, i);
        // SAFETY: the offsets lie inside the operands and i < elems (the contract). `p.op` is
        // uniform across the launch.
        unsafe {
            let r = apply(p.op, load(ty, a, ia as usize), load(ty, b, ib as usize));
            *y.add(i as usize) = r as u8;
        }
        i += stride;
    }
}

/// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), boolean logic (And, Or,
/// Xor, Not) and the float classes (IsNaN, IsInf) with NumPy broadcasting, on operands of any
/// [`scalar`] type; the output is bool bytes ([`CompareParams`]).
///
/// # Safety
/// `a` and `b` hold every element the shape and strides of `p.bin` address, of type `p.dtype`;
/// `y` holds `p.bin.elems` bytes and does not overlap the operands. For the one-operand ops (Not,
/// IsNaN, IsInf), `b` is `a`.
///
/// # Parameters
/// `p`: shape, strides, op and type; `a`, `b`: the operands; `y`: the bool output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn compare(p: CompareParams, a: *const u8, b: *const u8, y: *mut u8) {
    if p.bin.rank as usize > MAX_RANK {
        return;
    }
    // SAFETY: forwarded from the contract. The common types get a loop of their own; the rest
    // share one that branches on the (uniform) type per element.
    unsafe {
        match p.dtype {
            scalar::F32 => compare_typed(scalar::F32, &p, a, b, y),
            scalar::F64 => compare_typed(scalar::F64, &p, a, b, y),
            scalar::I64 => compare_typed(scalar::I64, &p, a, b, y),
            scalar::I32 => compare_typed(scalar::I32, &p, a, b, y),
            scalar::I8 => compare_typed(scalar::I8, &p, a, b, y),
            scalar::U8 => compare_typed(scalar::U8, &p, a, b, y),
            scalar::BOOL => compare_typed(scalar::BOOL, &p, a, b, y),
            ty => compare_typed(ty, &p, a, b, y),
        }
    }
}

/// The width in bits of integer type `ty` (64 for the 64-bit ones and unknown codes).
#[inline(always)]
fn int_bits(ty: u32) -> i64 {
    match ty {
        scalar::I8 | scalar::U8 => 8,
        scalar::I16 | scalar::U16 => 16,
        scalar::I32 | scalar::U32 => 32,
        _ => 64,
    }
}

/// `op(x, y)` of integers ([`int_op`]), wrapping; `bits`: the operands' width (the shifts give 0
/// past it). Operands of up to 32 bits arrive sign- or zero-extended, so every op but the
/// shifts is the i64 one wrapped to the width when stored; the shifts take unsigned operands,
/// zero-extended, so the right shift is logical.
#[inline(always)]
fn int_apply(op: u32, x: i64, y: i64, bits: i64) -> i64 {
    match op {
        int_op::ADD => x.wrapping_add(y),
        int_op::SUB => x.wrapping_sub(y),
        int_op::MUL => x.wrapping_mul(y),
        int_op::DIV if y != 0 => x.wrapping_div(y),
        int_op::MOD | int_op::FMOD if y != 0 => {
            let r = x.wrapping_rem(y);
            if op == int_op::MOD && r != 0 && ((r < 0) != (y < 0)) { r + y } else { r }
        }
        int_op::MAX => x.max(y),
        int_op::MIN => x.min(y),
        int_op::POW => math::int_pow(x, y),
        int_op::NEG => x.wrapping_neg(),
        int_op::ABS => x.wrapping_abs(),
        int_op::AND => x & y,
        int_op::OR => x | y,
        int_op::XOR => x ^ y,
        int_op::NOT => !x,
        int_op::SHL if (0..bits).contains(&y) => ((x as u64) << y) as i64,
        int_op::SHR if (0..bits).contains(&y) => ((x as u64) >> y) as i64,
        _ => 0,
    }
}

/// `op(x, y)` of unsigned 64-bit integers ([`int_op`]), wrapping.
#[inline(always)]
fn u64_apply(op: u32, x: u64, y: u64) -> u64 {
    match op {
        int_op::DIV if y != 0 => x / y,
        int_op::MOD | int_op::FMOD if y != 0 => x % y,
        int_op::MAX => x.max(y),
        int_op::MIN => x.min(y),
        int_op::ABS => x,
        int_op::SHL if y < 64 => x << y,
        int_op::SHR if y < 64 => x >> y,
        int_op::SHL | int_op::SHR | int_op::DIV | int_op::MOD | int_op::FMOD => 0,
        int_op::POW => math::pow_u64(x, y),
        // Add, Sub, Mul, Neg and the bitwise ops: the two's-complement bits are the same.
        _ => int_apply(op, x as i64, y as i64, 64) as u64,
    }
}

/// # Safety
/// The [`int_arith`] contract, with `ty` equal to `p.dtype` (a constant where the caller
/// monomorphizes the loop for one type).
#[inline(always)]
unsafe fn int_arith_typed(
    ty: u32,
    p: &CompareParams,
    a: *const u8,
    b: *const u8,
    status: *mut u32,
    y: *mut u8,
) {
    let bits = int_bits(ty);
    let divides = matches!(p.op, int_op::DIV | int_op::MOD | int_op::FMOD);
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.bin.elems {
        let (ia, ib) = offsets(p, i);
        // SAFETY: the offsets lie inside the operands and i < elems (the contract). Each thread
        // reads its operands before writing its element.
        unsafe {
            let (x, z) = (load(ty, a, ia as usize), load(ty, b, ib as usize));
            if divides && !z.nonzero() && !status.is_null() {
                atomic_max_u32(status, p.status_code);
            }
            let r = match (x, z) {
                (Wide::U(x), Wide::U(z)) => Wide::U(u64_apply(p.op, x, z)),
                (x, z) => Wide::I(int_apply(p.op, x.i64(), z.i64(), bits)),
            };
            store(ty, y, i as usize, r, EXACT);
        }
        i += stride;
    }
}

/// Integer arithmetic ([`int_op`]: Add, Sub, Mul, Div, Mod, Max, Min, Pow, Neg, Abs, the bitwise
/// ops and the shifts) with NumPy broadcasting, computed in i64 (u64 for unsigned 64-bit
/// operands) with wrap-around and stored in the operands' type ([`CompareParams`]). A zero
/// divisor gives 0 and raises `*status` (the session's status word, which it reads after the run
/// and reports as an error naming the node) to `p.status_code`.
///
/// # Safety
/// `a` and `b` hold every element the shape and strides of `p.bin` address, of type `p.dtype`
/// (an integer type of [`scalar`]); `y` holds `p.bin.elems` elements of that type and does not
/// overlap the operands, except that it may equal an operand whose layout is the output's (each
/// thread reads its operands before writing). For Neg, Abs and Not, `b` is `a`. `status` is null
/// or a valid u32 that concurrent writers update only through atomics.
///
/// # Parameters
/// `p`: shape, strides, op and type; `a`, `b`: the operands; `status`: the status word (or
/// null); `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn int_arith(
    p: CompareParams,
    a: *const u8,
    b: *const u8,
    status: *mut u32,
    y: *mut u8,
) {
    if p.bin.rank as usize > MAX_RANK {
        return;
    }
    // SAFETY: forwarded from the contract. The common types get a loop of their own; the rest
    // share one that branches on the (uniform) type per element.
    unsafe {
        match p.dtype {
            scalar::I64 => int_arith_typed(scalar::I64, &p, a, b, status, y),
            scalar::I32 => int_arith_typed(scalar::I32, &p, a, b, status, y),
            scalar::I8 => int_arith_typed(scalar::I8, &p, a, b, status, y),
            scalar::U8 => int_arith_typed(scalar::U8, &p, a, b, status, y),
            ty => int_arith_typed(ty, &p, a, b, status, y),
        }
    }
}

/// Offsets of output index `i` into the condition and both values.
#[inline(always)]
fn where_offsets(p: &WhereParams, i: u64) -> (u64, u64, u64) {
    if p.rank == 0 {
        return (i, i, i);
    }
    let (mut oc, mut oa, mut ob) = (0u64, 0u64, 0u64);
    unravel(
        i,
        p.rank,
        |d| p.out_shape[d],
        |d, idx| {
            oc += idx * p.c_strides[d];
            oa += idx * p.a_strides[d];
            ob += idx * p.b_strides[d];
        },
    );
    (oc, oa, ob)
}

/// # Safety
/// The `where_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn select<T: Copy>(p: &WhereParams, c: *const u8, a: *const T, b: *const T, y: *mut T) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let (ic, ia, ib) = where_offsets(p, i);
        // SAFETY: offsets inside the operands, i < elems (the contract).
        unsafe {
            *y.add(i as usize) =
                if *c.add(ic as usize) != 0 { *a.add(ia as usize) } else { *b.add(ib as usize) };
        }
        i += stride;
    }
}

macro_rules! where_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX Where of ", $bytes, "-byte elements ([`WhereParams`]).")]
        ///
        /// # Safety
        /// `c` (bool bytes), `a` and `b` hold every element the shape and strides address; `y`
        /// holds `p.elems` elements and overlaps none of them.
        ///
        /// # Parameters
        /// `p`: shape and strides; `c`: the condition; `a`: taken where it holds; `b`: elsewhere;
        /// `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: WhereParams,
            c: *const u8,
            a: *const $t,
            b: *const $t,
            y: *mut $t,
        ) {
            // SAFETY: forwarded from the contract.
            unsafe { select(&p, c, a, b, y) }
        }
    };
}

where_kernel!(where_b1, u8, "1");
where_kernel!(where_b4, u32, "4");
where_kernel!(where_b8, u64, "8");
