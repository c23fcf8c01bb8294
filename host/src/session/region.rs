//! The run-time region of a session ([`Region`]): one device buffer for the tensors that cross a
//! stage boundary of a staged run, handed out by a free list that splits and merges blocks, its
//! blocks reference-counted.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, result, sys};

use crate::arena::{FreeList, alloc};
use crate::device::Context;
use crate::error::HostError;

/// Alignment of the region's blocks.
const REGION_ALIGN: u64 = 256;
/// Smallest region the session allocates.
const REGION_MIN_BYTES: u64 = 64 << 10;

/// The run-time region of a session: one device buffer, handed out by a free list. A block may
/// hold several values at once (a control-flow body passing an input through): it is counted, and
/// freed when its last holder frees it.
pub(super) struct Region {
    buf: Option<CudaSlice<u8>>,
    list: FreeList,
    allocations: u64,
    refs: HashMap<u64, u32>,
}

impl Default for Region {
    fn default() -> Self {
        Region { buf: None, list: FreeList::new(0, REGION_ALIGN), allocations: 0, refs: HashMap::new() }
    }
}

/// Sizes of a session's run-time region ([`Session::region_stats`](crate::Session::region_stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionStats {
    /// Bytes of the region's device buffer.
    pub capacity: u64,
    /// The most bytes any run needed at once (the highest block end).
    pub high_water: u64,
    /// Bytes in use now (0 between runs).
    pub used: u64,
}

impl Region {
    /// Device allocations the region has made.
    pub(super) fn allocation_count(&self) -> u64 {
        self.allocations
    }

    /// Bytes of the region's buffer.
    pub(super) fn bytes(&self) -> u64 {
        self.list.capacity()
    }

    pub(super) fn base(&self, stream: &Arc<CudaStream>) -> u64 {
        self.buf.as_ref().map_or(0, |b| b.device_ptr(stream).0)
    }

    /// The capacity the region grows to when a block of `bytes` does not fit.
    fn grown_capacity(&self, bytes: u64) -> u64 {
        let old = self.list.capacity();
        let need = self.list.high_water().max(old) + bytes.max(1).div_ceil(REGION_ALIGN) * REGION_ALIGN;
        need.max(old * 2).max(REGION_MIN_BYTES)
    }

    /// The device bytes a block of `bytes` would allocate: 0 when a free block fits, else the
    /// grown region's (the old one is still held while its contents are copied over).
    pub(super) fn growth_for(&self, bytes: u64) -> u64 {
        if self.list.fits(bytes) { 0 } else { self.grown_capacity(bytes) }
    }

    /// A block of `bytes`; grows the region when no free block fits: a new buffer of at least
    /// twice the size, the old contents copied over (offsets stay valid; addresses do not).
    pub(super) fn alloc(
        &mut self,
        ctx: &Context,
        stream: &Arc<CudaStream>,
        bytes: u64,
    ) -> Result<u64, HostError> {
        let at = self.alloc_block(ctx, stream, bytes)?;
        self.refs.insert(at, 1);
        Ok(at)
    }

    pub(super) fn alloc_block(
        &mut self,
        ctx: &Context,
        stream: &Arc<CudaStream>,
        bytes: u64,
    ) -> Result<u64, HostError> {
        if let Some(at) = self.list.alloc(bytes) {
            return Ok(at);
        }
        let old = self.list.capacity();
        let capacity = self.grown_capacity(bytes);
        // Kernels queued on the session's stream may still use the old buffer.
        stream
            .synchronize()
            .map_err(HostError::driver("synchronizing before growing the run-time region"))?;
        let new = alloc(ctx, capacity, "the run-time region (tensors of data-dependent size)")?;
        self.allocations += 1;
        ctx.synchronize()?;
        if let Some(old_buf) = &self.buf {
            let (src, dst) = (old_buf.device_ptr(stream).0, new.device_ptr(stream).0);
            // SAFETY: both buffers hold at least `old` bytes and are distinct allocations.
            unsafe { result::memcpy_dtod_async(dst, src, old as usize, stream.cu_stream()) }
                .map_err(HostError::driver("copying the run-time region"))?;
            stream.synchronize().map_err(HostError::driver("copying the run-time region"))?;
        }
        self.buf = Some(new);
        self.list.grow(capacity);
        self.list.alloc(bytes).ok_or_else(|| HostError::Arena {
            detail: format!(
                "the run-time region grew to {capacity} bytes and still has no {bytes}-byte block"
            ),
        })
    }

