//! Constructors of the loss, sampling, selection and normalization operators added after the
//! core families: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, GridSample,
//! NonMaxSuppression, Shrink, Compress, ReverseSequence, Unique, LRN, LpNormalization, Det, and
//! MeanVarianceNormalization (rewritten into reductions, as its ONNX function body defines it).

use planner::ConstTensor;
use planner::op::{self, Op};

use crate::error::OnnxError;

use super::attrs::Attrs;
use super::lower::Lower;

fn loss_attrs(a: &Attrs<'_>) -> Result<(op::LossReduction, Option<i64>), OnnxError> {
    use op::LossReduction as R;
    let reduction =
        a.choice("reduction", R::Mean, &[("none", R::None), ("sum", R::Sum), ("mean", R::Mean)])?;
    Ok((reduction, a.int("ignore_index")?))
}

/// `NegativeLogLikelihoodLoss` (opset 12; 13 only widens types).
pub(crate) fn nll_loss(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let (reduction, ignore_index) = loss_attrs(&l.attrs())?;
    l.emit(Op::NegativeLogLikelihoodLoss(op::NegativeLogLikelihoodLoss { reduction, ignore_index }))
}

/// `SoftmaxCrossEntropyLoss` (opset 12; 13 only widens types).
pub(crate) fn softmax_cross_entropy(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let (reduction, ignore_index) = loss_attrs(&l.attrs())?;
    l.emit(Op::SoftmaxCrossEntropyLoss(op::SoftmaxCrossEntropyLoss { reduction, ignore_index }))
}

/// `GridSample`: opset 16 spells the modes `bilinear`/`bicubic` and is 2-D only; 20 spells
/// them `linear`/`cubic` and allows N-D.
pub(crate) fn grid_sample(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::{GridSampleMode as M, GridSamplePadding as P};
    let a = l.attrs();
    let modes: &[(&str, M)] = if l.opset < 20 {
        &[("bilinear", M::Linear), ("nearest", M::Nearest), ("bicubic", M::Cubic)]
    } else {
        &[("linear", M::Linear), ("nearest", M::Nearest), ("cubic", M::Cubic)]
    };
    let mode = a.choice("mode", M::Linear, modes)?;
    let paddings = [("zeros", P::Zeros), ("border", P::Border), ("reflection", P::Reflection)];
    let padding_mode = a.choice("padding_mode", P::Zeros, &paddings)?;
    let align_corners = a.bool_or("align_corners", false)?;
    l.emit(Op::GridSample(op::GridSample { align_corners, mode, padding_mode }))
}

/// `NonMaxSuppression`.
pub(crate) fn non_max_suppression(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let center_point_box = l.attrs().bool_or("center_point_box", false)?;
    l.emit(Op::NonMaxSuppression(op::NonMaxSuppression { center_point_box }))
}

/// `Shrink`.
pub(crate) fn shrink(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Shrink { bias: a.float_or("bias", 0.0)?, lambd: a.float_or("lambd", 0.5)? };
    l.emit(Op::Shrink(attrs))
}

/// `Compress`.
pub(crate) fn compress(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int("axis")?;
    l.emit(Op::Compress(op::Compress { axis }))
}

/// `ReverseSequence`: the two axes must be 0 and 1 in some order.
pub(crate) fn reverse_sequence(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let (batch_axis, time_axis) = (a.usize_or("batch_axis", 1)?, a.usize_or("time_axis", 0)?);
    if !matches!((batch_axis, time_axis), (0, 1) | (1, 0)) {
        return Err(l.invalid(format!("batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1")));
    }
    l.emit(Op::ReverseSequence(op::ReverseSequence { batch_axis, time_axis }))
}

/// `Unique`.
pub(crate) fn unique(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Unique { axis: a.int("axis")?, sorted: a.bool_or("sorted", true)? };
    l.emit(Op::Unique(attrs))
}

/// `LRN`.
pub(crate) fn lrn(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let size = a.required("size", a.usize("size")?)?;
    if size == 0 {
        return Err(a.invalid("size", "must be at least 1"));
    }
    let attrs = op::Lrn {
        alpha: a.float_or("alpha", 1e-4)?,
        beta: a.float_or("beta", 0.75)?,
        bias: a.float_or("bias", 1.0)?,
        size,
    };
    l.emit(Op::Lrn(attrs))
}

