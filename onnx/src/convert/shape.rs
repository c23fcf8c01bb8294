//! Constructors of indexing, data-movement, shape and constant operators.
//!
//! Opset differences handled here: `Split` sizes (attribute before 13, input after, plus
//! `num_outputs` from 18), `Squeeze`/`Unsqueeze` axes (attribute before 13, input after), `Pad`
//! (`axes` input from 18, `wrap` mode from 19), `Resize` (`half_pixel_symmetric` from 19),
//! `SpaceToDepth` (`mode` from 28, DCR only). Slice/TopK/Pad/Clip take their legacy attributes as
//! inputs at every supported opset, so those attributes are rejected. `Constant` becomes an
//! initializer; deprecated `Upsample` becomes `Resize` (asymmetric coordinates, floor rounding).

use planner::ConstTensor;
use planner::op::{self, Op, ScatterReduction};

use crate::error::{AttrIssue, OnnxError};

use super::attrs::Attrs;
use super::lower::Lower;

/// `Gather`.
pub(crate) fn gather(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", 0)?;
    l.emit(Op::Gather(op::Gather { axis }))
}

/// `GatherElements`.
pub(crate) fn gather_elements(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", 0)?;
    l.emit(Op::GatherElements(op::GatherElements { axis }))
}

/// `GatherND`.
pub(crate) fn gather_nd(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let batch_dims = l.attrs().usize_or("batch_dims", 0)?;
    l.emit(Op::GatherNd(op::GatherNd { batch_dims }))
}

fn reduction(a: &Attrs<'_>) -> Result<ScatterReduction, OnnxError> {
    use ScatterReduction as R;
    let choices = [("none", R::None), ("add", R::Add), ("mul", R::Mul), ("max", R::Max), ("min", R::Min)];
    a.choice("reduction", R::None, &choices)
}

/// Deprecated `Scatter`.
pub(crate) fn scatter(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", 0)?;
    l.emit(Op::Scatter(op::Scatter { axis }))
}

/// `ScatterElements`.
pub(crate) fn scatter_elements(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::ScatterElements { axis: a.int_or("axis", 0)?, reduction: reduction(&a)? };
    l.emit(Op::ScatterElements(attrs))
}

/// `ScatterND`.
pub(crate) fn scatter_nd(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let reduction = reduction(&l.attrs())?;
    l.emit(Op::ScatterNd(op::ScatterNd { reduction }))
}

/// `Slice`: starts/ends/axes/steps are inputs at every supported opset.
pub(crate) fn slice(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    for attr in ["starts", "ends", "axes"] {
        l.no_attr(attr, 10)?;
    }
    l.emit(Op::Slice(op::Slice::default()))
}

/// `Split`: sizes as attribute (< 13) or input 1; `num_outputs` from opset 18.
pub(crate) fn split(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", 0)?;
    let attrs = if l.opset < 13 {
        l.no_inputs_from(1, "split sizes are an attribute")?;
        op::Split { axis, split: l.attrs().ints("split")?, num_outputs: None }
    } else {
        l.no_attr("split", 13)?;
        let num_outputs = if l.opset >= 18 { l.attrs().usize("num_outputs")? } else { None };
        if num_outputs.is_some() && l.input(1).is_some() {
            return Err(l.invalid("both the split input and num_outputs are given"));
        }
        op::Split { axis, split: None, num_outputs }
    };
    l.emit(Op::Split(attrs))
}

/// `Concat` (`axis` required).
pub(crate) fn concat(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let axis = a.required("axis", a.int("axis")?)?;
    l.emit(Op::Concat(op::Concat { axis }))
}

/// `Pad`: pads and constant value are inputs; `axes` input from 18; `wrap` mode from 19.
pub(crate) fn pad(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::PadMode as M;
    l.no_attr("pads", 11)?;
    l.no_attr("value", 11)?;
    if l.opset < 18 {
        l.no_inputs_from(3, "the axes input exists from opset 18")?;
    }
    let mut modes = vec![("constant", M::Constant), ("reflect", M::Reflect), ("edge", M::Edge)];
    if l.opset >= 19 {
        modes.push(("wrap", M::Wrap));
    }
    let mode = l.attrs().choice("mode", M::Constant, &modes)?;
    l.emit(Op::Pad(op::Pad { mode, pads: None, value: None }))
}

