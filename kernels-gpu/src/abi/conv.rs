//! Convolution and pooling kernels: Conv (implicit GEMM and direct), ConvTranspose, MaxPool and
//! AveragePool.
//!
//! Every kernel sees 3 spatial dims `[d, h, w]`: the host pads 1-D and 2-D problems with leading
//! size-1 dims (kernel 1, stride 1, dilation 1, no padding), which changes no index.

use super::Params;

/// Parameters of `conv::conv_gemm_f32`, `conv::conv_direct_f32` and `conv::conv_transpose_f32`.
///
/// Conv: X `(batch, in_channels, in_size)`, W `(out_channels, in_channels / groups, kernel)`,
/// B `(out_channels)` when `has_bias != 0`, Y `(batch, out_channels, out_size)`, all contiguous;
/// `Y[n, m, o] = act(B[m] + Σ_{c, k} X[n, g·C/G + c, o·s + k·d − pad_begin] · W[m, c, k])` with
/// `s` the strides, `d` the dilations, `g = m / (M/G)`, and positions outside `[0, in_size)`
/// reading zero.
///
/// ConvTranspose: W `(in_channels, out_channels / groups, kernel)`, and
/// `Y[n, m, o] = act(B[m] + Σ_{c, k, i} X[n, c, i] · W[c, m mod M/G, k])` over the input positions
/// `i` with `i·strides + k·dilations − pad_begin = o`, `c` in group `m / (M/G)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConvParams {
    /// N.
    pub batch: u32,
    /// C.
    pub in_channels: u32,
    /// M.
    pub out_channels: u32,
    /// G; divides C and M.
    pub groups: u32,
    /// Input spatial dims `[d, h, w]`.
    pub in_size: [u32; 3],
    /// Output spatial dims.
    pub out_size: [u32; 3],
    /// Kernel spatial dims (W's trailing dims).
    pub kernel: [u32; 3],
    /// Strides (>= 1).
    pub strides: [u32; 3],
    /// Dilations (>= 1).
    pub dilations: [u32; 3],
    /// Padding before each spatial dim (ConvTranspose's may be negative).
    pub pad_begin: [i32; 3],
    /// 1 when the bias operand is present.
    pub has_bias: u32,
    /// [`super::Activation`] code applied last (a fused Relu, ...).
    pub act: u32,
    /// The activation's alpha (LeakyRelu).
    pub act_alpha: f32,
    /// Split-K factor of the `wgmma` convolutions (`gemm_wg::conv_wg*`; 0 and 1: none): block z
    /// `group · splits + split` sums depths `split · conv_k_chunk ..` of its tile into partial
    /// `(image · splits + split, channel, position)` of Y, a workspace of `splits` outputs, raw
    /// (bias and activation are the reduction's, `gemm_reduce_f32`). The other kernels ignore it.
    pub splits: u32,
}

/// The depths each split of a `wgmma` convolution sums (see [`ConvParams::splits`]): the GEMM
/// depth over the splits, rounded up to whole k tiles of 32.
pub const fn conv_k_chunk(p: &ConvParams) -> u32 {
    let splits = if p.splits == 0 { 1 } else { p.splits };
    conv_depth(p).div_ceil(splits).next_multiple_of(32)
}

/// Output channels (rows) and output positions (columns) of one `conv_gemm_f32` block tile.
pub const CONV_TILE: u32 = 64;
/// Threads per block dimension of `conv_gemm_f32` (a 16 x 16 block, 4 x 4 outputs per thread).
pub const CONV_THREADS: u32 = 16;
/// Dynamic shared memory of `conv_gemm_f32`: a weight tile and an input tile of 16 x 64 f32.
pub const CONV_SHARED_BYTES: u32 = 2 * 16 * CONV_TILE * 4;

/// One entry of the tap table of the `wgmma` convolutions (`gemm_wg::conv_wg*`): for GEMM depth
/// `k` of a group (`k = c · taps + tap`, input channel `c` of the group, tap `[kz, ky, kx]`
/// row-major over the kernel), the input element's offset from the output position's window
/// origin, `delta = c · in_plane + (dz · H + dy) · W + dx`, and the tap's offsets `d· = k· ·
/// dilation·` along each spatial axis (the kernel checks `origin + d·` against the input size).
/// 16-byte aligned: the kernel reads an entry with one vector load.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvTap {
    /// Offset from the window origin, in elements.
    pub delta: i32,
    /// `kz · dilation_z`.
    pub dz: i32,
    /// `ky · dilation_y`.
    pub dy: i32,
    /// `kx · dilation_x`.
    pub dx: i32,
}

