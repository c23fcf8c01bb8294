//! Dim arithmetic shared by several op families: symbolic products (to solve Reshape's `-1`),
//! ONNX slice ranges, and sliding-window output sizes.

use crate::tensor_info::Dim;

/// A product of dims: a known factor times a multiset of symbols (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Product {
    known: usize,
    syms: Vec<String>,
}

impl Product {
    /// The product of `dims`; `None` on overflow.
    pub(crate) fn of<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Option<Product> {
        let mut p = Product { known: 1, syms: Vec::new() };
        for d in dims {
            match d {
                Dim::Known(n) => p.known = p.known.checked_mul(*n)?,
                Dim::Symbol(s) => p.syms.push(s.clone()),
            }
        }
        p.syms.sort();
        Some(p)
    }

    /// The single dim `x` with `self = other * x`, when it is expressible (a known size, or one symbol
    /// with known factor 1). A zero product makes `x` undetermined (`None`).
    pub(crate) fn quotient(&self, other: &Product) -> Option<Dim> {
        if other.known == 0 || !self.known.is_multiple_of(other.known) {
            return None;
        }
        let mut rest = self.syms.clone();
        for s in &other.syms {
            let i = rest.iter().position(|r| r == s)?;
            rest.remove(i);
        }
        let k = self.known / other.known;
        match rest.as_slice() {
            [] => Some(Dim::Known(k)),
            [s] if k == 1 => Some(Dim::Symbol(s.clone())),
            _ => None,
        }
    }

    /// The product as one dim, when expressible (known, or a lone symbol).
    pub(crate) fn as_dim(&self) -> Option<Dim> {
        self.quotient(&Product { known: 1, syms: Vec::new() })
    }

    /// True when both products are provably different (different known factors, same symbols).
    pub(crate) fn provably_differs(&self, other: &Product) -> bool {
        self.syms == other.syms && self.known != other.known
    }
}

/// ONNX `Slice` semantics on one axis of length `len`: the first index and the element count.
/// `None` when `step` is 0.
pub(crate) fn slice_range(len: i64, start: i64, end: i64, step: i64) -> Option<(i64, usize)> {
    if step == 0 {
        return None;
    }
    if len <= 0 {
        return Some((0, 0));
    }
    let norm = |x: i64| if x < 0 { x.saturating_add(len) } else { x };
    let (start, end) = (norm(start), norm(end));
    let (start, end) = if step > 0 {
        (start.clamp(0, len), end.clamp(0, len))
    } else {
        (start.clamp(0, len - 1), end.clamp(-1, len - 1))
    };
    let (span, stride) = if step > 0 { (end - start, step) } else { (start - end, -step) };
    let count = if span <= 0 { 0 } else { (span + stride - 1) / stride };
    Some((start, usize::try_from(count).ok()?))
}

/// Sliding-window geometry of one spatial axis (conv or pool).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub pad_end: usize,
    pub ceil_mode: bool,
}

impl Window {
    /// Output size for input size `input` with explicit pads; `None` when the window does not fit.
    pub(crate) fn output(&self, input: usize) -> Option<usize> {
        let span = self.dilation.checked_mul(self.kernel.checked_sub(1)?)?.checked_add(1)?;
        let padded = input.checked_add(self.pad_begin)?.checked_add(self.pad_end)?;
        let room = padded.checked_sub(span)?;
        let stride = self.stride.max(1);
        let mut out = if self.ceil_mode { room.div_ceil(stride) } else { room / stride } + 1;
        // A window that would start entirely in the end padding is dropped (ONNX/PyTorch ceil rule).
        if self.ceil_mode && (out - 1) * stride >= input + self.pad_begin {
            out -= 1;
        }
        Some(out)
    }

    /// True when the window maps every input size to itself (1x1, stride 1, no padding).
    pub(crate) fn is_identity(&self) -> bool {
        self.kernel == 1 && self.stride <= 1 && self.pad_begin == 0 && self.pad_end == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(s: &str) -> Dim {
        Dim::Symbol(s.into())
    }

    #[test]
    fn quotient_solves_reshape_minus_one() {
        let whole = Product::of(&[sym("b"), sym("s"), Dim::Known(768)]).unwrap();
        let part = Product::of(&[sym("b"), Dim::Known(12), Dim::Known(64)]).unwrap();
        assert_eq!(whole.quotient(&part), Some(sym("s")));
        let part = Product::of(&[sym("s"), sym("b")]).unwrap();
        assert_eq!(whole.quotient(&part), Some(Dim::Known(768)));
        let part = Product::of(&[Dim::Known(7)]).unwrap();
        assert_eq!(whole.quotient(&part), None);
    }

    #[test]
    fn slice_range_follows_onnx() {
        assert_eq!(slice_range(10, 2, 8, 2), Some((2, 3)));
        assert_eq!(slice_range(10, -3, i64::MAX, 1), Some((7, 3)));
        assert_eq!(slice_range(10, -1, i64::MIN, -1), Some((9, 10)));
        assert_eq!(slice_range(10, 5, 2, 1), Some((5, 0)));
        assert_eq!(slice_range(4, 0, 4, 0), None);
        assert_eq!(slice_range(0, -1, i64::MIN, -1), Some((0, 0)));
    }

    #[test]
    fn window_output_sizes() {
        let w = Window { kernel: 3, stride: 2, dilation: 1, pad_begin: 1, pad_end: 1, ceil_mode: false };
        assert_eq!(w.output(224), Some(112));
        let w = Window { kernel: 2, stride: 2, dilation: 1, pad_begin: 0, pad_end: 0, ceil_mode: true };
        assert_eq!(w.output(5), Some(3));
        let w = Window { kernel: 5, stride: 1, dilation: 1, pad_begin: 0, pad_end: 0, ceil_mode: false };
        assert_eq!(w.output(3), None);
    }
}
