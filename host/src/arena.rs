//! [`Arena`]: one device allocation per session, sliced into the slots of a memory plan, with a
//! run-time region for tensors whose size depends on data ([`FreeList`]), and [`StateBuffers`] for
//! recurrent state that persists across runs.
//!
//! Invariants: the arena's bytes only change in [`Arena::ensure`] (grow) and [`Arena::shrink_to`];
//! every device allocation it makes is counted ([`Arena::allocation_count`]), so a test can assert
//! that a warm `run` allocates nothing. Slot pointers are handed out only after a bounds check.

use std::collections::BTreeMap;

use cudarc::driver::{CudaSlice, DevicePtr};
use planner::memory::{BufferSlot, MemoryOptions, MemoryPlan};
use planner::{Binding, Graph};

use crate::device::Context;
use crate::error::HostError;

/// Where the arena's memory comes from.
#[derive(Debug)]
enum Storage {
    /// Allocated by the arena (`None` while empty).
    Owned(Option<CudaSlice<u8>>),
    /// A caller-provided device buffer.
    External { ptr: u64, bytes: u64 },
}

/// One device allocation holding every planned intermediate tensor.
#[derive(Debug)]
pub struct Arena {
    storage: Storage,
    bytes: u64,
    allocations: u64,
}

/// Arena bytes `graph` needs under `binding`: the planned static part (the dynamic region is
/// sized separately, from what data-dependent tensors needed in earlier runs).
pub fn required_bytes(graph: &Graph, binding: &Binding) -> Result<u64, HostError> {
    Ok(planner::memory::plan(graph, binding, &MemoryOptions::default())?.arena_bytes)
}

impl Arena {
    /// An arena of `bytes` (one device allocation; none when `bytes == 0`).
    pub fn new(ctx: &Context, bytes: u64) -> Result<Self, HostError> {
        let mut a = Arena { storage: Storage::Owned(None), bytes: 0, allocations: 0 };
        a.ensure(ctx, bytes)?;
        Ok(a)
    }

    /// An arena over a caller-provided device buffer (sized with [`required_bytes`]); it never
    /// allocates and cannot grow.
    ///
    /// # Safety
    /// `ptr` must be a device allocation of at least `bytes` bytes in `ctx`'s context, 256-byte
    /// aligned, that outlives the arena and that nothing else writes while sessions use it.
    pub unsafe fn external(ptr: u64, bytes: u64) -> Self {
        Arena { storage: Storage::External { ptr, bytes }, bytes, allocations: 0 }
    }

    /// Bytes available.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Device allocations this arena has made since it was created.
    pub fn allocation_count(&self) -> u64 {
        self.allocations
    }

    /// Makes the arena at least `bytes` large, reallocating (contents not kept) only when it is
    /// smaller. Returns whether it allocated.
    pub fn ensure(&mut self, ctx: &Context, bytes: u64) -> Result<bool, HostError> {
        if bytes <= self.bytes {
            return Ok(false);
        }
        match &mut self.storage {
            Storage::External { bytes: have, .. } => Err(HostError::Arena {
                detail: format!("the caller-provided arena has {have} bytes; this binding needs {bytes}"),
            }),
            Storage::Owned(buf) => {
                *buf = None; // free first: the old contents are dead and the memory may be needed
                *buf = Some(alloc(ctx, bytes, "the arena")?);
                self.bytes = bytes;
                self.allocations += 1;
                Ok(true)
            }
        }
    }

    /// Gives memory back: reallocates to exactly `bytes` when smaller than now (0 frees it all).
    pub fn shrink_to(&mut self, ctx: &Context, bytes: u64) -> Result<(), HostError> {
        if bytes >= self.bytes {
            return Ok(());
        }
        if let Storage::Owned(buf) = &mut self.storage {
            *buf = None;
            if bytes > 0 {
                *buf = Some(alloc(ctx, bytes, "the shrunk arena")?);
                self.allocations += 1;
            }
            self.bytes = bytes;
        }
        Ok(())
    }

