//! Selection launches. ONNX NonZero, which the session runs between the stages of a graph
//! ([`crate::stage`]): a count launch, whose per-block partial counts the host reads back to learn
//! the output length, then a write launch over the same blocks; NonMaxSuppression and Unique the
//! same way (a select or count launch, its counts read back, a write launch). ONNX TopK: one
//! sorting launch.

use kernels_gpu::abi::{
    KernelId, MAX_RANK, NMS_MAX_BOXES, NMS_THREADS, NON_ZERO_SHARED_BYTES, NON_ZERO_THREADS, NmsParams,
    NonZeroParams, Params, TOP_K_I64_MAX_LEN, TOP_K_MAX_LEN, TOP_K_THREADS, TopKParams, UNIQUE_MAX_LEN,
    UNIQUE_THREADS, UniqueParams, scalar, unique_scratch_words,
};

use super::lower::{Lowered, dims};
use super::{Arg, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{NodeId, ValueId};
use crate::op::TopK;
use crate::tensor_info::DType;

/// Elements each thread of a count block takes, at least (fewer, larger blocks beyond that).
const ELEMS_PER_THREAD: u64 = 8;
/// Blocks per multiprocessor the grid is capped at (the write launch sums up to this many partials
/// per block).
const BLOCKS_PER_SM: u64 = 4;

/// A launch the session makes between stages (no graph node of a plan): `params` then `args`,
/// `(grid, block, shared bytes)` one-dimensional.
fn between_stages(
    label: &str,
    kernel: KernelId,
    params: &impl Params,
    (grid, block, shared_bytes): (u32, u32, u32),
    args: Vec<Arg>,
) -> Step {
    let mut all = vec![Arg::Params(params.as_bytes().to_vec())];
    all.extend(args);
    Step::Kernel {
        nodes: Vec::new(),
        label: label.to_string(),
        kernel,
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes,
        args: all,
    }
}

/// The two launches of one NonZero over an input of fixed dims.
#[derive(Debug, Clone, PartialEq)]
pub struct NonZero {
    label: String,
    params: NonZeroParams,
    blocks: u32,
}

/// Bits that make an element of `dtype` non-zero: all of them, but a float's sign bit.
fn mask(dtype: DType) -> Result<u64, String> {
    Ok(match dtype {
        DType::F32 => 0x7fff_ffff,
        DType::F64 => 0x7fff_ffff_ffff_ffff,
        DType::F16 | DType::BF16 => 0x7fff,
        DType::I64 => u64::MAX,
        DType::I32 => 0xffff_ffff,
        DType::I8 | DType::U8 | DType::Bool => 0xff,
        DType::I16 | DType::U16 | DType::U32 | DType::U64 | DType::Coded(_) | DType::String => {
            return Err(super::logic::no_gpu_dtype(dtype));
        }
    })
}

impl NonZero {
    /// The launches of NonZero `label` over `dims` of `dtype`, on a device of `sm_count`
    /// multiprocessors; an input of rank above `MAX_RANK` is refused.
    pub fn new(label: &str, dims: &[usize], dtype: DType, sm_count: u32) -> Result<NonZero, String> {
        if dims.len() > MAX_RANK {
            return Err(format!("NonZero of rank {} (the GPU kernel takes up to {MAX_RANK})", dims.len()));
        }
        let elems =
            dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).ok_or("element count overflows")?;
        let per_block = NON_ZERO_THREADS as u64 * ELEMS_PER_THREAD;
        let blocks = elems.div_ceil(per_block).clamp(1, sm_count.max(1) as u64 * BLOCKS_PER_SM);
        let mut shape = [1u64; MAX_RANK];
        shape[MAX_RANK - dims.len()..].iter_mut().zip(dims).for_each(|(s, &d)| *s = d as u64);
        let params = NonZeroParams {
            elems,
            chunk: elems.div_ceil(blocks).max(1),
            count: 0,
            mask: mask(dtype)?,
            elem_bytes: dtype.size_bytes() as u32,
            rank: dims.len() as u32,
            shape,
        };
        Ok(NonZero { label: format!("NonZero {label}"), params, blocks: blocks as u32 })
    }

    /// Bytes of the partial counts (one u64 per block).
    pub fn partials_bytes(&self) -> u64 {
        self.blocks as u64 * 8
    }

    /// The total the partial counts (read back as bytes) add up to: the output length.
    pub fn count(partials: &[u8]) -> u64 {
        partials.as_chunks::<8>().0.iter().map(|c| u64::from_le_bytes(*c)).sum()
    }

    fn step(&self, kernel: KernelId, params: &NonZeroParams, args: Vec<Arg>) -> Step {
        let shape = (self.blocks, NON_ZERO_THREADS, NON_ZERO_SHARED_BYTES);
        between_stages(&self.label, kernel, params, shape, args)
    }

    /// The count launch: reads `x`, writes the partial counts to `partials`.
    pub fn count_step(&self, x: ValueId, partials: ValueId) -> Step {
        self.step(KernelId::NonZeroCount, &self.params, vec![Arg::Value(x), Arg::Value(partials)])
    }

    /// The write launch, once the partials add up to `count`: writes the `[rank, count]` i64
    /// coordinates to `y`.
    pub fn write_step(&self, x: ValueId, partials: ValueId, y: ValueId, count: u64) -> Step {
        let params = NonZeroParams { count, ..self.params };
        self.step(KernelId::NonZeroWrite, &params, vec![Arg::Value(x), Arg::Value(partials), Arg::Value(y)])
    }
}