/// `LpNormalization` (p is 1 or 2).
pub(crate) fn lp_normalization(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let p = match a.int_or("p", 2)? {
        1 => 1,
        2 => 2,
        other => return Err(a.invalid("p", format!("{other} is neither 1 nor 2"))),
    };
    l.emit(Op::LpNormalization(op::LpNormalization { axis: a.int_or("axis", -1)?, p }))
}

/// `MeanVarianceNormalization(X)` with `axes` (default `[0, 2, 3]`), as its function body
/// defines it: `(X - E[X]) / (sqrt(E[X²] - E[X]²) + 1e-9)`, the means over `axes`.
pub(crate) fn mean_variance_normalization(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axes = l.attrs().ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let x = l.required_input(0)?;
    let y = l.required_output(0)?;
    let mean = |axes: &Vec<i64>| {
        Op::ReduceMean(op::Reduce { axes: Some(axes.clone()), keepdims: true, noop_with_empty_axes: false })
    };
    let (m, sq, msq, m2, var, std) =
        (l.temp("mean"), l.temp("sq"), l.temp("mean_sq"), l.temp("mean2"), l.temp("var"), l.temp("std"));
    let (eps32, eps, den, num) =
        (l.constant("eps", ConstTensor::scalar_f32(1e-9)), l.temp("eps_like"), l.temp("den"), l.temp("num"));
    l.push("mean", mean(&axes), &[Some(x)], &[m]);
    l.push("sq", Op::Mul, &[Some(x), Some(x)], &[sq]);
    l.push("mean_sq", mean(&axes), &[Some(sq)], &[msq]);
    l.push("mean2", Op::Mul, &[Some(m), Some(m)], &[m2]);
    l.push("var", Op::Sub, &[Some(msq), Some(m2)], &[var]);
    l.push("std", Op::Sqrt, &[Some(var)], &[std]);
    l.push("eps_like", Op::CastLike(op::CastLike::default()), &[Some(eps32), Some(x)], &[eps]);
    l.push("den", Op::Add, &[Some(std), Some(eps)], &[den]);
    l.push("num", Op::Sub, &[Some(x), Some(m)], &[num]);
    l.push("y", Op::Div, &[Some(num), Some(den)], &[y]);
    Ok(())
}

/// `DFT`: opsets 17-19 take `axis` as an attribute (default 1), 20 as input 2 (default -2).
pub(crate) fn dft(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = if l.opset < 20 {
        l.no_inputs_from(2, "axis is an attribute")?;
        Some(l.attrs().int_or("axis", 1)?)
    } else {
        l.no_attr("axis", 20)?;
        None
    };
    let a = l.attrs();
    let attrs =
        op::Dft { axis, inverse: a.bool_or("inverse", false)?, onesided: a.bool_or("onesided", false)? };
    l.emit(Op::Dft(attrs))
}

/// `CenterCropPad` (opset 18).
pub(crate) fn center_crop_pad(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axes = l.attrs().ints("axes")?;
    l.emit(Op::CenterCropPad(op::CenterCropPad { axes }))
}

/// `Col2Im` (opset 18).
pub(crate) fn col2im(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Col2Im {
        dilations: a.usizes("dilations")?,
        pads: a.usizes("pads")?,
        strides: a.usizes("strides")?,
    };
    l.emit(Op::Col2Im(attrs))
}

/// `AffineGrid` (opset 20).
pub(crate) fn affine_grid(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let align_corners = l.attrs().bool_or("align_corners", false)?;
    l.emit(Op::AffineGrid(op::AffineGrid { align_corners }))
}

/// `TensorScatter` (opset 24).
pub(crate) fn tensor_scatter(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let circular = a.choice("mode", false, &[("linear", false), ("circular", true)])?;
    l.emit(Op::TensorScatter(op::TensorScatter { axis: a.int_or("axis", -2)?, circular }))
}

/// `RoiAlign` (opset 10; 16 adds `coordinate_transformation_mode`, default `half_pixel`).
pub(crate) fn roi_align(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let half_pixel = if l.opset < 16 {
        false
    } else {
        a.choice(
            "coordinate_transformation_mode",
            true,
            &[("half_pixel", true), ("output_half_pixel", false)],
        )?
    };
    let attrs = op::RoiAlign {
        half_pixel,
        max: a.choice("mode", false, &[("avg", false), ("max", true)])?,
        output_height: a.usize_or("output_height", 1)?,
        output_width: a.usize_or("output_width", 1)?,
        sampling_ratio: a.usize_or("sampling_ratio", 0)?,
        spatial_scale: a.float_or("spatial_scale", 1.0)?,
    };
    l.emit(Op::RoiAlign(attrs))
}