    /// Device address of the arena's first byte (0 when empty).
    pub fn base_ptr(&self, ctx: &Context) -> u64 {
        match &self.storage {
            Storage::Owned(Some(buf)) => buf.device_ptr(ctx.stream()).0,
            Storage::Owned(None) => 0,
            Storage::External { ptr, .. } => *ptr,
        }
    }

    /// Device address of `slot`, after checking it lies inside the arena.
    pub fn slot_ptr(&self, ctx: &Context, slot: BufferSlot) -> Result<u64, HostError> {
        match slot.offset.checked_add(slot.bytes) {
            Some(end) if end <= self.bytes => Ok(self.base_ptr(ctx) + slot.offset),
            _ => Err(HostError::Arena {
                detail: format!("slot {slot:?} outside the {}-byte arena", self.bytes),
            }),
        }
    }

    /// Ensures room for `plan` plus a dynamic region of `dynamic_bytes`, returning the offset where
    /// the dynamic region starts.
    pub fn fit(&mut self, ctx: &Context, plan: &MemoryPlan, dynamic_bytes: u64) -> Result<u64, HostError> {
        let start = plan.arena_bytes.div_ceil(plan.alignment) * plan.alignment;
        self.ensure(ctx, start + dynamic_bytes)?;
        Ok(start)
    }
}

/// One device allocation of `bytes` on the context's stream (uninitialised).
pub(crate) fn alloc(ctx: &Context, bytes: u64, what: &str) -> Result<CudaSlice<u8>, HostError> {
    // SAFETY: the memory is uninitialised; every user writes before reading (planned tensors at
    // their producing step, which starts their lifetime; session inputs by the host copy).
    unsafe { ctx.stream().alloc::<u8>(bytes as usize) }.map_err(|source| HostError::OutOfMemory {
        what: what.to_string(),
        bytes,
        source,
    })
}

/// A first-fit free list with block splitting and merging of neighbours, for the arena's dynamic
/// region (tensors whose size is only known while running). Offsets are relative to the region.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FreeList {
    capacity: u64,
    alignment: u64,
    free: BTreeMap<u64, u64>,
    used: BTreeMap<u64, u64>,
    high_water: u64,
}

impl FreeList {
    /// An empty region of `capacity` bytes handing out `alignment`-aligned blocks.
    pub fn new(capacity: u64, alignment: u64) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        FreeList { capacity, alignment: alignment.max(1), free, used: BTreeMap::new(), high_water: 0 }
    }

    /// A block of `bytes` (rounded up to the alignment), or `None` when no free block is large
    /// enough (the caller grows the region between runs, by [`FreeList::high_water`]).
    pub fn alloc(&mut self, bytes: u64) -> Option<u64> {
        let size = self.block_size(bytes);
        let (&at, &len) = self.free.iter().find(|&(_, &len)| len >= size)?;
        self.free.remove(&at);
        if len > size {
            self.free.insert(at + size, len - size);
        }
        self.used.insert(at, size);
        self.high_water = self.high_water.max(at + size);
        Some(at)
    }

    /// Extends the region to `capacity` bytes (no-op when not larger): the new tail is free, merged
    /// with a free block that ends where the old capacity did. Blocks in use keep their offsets.
    pub fn grow(&mut self, capacity: u64) {
        if capacity <= self.capacity {
            return;
        }
        let (mut start, mut len) = (self.capacity, capacity - self.capacity);
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back()
            && prev + prev_len == start
        {
            self.free.remove(&prev);
            start = prev;
            len += prev_len;
        }
        self.free.insert(start, len);
        self.capacity = capacity;
    }

    /// Returns the block at `offset`, merging it with free neighbours.
    pub fn free(&mut self, offset: u64) -> Result<(), HostError> {
        let size = self.used.remove(&offset).ok_or_else(|| HostError::Arena {
            detail: format!("dynamic block at {offset} is not allocated"),
        })?;
        let (mut start, mut len) = (offset, size);
        if let Some((&prev, &prev_len)) = self.free.range(..offset).next_back()
            && prev + prev_len == offset
        {
            self.free.remove(&prev);
            start = prev;
            len += prev_len;
        }
        if let Some(next_len) = self.free.remove(&(offset + size)) {
            len += next_len;
        }
        self.free.insert(start, len);
        Ok(())
    }

    /// Bytes in use.
    pub fn used_bytes(&self) -> u64 {
        self.used.values().sum()
    }

    /// Largest block that `alloc` could hand out now.
    pub fn largest_free(&self) -> u64 {
        self.free.values().copied().max().unwrap_or(0)
    }

    /// Highest end offset ever handed out: the capacity that would have sufficed.
    pub fn high_water(&self) -> u64 {
        self.high_water
    }

    /// Total bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Whether [`FreeList::alloc`] of `bytes` would find a free block now.
    pub fn fits(&self, bytes: u64) -> bool {
        self.largest_free() >= self.block_size(bytes)
    }

    /// The block `bytes` take: at least one byte, rounded up to the alignment.
    fn block_size(&self, bytes: u64) -> u64 {
        bytes.max(1).div_ceil(self.alignment) * self.alignment
    }
}

