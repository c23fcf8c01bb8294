//! Packing of weights the device computes (`abi::pack` describes the layouts): a GEMM or
//! convolution whose weight is computed from the model's weights once per binding reads it
//! packed for the tensor cores, as it reads a packed initializer.

use crate::abi::{PackParams, Packed, packed_element, tf32_bits, tf32_split};
use crate::intrinsics::*;

/// `dst[i]` = element `i` of the packed form of `src` that `p` describes
/// ([`packed_element`]), for every `i < p.len`.
///
/// # Safety
/// `src` holds `p.src_len` f32, `dst` holds `p.len` words; they do not overlap.
///
/// # Thread mapping
/// Grid-stride over the `p.len` packed elements, one per thread per round.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn pack_weights_f32(p: PackParams, src: *const f32, dst: *mut u32) {
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    let read = |at: u64| {
        if at >= p.src_len {
            trap();
        }
        // SAFETY: at < src_len (checked above).
        unsafe { *src.add(at as usize) }
    };
    while i < p.len {
        let bits = match packed_element(&p, i) {
            Packed::Zero => 0,
            Packed::Big(at) => tf32_bits(read(at)),
            Packed::Small(at) => tf32_split(read(at)).1,
            Packed::Word(w) => w,
        };
        // SAFETY: i < len, the words `dst` holds.
        unsafe { *dst.add(i as usize) = bits };
        i += stride;
    }
}
