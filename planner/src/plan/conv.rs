//! Lowering of the convolution family to the `conv` kernels: Conv (implicit GEMM for many output
//! channels per group, else direct), ConvTranspose, MaxPool (and its Indices output, as a second
//! step) and AveragePool. Sliding-window geometry (`auto_pad`, `ceil_mode`) is resolved here, as
//! the ONNX operator docs define it, and 1-D and 2-D problems become 3-D ones with leading size-1
//! dims.

use kernels_gpu::abi::{
    Activation, CONV_SHARED_BYTES, CONV_THREADS, CONV_TILE, ConvParams, GemmTile, KernelId, Params, PoolOp,
    PoolParams,
};

use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{NodeId, ValueId};
use crate::op::{AutoPad, AveragePool, Conv, ConvTranspose, LpPool, MaxPool};
use crate::tensor_info::DType;

type Lowered = Result<Vec<Step>, String>;

/// Spatial dims the kernels index; higher-dimensional convolutions are refused.
const SPATIAL: usize = 3;
/// Output channels per group from which Conv runs as an implicit GEMM (64-channel tiles); below,
/// a thread per output wastes less.
const GEMM_MIN_CHANNELS: usize = 32;

/// A node of the convolution family being lowered.
pub(super) struct ConvNode<'a> {
    /// The node.
    pub id: NodeId,
    /// Its label.
    pub label: String,
    /// Its inputs (`None` for omitted optional inputs).
    pub ins: &'a [Option<ValueId>],
    /// Its outputs (`None` for omitted optional outputs).
    pub outs: &'a [Option<ValueId>],
}

impl ConvNode<'_> {
    pub(super) fn input(&self, i: usize, what: &str) -> Result<ValueId, String> {
        self.ins.get(i).copied().flatten().ok_or_else(|| format!("missing input {what}"))
    }

    pub(super) fn output(&self) -> Result<ValueId, String> {
        self.outs.first().copied().flatten().ok_or_else(|| "the node's first output is omitted".into())
    }
}

pub(super) fn static_f32(values: &[PlannedValue], v: ValueId) -> Result<&[usize], String> {
    let pv = &values[v.index()];
    if pv.dtype != DType::F32 {
        return Err(format!("`{}` is {}; the conv kernels take f32 so far", pv.name, pv.dtype));
    }
    pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

fn u32_of(v: usize, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} {v} does not fit the kernel's u32 sizes"))
}

/// Resolved sliding-window geometry per spatial axis.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pad_begin: Vec<usize>,
    pad_end: Vec<usize>,
    out: Vec<usize>,
}

fn per_axis(list: &[usize], n: usize, default: usize, what: &str) -> Result<Vec<usize>, String> {
    match list.len() {
        0 => Ok(vec![default; n]),
        l if l == n => Ok(list.to_vec()),
        l => Err(format!("{what} has {l} values for {n} spatial axes")),
    }
}

