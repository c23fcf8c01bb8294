//! The `wgmma` convolutions (`conv_wg*`): [`super::gemm_wg`]'s body with output positions as the
//! rows of A, gathered through the tap table ([`ConvRow`]), and an epilogue that stores Y's planes
//! ([`conv_store`]); the entries, which read the packed weights of their group.

#[cfg(ferrofuse_hopper)]
use crate::abi::{
    Activation, ConvTap, GemmParams, MAX_RANK, conv_depth, conv_k_chunk, conv_wg_table_at, gemm_wg_packed_ld,
    gemm_wg_packed_len,
};
use crate::abi::{ConvParams, EwProgramParams};
#[cfg(ferrofuse_hopper)]
use crate::gemm::Program;
use crate::intrinsics::trap;
#[cfg(ferrofuse_hopper)]
use crate::intrinsics::{block_idx_z, sync_threads};

/// One output position of a `wgmma` convolution (a row of its implicit GEMM), decoded once per
/// block: the offset of its window origin in X (image, the group's first channel, the spatial
/// origin `o · stride − pad_begin`, which may lie in the padding) and that origin per axis.
#[cfg(ferrofuse_hopper)]
#[derive(Clone, Copy)]
pub(super) struct ConvRow {
    /// Element offset of the window origin (may be negative: an origin in the padding).
    base: i64,
    /// The origin per spatial axis `[z, y, x]`; [`ConvRow::OUTSIDE`]'s fails every check (the
    /// planner keeps sizes, pads and tap offsets below 2^30).
    at: [i32; 3],
}

#[cfg(ferrofuse_hopper)]
impl ConvRow {
    /// A row past the output positions: reads nothing.
    pub(super) const OUTSIDE: Self = Self { base: 0, at: [-(1 << 30); 3] };

    /// The element offset in X of this row's input at `tap` and the bytes to copy: 4 when the
    /// tap's element is inside the input (and `depth_ok`: the depth is below k), else 0 (a zero
    /// of the padding, or past the problem).
    #[inline(always)]
    pub(super) fn source(&self, p: &ConvParams, tap: &ConvTap, depth_ok: bool) -> (isize, u32) {
        let inside = |o: i32, d: i32, n: u32| ((o + d) as u32) < n;
        // (`&`, not `&&`: selects, no branches.)
        let ok = depth_ok
            & inside(self.at[0], tap.dz, p.in_size[0])
            & inside(self.at[1], tap.dy, p.in_size[1])
            & inside(self.at[2], tap.dx, p.in_size[2]);
        let at = self.base + tap.delta as i64;
        (if ok { at as isize } else { 0 }, if ok { 4 } else { 0 })
    }
}

/// Row `row` (of `rows = batch · out_plane`) of group `group`'s implicit GEMM of `p`.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
pub(super) fn conv_row(p: &ConvParams, row: u32, rows: u32, group: u32) -> ConvRow {
    if row >= rows {
        return ConvRow::OUTSIDE;
    }
    let [od, oh, ow] = p.out_size;
    let plane = od * oh * ow;
    let (image, pos) = (row / plane, row % plane);
    let o = [pos / (oh * ow), pos / ow % oh, pos % ow];
    let at: [i32; 3] = core::array::from_fn(|i| (o[i] * p.strides[i]) as i32 - p.pad_begin[i]);
    let [d, h, w] = p.in_size.map(|v| v as i64);
    let channel = image as i64 * p.in_channels as i64 + (group * (p.in_channels / p.groups.max(1))) as i64;
    let base = channel * d * h * w + (at[0] as i64 * h + at[1] as i64) * w + at[2] as i64;
    ConvRow { base, at }
}