/// Persistent recurrent state (Mamba, Griffin, RWKV): one device allocation, kept across runs until
/// [`StateBuffers::reset_state`] zeroes it.
#[derive(Debug)]
pub struct StateBuffers {
    buf: Option<CudaSlice<u8>>,
    slots: Vec<(String, BufferSlot)>,
}

impl StateBuffers {
    /// Allocates zeroed state for `(name, bytes)` entries, each 256-byte aligned.
    pub fn new(ctx: &Context, entries: &[(String, u64)]) -> Result<Self, HostError> {
        let mut slots = Vec::with_capacity(entries.len());
        let mut end = 0u64;
        for (name, bytes) in entries {
            slots.push((name.clone(), BufferSlot { offset: end, bytes: *bytes }));
            end += bytes.div_ceil(256) * 256;
        }
        let buf =
            if end == 0 {
                None
            } else {
                Some(ctx.stream().alloc_zeros::<u8>(end as usize).map_err(|source| {
                    HostError::OutOfMemory { what: "the recurrent state".into(), bytes: end, source }
                })?)
            };
        Ok(StateBuffers { buf, slots })
    }

    /// Device address of the state named `name`.
    pub fn ptr(&self, ctx: &Context, name: &str) -> Option<u64> {
        let base = self.buf.as_ref()?.device_ptr(ctx.stream()).0;
        self.slots.iter().find(|(n, _)| n == name).map(|(_, s)| base + s.offset)
    }

    /// Overwrites the state named `name` with `bytes` (restoring a checkpoint, or setting an initial
    /// state); `bytes` must be exactly the state's size.
    pub fn load(&mut self, ctx: &Context, name: &str, bytes: &[u8]) -> Result<(), HostError> {
        let slot = self.slots.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        let (Some(slot), Some(buf)) = (slot, self.buf.as_mut()) else {
            return Err(HostError::Arena { detail: format!("no recurrent state named `{name}`") });
        };
        if bytes.len() as u64 != slot.bytes {
            return Err(HostError::Arena {
                detail: format!("state `{name}` has {} bytes, got {}", slot.bytes, bytes.len()),
            });
        }
        let start = slot.offset as usize;
        let mut view = buf.slice_mut(start..start + bytes.len());
        ctx.stream().memcpy_htod(bytes, &mut view).map_err(HostError::driver("loading recurrent state"))
    }