/// The two launches of one NonMaxSuppression over boxes `(batch, n, 4)` and scores `(batch,
/// classes, n)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Nms {
    label: String,
    params: NmsParams,
    grid: u32,
}

impl Nms {
    /// The launches of NonMaxSuppression `label` over `boxes` and `scores` (dims), on a device of
    /// `sm_count` multiprocessors; scores that are not `(batch, classes, n)` for the boxes'
    /// `(batch, n, 4)`, or more than `NMS_MAX_BOXES` boxes, are refused.
    pub fn new(
        label: &str,
        boxes: &[usize],
        scores: &[usize],
        center_point_box: bool,
        sm_count: u32,
    ) -> Result<Nms, String> {
        let &[batch, n, 4] = boxes else { return Err(format!("boxes {boxes:?} must be (batch, n, 4)")) };
        let &[sb, classes, sn] = scores else {
            return Err(format!("scores {scores:?} must be (batch, classes, n)"));
        };
        if (sb, sn) != (batch, n) {
            return Err(format!("scores {scores:?} do not fit boxes {boxes:?}"));
        }
        if n as u64 > NMS_MAX_BOXES {
            return Err(format!("{n} boxes per batch entry (the GPU kernel takes up to {NMS_MAX_BOXES})"));
        }
        let params = NmsParams {
            batch: batch as u64,
            classes: classes as u64,
            n: n as u64,
            padded: n.next_power_of_two().max(1) as u32,
            center_point_box: center_point_box as u32,
        };
        let pairs = (batch * classes) as u64;
        let grid = capped_grid(sm_count, pairs.max(1))[0];
        Ok(Nms { label: format!("NonMaxSuppression {label}"), params, grid })
    }

    /// Bytes of the kept-box slots (u32 per box and (batch, class)).
    pub fn slots_bytes(&self) -> u64 {
        4 * self.params.batch * self.params.classes * self.params.n
    }

    /// Bytes of the per-(batch, class) counts (i64 each).
    pub fn counts_bytes(&self) -> u64 {
        8 * self.params.batch * self.params.classes
    }

    /// The output's row count: the sum of the counts (read back as bytes).
    pub fn count(counts: &[u8]) -> u64 {
        counts.as_chunks::<8>().0.iter().map(|c| i64::from_le_bytes(*c).max(0) as u64).sum()
    }

    fn step(&self, kernel: KernelId, block: u32, shared_bytes: u32, args: Vec<Arg>) -> Step {
        between_stages(&self.label, kernel, &self.params, (self.grid, block, shared_bytes), args)
    }

    /// The select launch: reads `boxes`, `scores` and the optional scalars (`None`: not given),
    /// writes `slots` and `counts`.
    pub fn select_step(
        &self,
        boxes: ValueId,
        scores: ValueId,
        scalars: [Option<ValueId>; 3],
        (slots, counts): (ValueId, ValueId),
    ) -> Step {
        let mut args = vec![Arg::Value(boxes), Arg::Value(scores)];
        args.extend(scalars.map(|s| s.map_or(Arg::Null, Arg::Value)));
        args.extend([Arg::Value(slots), Arg::Value(counts)]);
        self.step(KernelId::NmsSelect, NMS_THREADS, 12 * self.params.padded, args)
    }

