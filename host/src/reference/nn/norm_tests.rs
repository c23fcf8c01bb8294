//! Normalization tests: hand-computed cases, the mean-0/variance-1 property of LayerNormalization
//! and agreement between GroupNormalization and Instance/LayerNormalization at the extremes.

use planner::DType;

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

#[test]
fn batchnorm_inference_uses_the_running_statistics() {
    let x = tf(&[1, 2, 1, 3], &[-1., 0., 1., 2., 3., 4.]);
    let p = |v: &[f64]| tf(&[2], v);
    let (s, b, m, v) = (p(&[1.0, 1.5]), p(&[0.0, 1.0]), p(&[0.0, 3.0]), p(&[1.0, 1.5]));
    let attrs = BatchNormalization::default();
    let out = batch_normalization(
        &node("BatchNormalization"),
        &attrs,
        &[Some(&x), Some(&s), Some(&b), Some(&m), Some(&v)],
    )
    .unwrap();
    assert_eq!(out.len(), 1);
    let d0 = (1.0f64 + 1e-5).sqrt();
    let d1 = (1.5f64 + 1e-5).sqrt();
    let want = [-1. / d0, 0., 1. / d0, -1.5 / d1 + 1., 1., 1.5 / d1 + 1.];
    assert_close(&vals(&out[0]), &want, 1e-6);
}

#[test]
fn batchnorm_training_mode_updates_running_statistics() {
    let x = tf(&[2, 1, 2], &[1., 3., 5., 7.]);
    let one = |v: f64| tf(&[1], &[v]);
    let attrs = BatchNormalization { epsilon: 0.0, momentum: 0.5, training_mode: true };
    let ins = [Some(&x), Some(&one(1.0)), Some(&one(0.0)), Some(&one(2.0)), Some(&one(1.0))];
    let ins: Vec<Option<&HostTensor>> = ins.to_vec();
    let out = batch_normalization(&node("BatchNormalization"), &attrs, &ins).unwrap();
    assert_eq!(out.len(), 3);
    let sd = 5.0f64.sqrt();
    assert_close(&vals(&out[0]), &[-3. / sd, -1. / sd, 1. / sd, 3. / sd], 1e-6);
    assert_close(&vals(&out[1]), &[0.5 * 2.0 + 0.5 * 4.0], 1e-6);
    assert_close(&vals(&out[2]), &[0.5 * 1.0 + 0.5 * 5.0], 1e-6);
}

#[test]
fn instance_norm_normalizes_each_plane() {
    let x = tf(&[1, 2, 3], &[1., 2., 3., 10., 10., 10.]);
    let (s, b) = (tf(&[2], &[2., 1.]), tf(&[2], &[0., 5.]));
    let attrs = InstanceNormalization { epsilon: 1e-10 };
    let y = instance_normalization(&node("InstanceNormalization"), &attrs, &[Some(&x), Some(&s), Some(&b)])
        .unwrap();
    let r = (1.5f64).sqrt() * 2.0;
    assert_close(&vals(&y[0]), &[-r, 0., r, 5., 5., 5.], 1e-6);
}

#[test]
fn layer_norm_rows_have_mean_zero_and_variance_one() {
    let mut rng = Rng::new(17);
    for _ in 0..20 {
        let shape = [rng.int(1, 3), rng.int(1, 4), rng.int(2, 9)];
        let ax = rng.int(1, 2);
        let x = rng.vec(shape.iter().product(), -5.0, 5.0);
        let inner: usize = shape[ax..].iter().product();
        let ones = tf(&shape[ax..], &vec![1.0; inner]);
        let attrs = LayerNormalization { axis: ax as i64 - 3, epsilon: 1e-9, stash_type: DType::F32 };
        let xt = tf(&shape, &x);
        let out = layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&xt), Some(&ones), None])
            .unwrap();
        let y = vals(&out[0]);
        let mut stat_shape = shape[..ax].to_vec();
        stat_shape.extend(std::iter::repeat_n(1, 3 - ax));
        assert_eq!(out[1].shape(), &stat_shape[..]);
        for (r, row) in y.chunks(inner).enumerate() {
            let mean = row.iter().sum::<f64>() / inner as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / inner as f64;
            assert!(mean.abs() < 1e-5, "row {r} mean {mean}");
            assert!((var - 1.0).abs() < 1e-4, "row {r} var {var}");
            let xr = &x[r * inner..(r + 1) * inner];
            let xm = xr.iter().sum::<f64>() / inner as f64;
            assert_close(&[vals(&out[1])[r]], &[xm], 1e-5);
        }
    }
}