    /// Frees the region's buffer (it must hold nothing: between runs); the next block allocates
    /// it again.
    pub(super) fn release(&mut self) -> Result<(), HostError> {
        if self.list.used_bytes() != 0 {
            return Err(HostError::Arena { detail: "the run-time region is in use".into() });
        }
        (self.buf, self.list) = (None, FreeList::new(0, REGION_ALIGN));
        self.refs.clear();
        Ok(())
    }

    /// One more holder of the block at `offset`.
    pub(super) fn retain(&mut self, offset: u64) -> Result<(), HostError> {
        let n = self.refs.get_mut(&offset).ok_or_else(|| HostError::Arena {
            detail: format!("dynamic block at {offset} is not allocated"),
        })?;
        *n += 1;
        Ok(())
    }

    /// One holder fewer of the block at `offset`; the last one frees it.
    pub(super) fn free(&mut self, offset: u64) -> Result<(), HostError> {
        let n = self.refs.get_mut(&offset).ok_or_else(|| HostError::Arena {
            detail: format!("dynamic block at {offset} is not allocated"),
        })?;
        *n -= 1;
        if *n == 0 {
            self.refs.remove(&offset);
            self.list.free(offset)?;
        }
        Ok(())
    }

    /// Copies `height` rows of `width` bytes from `src + y * src_pitch` to `dst + y * dst_pitch`
    /// (offsets in the region), ordered on `stream`.
    pub(super) fn copy_2d(
        &self,
        stream: &Arc<CudaStream>,
        (src, src_pitch): (u64, u64),
        (dst, dst_pitch): (u64, u64),
        (width, height): (u64, u64),
    ) -> Result<(), HostError> {
        if width == 0 || height == 0 {
            return Ok(());
        }
        let base = self.base(stream);
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: base + src,
            srcArray: std::ptr::null_mut(),
            srcPitch: src_pitch as usize,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: base + dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: dst_pitch as usize,
            WidthInBytes: width as usize,
            Height: height as usize,
        };
        // SAFETY: both ranges lie inside blocks of the region the caller holds (its contract:
        // `src + (height - 1) * src_pitch + width` and the same for `dst` are within them).
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }
            .result()
            .map_err(HostError::driver("copying within the run-time region"))
    }

    /// Copies `bytes` to the block at `offset`.
    pub(super) fn write(
        &mut self,
        stream: &Arc<CudaStream>,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), HostError> {
        let Some(buf) = self.buf.as_mut() else { return Ok(()) };
        let at = offset as usize;
        let mut view = buf.slice_mut(at..at + bytes.len());
        stream.memcpy_htod(bytes, &mut view).map_err(HostError::driver("copying an input to the device"))
    }

    /// The `len` bytes at `offset`, copied to the host; valid once the stream is synchronized.
    pub(super) fn read(&self, stream: &Arc<CudaStream>, offset: u64, len: u64) -> Result<Vec<u8>, HostError> {
        let Some(buf) = self.buf.as_ref() else { return Ok(vec![0; len as usize]) };
        let at = offset as usize;
        stream.clone_dtoh(&buf.slice(at..at + len as usize)).map_err(HostError::driver("copying to the host"))
    }

    pub(super) fn stats(&self) -> RegionStats {
        RegionStats {
            capacity: self.list.capacity(),
            high_water: self.list.high_water(),
            used: self.list.used_bytes(),
        }
    }
}