    /// The write launch: the `(batch, class, box)` rows into `y`.
    pub fn write_step(&self, slots: ValueId, counts: ValueId, y: ValueId) -> Step {
        self.step(KernelId::NmsWrite, 128, 0, vec![Arg::Value(slots), Arg::Value(counts), Arg::Value(y)])
    }
}

/// The two launches of one Unique over an input viewed as `[outer, len, inner]`.
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueSteps {
    label: String,
    params: UniqueParams,
    write: KernelId,
    sm_count: u32,
}

impl UniqueSteps {
    /// The launches of Unique `label` over `(outer, len, inner)` of `dtype` (f32, i32 or i64;
    /// at most `UNIQUE_MAX_LEN` slices), ascending when `sorted`.
    pub fn new(
        label: &str,
        (outer, len, inner): (usize, usize, usize),
        dtype: DType,
        sorted: bool,
        sm_count: u32,
    ) -> Result<UniqueSteps, String> {
        let (code, write) = match dtype {
            DType::F32 => (scalar::F32, KernelId::UniqueWriteB4),
            DType::I32 => (scalar::I32, KernelId::UniqueWriteB4),
            DType::I64 => (scalar::I64, KernelId::UniqueWriteB8),
            other => return Err(format!("Unique of {other}: the kernels take f32, i32 and i64")),
        };
        if len as u64 > UNIQUE_MAX_LEN {
            return Err(format!("Unique over {len} slices (the GPU kernel takes up to {UNIQUE_MAX_LEN})"));
        }
        let params = UniqueParams {
            outer: outer as u64,
            len: len as u64,
            inner: inner as u64,
            count: 0,
            padded: len.next_power_of_two().max(1) as u32,
            dtype: code,
            sorted: sorted as u32,
            _pad: 0,
        };
        Ok(UniqueSteps { label: format!("Unique {label}"), params, write, sm_count })
    }

    /// Bytes of the count launch's scratch.
    pub fn scratch_bytes(&self) -> u64 {
        8 * unique_scratch_words(self.params.len)
    }

    /// The count launch: reads `x`, writes `scratch` (its first i64 is the distinct count).
    pub fn count_step(&self, x: ValueId, scratch: ValueId) -> Step {
        let shape = (1, UNIQUE_THREADS, 4 * self.params.padded);
        between_stages(
            &self.label,
            KernelId::UniqueCount,
            &self.params,
            shape,
            vec![Arg::Value(x), Arg::Value(scratch)],
        )
    }

    /// The write launch once the distinct count is `count`: `y` and the optional `indices`,
    /// `inverse`, `counts` (`None`: omitted).
    pub fn write_step(
        &self,
        (x, scratch): (ValueId, ValueId),
        y: ValueId,
        rest: [Option<ValueId>; 3],
        count: u64,
    ) -> Step {
        let params = UniqueParams { count, ..self.params };
        let work = (params.outer * count * params.inner).max(params.len);
        let mut args = vec![Arg::Value(x), Arg::Value(scratch), Arg::Value(y)];
        args.extend(rest.map(|v| v.map_or(Arg::Null, Arg::Value)));
        let grid = capped_grid(self.sm_count, work.div_ceil(256).max(1))[0];
        between_stages(&self.label, self.write, &params, (grid, 256, 0), args)
    }
}