    /// Copies the state named `name` to the host (waits for the context's stream).
    pub fn read(&self, ctx: &Context, name: &str) -> Result<Vec<u8>, HostError> {
        let slot = self.slots.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        let (Some(slot), Some(buf)) = (slot, self.buf.as_ref()) else {
            return Err(HostError::Arena { detail: format!("no recurrent state named `{name}`") });
        };
        let start = slot.offset as usize;
        let view = buf.slice(start..start + slot.bytes as usize);
        let v = ctx.stream().clone_dtoh(&view).map_err(HostError::driver("copying state to the host"))?;
        ctx.synchronize()?;
        Ok(v)
    }

    /// Zeroes every state (the start of a new sequence).
    pub fn reset_state(&mut self, ctx: &Context) -> Result<(), HostError> {
        if let Some(buf) = self.buf.as_mut() {
            ctx.stream().memset_zeros(buf).map_err(HostError::driver("zeroing recurrent state"))?;
        }
        Ok(())
    }

    /// Copies all state to the host (for tests and checkpoints).
    pub fn to_host(&self, ctx: &Context) -> Result<Vec<u8>, HostError> {
        match &self.buf {
            None => Ok(Vec::new()),
            Some(buf) => {
                let v =
                    ctx.stream().clone_dtoh(buf).map_err(HostError::driver("copying state to the host"))?;
                ctx.synchronize()?;
                Ok(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_list_splits_and_merges() {
        let mut f = FreeList::new(4096, 256);
        let a = f.alloc(100).unwrap();
        let b = f.alloc(1000).unwrap();
        let c = f.alloc(256).unwrap();
        assert_eq!((a, b, c), (0, 256, 1280));
        assert_eq!(f.used_bytes(), 256 + 1024 + 256);
        assert!(f.alloc(4096).is_none());
        f.free(b).unwrap();
        assert_eq!(f.alloc(512), Some(256), "split the freed block");
        f.free(a).unwrap();
        f.free(256).unwrap();
        f.free(c).unwrap();
        assert_eq!(f.largest_free(), 4096, "everything merged back into one block");
        assert_eq!(f.high_water(), 1536);
        assert!(f.free(c).is_err(), "double free is an error");
    }

    #[test]
    fn growing_keeps_blocks_and_merges_the_free_tail() {
        let mut f = FreeList::new(1024, 256);
        let a = f.alloc(256).unwrap();
        let b = f.alloc(512).unwrap();
        assert!(f.alloc(512).is_none());
        f.grow(2048);
        assert_eq!(f.largest_free(), 1280, "the free 256 at the end merged with the new 1024");
        assert_eq!(f.alloc(1280), Some(768));
        f.grow(1000);
        assert_eq!(f.capacity(), 2048, "growing to less is a no-op");
        for o in [a, b, 768] {
            f.free(o).unwrap();
        }
        assert_eq!(f.largest_free(), 2048);
        let mut empty = FreeList::new(0, 256);
        assert!(empty.alloc(1).is_none());
        empty.grow(512);
        assert_eq!(empty.alloc(300), Some(0));
    }

    #[test]
    fn random_alloc_free_sequences_keep_blocks_disjoint() {
        let mut f = FreeList::new(1 << 16, 64);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut rng = 7u64;
        for _ in 0..5000 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if rng >> 63 == 0 || live.is_empty() {
                let bytes = (rng >> 40) % 3000 + 1;
                if let Some(at) = f.alloc(bytes) {
                    let size = bytes.div_ceil(64) * 64;
                    assert!(at % 64 == 0 && at + size <= f.capacity());
                    assert!(live.iter().all(|&(o, s)| at + size <= o || o + s <= at), "overlap at {at}");
                    live.push((at, size));
                }
            } else {
                let (o, _) = live.swap_remove((rng >> 33) as usize % live.len());
                f.free(o).unwrap();
            }
            assert_eq!(f.used_bytes(), live.iter().map(|&(_, s)| s).sum::<u64>());
        }
        for (o, _) in live {
            f.free(o).unwrap();
        }
        assert_eq!(f.largest_free(), 1 << 16);
    }
}