/// The window geometry of Conv and the pools over input spatial sizes `input`: `SAME_*` pads to
/// `ceil(in / stride)` outputs (the odd pad at the end for UPPER, the beginning for LOWER);
/// `ceil_mode` rounds the output size up but drops a window that would start in the end padding.
#[allow(clippy::too_many_arguments)]
fn window(
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Window, String> {
    let n = input.len();
    if kernel.len() != n {
        return Err(format!("kernel has {} axes, the input {n} spatial axes", kernel.len()));
    }
    let strides = per_axis(strides, n, 1, "strides")?;
    let dilations = per_axis(dilations, n, 1, "dilations")?;
    if strides.contains(&0) || dilations.contains(&0) || kernel.contains(&0) {
        return Err("strides, dilations and kernel sizes must be positive".into());
    }
    let (mut pad_begin, mut pad_end) = match pads.len() {
        0 => (vec![0; n], vec![0; n]),
        l if l == 2 * n => (pads[..n].to_vec(), pads[n..].to_vec()),
        l => return Err(format!("pads has {l} values for {n} spatial axes")),
    };
    let mut out = vec![0; n];
    for i in 0..n {
        let extent = (kernel[i] - 1) * dilations[i] + 1;
        match auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                out[i] = input[i].div_ceil(strides[i]);
                let total = ((out[i].max(1) - 1) * strides[i] + extent).saturating_sub(input[i]);
                let small = total / 2;
                (pad_begin[i], pad_end[i]) = if auto_pad == AutoPad::SameUpper {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            AutoPad::Valid | AutoPad::NotSet => {
                if auto_pad == AutoPad::Valid {
                    (pad_begin[i], pad_end[i]) = (0, 0);
                }
                let total = input[i] + pad_begin[i] + pad_end[i];
                let span = total.checked_sub(extent).ok_or_else(|| {
                    format!("axis {i}: padded input {total} is smaller than the window {extent}")
                })?;
                out[i] = if ceil_mode { span.div_ceil(strides[i]) + 1 } else { span / strides[i] + 1 };
                if ceil_mode && (out[i] - 1) * strides[i] >= input[i] + pad_begin[i] {
                    out[i] -= 1;
                }
            }
        }
    }
    Ok(Window { kernel: kernel.to_vec(), strides, dilations, pad_begin, pad_end, out })
}

/// `v` right-aligned in `[fill; 3]` (1-D and 2-D become 3-D with leading `fill`s).
fn lift<T: Copy>(v: &[T], fill: T) -> Result<[T; SPATIAL], String> {
    if v.len() > SPATIAL {
        return Err(format!("{} spatial dims; the kernels take at most {SPATIAL}", v.len()));
    }
    let mut a = [fill; SPATIAL];
    a[SPATIAL - v.len()..].copy_from_slice(v);
    Ok(a)
}

fn lift_u32(v: &[usize], fill: u32, what: &str) -> Result<[u32; SPATIAL], String> {
    let v: Vec<u32> = v.iter().map(|&e| u32_of(e, what)).collect::<Result<_, _>>()?;
    lift(&v, fill)
}

/// Checks that shape inference and the resolved window agree on the output.
fn check_out(values: &[PlannedValue], out: ValueId, want: &[usize]) -> Result<(), String> {
    let got = static_f32(values, out)?;
    if got != want {
        return Err(format!("output {got:?} disagrees with the window geometry {want:?}"));
    }
    Ok(())
}

pub(super) fn grid_stride_step(
    n: &ConvNode,
    kernel: KernelId,
    p: &impl Params,
    work: u64,
    o: &PlanOptions,
    args: Vec<Arg>,
) -> Step {
    let mut all = vec![Arg::Params(p.as_bytes().to_vec())];
    all.extend(args);
    Step::Kernel {
        nodes: vec![n.id],
        label: n.label.clone(),
        kernel,
        grid: capped_grid(o.sm_count, work.div_ceil(THREADS as u64)),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args: all,
    }
}

/// X and W of a Conv or ConvTranspose with their dims.
type Operands<'v> = (ValueId, ValueId, &'v [usize], &'v [usize]);

/// X and W of a Conv or ConvTranspose, checked: f32, static, same rank 3..=5.
fn operands<'v>(n: &ConvNode, values: &'v [PlannedValue]) -> Result<Operands<'v>, String> {
    let (x, w) = (n.input(0, "X")?, n.input(1, "W")?);
    let (xd, wd) = (static_f32(values, x)?, static_f32(values, w)?);
    if xd.len() < 3 || wd.len() != xd.len() {
        return Err(format!("X {xd:?} and W {wd:?} must have the same rank >= 3"));
    }
    if xd.len() - 2 > SPATIAL {
        return Err(format!("{}-D convolution; the kernels take 1-D to 3-D", xd.len() - 2));
    }
    Ok((x, w, xd, wd))
}

/// The bias operand (input 2), checked to hold `maps` f32.
fn bias(n: &ConvNode, values: &[PlannedValue], maps: usize) -> Result<Option<ValueId>, String> {
    let Some(b) = n.ins.get(2).copied().flatten() else { return Ok(None) };
    let bd = static_f32(values, b)?;
    if bd != [maps] {
        return Err(format!("B {bd:?} must be [{maps}]"));
    }
    Ok(Some(b))
}

/// Output channels per group from which Conv runs on the `wgmma` tensor cores (64-channel tiles
/// at the least; below, the direct kernel wastes less).
const WG_MIN_CHANNELS: u32 = 16;