/// `Resize` (opset 11 input layout X, roi, scales, sizes at every supported opset).
pub(crate) fn resize(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::CoordinateTransformationMode as C;
    use op::{KeepAspectRatioPolicy as K, NearestMode as N, ResizeMode as M};
    let mut transforms = vec![
        ("half_pixel", C::HalfPixel),
        ("pytorch_half_pixel", C::PytorchHalfPixel),
        ("align_corners", C::AlignCorners),
        ("asymmetric", C::Asymmetric),
        ("tf_crop_and_resize", C::TfCropAndResize),
    ];
    if l.opset >= 19 {
        transforms.push(("half_pixel_symmetric", C::HalfPixelSymmetric));
    }
    let a = l.attrs();
    let nearest = [
        ("round_prefer_floor", N::RoundPreferFloor),
        ("round_prefer_ceil", N::RoundPreferCeil),
        ("floor", N::Floor),
        ("ceil", N::Ceil),
    ];
    let modes = [("nearest", M::Nearest), ("linear", M::Linear), ("cubic", M::Cubic)];
    let policies = [("stretch", K::Stretch), ("not_larger", K::NotLarger), ("not_smaller", K::NotSmaller)];
    let attrs = op::Resize {
        antialias: a.bool_or("antialias", false)?,
        axes: a.ints("axes")?,
        coordinate_transformation_mode: a.choice(
            "coordinate_transformation_mode",
            C::HalfPixel,
            &transforms,
        )?,
        cubic_coeff_a: a.float_or("cubic_coeff_a", -0.75)?,
        exclude_outside: a.bool_or("exclude_outside", false)?,
        extrapolation_value: a.float_or("extrapolation_value", 0.0)?,
        keep_aspect_ratio_policy: a.choice("keep_aspect_ratio_policy", K::Stretch, &policies)?,
        mode: a.choice("mode", M::Nearest, &modes)?,
        nearest_mode: a.choice("nearest_mode", N::RoundPreferFloor, &nearest)?,
    };
    l.emit(Op::Resize(attrs))
}

/// Deprecated `Upsample(X, scales)` as `Resize(X, -, scales)`: output coordinate `o` reads input
/// `o / scale` (asymmetric), nearest rounds down.
pub(crate) fn upsample(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::ResizeMode as M;
    if l.attrs().has("scales") {
        return Err(l
            .attrs()
            .invalid("scales", "the opset-7 scales attribute is not supported; use input 1"));
    }
    let mode = l.attrs().choice("mode", M::Nearest, &[("nearest", M::Nearest), ("linear", M::Linear)])?;
    let (x, scales) = (l.required_input(0)?, l.required_input(1)?);
    if l.n_inputs() > 2 {
        return Err(l.invalid("takes exactly two inputs (X, scales)"));
    }
    let attrs = op::Resize {
        coordinate_transformation_mode: op::CoordinateTransformationMode::Asymmetric,
        mode,
        nearest_mode: op::NearestMode::Floor,
        ..op::Resize::default()
    };
    l.emit_with_inputs(Op::Resize(attrs), vec![Some(x), None, Some(scales)])
}

/// `Reshape` (`allowzero` from 14).
pub(crate) fn reshape(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let allowzero = l.attrs().bool_or("allowzero", false)?;
    l.emit(Op::Reshape(op::Reshape { allowzero }))
}

/// `Flatten`.
pub(crate) fn flatten(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", 1)?;
    l.emit(Op::Flatten(op::Flatten { axis }))
}

/// Legacy `axes` attribute before opset 13 (`required` for Unsqueeze), input 1 after.
fn legacy_axes(l: &Lower<'_, '_>, required: bool) -> Result<Option<Vec<i64>>, OnnxError> {
    if l.opset >= 13 {
        l.no_attr("axes", 13)?;
        return Ok(None);
    }
    l.no_inputs_from(1, "axes is an attribute before opset 13")?;
    let a = l.attrs();
    match a.ints("axes")? {
        None if required => Err(a.error("axes", AttrIssue::Missing)),
        axes => Ok(axes),
    }
}

/// `Squeeze`.
pub(crate) fn squeeze(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axes = legacy_axes(l, false)?;
    l.emit(Op::Squeeze(op::Squeeze { axes }))
}

/// `Unsqueeze`.
pub(crate) fn unsqueeze(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axes = legacy_axes(l, true)?;
    l.emit(Op::Unsqueeze(op::Unsqueeze { axes }))
}