/// The epilogue of a `wgmma` convolution: stages the block's accumulators transposed in shared
/// memory at `tile` (column-major, `bm + 4` apart: the lanes of a fragment store hit 32 banks),
/// then thread `tid` finishes outputs `tid, tid + threads, ...` in column-major order (consecutive
/// threads, consecutive output positions of one channel: coalesced stores into Y's planes), each
/// with its channel's bias, the activation and the epilogue program (over Y's flat index; none
/// when it has no instruction); split over k, the raw sums of split `split` go to partial
/// `image · splits + split` of the workspace `y` ([`ConvParams::splits`]), and the reduction
/// finishes them.
///
/// # Safety
/// `tile` has `BN (bm + 4)` f32 of shared memory no copy still writes; the conv launch contract for
/// `bias` and `y`, and the program's inputs hold every element their strides address for Y's
/// elements; every thread of the block calls it.
#[cfg(ferrofuse_hopper)]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn conv_store<const ACC: usize>(
    p: &ConvParams,
    acc: &[f32; ACC],
    tile: *mut f32,
    (a_row, t): (u32, u32),
    (row0, col0, group, split): (u32, u32, u32, u32),
    bm: u32,
    bn: u32,
    bias: *const f32,
    y: *mut f32,
    (tid, threads): (u32, u32),
    program: Program,
) {
    // Whether a program applies, as a flag: `Option::filter` would select between the
    // parameters' address and null, and a pointer that may be null cannot be read from the
    // parameter space (the compiler then copies all 800 bytes of them to local memory).
    let apply = program.is_some_and(|(e, _)| e.n_instr > 0);
    let plane = p.out_size[0] * p.out_size[1] * p.out_size[2];
    if let Some((e, _)) = program
        && apply
    {
        // Constant indices only (a slice comparison would need the parameters' address).
        let (r, dims) = (MAX_RANK - 3, [p.batch, p.out_channels, plane].map(u64::from));
        let shaped =
            e.out_shape[r] == dims[0] && e.out_shape[r + 1] == dims[1] && e.out_shape[r + 2] == dims[2];
        if e.rank != 0 && !(e.rank == 3 && shaped) {
            trap(); // not the planner's aligned parameters
        }
    }
    let ld = bm + 4;
    for j in 0..ACC / 4 {
        // Accumulator `4j + e` is row `a_row + 8 (e / 2)`, column `8j + 2t + e % 2`.
        let c = 8 * j as u32 + 2 * t;
        // SAFETY: inside the tile (the caller's contract).
        unsafe {
            let at = tile.add((c * ld + a_row) as usize);
            *at = acc[4 * j];
            *at.add(ld as usize) = acc[4 * j + 1];
            *at.add(8) = acc[4 * j + 2];
            *at.add(ld as usize + 8) = acc[4 * j + 3];
        }
    }
    sync_threads();
    let rows = p.batch * plane;
    let per_group = p.out_channels / p.groups.max(1);
    let splits = p.splits.max(1);
    let mut q = tid;
    while q < bm * bn {
        let (c, r) = (q / bm, q % bm);
        let (row, col) = (row0 + r, col0 + c);
        if row < rows && col < per_group {
            let channel = group * per_group + col;
            let (image, pos) = (row / plane, row % plane);
            // SAFETY: the tile entry was written before the barrier; `channel` is below the bias's
            // length; the output offset is inside Y (the launch contract).
            unsafe {
                let v = *tile.add((c * ld + r) as usize);
                let image = image as u64 * splits as u64 + split as u64;
                let out = (image * p.out_channels as u64 + channel as u64) * plane as u64 + pos as u64;
                // Split over k, the raw sum; else with the bias and the activation (Relu inline,
                // the common case; the others out of line).
                let v = if splits > 1 {
                    v
                } else {
                    let v = if p.has_bias != 0 { v + *bias.add(channel as usize) } else { v };
                    let v = match p.act {
                        a if a == Activation::None as u32 => v,
                        a if a == Activation::Relu as u32 => crate::math::relu(v),
                        _ => crate::conv::activate(p.act, p.act_alpha, v),
                    };
                    match program {
                        // The program over Y is aligned to [batch, out_channels, out_plane] (or
                        // its inputs have Y's shape): the offsets without dividing.
                        Some((e, x)) if apply => {
                            let o = if e.rank == 0 {
                                [out; 4]
                            } else {
                                let r = MAX_RANK - 3;
                                let at = |s: &[u64; MAX_RANK]| {
                                    image * s[r] + channel as u64 * s[r + 1] + pos as u64 * s[r + 2]
                                };
                                [at(&e.strides[0]), at(&e.strides[1]), at(&e.strides[2]), at(&e.strides[3])]
                            };
                            crate::program::ew_element_at(e, o, Some(v), x)
                        }
                        _ => v,
                    }
                };
                *y.add(out as usize) = v;
            }
        }
        q += threads;
    }
}