/// `STFT` (opset 17).
pub(crate) fn stft(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let onesided = l.attrs().bool_or("onesided", true)?;
    l.emit(Op::Stft(op::Stft { onesided }))
}

/// `HannWindow` / `HammingWindow` / `BlackmanWindow` (opset 17): `periodic`, `output_datatype`.
fn signal_window(l: &mut Lower<'_, '_>, kind: op::WindowKind) -> Result<(), OnnxError> {
    let a = l.attrs();
    let periodic = a.bool_or("periodic", true)?;
    let output_dtype = a.dtype("output_datatype")?.unwrap_or(planner::DType::F32);
    l.emit(Op::SignalWindow(op::SignalWindow { kind, periodic, output_dtype }))
}

/// `MelWeightMatrix` (opset 17): `output_datatype`.
pub(crate) fn mel_weight_matrix(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let output_dtype = l.attrs().dtype("output_datatype")?.unwrap_or(planner::DType::F32);
    l.emit(Op::MelWeightMatrix(op::MelWeightMatrix { output_dtype }))
}

/// `TfIdfVectorizer` (opset 9) with an integer pool (`pool_int64s`); a string pool is refused:
/// ferrofuse holds no string tensors.
pub(crate) fn tf_idf_vectorizer(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    if a.strings("pool_strings")?.is_some_and(|s| !s.is_empty()) {
        return Err(
            a.invalid("pool_strings", "string pools need string tensors, which ferrofuse does not hold")
        );
    }
    let len = |attr: &str| -> Result<usize, OnnxError> {
        let v = a.required(attr, a.int(attr)?)?;
        usize::try_from(v).map_err(|_| a.invalid(attr, format!("{v} is negative")))
    };
    let modes = [("TF", op::TfIdfMode::Tf), ("IDF", op::TfIdfMode::Idf), ("TFIDF", op::TfIdfMode::TfIdf)];
    let t = op::TfIdfVectorizer {
        min_gram_length: len("min_gram_length")?,
        max_gram_length: len("max_gram_length")?,
        max_skip_count: len("max_skip_count")?,
        mode: a
            .required("mode", a.string("mode")?.map(|_| ()))
            .and_then(|()| a.choice("mode", op::TfIdfMode::Tf, &modes))?,
        ngram_counts: a.required("ngram_counts", a.ints("ngram_counts")?)?,
        ngram_indexes: a.required("ngram_indexes", a.ints("ngram_indexes")?)?,
        pool: a.required("pool_int64s", a.ints("pool_int64s")?)?,
        weights: a.floats("weights")?.unwrap_or_default(),
    };
    let grams = tf_idf_grams(&t).map_err(|why| a.invalid("ngram_counts", why))?;
    if grams != t.ngram_indexes.len() {
        return Err(a.invalid(
            "ngram_indexes",
            format!("{} entries for the pool's {grams} n-grams", t.ngram_indexes.len()),
        ));
    }
    if t.min_gram_length == 0 || t.min_gram_length > t.max_gram_length {
        return Err(a.invalid("min_gram_length", "must be at least 1 and at most max_gram_length"));
    }
    let columns =
        || a.invalid("weights", "ngram_indexes must be non-negative and weights one per output column");
    if t.ngram_indexes.iter().any(|&i| i < 0) {
        return Err(columns());
    }
    let Some(width) = t.width().filter(|&w| w <= u32::MAX as usize) else {
        return Err(a.invalid("ngram_indexes", "an output column past 2^32"));
    };
    if !t.weights.is_empty() && t.weights.len() != width {
        return Err(columns());
    }
    l.emit(Op::TfIdfVectorizer(t))
}

/// How many n-grams the pool holds (`ngram_counts` non-decreasing starts within it).
fn tf_idf_grams(t: &op::TfIdfVectorizer) -> Result<usize, String> {
    let starts = &t.ngram_counts;
    let mut grams = 0;
    for (i, &s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(t.pool.len() as i64);
        if s < 0 || end < s || end > t.pool.len() as i64 {
            return Err(format!("entry {i} ({s}) is outside the pool or out of order"));
        }
        grams += (end - s) as usize / (i + 1);
    }
    Ok(grams)
}

/// `HannWindow`.
pub(crate) fn hann_window(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    signal_window(l, op::WindowKind::Hann)
}

/// `HammingWindow`.
pub(crate) fn hamming_window(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    signal_window(l, op::WindowKind::Hamming)
}

/// `BlackmanWindow`.
pub(crate) fn blackman_window(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    signal_window(l, op::WindowKind::Blackman)
}
