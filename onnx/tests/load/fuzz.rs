//! Robustness: truncated, garbage, mutated, random and deeply nested input yields errors, never
//! a panic, a stack overflow or a huge allocation.

use onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto};
use onnx::{OnnxError, load_bytes};
use proptest::prelude::*;

use crate::common::sample_model;

fn sample_bytes() -> Vec<u8> {
    prost::Message::encode_to_vec(&sample_model())
}

#[test]
fn every_truncation_is_handled_and_mid_field_cuts_fail() {
    let bytes = sample_bytes();
    for len in 0..bytes.len() {
        let _ = load_bytes(&bytes[..len], None);
    }
    let err = load_bytes(&bytes[..bytes.len() - 1], None).expect_err("cut inside the last field");
    assert!(matches!(err, OnnxError::Decode { path: None, .. }), "{err:?}");
}

#[test]
fn garbage_bytes_fail_to_decode() {
    for garbage in [
        &b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..],
        b"not an onnx model",
        &[0x3a, 0xff, 0xff, 0xff, 0x7f],
    ] {
        assert!(load_bytes(garbage, None).is_err(), "{garbage:?}");
    }
}

#[test]
fn deep_subgraph_nesting_is_a_decode_error() {
    let mut graph = GraphProto::default();
    for _ in 0..200 {
        let attribute = AttributeProto { name: "body".into(), g: Some(graph), ..Default::default() };
        let node = NodeProto { op_type: "Loop".into(), attribute: vec![attribute], ..Default::default() };
        graph = GraphProto { node: vec![node], ..Default::default() };
    }
    let model = ModelProto { ir_version: 8, graph: Some(graph), ..Default::default() };
    let bytes = prost::Message::encode_to_vec(&model);
    assert!(matches!(load_bytes(&bytes, None), Err(OnnxError::Decode { .. })));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = load_bytes(&bytes, None);
    }

    #[test]
    fn mutated_models_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)) {
        let mut bytes = sample_bytes();
        for (index, value) in edits {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        let _ = load_bytes(&bytes, None);
    }
}
