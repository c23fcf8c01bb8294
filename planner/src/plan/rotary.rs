//! Lowering of ONNX RotaryEmbedding (`rotary_f32`), with the CPU reference's shape rules: X is
//! `(B, H, S, D)` or `(B, S, H·D)` (`num_heads` given); with position ids the caches are
//! `(rows, r/2)` indexed by position, without them `(B, S, r/2)`, or `(rows, r/2)` indexed by the
//! sequence index; full-width caches (`RotaryEmbedding::full_caches`, from `rotary_lift`)
//! broadcast to `(B, H, S, r)`.

use kernels_gpu::abi::{KernelId, RotaryParams, rotary_mode};

use super::lower::{Lowered, dims};
use super::{Arg, PlanOptions, PlannedValue};
use crate::graph::{NodeId, ValueId};
use crate::op::RotaryEmbedding;
use crate::tensor_info::DType;

/// The launch of RotaryEmbedding `x` (caches `cos`, `sin`, optional `positions`) into `y`.
#[allow(clippy::too_many_arguments)]
pub(super) fn rotary(
    id: NodeId,
    label: String,
    a: &RotaryEmbedding,
    (x, cos, sin, positions): (ValueId, ValueId, ValueId, Option<ValueId>),
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((xd, xt), (cd, ct), (sd, st)) = (dims(values, x)?, dims(values, cos)?, dims(values, sin)?);
    if (xt, ct, st) != (DType::F32, DType::F32, DType::F32) {
        return Err(format!("RotaryEmbedding of {xt} with {ct} caches: the kernel takes f32"));
    }
    if cd != sd {
        return Err(format!("cos_cache {cd:?} and sin_cache {sd:?} differ"));
    }
    let (batch, seq, heads, size, bs, ss, hs) = match (xd, a.num_heads) {
        (&[b, h, s, d], _) => (b, s, h, d, h * s * d, d, s * d),
        (&[b, s, hidden], Some(h)) if h > 0 && hidden % h == 0 => {
            (b, s, h, hidden / h, s * hidden, hidden, hidden / h)
        }
        (other, _) => {
            return Err(format!("X {other:?}: 4-D, or 3-D with num_heads dividing the hidden size"));
        }
    };
    let rot = if a.rotary_embedding_dim == 0 { size } else { a.rotary_embedding_dim };
    if rot % 2 != 0 || rot > size {
        return Err(format!("rotary_embedding_dim {rot} must be even and at most the head size {size}"));
    }
    let half = rot / 2;
    let mut cache_strides = [0u64; 3];
    let (mode, rows) = match (cd, positions) {
        (_, Some(_)) if a.full_caches => return Err("full-width caches take no position ids".into()),
        (c, None) if a.full_caches => {
            let s = RotaryEmbedding::full_cache_strides(c, [batch, heads, seq, rot])?;
            cache_strides = s.map(|v| v as u64);
            (rotary_mode::FULL, 0)
        }
        (&[rows, w], Some(p)) if w == half => {
            let (pd, pt) = dims(values, p)?;
            if pt != DType::I64 || pd.iter().product::<usize>() != batch * seq {
                return Err(format!("position_ids must be (B={batch}, S={seq}) int64, got {pd:?} {pt}"));
            }
            (rotary_mode::POSITIONS, rows)
        }
        (&[rows, w], None) if w == half && seq <= rows => (rotary_mode::SEQUENCE, rows),
        (&[cb, cs, w], None) if w == half && cb == batch && cs == seq => (rotary_mode::PER_TOKEN, 0),
        (c, _) => return Err(format!("caches {c:?} do not fit B={batch}, S={seq}, rotary dim/2={half}")),
    };
    let p = RotaryParams {
        batch: batch as u64,
        seq: seq as u64,
        heads: heads as u64,
        size: size as u64,
        batch_stride: bs as u64,
        seq_stride: ss as u64,
        head_stride: hs as u64,
        rot: rot as u64,
        cache_rows: rows as u64,
        cache_strides,
        mode,
        interleaved: a.interleaved as u32,
    };
    let work = (batch * seq * heads * size) as u64;
    let pos = positions.map_or(Arg::Null, Arg::Value);
    let args = vec![Arg::Value(x), Arg::Value(cos), Arg::Value(sin), pos, Arg::Value(y)];
    Ok(super::movement::step(id, label, KernelId::RotaryF32, &p, work, o, args))
}
