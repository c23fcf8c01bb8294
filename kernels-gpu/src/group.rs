//! Cooperative groups for the reduction-shaped kernels (`rows`, `reduce`): a *group* of 1, 32 or
//! `blockDim.x` threads owns one item (a row, an output element) at a time and grid-strides over
//! the items, reducing within the group by butterfly shuffles and, for a block, one partial per
//! warp through dynamic shared memory.
//!
//! Invariants: the item loop's condition is uniform over a group, so the group-collective
//! reductions are reached by every thread of the group; a reduction's combine function must be
//! commutative and associative for all lanes to end with the same bits (sums are: every lane adds
//! the same two values).

use crate::intrinsics::{
    WARP_SIZE, block_dim_x, block_idx_x, dynamic_shared_ptr, global_thread_x, grid_dim_x, grid_threads_x,
    shfl_xor_f32, shfl_xor_u32, sync_threads, thread_idx_x,
};

/// Threads per group for a warp per item.
pub(crate) const WARP: u32 = WARP_SIZE;

/// A value a group can reduce: exchangeable between lanes by shuffles and storable in shared
/// memory (at most 8 bytes: 32 partials fit in 256 bytes).
pub(crate) trait Lane: Copy {
    /// This value of lane `lane_id() ^ mask`. Warp-collective.
    fn shfl_xor(self, mask: u32) -> Self;
}

impl Lane for f32 {
    #[inline(always)]
    fn shfl_xor(self, mask: u32) -> Self {
        shfl_xor_f32(self, mask)
    }
}

impl Lane for (f32, u32) {
    #[inline(always)]
    fn shfl_xor(self, mask: u32) -> Self {
        (shfl_xor_f32(self.0, mask), shfl_xor_u32(self.1, mask))
    }
}

impl Lane for u64 {
    #[inline(always)]
    fn shfl_xor(self, mask: u32) -> Self {
        let lo = shfl_xor_u32(self as u32, mask) as u64;
        let hi = shfl_xor_u32((self >> 32) as u32, mask) as u64;
        hi << 32 | lo
    }
}

impl Lane for f64 {
    #[inline(always)]
    fn shfl_xor(self, mask: u32) -> Self {
        f64::from_bits(self.to_bits().shfl_xor(mask))
    }
}

/// The threads that cooperate on one item, and this thread's place among them.
#[derive(Clone, Copy)]
pub(crate) struct Group {
    /// This thread's index in the group.
    pub t: u64,
    /// Threads in the group.
    pub size: u64,
}

impl Group {
    /// `f`-reduction of `v` over the group, the same bits on every thread. Group-collective; a
    /// block group needs `32 * size_of::<T>()` bytes of dynamic shared memory.
    #[inline(always)]
    pub fn reduce<T: Lane>(self, v: T, f: impl Fn(T, T) -> T) -> T {
        match self.size {
            1 => v,
            32 => warp_reduce(v, &f),
            _ => block_combine(warp_reduce(v, &f), f),
        }
    }

    /// Sum over the group. Group-collective.
    #[inline(always)]
    pub fn sum(self, v: f32) -> f32 {
        self.reduce(v, |a, b| a + b)
    }

    /// Maximum over the group (NaN wins). Group-collective.
    #[inline(always)]
    pub fn max(self, v: f32) -> f32 {
        self.reduce(v, crate::math::max)
    }
}

/// Butterfly reduction over the warp: every lane ends with `f` over all 32 values.
#[inline(always)]
fn warp_reduce<T: Lane>(mut v: T, f: &impl Fn(T, T) -> T) -> T {
    let mut m = 16;
    while m > 0 {
        v = f(v, v.shfl_xor(m));
        m >>= 1;
    }
    v
}

/// Combines one value per warp (`w`, already reduced over the warp) across the block, through
/// shared memory; every thread reads the partials in the same order, so all get the same bits.
/// Block-collective; the trailing barrier lets the next call reuse the buffer.
#[inline(always)]
fn block_combine<T: Lane>(w: T, f: impl Fn(T, T) -> T) -> T {
    let partials = dynamic_shared_ptr().cast::<T>();
    let (tid, warps) = (thread_idx_x(), block_dim_x() / WARP_SIZE);
    if tid % WARP_SIZE == 0 {
        // SAFETY: tid / 32 < warps <= 32 partials of at most 8 bytes fit the shared memory the
        // launch provides (the callers' launch contracts).
        unsafe { *partials.add((tid / WARP_SIZE) as usize) = w };
    }
    sync_threads();
    // SAFETY: as above; written before the barrier.
    let mut r = unsafe { *partials };
    let mut k = 1;
    while k < warps {
        // SAFETY: k < warps.
        r = f(r, unsafe { *partials.add(k as usize) });
        k += 1;
    }
    sync_threads();
    r
}

/// Calls `f(group, item)` for every item below `items` that this thread's group owns. A group is
/// one thread (`threads_per_item == 1`), a warp ([`WARP`]; the block size must be a multiple of
/// 32) or the whole block (any other value, which must equal the block size, a multiple of 32).
/// The loop condition is uniform over a group, so `f` may use group-collective reductions.
#[inline(always)]
pub(crate) fn each_item(items: u64, threads_per_item: u32, mut f: impl FnMut(Group, u64)) {
    let (group, first, step) = if threads_per_item == 1 {
        (Group { t: 0, size: 1 }, global_thread_x(), grid_threads_x())
    } else if threads_per_item == WARP {
        let per_block = (block_dim_x() / WARP) as u64;
        let (tid, b) = (thread_idx_x(), block_idx_x() as u64);
        let first = b * per_block + (tid / WARP) as u64;
        (Group { t: (tid % WARP) as u64, size: 32 }, first, grid_dim_x() as u64 * per_block)
    } else {
        let g = Group { t: thread_idx_x() as u64, size: block_dim_x() as u64 };
        (g, block_idx_x() as u64, grid_dim_x() as u64)
    };
    let mut r = first;
    while r < items {
        f(group, r);
        r += step;
    }
}