/// A Conv on the `wgmma` tensor cores (`conv_wg*`): its entry, tile and grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WgConv {
    /// The entry: its tile and precision.
    pub kernel: KernelId,
    /// The block tile (output positions x output channels).
    pub tile: GemmTile,
    /// Blocks: channel tiles, position tiles, groups times splits.
    pub grid: [u32; 3],
    /// Split-K factor ([`ConvParams::splits`]; 1: none).
    pub splits: u32,
}

/// Whether every window coordinate of `p` is below 2^30 (sizes, pads, tap offsets, the strided
/// output positions), as the `wgmma` kernels' i32 window origins need.
fn small(p: &ConvParams) -> bool {
    let limit = 1u64 << 30;
    (0..SPATIAL).all(|i| {
        let tap = (p.kernel[i] as u64).saturating_sub(1) * p.dilations[i] as u64;
        let origin = p.out_size[i] as u64 * p.strides[i] as u64;
        [p.in_size[i] as u64, p.pad_begin[i].unsigned_abs() as u64, tap, origin].iter().all(|&v| v < limit)
    })
}

/// The `wgmma` launch of a Conv of parameters `p`, when it takes one: the Hopper flavour's
/// tensor-core GEMMs on (`wgmma_gemm`, `tensor_core_gemm`, `tile_gemm`), at least
/// [`WG_MIN_CHANNELS`] output channels per group, and sizes inside the kernel's index types (the
/// positions of all images in u32, a group's input in i32, the grid's y in 65535). 64 x 32 tiles
/// for at most 32 channels per group, else 128 x 128 where they fill the device, else 64 x 64.
pub(super) fn wg_launch(p: &ConvParams, o: &PlanOptions) -> Option<WgConv> {
    let groups = p.groups.max(1) as u64;
    let per_group = p.out_channels as u64 / groups;
    let plane = |s: [u32; 3]| s.iter().map(|&v| v as u64).product::<u64>();
    let rows = p.batch as u64 * plane(p.out_size);
    let group_input = p.in_channels as u64 / groups * plane(p.in_size);
    if !(o.wgmma_gemm && o.tensor_core_gemm && o.tile_gemm)
        || per_group < WG_MIN_CHANNELS as u64
        || rows == 0
        || rows > u32::MAX as u64
        || group_input > i32::MAX as u64
        || !small(p)
        || groups > 65535
        || kernels_gpu::abi::conv_depth(p) == 0
    {
        return None;
    }
    let tiles = |t: GemmTile| rows.div_ceil(t.m as u64) * per_group.div_ceil(t.n as u64) * groups;
    let tile = if per_group <= GemmTile::NARROW.n as u64 {
        // A 64- or 128-column tile would multiply mostly zero columns.
        GemmTile::NARROW
    } else if tiles(GemmTile::LARGE) >= o.sm_count as u64 && !super::gemm::large_pads(per_group) {
        GemmTile::LARGE
    } else {
        GemmTile::SMALL
    };
    let y = rows.div_ceil(tile.m as u64);
    // Tiles too few to fill the device split their depth (at least four k tiles a split, at
    // most 16 splits) so that about two blocks per multiprocessor run: the CNN's last layers at
    // batch 1 (8 tiles of 36 k tiles) were a chain of k steps on 8 multiprocessors.
    let (blocks, k_tiles) = (tiles(tile), kernels_gpu::abi::conv_depth(p).div_ceil(32) as u64);
    let want = (2 * o.sm_count as u64).div_ceil(blocks).min(k_tiles / 4).min(16);
    let splits = if blocks >= o.sm_count as u64 || want < 2 {
        1
    } else {
        // Every split gets depths: as many as whole chunks cover.
        let chunk = kernels_gpu::abi::conv_k_chunk(&ConvParams { splits: want as u32, ..*p }) as u64;
        (k_tiles * 32).div_ceil(chunk).min(want)
    };
    if y > 65535 || groups * splits > 65535 {
        return None;
    }
    use KernelId as K;
    let kernel = match (tile.n, o.precision.tf32_convolutions()) {
        (128, false) => K::ConvWg128F32,
        (64, false) => K::ConvWg64F32,
        (_, false) => K::ConvWg32F32,
        (128, true) => K::ConvWg128Tf32,
        (64, true) => K::ConvWg64Tf32,
        (_, true) => K::ConvWg32Tf32,
    };
    let grid = [per_group.div_ceil(tile.n as u64) as u32, y as u32, (groups * splits) as u32];
    Some(WgConv { kernel, tile, grid, splits: splits as u32 })
}

