//! Reference neural-network and sequence operators: matrix products, convolution, pooling,
//! normalization, softmax, attention, resize, the ONNX recurrent layers and the state-space
//! operators of OPS.md.
//!
//! Every op has the signature `fn(node, attrs, inputs) -> Result<Vec<HostTensor>, HostError>`,
//! returns all of its ONNX outputs in order, computes in f64 and rounds once to the output dtype.

mod attention;
mod blocks;
mod conv;
mod conv_transpose;
mod deform_conv;
mod dft;
mod einsum;
mod flex_attention;
mod grid_sample;
mod linear_attention;
mod loss;
mod matmul;
mod ml;
mod norm;
mod normalize;
mod operand;
mod pool;
mod quant;
mod resize;
mod rnn;
mod roi_align;
mod rotary;
mod select;
mod sequence;
mod softmax;
#[cfg(test)]
mod testing;
mod training;
mod tree;
mod unpool;
mod window;

pub use attention::attention;
pub use blocks::{center_crop_pad, col2im, tensor_scatter};
pub use conv::conv;
pub use conv_transpose::conv_transpose;
pub use deform_conv::deform_conv;
pub use dft::{dft, stft};
pub use einsum::einsum;
pub use flex_attention::flex_attention;
pub use grid_sample::{affine_grid, grid_sample};
pub use linear_attention::linear_attention;
pub use loss::{negative_log_likelihood_loss, softmax_cross_entropy_loss};
pub use matmul::{gemm, matmul};
pub use ml::{array_feature_extractor, binarizer, tf_idf_vectorizer};
pub use norm::{
    batch_normalization, group_normalization, instance_normalization, layer_normalization, rms_normalization,
};
pub use normalize::{det, lp_normalization, lrn};
pub use pool::{average_pool, global_average_pool, global_max_pool, lp_pool, max_pool};
pub use quant::{
    conv_integer, dequantize_linear, dynamic_quantize_linear, matmul_integer, qlinear_conv, qlinear_matmul,
    quantize_linear,
};
pub use resize::resize;
pub use rnn::{gru, lstm, rnn};
pub use roi_align::roi_align;
pub use rotary::rotary_embedding;
pub use select::{compress, non_max_suppression, reverse_sequence, unique};
pub use sequence::{
    causal_conv_with_state, griffin_rglru, linear_scan, mamba_scan, rglru, rwkv_wkv6, selective_scan,
    ssd_scan, wkv6,
};
pub use softmax::{hardmax, log_softmax, softmax};
pub use training::{adagrad, adam, momentum};
pub use tree::tree_ensemble;
pub use unpool::max_unpool;

#[cfg(test)]
mod tests {
    use half::{bf16, f16};
    use planner::DType;
    use planner::op::{LayerNormalization, SsdScan};

    use super::*;
    use crate::reference::nn::testing::{assert_close, assert_meta, node, vals};
    use crate::tensor::HostTensor;

    #[test]
    fn half_inputs_accumulate_in_f64_and_round_once() {
        // In f16, 1 + 2^-11 rounds back to 1 (ties to even) twice; the exact sum 1 + 2^-10 is an f16.
        let h = |v: &[f64]| v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>();
        let a = HostTensor::new(vec![1, 3], h(&[1.0, 2f64.powi(-11), 2f64.powi(-11)])).unwrap();
        let b = HostTensor::new(vec![3, 1], h(&[1.0, 1.0, 1.0])).unwrap();
        let y = matmul(&node("MatMul"), &(), &[Some(&a), Some(&b)]).unwrap();
        assert_meta(&y[0], &[1, 1], DType::F16);
        assert_eq!(vals(&y[0]), [1.0 + 2f64.powi(-10)]);
        let x = HostTensor::new(vec![1, 2], vec![bf16::from_f32(1.0), bf16::from_f32(3.0)]).unwrap();
        let s = HostTensor::new(vec![2], vec![bf16::from_f32(1.0); 2]).unwrap();
        let attrs =
            LayerNormalization { epsilon: 0.0, stash_type: DType::F32, ..LayerNormalization::default() };
        let out =
            layer_normalization(&node("LayerNormalization"), &attrs, &[Some(&x), Some(&s), None]).unwrap();
        assert_meta(&out[0], &[1, 2], DType::BF16);
        assert_meta(&out[1], &[1, 1], DType::F32);
        assert_eq!(vals(&out[0]), [-1.0, 1.0]);
    }

    #[test]
    fn sequence_states_are_f32_whatever_the_input_dtype() {
        let b16 = |shape: &[usize], v: f32| {
            let n = shape.iter().product();
            HostTensor::new(shape.to_vec(), vec![bf16::from_f32(v); n]).unwrap()
        };
        let ins = [
            b16(&[1, 2, 1, 1], 1.0),
            b16(&[1, 2, 1], 0.5),
            b16(&[1], -1.0),
            b16(&[1, 2, 1, 1], 1.0),
            b16(&[1, 2, 1, 1], 1.0),
        ];
        let opts: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        let out = ssd_scan(&node("SSDScan"), &SsdScan::default(), &opts).unwrap();
        assert_meta(&out[0], &[1, 2, 1, 1], DType::BF16);
        assert_meta(&out[1], &[1, 1, 1, 1], DType::F32);
        let s1 = 0.5;
        let s2 = (-0.5f64).exp() * s1 + 0.5;
        assert_close(&vals(&out[1]), &[s2], 1e-6);
        assert_eq!(vals(&out[0]), [s1, bf16::from_f64(s2).to_f64()]);
    }
}
