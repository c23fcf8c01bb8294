//! Pooling tests: ONNX backend-test cases computed by hand, plus consistency between the ops.

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

fn ramp(h: usize, w: usize) -> HostTensor {
    tf(&[1, 1, h, w], &(1..=h * w).map(|v| v as f64).collect::<Vec<_>>())
}

fn maxp(attrs: &MaxPool, x: &HostTensor) -> (HostTensor, HostTensor) {
    let mut out = max_pool(&node("MaxPool"), attrs, &[Some(x)]).unwrap();
    let idx = out.remove(1);
    (out.remove(0), idx)
}

fn avgp(attrs: &AveragePool, x: &HostTensor) -> HostTensor {
    average_pool(&node("AveragePool"), attrs, &[Some(x)]).unwrap().remove(0)
}

#[test]
fn maxpool_pads_strides_ceil_and_dilations() {
    let (y, idx) =
        maxp(&MaxPool { kernel_shape: vec![5, 5], pads: vec![2; 4], ..MaxPool::default() }, &ramp(5, 5));
    let row = |a: f64| [a, a + 1., a + 2., a + 2., a + 2.];
    assert_eq!(vals(&y), [row(13.), row(18.), row(23.), row(23.), row(23.)].concat());
    assert_eq!(vals(&idx), [row(12.), row(17.), row(22.), row(22.), row(22.)].concat());
    let strided = MaxPool { kernel_shape: vec![2, 2], strides: vec![2, 2], ..MaxPool::default() };
    let (y, idx) = maxp(&strided, &ramp(5, 5));
    assert_eq!(vals(&y), [7., 9., 17., 19.]);
    assert_eq!(vals(&idx), [6., 8., 16., 18.]);
    let (_, idx) = maxp(&MaxPool { storage_order: 1, ..strided }, &ramp(5, 5));
    assert_eq!(vals(&idx), [6., 16., 8., 18.]);
    let ceil =
        MaxPool { kernel_shape: vec![3, 3], strides: vec![2, 2], ceil_mode: true, ..MaxPool::default() };
    assert_eq!(vals(&maxp(&ceil, &ramp(4, 4)).0), [11., 12., 15., 16.]);
    let dil = MaxPool { kernel_shape: vec![2, 2], dilations: vec![2, 2], ..MaxPool::default() };
    assert_eq!(vals(&maxp(&dil, &ramp(4, 4)).0), [11., 12., 15., 16.]);
}

#[test]
fn maxpool_same_upper_and_1d() {
    let same = MaxPool { kernel_shape: vec![2], auto_pad: AutoPad::SameUpper, ..MaxPool::default() };
    let x = tf(&[1, 2, 3], &[1., 5., 2., -1., -3., -2.]);
    let (y, idx) = maxp(&same, &x);
    assert_eq!(y.shape(), &[1, 2, 3]);
    assert_eq!(vals(&y), [5., 5., 2., -1., -2., -2.]);
    assert_eq!(vals(&idx), [1., 1., 2., 3., 5., 5.]);
}

#[test]
fn averagepool_pad_counting_and_ceil() {
    let x = ramp(5, 5);
    let base = AveragePool { kernel_shape: vec![5, 5], pads: vec![2; 4], ..AveragePool::default() };
    let want = [
        7., 7.5, 8., 8.5, 9., 9.5, 10., 10.5, 11., 11.5, 12., 12.5, 13., 13.5, 14., 14.5, 15., 15.5, 16.,
        16.5, 17., 17.5, 18., 18.5, 19.,
    ];
    assert_close(&vals(&avgp(&base, &x)), &want, 1e-6);
    // Window sums over the in-bounds part, divided by all 25 taps (e.g. (1,4): rows 0..3, cols 2..4).
    let inc = AveragePool { count_include_pad: true, ..base };
    let want = [
        2.52, 3.6, 4.8, 4.08, 3.24, 4.56, 6.4, 8.4, 7.04, 5.52, 7.2, 10., 13., 10.8, 8.4, 6.96, 9.6, 12.4,
        10.24, 7.92, 6.12, 8.4, 10.8, 8.88, 6.84,
    ];
    assert_close(&vals(&avgp(&inc, &x)), &want, 1e-6);
    let ceil = AveragePool {
        kernel_shape: vec![3, 3],
        strides: vec![2, 2],
        ceil_mode: true,
        ..AveragePool::default()
    };
    assert_close(&vals(&avgp(&ceil, &ramp(4, 4))), &[6., 7.5, 12., 13.5], 1e-6);
    // The overhang never counts, even with count_include_pad.
    let ceil_inc = AveragePool { count_include_pad: true, ..ceil };
    assert_close(&vals(&avgp(&ceil_inc, &ramp(4, 4))), &[6., 7.5, 12., 13.5], 1e-6);
}

#[test]
fn lppool_is_the_p_norm_of_each_window() {
    let x = tf(&[1, 1, 4], &[3., -4., 0., 1.]);
    let attrs = LpPool { kernel_shape: vec![2], strides: vec![2], ..LpPool::default() };
    let y = lp_pool(&node("LpPool"), &attrs, &[Some(&x)]).unwrap().remove(0);
    assert_close(&vals(&y), &[5., 1.], 1e-6);
    let l1 = LpPool { p: 1, kernel_shape: vec![3], ..LpPool::default() };
    let y = lp_pool(&node("LpPool"), &l1, &[Some(&x)]).unwrap().remove(0);
    assert_close(&vals(&y), &[7., 5.], 1e-6);
}

#[test]
fn global_pools_equal_full_window_pools() {
    let mut rng = Rng::new(9);
    for _ in 0..10 {
        let shape = [rng.int(1, 2), rng.int(1, 3), rng.int(1, 4), rng.int(1, 4)];
        let x = tf(&shape, &rng.vec(shape.iter().product(), -3.0, 3.0));
        let g_avg = global_average_pool(&node("GlobalAveragePool"), &(), &[Some(&x)]).unwrap().remove(0);
        let g_max = global_max_pool(&node("GlobalMaxPool"), &(), &[Some(&x)]).unwrap().remove(0);
        assert_eq!(g_avg.shape(), &[shape[0], shape[1], 1, 1]);
        let k = shape[2..].to_vec();
        let avg = avgp(&AveragePool { kernel_shape: k.clone(), ..AveragePool::default() }, &x);
        let (max, _) = maxp(&MaxPool { kernel_shape: k, ..MaxPool::default() }, &x);
        assert_close(&vals(&g_avg), &vals(&avg), 1e-6);
        assert_eq!(vals(&g_max), vals(&max));
    }
}

#[test]
fn rejects_missing_kernel_and_low_rank() {
    assert!(max_pool(&node("MaxPool"), &MaxPool::default(), &[Some(&ramp(2, 2))]).is_err());
    let flat = tf(&[4], &[0.; 4]);
    assert!(global_average_pool(&node("GlobalAveragePool"), &(), &[Some(&flat)]).is_err());
}