/// The Conv parameters of node `n` (its attributes over its operands' static shapes), without a
/// fused activation.
pub(super) fn conv_params(n: &ConvNode, values: &[PlannedValue], a: &Conv) -> Result<ConvParams, String> {
    Ok(conv_geometry(n, values, a)?.0)
}

/// The split-K workspace of Conv node `n` when it runs split on the `wgmma` tensor cores
/// ([`wg_launch`]): `splits` partial outputs.
pub(super) fn scratch(
    n: &ConvNode,
    values: &[PlannedValue],
    a: &Conv,
    o: &PlanOptions,
) -> Option<PlannedValue> {
    let p = conv_params(n, values, a).ok()?;
    let l = wg_launch(&p, o).filter(|l| l.splits > 1)?;
    let out = p.batch as usize * p.out_channels as usize * p.out_size.iter().product::<u32>() as usize;
    let dims = Some(vec![l.splits as usize * out]);
    Some(PlannedValue { name: format!("{}/split-k", n.label), dtype: DType::F32, dims })
}

/// ONNX Conv of f32; `act` is an activation fused into the epilogue; `packed` the weights packed
/// for the `wgmma` kernels with their tap table (`tc_pack`), when the planner packed them, and
/// `workspace` the split-K partials ([`scratch`]); `program` the epilogue program of a
/// [`crate::op::FusedConv`] and its inputs after input 0 (the convolution's result): the `wgmma`
/// convolutions (or their split-K reduction) apply it as they store, the other kernels write the
/// convolution to the output and a program step finishes it there.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv(
    n: ConvNode,
    values: &[PlannedValue],
    a: &Conv,
    act: Option<(Activation, f32)>,
    (packed, workspace): (Option<ValueId>, Option<ValueId>),
    program: Option<(&super::fuse::EwProgram, &[ValueId])>,
    o: &PlanOptions,
) -> Lowered {
    let (mut p, g, b) = conv_geometry(&n, values, a)?;
    let (x, w, out) = (n.input(0, "X")?, n.input(1, "W")?, n.output()?);
    let mut label = n.label.clone();
    if let Some((act, alpha)) = act {
        (p.act, p.act_alpha) = (act as u32, alpha);
        label = format!("{label}+{act:?}");
    }
    let args = |p: &ConvParams, w: ValueId, y: ValueId| {
        vec![
            Arg::Params(p.as_bytes().to_vec()),
            Arg::Value(x),
            Arg::Value(w),
            b.map_or(Arg::Null, Arg::Value),
            Arg::Value(y),
        ]
    };
    // The wgmma convolutions apply a program whose inputs' offsets are linear in the image, the
    // channel and the output position (its parameters aligned to them, `gemm::gemm_aligned`) or
    // which reads inputs of Y's shape; any other program runs as a step after the convolution
    // (over Y in place: input 0 read and written by the same thread), as after the CUDA-core ones.
    let plane = p.out_size.iter().product::<u32>();
    let aligned = |prog: &super::fuse::EwProgram, extras: &[ValueId]| {
        let e = super::lower::fused_program_params(prog, out, extras, values)?;
        let e = super::gemm::gemm_aligned(e, p.batch, p.out_channels, plane);
        let r = kernels_gpu::abi::MAX_RANK - 3;
        let dims = [p.batch, p.out_channels, plane].map(u64::from);
        Ok::<_, String>((e.rank == 0 || (e.rank == 3 && e.out_shape[r..] == dims)).then_some(e))
    };
    let program_after = |mut steps: Vec<Step>, program: Option<(&super::fuse::EwProgram, &[ValueId])>| {
        if let Some((prog, extras)) = program {
            let inputs: Vec<ValueId> = std::iter::once(out).chain(extras.iter().copied()).collect();
            steps.extend(super::lower::ew_program(n.id, label.clone(), prog, &inputs, out, values)?);
        }
        Ok::<_, String>(steps)
    };
    if let (Some(packed), Some(l)) = (packed, wg_launch(&p, o)) {
        use kernels_gpu::abi::EW_MAX_INPUTS;
        // The program's parameters over Y and its inputs after input 0 (null where unused); the
        // identity program (no instruction) without one or with one run after.
        let (epilogue, after) = match program {
            Some(_) if !o.conv_program_epilogue => (None, program),
            Some((prog, extras)) => match aligned(prog, extras)? {
                Some(e) => {
                    let xs: Vec<Arg> = (0..EW_MAX_INPUTS - 1)
                        .map(|k| extras.get(k).map_or(Arg::Null, |&v| Arg::Value(v)))
                        .collect();
                    (Some((e, xs)), None)
                }
                None => (None, program),
            },
            None => (None, None),
        };
        let (e, xs) = epilogue
            .clone()
            .unwrap_or_else(|| (super::gemm::identity_program(), vec![Arg::Null; EW_MAX_INPUTS - 1]));
        // `[p, e, x, w, b, x1, x2, x3, y]`; the partials of a split convolution are raw (the
        // kernel applies neither the bias, the activation nor the program to them).
        let wg_args = |p: &ConvParams, y: ValueId| {
            let mut v = vec![Arg::Params(p.as_bytes().to_vec()), Arg::Params(e.as_bytes().to_vec())];
            v.extend([Arg::Value(x), Arg::Value(packed), b.map_or(Arg::Null, Arg::Value)]);
            v.extend(xs.iter().cloned());
            v.push(Arg::Value(y));
            v
        };
        let split = |y: ValueId| {
            let p = ConvParams { splits: l.splits, ..p };
            let shared_bytes = l.kernel.large_shared_bytes().unwrap_or(0);
            let (block, args) = ([l.tile.threads, 1, 1], wg_args(&p, y));
            Step::Kernel {
                nodes: vec![n.id],
                label: label.clone(),
                kernel: l.kernel,
                grid: l.grid,
                block,
                shared_bytes,
                args,
            }
        };
        if l.splits <= 1 {
            return program_after(vec![split(out)], after);
        }
        let ws = workspace.ok_or("the split-K workspace was not planned")?;
        let steps = vec![split(ws), split_reduce(&n, &p, l.splits, (b, ws, out), epilogue, &label)];
        return program_after(steps, after);
    }
    // The other kernels write the convolution to Y; the program, if any, then runs over Y.
    let steps = conv_cuda_cores(&n, &p, &g, args(&p, w, out), label.clone(), o)?;
    program_after(steps, program)
}