/// ONNX TopK of `x` into the values `y` and the positions `indices` (the k kept is `y`'s extent
/// along the axis): f32 or i32 rows of at most `TOP_K_MAX_LEN` elements (i64: `TOP_K_I64_MAX_LEN`), each sorted whole by
/// one block.
pub(super) fn top_k(
    id: NodeId,
    label: String,
    a: &TopK,
    x: ValueId,
    (y, indices): (ValueId, ValueId),
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((xd, dtype), (yd, _)) = (dims(values, x)?, dims(values, y)?);
    let (dtype_code, kernel, key_bytes, max_len) = match dtype {
        DType::F32 => (scalar::F32, KernelId::TopK, 8, TOP_K_MAX_LEN),
        DType::I32 => (scalar::I32, KernelId::TopK, 8, TOP_K_MAX_LEN),
        DType::I64 => (scalar::I64, KernelId::TopKI64, 16, TOP_K_I64_MAX_LEN),
        other => return Err(format!("TopK of {other}: the kernels sort f32, i32 and i64")),
    };
    let rank = xd.len() as i64;
    let axis = if a.axis < 0 { a.axis + rank } else { a.axis };
    let axis = usize::try_from(axis).ok().filter(|&x| x < xd.len()).ok_or("axis out of range")?;
    let len = xd[axis] as u64;
    if len > max_len {
        return Err(format!("TopK over {len} elements (the {dtype} kernel sorts rows of up to {max_len})"));
    }
    let (outer, inner) =
        (xd[..axis].iter().product::<usize>() as u64, xd[axis + 1..].iter().product::<usize>() as u64);
    let padded = len.next_power_of_two().max(1);
    let p = TopKParams {
        outer,
        len,
        inner,
        k: yd[axis] as u64,
        padded: padded as u32,
        largest: a.largest as u32,
        dtype: dtype_code,
        _pad: 0,
    };
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid: capped_grid(o.sm_count, outer * inner),
        block: [TOP_K_THREADS, 1, 1],
        shared_bytes: (key_bytes * padded) as u32,
        args: vec![Arg::Params(p.as_bytes().to_vec()), Arg::Value(x), Arg::Output(y), Arg::Value(indices)],
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_input_and_floats_ignore_the_sign_bit() {
        let nz = NonZero::new("n", &[3, 1000], DType::F32, 2).unwrap();
        assert_eq!(nz.blocks, 2, "3000 elements: two blocks of 2048");
        assert!(nz.params.chunk * nz.blocks as u64 >= 3000);
        assert_eq!(&nz.params.shape[MAX_RANK - 2..], &[3, 1000]);
        assert_eq!(nz.params.mask & 0x8000_0000, 0);
        let capped = NonZero::new("n", &[1 << 30], DType::U8, 2).unwrap();
        assert_eq!(capped.blocks, 8);
        assert!(capped.params.chunk * 8 >= 1 << 30);
        let empty = NonZero::new("n", &[0, 4], DType::I64, 2).unwrap();
        assert_eq!((empty.blocks, empty.params.elems), (1, 0));
        assert!(NonZero::new("n", &[1; 9], DType::F32, 2).is_err());
        assert_eq!(NonZero::count(&[3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0]), 7);
    }

    #[test]
    fn top_k_sorts_a_padded_row_per_block_and_refuses_long_rows() {
        use crate::graph::Graph;
        use crate::plan::compile;
        use crate::tensor_info::{Binding, Dim};
        let top_k = |len: usize, dtype: DType| {
            let mut g = Graph::new();
            let x = g.input("x", dtype, vec![Dim::Known(3), Dim::Known(len)]);
            let k = g.const_i64("k", &[1], &[2]);
            let outs = g.push(crate::op::Op::TopK(TopK::default()), &[x, k], 2);
            g.output(outs[0]);
            g.output(outs[1]);
            compile(&g, &Binding::new(), &PlanOptions::default())
        };
        let plan = top_k(100, DType::F32).unwrap();
        let Step::Kernel { kernel, grid, shared_bytes, .. } = &plan.steps[0] else { panic!("{plan}") };
        assert_eq!((*kernel, grid[0], *shared_bytes), (KernelId::TopK, 3, 8 * 128));
        assert!(top_k(5000, DType::F32).unwrap_err().to_string().contains("rows of up to 4096"));
        // NonMaxSuppression's scores must fit its boxes (a kernel would read past them).
        assert!(Nms::new("n", &[2, 10, 4], &[2, 3, 10], false, 132).is_ok());
        for scores in [&[1, 3, 10][..], &[2, 3, 9], &[2, 3]] {
            assert!(Nms::new("n", &[2, 10, 4], scores, false, 132).is_err(), "{scores:?}");
        }
        let plan = top_k(10, DType::I64).unwrap();
        let Step::Kernel { kernel, shared_bytes, .. } = &plan.steps[0] else { panic!("{plan}") };
        assert_eq!((*kernel, *shared_bytes), (KernelId::TopKI64, 16 * 16));
        assert!(top_k(3000, DType::I64).unwrap_err().to_string().contains("rows of up to 2048"));
        assert!(top_k(10, DType::F64).unwrap_err().to_string().contains("sort f32, i32 and i64"));
    }
}
