//! ONNX RotaryEmbedding (`rotary_f32`): each output element reads its own feature and its pair's,
//! and the token's cos / sin from the caches.

use crate::abi::{RotaryParams, rotary_mode};
use crate::intrinsics::{global_thread_x, grid_threads_x};
use crate::math;

/// ONNX RotaryEmbedding ([`RotaryParams`]): `y` is `x` with the first `rot` features of each head
/// turned by the angle of the token's cache row.
///
/// # Safety
/// `x` and `y` hold every element the params address (`y` does not overlap `x`: an element's pair
/// is read by another thread); `cos` and `sin` hold the cache (`cache_rows * rot / 2` f32, or
/// `batch * seq * rot / 2` per token, every element `cache_strides` address in the FULL mode);
/// `positions` holds `batch * seq` i64 in the POSITIONS mode
/// (it is not read otherwise); `rot` is even and at most `size`.
///
/// # Parameters
/// `p`; input `x`; caches `cos`, `sin`; `positions` (or null); output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `batch * seq * heads * size`
/// output elements in (b, s, h, d) order.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn rotary_f32(
    p: RotaryParams,
    x: *const f32,
    cos: *const f32,
    sin: *const f32,
    positions: *const i64,
    y: *mut f32,
) {
    let half = p.rot / 2;
    let total = p.batch * p.seq * p.heads * p.size;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < total {
        let d = i % p.size;
        let h = (i / p.size) % p.heads;
        let token = i / (p.size * p.heads); // b * seq + s
        let (b, s) = (token / p.seq, token % p.seq);
        let base = (b * p.batch_stride + s * p.seq_stride + h * p.head_stride) as usize;
        // SAFETY: d < size: an element of the head (the contract).
        let v = unsafe { *x.add(base + d as usize) };
        let out = if d >= p.rot {
            v
        } else {
            // The pair: (k, first, other) with `first` whether d is the pair's first element.
            let (k, first, other) = if p.interleaved != 0 {
                (d / 2, d % 2 == 0, if d % 2 == 0 { d + 1 } else { d - 1 })
            } else if d < half {
                (d, true, d + half)
            } else {
                (d - half, false, d - half)
            };
            if p.mode == rotary_mode::FULL {
                // SAFETY: the caches hold every (b, h, s) the strides address, `rot` features
                // each (the contract); d and `other` < rot.
                let (c, sn, w) = unsafe {
                    let at = (b * p.cache_strides[0] + h * p.cache_strides[1] + s * p.cache_strides[2] + d)
                        as usize;
                    (*cos.add(at), *sin.add(at), *x.add(base + other as usize))
                };
                let turned = if first { math::neg(w) } else { w };
                math::add(math::mul(v, c), math::mul(turned, sn))
            } else {
                let row = match p.mode {
                    // SAFETY: token < batch * seq ids (the contract).
                    rotary_mode::POSITIONS => {
                        match u64::try_from(unsafe { *positions.add(token as usize) }) {
                            Ok(r) if r < p.cache_rows => Some(r),
                            _ => None,
                        }
                    }
                    rotary_mode::SEQUENCE => Some(s),
                    _ => Some(token),
                };
                match row {
                    Some(r) => {
                        // SAFETY: r indexes a cache row of `half` entries, k < half; `other` < rot.
                        let (c, sn, w) = unsafe {
                            let at = (r * half + k) as usize;
                            (*cos.add(at), *sin.add(at), *x.add(base + other as usize))
                        };
                        if first { math::fma(c, v, -sn * w) } else { math::fma(sn, w, c * v) }
                    }
                    None => f32::NAN,
                }
            }
        };
        // SAFETY: as for the read.
        unsafe { *y.add(base + d as usize) = out };
        i += stride;
    }
}