/// The CUDA-core launch of a Conv of parameters `p` and geometry `g` (`args`: `[p, x, w, b, y]`):
/// the implicit GEMM from [`GEMM_MIN_CHANNELS`] output channels per group, else the direct kernel.
fn conv_cuda_cores(
    n: &ConvNode,
    p: &ConvParams,
    g: &Window,
    args: Vec<Arg>,
    label: String,
    o: &PlanOptions,
) -> Lowered {
    let (batch, maps, group) = (p.batch as usize, p.out_channels as usize, p.groups as usize);
    let maps_per_group = maps / group;
    let out_plane: usize = g.out.iter().product();
    let cols = (batch * out_plane) as u64;
    if maps_per_group >= GEMM_MIN_CHANNELS {
        let tile = CONV_TILE as u64;
        let grid = [cols.div_ceil(tile), (maps_per_group as u64).div_ceil(tile), group as u64];
        if grid[0] > i32::MAX as u64 || grid[1] > 65535 || grid[2] > 65535 {
            return Err(format!("the implicit-GEMM grid {grid:?} exceeds the device's limits"));
        }
        return Ok(vec![Step::Kernel {
            nodes: vec![n.id],
            label,
            kernel: KernelId::ConvGemmF32,
            grid: [grid[0].max(1) as u32, grid[1].max(1) as u32, grid[2] as u32],
            block: [CONV_THREADS, CONV_THREADS, 1],
            shared_bytes: CONV_SHARED_BYTES,
            args,
        }]);
    }
    let work = (batch * maps * out_plane) as u64;
    Ok(vec![Step::Kernel {
        nodes: vec![n.id],
        label,
        kernel: KernelId::ConvDirectF32,
        grid: capped_grid(o.sm_count, work.div_ceil(THREADS as u64)),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args,
    }])
}