#[test]
fn layer_norm_applies_scale_and_bias_and_reports_inv_std() {
    let x = tf(&[1, 2], &[1., 3.]);
    let (s, b) = (tf(&[2], &[2., 3.]), tf(&[2], &[1., -1.]));
    let attrs = LayerNormalization { epsilon: 0.0, ..LayerNormalization::default() };
    let out =
        layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&x), Some(&s), Some(&b)]).unwrap();
    assert_close(&vals(&out[0]), &[-1., 2.], 1e-6);
    assert_close(&vals(&out[1]), &[2.], 1e-6);
    assert_close(&vals(&out[2]), &[1.], 1e-6);
    let bad = tf(&[3], &[1.; 3]);
    assert!(layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&x), Some(&bad), None]).is_err());
}

#[test]
fn group_norm_matches_instance_norm_and_layer_norm_at_the_extremes() {
    let mut rng = Rng::new(23);
    for _ in 0..10 {
        let shape = [rng.int(1, 2), rng.int(1, 4), rng.int(2, 5)];
        let c = shape[1];
        let x = tf(&shape, &rng.vec(shape.iter().product(), -2.0, 2.0));
        let (s, b) = (tf(&[c], &rng.vec(c, 0.5, 2.0)), tf(&[c], &rng.vec(c, -1.0, 1.0)));
        let ins = [Some(&x), Some(&s), Some(&b)];
        let gn = |groups| {
            let a = GroupNormalization { epsilon: 1e-5, num_groups: groups, stash_type: DType::F32 };
            vals(&group_normalization(&node("GroupNormalization"), &a, &ins).unwrap()[0])
        };
        let inst =
            instance_normalization(&node("InstanceNormalization"), &InstanceNormalization::default(), &ins)
                .unwrap();
        assert_close(&gn(c), &vals(&inst[0]), 1e-6);
        // One group: LayerNormalization over axes 1.. with scale/bias expanded per channel.
        let expand = |t: &HostTensor| {
            let v = vals(t);
            tf(&[c, shape[2]], &v.iter().flat_map(|&e| vec![e; shape[2]]).collect::<Vec<_>>())
        };
        let (se, be) = (expand(&s), expand(&b));
        let attrs = LayerNormalization { axis: 1, ..LayerNormalization::default() };
        let ln = layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&x), Some(&se), Some(&be)])
            .unwrap();
        assert_close(&gn(1), &vals(&ln[0]), 1e-6);
    }
}

#[test]
fn rms_norm_divides_by_the_root_mean_square() {
    let x = tf(&[2, 2], &[3., 4., 0., 2.]);
    let s = tf(&[2], &[1., 2.]);
    let attrs = RmsNormalization { epsilon: 0.0, ..RmsNormalization::default() };
    let y = rms_normalization(&node("RMSNormalization"), &attrs, &[Some(&x), Some(&s)]).unwrap();
    let r = 12.5f64.sqrt();
    assert_close(&vals(&y[0]), &[3. / r, 8. / r, 0., 2. * 2. / 2f64.sqrt()], 1e-6);
    let all = RmsNormalization { axis: 0, epsilon: 0.0, ..RmsNormalization::default() };
    let s4 = tf(&[2, 2], &[1.; 4]);
    let y = rms_normalization(&node("RMSNormalization"), &all, &[Some(&x), Some(&s4)]).unwrap();
    let r = (29.0f64 / 4.0).sqrt();
    assert_close(&vals(&y[0]), &[3. / r, 4. / r, 0., 2. / r], 1e-6);
}

#[test]
fn layer_norm_over_an_empty_axis_gives_an_empty_output_and_nan_statistics() {
    let x = tf(&[2, 0], &[]);
    let attrs = LayerNormalization { axis: 1, epsilon: 1e-5, stash_type: DType::F32 };
    let out =
        layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&x), Some(&tf(&[0], &[])), None])
            .expect("normalizing nothing is not an error");
    assert_eq!(out[0].shape(), &[2, 0]);
    assert_eq!(out[1].shape(), &[2, 1]);
    assert!(vals(&out[1]).iter().chain(&vals(&out[2])).all(|v| v.is_nan()));
}