/// ONNX Conv of f32 as an implicit GEMM on the `wgmma` tensor cores: rows the output positions of
/// every image, columns the output channels of group `blockIdx.z`, depth its input channels times
/// taps, A gathered from X through the tap table, B the group's weights packed.
///
/// # Safety
/// The conv launch contract of `conv.rs` (contiguous X, Y, bias; `groups` divides both channel
/// counts); `w` is the constant of [`crate::abi::conv_wg_packed_len`] for `p` (16-byte aligned);
/// `batch · out_plane` fits u32 and X's offsets fit i64; block `128 WGS` threads, grid
/// `(ceil(M/G / BN), ceil(batch · out_plane / (64 WGS)), G · splits)`, the entry's shared
/// memory; split over k, `y` is the workspace of [`ConvParams::splits`].
#[cfg(ferrofuse_hopper)]
#[inline(always)]
unsafe fn conv_wg<const WGS: u32, const BN: u32, const ACC: usize, const EXACT: bool>(
    p: &ConvParams,
    program: Program,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
) {
    let groups = p.groups.max(1);
    let k = conv_depth(p);
    let n = p.out_channels / groups;
    let plane = p.out_size[0] * p.out_size[1] * p.out_size[2];
    let ld = gemm_wg_packed_ld(k);
    let splits = p.splits.max(1);
    let gemm = GemmParams {
        m: p.batch * plane,
        n,
        k,
        batch: groups,
        a_cs: 1,
        b_rs: 1,
        b_cs: ld as u64,
        splits,
        k_chunk: if splits > 1 { conv_k_chunk(p) } else { k },
        ..GemmParams::default()
    };
    let group = block_idx_z() / splits;
    // SAFETY: inside the packed constant (the launch contract): the group's packed weights, and
    // the tap table after every group's.
    let (b, taps) = unsafe {
        (
            w.add((group as u64 * gemm_wg_packed_len(k, n, EXACT)) as usize),
            w.add(conv_wg_table_at(p, EXACT) as usize) as *const ConvTap,
        )
    };
    // SAFETY: forwarded (the launch contract; the GEMM's B is the group's packed weight).
    unsafe {
        super::gemm_wg::<WGS, BN, ACC, EXACT, true, false, false>(
            &gemm,
            x,
            b,
            bias,
            y,
            program,
            p,
            taps,
            &super::CatOperand::NONE,
        )
    }
}

macro_rules! conv_wg_entries {
    ($($(#[$doc:meta])* $name:ident: $wgs:literal warpgroups, $bn:literal columns, $exact:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As `conv_wg` (module `gemm_wg`): the conv launch contract, `w` the packed weights and
        /// tap table of [`crate::abi::conv_wg_packed_len`]; the program's inputs `x1..x3` hold
        /// every element their strides address for Y's elements and do not overlap Y.
        ///
        /// # Parameters
        /// [`ConvParams`]; [`EwProgramParams`], the epilogue program over Y (input 0 the
        /// convolution's result; no instruction: none); `x` the input, `w` the packed constant,
        /// `b` the bias (null without), `x1..x3` the program's other inputs (null where unused),
        /// `y` the output.
        ///
        /// # Thread mapping
        /// Grid (ceil(M/G / BN), ceil(batch · out_plane / (64 WGS)), G · splits), block `128 * WGS`
        /// threads, [`crate::abi::GemmTile::wg_shared_bytes`] of dynamic shared memory; the
        /// GEMM's (`gemm_wg128_f32`), with output positions as rows and output channels as
        /// columns.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: ConvParams,
            e: EwProgramParams,
            x: *const f32,
            w: *const f32,
            b: *const f32,
            x1: *const f32,
            x2: *const f32,
            x3: *const f32,
            y: *mut f32,
        ) {
            #[cfg(ferrofuse_hopper)]
            // SAFETY: forwarded (the kernel's contract).
            unsafe {
                let program = crate::gemm::program(&e, x1, x2, x3);
                conv_wg::<$wgs, $bn, { $bn / 2 }, $exact>(&p, program, x, w, b, y)
            }
            #[cfg(not(ferrofuse_hopper))]
            {
                let _ = (p, e, x, w, b, x1, x2, x3, y);
                trap()
            }
        }
    )*};
}

conv_wg_entries! {
    /// Conv on the `wgmma` tensor cores (3xTF32), 128 positions x 128 channels per block.
    conv_wg128_f32: 2 warpgroups, 128 columns, true;
    /// Conv on the `wgmma` tensor cores (3xTF32), 64 positions x 64 channels per block.
    conv_wg64_f32: 1 warpgroups, 64 columns, true;
    /// `conv_wg128_f32` in TF32.
    conv_wg128_tf32: 2 warpgroups, 128 columns, false;
    /// `conv_wg64_f32` in TF32.
    conv_wg64_tf32: 1 warpgroups, 64 columns, false;
    /// Conv on the `wgmma` tensor cores (3xTF32), 64 positions x 32 channels per block (layers of
    /// at most 32 output channels per group).
    conv_wg32_f32: 1 warpgroups, 32 columns, true;
    /// `conv_wg32_f32` in TF32.
    conv_wg32_tf32: 1 warpgroups, 32 columns, false;
}