/// The reduction of a split `wgmma` convolution's partials (`ws`, `splits` outputs' worth) into
/// `out` with the bias and the activation: `gemm_reduce_f32` over `batch` matrices of `out_channels
/// x out_plane` (the bias a column, one per row); with `program` (its parameters over Y and its
/// inputs after input 0), `gemm_reduce_program_f32`, whose output index is Y's flat index.
fn split_reduce(
    n: &ConvNode,
    p: &ConvParams,
    splits: u32,
    (b, ws, out): (Option<ValueId>, ValueId, ValueId),
    program: Option<(kernels_gpu::abi::EwProgramParams, Vec<Arg>)>,
    label: &str,
) -> Step {
    let plane = p.out_size.iter().product::<u32>();
    let g = kernels_gpu::abi::GemmParams {
        m: p.out_channels,
        n: plane,
        batch: p.batch,
        splits,
        alpha: 1.0,
        beta: 1.0,
        has_c: u32::from(b.is_some()),
        c_rs: 1,
        act: p.act,
        act_alpha: p.act_alpha,
        y_bs: p.out_channels as u64 * plane as u64,
        ..Default::default()
    };
    let (bias, g_bytes) = (b.map_or(Arg::Null, Arg::Value), Arg::Params(g.as_bytes().to_vec()));
    let (kernel, args) = match program {
        // `[p, e, c, ws, x1, x2, x3, y]`.
        Some((e, xs)) => {
            let mut args = vec![g_bytes, Arg::Params(e.as_bytes().to_vec()), bias, Arg::Value(ws)];
            args.extend(xs);
            args.push(Arg::Value(out));
            (KernelId::GemmReduceProgramF32, args)
        }
        None => (KernelId::GemmReduceF32, vec![g_bytes, bias, Arg::Value(ws), Arg::Value(out)]),
    };
    Step::Kernel {
        nodes: vec![n.id],
        label: format!("{label} split-k reduce"),
        kernel,
        grid: super::gemm::reduce_grid(&g),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args,
    }
}

/// A Conv's parameters (no activation), window and bias operand, checked against its operands.
fn conv_geometry(
    n: &ConvNode,
    values: &[PlannedValue],
    a: &Conv,
) -> Result<(ConvParams, Window, Option<ValueId>), String> {
    let (_, _, xd, wd) = operands(n, values)?;
    let out = n.output()?;
    let (batch, channels, maps, group) = (xd[0], xd[1], wd[0], a.group);
    if group == 0 || channels % group != 0 || maps % group != 0 || wd[1] * group != channels {
        return Err(format!("group {group} does not fit X channels {channels} and W {wd:?}"));
    }
    if !a.kernel_shape.is_empty() && a.kernel_shape != wd[2..] {
        return Err(format!("kernel_shape {:?} disagrees with W {wd:?}", a.kernel_shape));
    }
    let g = window(&xd[2..], &wd[2..], &a.strides, &a.dilations, &a.pads, a.auto_pad, false)?;
    let mut y_dims = vec![batch, maps];
    y_dims.extend(&g.out);
    check_out(values, out, &y_dims)?;
    let b = bias(n, values, maps)?;
    let pad_begin: Vec<i32> = g
        .pad_begin
        .iter()
        .map(|&v| i32::try_from(v).map_err(|_| format!("pad {v} is too large")))
        .collect::<Result<_, _>>()?;
    let p = ConvParams {
        batch: u32_of(batch, "batch")?,
        in_channels: u32_of(channels, "channels")?,
        out_channels: u32_of(maps, "output channels")?,
        groups: u32_of(group, "group")?,
        in_size: lift_u32(&xd[2..], 1, "input size")?,
        out_size: lift_u32(&g.out, 1, "output size")?,
        kernel: lift_u32(&g.kernel, 1, "kernel size")?,
        strides: lift_u32(&g.strides, 1, "stride")?,
        dilations: lift_u32(&g.dilations, 1, "dilation")?,
        pad_begin: lift(&pad_begin, 0)?,
        has_bias: u32::from(b.is_some()),
        ..ConvParams::default()
    };
    Ok((p, g, b))
}

