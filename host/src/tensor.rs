//! [`HostTensor`]: an f32 tensor in host memory, row-major and contiguous. Invariant: `data.len()`
//! equals the product of `shape` (1 for a scalar, `shape == []`).

use crate::error::HostError;

/// An f32 tensor in host memory (row-major, contiguous).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

/// Product of `shape`, or `None` if it overflows `usize`.
pub fn elem_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl HostTensor {
    /// A tensor of `shape` holding `data`; fails if the lengths disagree.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, HostError> {
        let expected = elem_count(&shape).unwrap_or(usize::MAX);
        if expected != data.len() {
            return Err(HostError::DataLength { what: "tensor".into(), shape, expected, got: data.len() });
        }
        Ok(HostTensor { shape, data })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements, row-major.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Consumes the tensor, returning its elements.
    pub fn into_data(self) -> Vec<f32> {
        self.data
    }
}