/// `Transpose` (absent `perm` reverses the axes).
pub(crate) fn transpose(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let perm = if a.has("perm") { Some(a.usizes("perm")?) } else { None };
    l.emit(Op::Transpose(op::Transpose { perm }))
}

fn blocksize(a: &Attrs<'_>) -> Result<usize, OnnxError> {
    match a.required("blocksize", a.usize("blocksize")?)? {
        0 => Err(a.invalid("blocksize", "must be at least 1")),
        b => Ok(b),
    }
}

/// `DepthToSpace`.
pub(crate) fn depth_to_space(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::DepthToSpaceMode as M;
    let a = l.attrs();
    let attrs = op::DepthToSpace {
        blocksize: blocksize(&a)?,
        mode: a.choice("mode", M::Dcr, &[("DCR", M::Dcr), ("CRD", M::Crd)])?,
    };
    l.emit(Op::DepthToSpace(attrs))
}

/// `SpaceToDepth` (opset 28's `mode` must be DCR: the planner op has no CRD order).
pub(crate) fn space_to_depth(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    a.choice("mode", (), &[("DCR", ())])?;
    let blocksize = blocksize(&a)?;
    l.emit(Op::SpaceToDepth(op::SpaceToDepth { blocksize }))
}

/// `Trilu` (input 1 is the diagonal offset).
pub(crate) fn trilu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let upper = l.attrs().bool_or("upper", true)?;
    l.emit(Op::Trilu(op::Trilu { upper }))
}

/// `Shape` (`start`/`end` from 15).
pub(crate) fn shape(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::ShapeOf { start: a.int_or("start", 0)?, end: a.int("end")? };
    l.emit(Op::Shape(attrs))
}

/// `Constant`, as an initializer. Exactly one `value*` attribute must be set; sparse and string
/// values are rejected.
pub(crate) fn constant(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    const FORMS: [&str; 8] = [
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
        "sparse_value",
        "value_string",
        "value_strings",
    ];
    let a = l.attrs();
    let set: Vec<&str> = FORMS.into_iter().filter(|f| a.has(f)).collect();
    let form = match set.as_slice() {
        [] => return Err(a.error("value", AttrIssue::Missing)),
        [one] => *one,
        many => return Err(l.invalid(format!("sets {many:?}; exactly one value attribute is allowed"))),
    };
    let bad = |e: planner::PlanError| a.invalid(form, e.to_string());
    let value = match form {
        "value" => a.required(form, l.tensor_attr(form)?)?,
        "value_float" => ConstTensor::scalar_f32(a.required(form, a.float(form)?)?),
        "value_int" => ConstTensor::scalar_i64(a.required(form, a.int(form)?)?),
        "value_floats" => {
            let v = a.required(form, a.floats(form)?)?;
            ConstTensor::from_f32(&[v.len()], &v).map_err(bad)?
        }
        "value_ints" => {
            let v = a.required(form, a.ints(form)?)?;
            ConstTensor::from_i64(&[v.len()], &v).map_err(bad)?
        }
        _ => return Err(a.invalid(form, "sparse and string constants are not supported")),
    };
    l.define_constant(value)
}

/// `ConstantOfShape`: `value` must hold one element (default: f32 zero).
pub(crate) fn constant_of_shape(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = match l.tensor_attr("value")? {
        None => op::ConstantOfShape::default(),
        Some(value) if value.elems() == 1 => op::ConstantOfShape { value },
        Some(value) => {
            let detail = format!("must hold one element, holds {}", value.elems());
            return Err(l.attrs().invalid("value", detail));
        }
    };
    l.emit(Op::ConstantOfShape(attrs))
}

/// `OneHot`.
pub(crate) fn one_hot(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let axis = l.attrs().int_or("axis", -1)?;
    l.emit(Op::OneHot(op::OneHot { axis }))
}

/// `TopK`: k is input 1 at every supported opset.
pub(crate) fn top_k(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    l.no_attr("k", 10)?;
    let a = l.attrs();
    let attrs = op::TopK {
        axis: a.int_or("axis", -1)?,
        largest: a.bool_or("largest", true)?,
        sorted: a.bool_or("sorted", true)?,
        k: None,
    };
    l.emit(Op::TopK(attrs))
}

/// `EyeLike` (opset 9): `dtype` and `k`.
pub(crate) fn eye_like(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::EyeLike { dtype: a.dtype("dtype")?, k: a.int_or("k", 0)? };
    l.emit(Op::EyeLike(attrs))
}