/// ONNX ConvTranspose of f32: output size `s·(in − 1) + output_padding + (k − 1)·d + 1 − pads`,
/// or the requested `output_shape` (also `in · s` under `SAME_*`), whose total padding is split
/// `⌊total/2⌋` first for SAME_UPPER and `total − ⌊total/2⌋` first otherwise.
pub(super) fn conv_transpose(
    n: ConvNode,
    values: &[PlannedValue],
    a: &ConvTranspose,
    o: &PlanOptions,
) -> Lowered {
    let (x, w, xd, wd) = operands(&n, values)?;
    let out = n.output()?;
    let (batch, channels, group) = (xd[0], xd[1], a.group);
    if group == 0 || channels % group != 0 || wd[0] != channels {
        return Err(format!("W {wd:?} must be (C={channels}, M/group, k...) with group {group}"));
    }
    let kernel = &wd[2..];
    if !a.kernel_shape.is_empty() && a.kernel_shape != kernel {
        return Err(format!("kernel_shape {:?} disagrees with W {wd:?}", a.kernel_shape));
    }
    let maps = wd[1] * group;
    let nd = xd.len() - 2;
    let spatial = &xd[2..];
    let st = per_axis(&a.strides, nd, 1, "strides")?;
    let dil = per_axis(&a.dilations, nd, 1, "dilations")?;
    let out_pad = per_axis(&a.output_padding, nd, 0, "output_padding")?;
    if st.contains(&0) || dil.contains(&0) || kernel.contains(&0) {
        return Err("strides, dilations and kernel sizes must be positive".into());
    }
    let requested: Option<Vec<usize>> = match a.output_shape.len() {
        0 if matches!(a.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) => {
            Some(spatial.iter().zip(&st).map(|(i, s)| i * s).collect())
        }
        0 => None,
        l if l == nd => Some(a.output_shape.clone()),
        l if l == nd + 2 => Some(a.output_shape[2..].to_vec()),
        l => return Err(format!("output_shape has {l} values for {nd} spatial axes")),
    };
    let pads = per_axis(&a.pads, 2 * nd, 0, "pads")?;
    let (mut pad_begin, mut y_spatial) = (vec![0i64; nd], vec![0usize; nd]);
    for i in 0..nd {
        let natural =
            (st[i] * spatial[i].saturating_sub(1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1) as i64;
        if let Some(req) = &requested {
            let total = natural - req[i] as i64;
            let half = total.div_euclid(2);
            pad_begin[i] = if a.auto_pad == AutoPad::SameUpper { half } else { total - half };
            y_spatial[i] = req[i];
        } else {
            let (pb, pe) = if a.auto_pad == AutoPad::Valid { (0, 0) } else { (pads[i], pads[nd + i]) };
            let size = natural - (pb + pe) as i64;
            if size < 0 {
                return Err(format!("axis {i}: pads {pb}+{pe} exceed the output size {natural}"));
            }
            (pad_begin[i], y_spatial[i]) = (pb as i64, size as usize);
        }
    }
    let mut y_dims = vec![batch, maps];
    y_dims.extend(&y_spatial);
    check_out(values, out, &y_dims)?;
    let b = bias(&n, values, maps)?;
    let pad_begin: Vec<i32> = pad_begin
        .iter()
        .map(|&v| i32::try_from(v).map_err(|_| format!("pad {v} is too large")))
        .collect::<Result<_, _>>()?;
    let p = ConvParams {
        batch: u32_of(batch, "batch")?,
        in_channels: u32_of(channels, "channels")?,
        out_channels: u32_of(maps, "output channels")?,
        groups: u32_of(group, "group")?,
        in_size: lift_u32(spatial, 1, "input size")?,
        out_size: lift_u32(&y_spatial, 1, "output size")?,
        kernel: lift_u32(kernel, 1, "kernel size")?,
        strides: lift_u32(&st, 1, "stride")?,
        dilations: lift_u32(&dil, 1, "dilation")?,
        pad_begin: lift(&pad_begin, 0)?,
        has_bias: u32::from(b.is_some()),
        ..ConvParams::default()
    };
    let work = y_dims.iter().product::<usize>() as u64;
    let args = vec![Arg::Value(x), Arg::Value(w), b.map_or(Arg::Null, Arg::Value), Arg::Value(out)];
    Ok(vec![grid_stride_step(&n, KernelId::ConvTransposeF32, &p, work, o, args)])
}

/// The pooling view of X `(N, C, spatial)`.
#[allow(clippy::too_many_arguments)]
fn pool(
    n: ConvNode,
    values: &[PlannedValue],
    op: PoolOp,
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
    count_include_pad: bool,
    (storage_order, lp): (i64, u32),
    o: &PlanOptions,
) -> Lowered {
    let x = n.input(0, "X")?;
    let out = n.output()?;
    let xd = static_f32(values, x)?;
    if xd.len() < 3 {
        return Err(format!("X must be (N, C, D1, ...), got {xd:?}"));
    }
    if kernel.is_empty() {
        return Err("kernel_shape is required".into());
    }
    let g = window(&xd[2..], kernel, strides, dilations, pads, auto_pad, ceil_mode)?;
    let mut y_dims = xd[..2].to_vec();
    y_dims.extend(&g.out);
    check_out(values, out, &y_dims)?;
    let p = PoolParams {
        planes: (xd[0] * xd[1]) as u64,
        in_size: lift_u32(&xd[2..], 1, "input size")?,
        out_size: lift_u32(&g.out, 1, "output size")?,
        kernel: lift_u32(&g.kernel, 1, "kernel size")?,
        strides: lift_u32(&g.strides, 1, "stride")?,
        dilations: lift_u32(&g.dilations, 1, "dilation")?,
        pad_begin: lift_u32(&g.pad_begin, 0, "pad")?,
        pad_end: lift_u32(&g.pad_end, 0, "pad")?,
        op: op as u32,
        count_include_pad: u32::from(count_include_pad),
        storage_order: u32::from(storage_order == 1),
        lp,
        _pad: 0,
    };
    let work = y_dims.iter().product::<usize>() as u64;
    let mut steps =
        vec![grid_stride_step(&n, KernelId::PoolF32, &p, work, o, vec![Arg::Value(x), Arg::Value(out)])];
    // MaxPool's optional Indices: a second pass over the windows (each step writes one value).
    if let Some(indices) = n.outs.get(1).copied().flatten() {
        let pv = &values[indices.index()];
        if pv.dtype != DType::I64 || pv.dims.as_deref() != Some(&y_dims[..]) {
            return Err(format!("Indices `{}` must be i64 {y_dims:?}", pv.name));
        }
        let args = vec![Arg::Value(x), Arg::Value(indices)];
        steps.push(grid_stride_step(&n, KernelId::MaxPoolIndicesF32, &p, work, o, args));
    }
    Ok(steps)
}

/// ONNX MaxPool of f32: Y, and the optional Indices (i64 flat indices into X, the spatial part
/// row-major, or column-major with `storage_order` 1).
pub(super) fn max_pool(n: ConvNode, values: &[PlannedValue], a: &MaxPool, o: &PlanOptions) -> Lowered {
    let (k, s, d, pads) = (&a.kernel_shape, &a.strides, &a.dilations, &a.pads);
    pool(n, values, PoolOp::Max, k, s, d, pads, a.auto_pad, a.ceil_mode, false, (a.storage_order, 0), o)
}

/// ONNX AveragePool of f32.
pub(super) fn average_pool(
    n: ConvNode,
    values: &[PlannedValue],
    a: &AveragePool,
    o: &PlanOptions,
) -> Lowered {
    let (k, s, d, pads) = (&a.kernel_shape, &a.strides, &a.dilations, &a.pads);
    pool(n, values, PoolOp::Average, k, s, d, pads, a.auto_pad, a.ceil_mode, a.count_include_pad, (0, 0), o)
}

/// ONNX LpPool of f32 (`p` from 1 up).
pub(super) fn lp_pool(n: ConvNode, values: &[PlannedValue], a: &LpPool, o: &PlanOptions) -> Lowered {
    let lp = u32::try_from(a.p)
        .ok()
        .filter(|&p| p >= 1)
        .ok_or_else(|| format!("p must be positive, got {}", a.p))?;
    let (k, s, d, pads) = (&a.kernel_shape, &a.strides, &a.dilations, &a.pads);
    pool(n, values, PoolOp::Lp, k, s, d, pads, a.auto_pad, a.ceil_mode, false, (0, lp), o)
}

#[cfg(test)]
#[path = "conv_tests.rs"]
mod tests;