/// The group count of `p` (at least 1).
const fn groups_of(p: &ConvParams) -> u32 {
    if p.groups == 0 { 1 } else { p.groups }
}

/// GEMM depth of one group of a convolution: input channels per group times taps.
pub const fn conv_depth(p: &ConvParams) -> u32 {
    p.in_channels / groups_of(p) * p.kernel[0] * p.kernel[1] * p.kernel[2]
}

/// The tap-table entry of depth `k` (`k <` [`conv_depth`]) of `p` (see [`ConvTap`]).
pub const fn conv_tap(p: &ConvParams, k: u32) -> ConvTap {
    let taps = p.kernel[0] * p.kernel[1] * p.kernel[2];
    let (c, tap) = (k / taps, k % taps);
    let plane = p.kernel[1] * p.kernel[2];
    let (kz, ky, kx) = (tap / plane, tap / p.kernel[2] % p.kernel[1], tap % p.kernel[2]);
    let (dz, dy, dx) = (kz * p.dilations[0], ky * p.dilations[1], kx * p.dilations[2]);
    let in_plane = p.in_size[0] * p.in_size[1] * p.in_size[2];
    let delta = c * in_plane + (dz * p.in_size[1] + dy) * p.in_size[2] + dx;
    ConvTap { delta: delta as i32, dz: dz as i32, dy: dy as i32, dx: dx as i32 }
}

/// The f32 length of the constant a `wgmma` convolution (`gemm_wg::conv_wg*`) reads in place of
/// W: per group `g`, the weight of its output channels as the `k x n` B of a GEMM
/// (`B[k][j] = W[g · M/G + j][k]`, `k <` [`conv_depth`]) packed as [`super::gemm_wg_packed_len`]
/// lays it out (`exact`: big and small TF32 planes); then the tap table, one [`ConvTap`] (four
/// words) per depth. Every part starts on a 16-byte boundary (the packed rows are multiples of four
/// f32).
pub const fn conv_wg_packed_len(p: &ConvParams, exact: bool) -> u64 {
    conv_wg_table_at(p, exact) + 4 * conv_depth(p) as u64
}

/// Where the tap table of [`conv_wg_packed_len`] starts, in f32.
pub const fn conv_wg_table_at(p: &ConvParams, exact: bool) -> u64 {
    let groups = groups_of(p);
    groups as u64 * super::gemm_wg_packed_len(conv_depth(p), p.out_channels / groups, exact)
}

/// Which window reduction `conv::pool_f32` applies (`PoolParams::op`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// MaxPool: the first maximum over the window's input elements (-inf when it has none).
    #[default]
    Max = 0,
    /// AveragePool: their sum over their count (with `count_include_pad`, the padding taps count
    /// too, but not the taps past the padded input that `ceil_mode` adds).
    Average = 1,
    /// LpPool: `(Σ |x|^lp)^(1/lp)` over the window's input elements.
    Lp = 2,
}

/// Parameters of `conv::pool_f32` and `conv::max_pool_indices_f32`: X `(planes, in_size)`, Y `(planes, out_size)`, contiguous
/// (`planes = N · C`). Output position `o`, tap `k` has the padded coordinate
/// `q = o·strides + k·dilations` on each axis, which is outside the padded input when
/// `q >= in + pad_begin + pad_end`, padding when `q < pad_begin` or `q >= in + pad_begin`, and
/// else input element `q − pad_begin`. A tap is outside if it is on some axis, else padding if it
/// is on some axis, else an input element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolParams {
    /// `N · C`.
    pub planes: u64,
    /// Input spatial dims `[d, h, w]`.
    pub in_size: [u32; 3],
    /// Output spatial dims.
    pub out_size: [u32; 3],
    /// Window dims.
    pub kernel: [u32; 3],
    /// Strides (>= 1).
    pub strides: [u32; 3],
    /// Dilations (>= 1).
    pub dilations: [u32; 3],
    /// Padding before each spatial dim.
    pub pad_begin: [u32; 3],
    /// Padding after each spatial dim.
    pub pad_end: [u32; 3],
    /// [`PoolOp`] code.
    pub op: u32,
    /// AveragePool: 1 counts padding taps in the divisor.
    pub count_include_pad: u32,
    /// `conv::max_pool_indices_f32`: 1 numbers the spatial positions column-major (ONNX
    /// `storage_order`), 0 row-major.
    pub storage_order: u32,
    /// LpPool: the norm's order `p` (>= 1).
    pub lp: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], 26 four-byte fields: 104 bytes, no padding.
unsafe impl Params for ConvParams {}
// SAFETY: #[repr(C)], one u64 then 26 four-byte fields (the last an explicit `_pad`): 112 bytes, no
// padding.
unsafe impl Params for PoolParams {}
