//! [`DeviceTensor`]: an f32 tensor in device memory, row-major and contiguous, possibly starting at
//! an element offset inside its allocation (as arena slots and sub-views do).
//!
//! Invariant: `offset + elem_count(shape) <= buf.len()`.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::Context;
use crate::error::HostError;
use crate::tensor::{HostTensor, elem_count};

/// An f32 tensor in device memory.
#[derive(Debug)]
pub struct DeviceTensor {
    shape: Vec<usize>,
    buf: CudaSlice<f32>,
    offset: usize,
}

impl DeviceTensor {
    /// Copies `t` to the device.
    pub fn from_host(ctx: &Context, t: &HostTensor) -> Result<Self, HostError> {
        Self::from_host_at_offset(ctx, t, 0)
    }

    /// Copies `t` into a fresh allocation, `offset` elements from its start (so its address is
    /// only 4-byte aligned when `offset % 4 != 0`; the kernels must handle that).
    pub fn from_host_at_offset(ctx: &Context, t: &HostTensor, offset: usize) -> Result<Self, HostError> {
        let mut staged = vec![f32::NAN; offset];
        staged.extend_from_slice(t.f32s("tensor copied to the device")?);
        let buf =
            ctx.stream().clone_htod(&staged).map_err(HostError::driver("copying a tensor to the device"))?;
        Ok(DeviceTensor { shape: t.shape().to_vec(), buf, offset })
    }

    /// A tensor of `shape` with every element `value` (tests poison outputs with NaN or a sentinel
    /// so that an element a kernel fails to write is caught).
    pub fn filled(ctx: &Context, shape: &[usize], value: f32) -> Result<Self, HostError> {
        let n = checked_len(shape)?;
        let t = HostTensor::new(shape.to_vec(), vec![value; n])?;
        Self::from_host(ctx, &t)
    }

    /// Copies the tensor back to the host (waits for the stream).
    pub fn to_host(&self, ctx: &Context) -> Result<HostTensor, HostError> {
        let view = self.buf.slice(self.offset..self.offset + self.len());
        let data =
            ctx.stream().clone_dtoh(&view).map_err(HostError::driver("copying a tensor to the host"))?;
        ctx.synchronize()?;
        HostTensor::new(self.shape.clone(), data)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        elem_count(&self.shape).expect("checked at construction")
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Device address of the first element.
    pub fn device_ptr(&self, ctx: &Context) -> u64 {
        let (base, _sync) = self.buf.device_ptr(ctx.stream());
        base + (self.offset * size_of::<f32>()) as u64
    }

    /// Copies `src` into `self` on the device (same element count).
    pub fn copy_from(&mut self, ctx: &Context, src: &DeviceTensor) -> Result<(), HostError> {
        if src.len() != self.len() {
            return Err(HostError::ShapeMismatch {
                what: "device copy destination".into(),
                expected: src.shape.clone(),
                got: self.shape.clone(),
            });
        }
        let from = src.buf.slice(src.offset..src.offset + src.len());
        let (offset, len) = (self.offset, self.len());
        let mut to = self.buf.slice_mut(offset..offset + len);
        ctx.stream().memcpy_dtod(&from, &mut to).map_err(HostError::driver("copying device to device"))
    }
}

fn checked_len(shape: &[usize]) -> Result<usize, HostError> {
    elem_count(shape).ok_or_else(|| HostError::DataLength {
        what: "device tensor".into(),
        shape: shape.to_vec(),
        expected: usize::MAX,
        got: 0,
    })
}
