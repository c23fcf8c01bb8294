//! Every rejection the loader promises: unsafe or broken external data, size mismatches,
//! limits and structurally empty models. Each error names the tensor involved.

use onnx::builder::{tensor_external, tensor_raw};
use onnx::proto::{StringStringEntryProto, TensorProto};
use onnx::{
    DataType, ExternalDataReason as Reason, LoadLimits, ModelBuilder, NodeBuilder, OnnxError, TensorIssue,
    load_bytes, load_bytes_with, load_path, load_path_with,
};

use crate::common::{TempDir, external_reason, f32_bytes, tensor_issue};

/// Writes a model with the single initializer `tensor` (and `w.bin` holding 4 floats) and loads it.
fn load_with(dir: &TempDir, tensor: TensorProto, limits: &LoadLimits) -> Result<onnx::Model, OnnxError> {
    dir.write("w.bin", &f32_bytes(&[1.0, 2.0, 3.0, 4.0]));
    let path = dir.write("model.onnx", &ModelBuilder::new(17).initializer(tensor).to_bytes());
    load_path_with(&path, limits)
}

fn load_one(tag: &str, tensor: TensorProto) -> OnnxError {
    let dir = TempDir::new(tag);
    load_with(&dir, tensor, &LoadLimits::default()).expect_err("must be rejected")
}

fn ext(location: &str, offset: Option<u64>, length: Option<u64>) -> TensorProto {
    tensor_external("w", DataType::Float, &[4], location, offset, length)
}

#[test]
fn absolute_location() {
    let dir = TempDir::new("abs-target");
    let target = dir.write("w.bin", &f32_bytes(&[1.0; 4]));
    let location = target.to_str().expect("utf-8 temp path");
    let reason = external_reason(load_one("abs", ext(location, None, None)), "w");
    assert!(matches!(reason, Reason::AbsoluteLocation { .. }), "{reason:?}");
}

#[test]
fn parent_dir_location() {
    for location in ["../w.bin", "sub/../w.bin", "sub/../../etc/passwd"] {
        let reason = external_reason(load_one("dotdot", ext(location, None, None)), "w");
        assert!(matches!(reason, Reason::ParentDirLocation { .. }), "{location}: {reason:?}");
    }
}

#[cfg(unix)]
#[test]
fn symlinks_escaping_the_model_folder() {
    let outside = TempDir::new("outside");
    outside.write("secret.bin", &f32_bytes(&[9.0; 4]));
    let dir = TempDir::new("escape");
    std::os::unix::fs::symlink(outside.path().join("secret.bin"), dir.path().join("file-link.bin"))
        .expect("symlink");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("dir-link")).expect("symlink");
    for location in ["file-link.bin", "dir-link/secret.bin"] {
        let err = load_with(&dir, ext(location, None, None), &LoadLimits::default()).expect_err("escape");
        let reason = external_reason(err, "w");
        assert!(matches!(reason, Reason::EscapesModelDir { .. }), "{location}: {reason:?}");
    }
}

#[test]
fn offset_and_length_beyond_the_file() {
    // w.bin holds 16 bytes.
    for (offset, length) in
        [(Some(17), None), (Some(8), Some(16)), (None, Some(17)), (Some(u64::MAX), Some(1))]
    {
        let reason = external_reason(load_one("oob", ext("w.bin", offset, length)), "w");
        assert!(
            matches!(reason, Reason::OutOfBounds { file_bytes: 16, .. }),
            "{offset:?}+{length:?}: {reason:?}"
        );
    }
}

#[test]
fn external_data_without_a_base_dir() {
    let bytes = ModelBuilder::new(17).initializer(ext("w.bin", None, None)).to_bytes();
    let reason = external_reason(load_bytes(&bytes, None).expect_err("no base dir"), "w");
    assert!(matches!(reason, Reason::NoBaseDir), "{reason:?}");
}

#[test]
fn missing_file_directory_and_bad_base_dir() {
    let reason = external_reason(load_one("missing", ext("nope.bin", None, None)), "w");
    assert!(matches!(reason, Reason::Open { .. }), "{reason:?}");

    let dir = TempDir::new("is-dir");
    std::fs::create_dir_all(dir.path().join("sub")).expect("mkdir");
    let err = load_with(&dir, ext("sub", None, None), &LoadLimits::default()).expect_err("dir");
    assert!(matches!(external_reason(err, "w"), Reason::NotAFile { .. }));
    let err = load_with(&dir, ext(".", None, None), &LoadLimits::default()).expect_err("the folder itself");
    assert!(matches!(external_reason(err, "w"), Reason::NotAFile { .. }));
    #[cfg(unix)]
    {
        // A FIFO would block a reader forever; it must be refused before it is opened.
        let status = std::process::Command::new("mkfifo").arg(dir.path().join("pipe")).status();
        assert!(status.is_ok_and(|s| s.success()), "mkfifo failed");
        let err = load_with(&dir, ext("pipe", None, None), &LoadLimits::default()).expect_err("fifo");
        assert!(matches!(external_reason(err, "w"), Reason::NotAFile { .. }));
        let err = load_path(&dir.path().join("pipe")).expect_err("fifo model");
        assert!(matches!(err, OnnxError::Io { .. }), "{err:?}");
    }

    let bytes = ModelBuilder::new(17).initializer(ext("w.bin", None, None)).to_bytes();
    let gone = dir.path().join("does-not-exist");
    let err = load_bytes(&bytes, Some(&gone)).expect_err("bad base");
    assert!(matches!(external_reason(err, "w"), Reason::BaseDir { .. }));
}

#[test]
fn malformed_entries() {
    let entry = |key: &str, value: &str| StringStringEntryProto { key: key.into(), value: value.into() };
    let mut no_location = ext("w.bin", None, None);
    no_location.external_data.clear();
    let mut empty_location = ext("", None, None);
    empty_location.external_data.push(entry("offset", "0"));
    let mut bad_offset = ext("w.bin", None, None);
    bad_offset.external_data.push(entry("offset", "-4"));
    let mut bad_length = ext("w.bin", None, None);
    bad_length.external_data.push(entry("length", "16 bytes"));
    let mut twice = ext("w.bin", Some(0), None);
    twice.external_data.push(entry("offset", "0"));

    type Expected = fn(&Reason) -> bool;
    let cases: [(TensorProto, Expected); 5] = [
        (no_location, |r| matches!(r, Reason::MissingLocation)),
        (empty_location, |r| matches!(r, Reason::MissingLocation)),
        (bad_offset, |r| matches!(r, Reason::InvalidEntry { key, .. } if key == "offset")),
        (bad_length, |r| matches!(r, Reason::InvalidEntry { key, .. } if key == "length")),
        (twice, |r| matches!(r, Reason::DuplicateEntry { key } if key == "offset")),
    ];
    for (tensor, expected) in cases {
        let reason = external_reason(load_one("entries", tensor), "w");
        assert!(expected(&reason), "{reason:?}");
    }
}

#[test]
fn external_string_tensor() {
    let tensor = tensor_external("w", DataType::String, &[1], "w.bin", None, None);
    assert!(matches!(external_reason(load_one("string", tensor), "w"), Reason::StringTensor));
}

#[test]
fn byte_count_must_match_dims_and_dtype() {
    // External: 16 bytes present, [4, 2] floats need 32.
    let tensor = tensor_external("w", DataType::Float, &[4, 2], "w.bin", None, None);
    let issue = tensor_issue(load_one("mismatch", tensor), "w");
    assert_eq!(
        issue,
        TensorIssue::ByteLenMismatch {
            data_type: "FLOAT",
            dims: vec![4, 2],
            expected_bytes: 32,
            actual_bytes: 16
        }
    );
    // Inline raw_data, unnamed Constant attribute: the error says where the tensor sits.
    let constant = tensor_raw("", DataType::Int64, &[2], vec![0; 12]);
    let bytes = ModelBuilder::new(17)
        .node_with(NodeBuilder::new("Constant", &[], &["c"]).name("const0").attr_tensor("value", constant))
        .to_bytes();
    let err = load_bytes(&bytes, None).expect_err("mismatch");
    let issue = tensor_issue(err, "<node 'const0' (Constant) attribute 'value'>");
    assert!(matches!(issue, TensorIssue::ByteLenMismatch { expected_bytes: 16, actual_bytes: 12, .. }));
}

#[test]
fn bad_dims_and_data_types() {
    let cases = [
        (tensor_raw("t", DataType::Float, &[2, -1], vec![0; 8]), "negative"),
        (tensor_raw("t", DataType::Float, &[i64::MAX, 3], vec![0; 8]), "overflow"),
        (tensor_raw("t", DataType::Undefined, &[2], vec![0; 8]), "undefined"),
    ];
    for (tensor, what) in cases {
        let err = load_bytes(&ModelBuilder::new(17).initializer(tensor).to_bytes(), None).expect_err(what);
        let issue = tensor_issue(err, "t");
        let ok = match what {
            "negative" => matches!(issue, TensorIssue::NegativeDim { .. }),
            "overflow" => matches!(issue, TensorIssue::CountOverflow { .. }),
            _ => matches!(issue, TensorIssue::UnknownDataType { data_type: 0 }),
        };
        assert!(ok, "{what}: {issue:?}");
    }
    let mut future = tensor_raw("t", DataType::Float, &[1], vec![0; 4]);
    future.data_type = 999;
    let err = load_bytes(&ModelBuilder::new(17).initializer(future).to_bytes(), None).expect_err("999");
    assert_eq!(tensor_issue(err, "t"), TensorIssue::UnknownDataType { data_type: 999 });
}

#[test]
fn size_limits() {
    let tight = |max_model_bytes, max_tensor_bytes, max_external_bytes| LoadLimits {
        max_model_bytes,
        max_tensor_bytes,
        max_external_bytes,
    };
    let dir = TempDir::new("limits");
    let err = load_with(&dir, ext("w.bin", None, None), &tight(1 << 20, 15, 1 << 20)).expect_err("tensor");
    assert_eq!(tensor_issue(err, "w"), TensorIssue::TooLarge { bytes: 16, limit_bytes: 15 });

    let err = load_with(&dir, ext("w.bin", None, None), &tight(1 << 20, 1 << 20, 8)).expect_err("total");
    let reason = external_reason(err, "w");
    assert!(matches!(reason, Reason::TotalTooLarge { total_bytes: 16, limit_bytes: 8 }), "{reason:?}");

    let inline = tensor_raw("big", DataType::Uint8, &[64], vec![0; 64]);
    let bytes = ModelBuilder::new(17).initializer(inline).to_bytes();
    let err = load_bytes_with(&bytes, None, &tight(1 << 20, 63, 0)).expect_err("inline");
    assert_eq!(tensor_issue(err, "big"), TensorIssue::TooLarge { bytes: 64, limit_bytes: 63 });

    let small = tight(10, 1 << 20, 1 << 20);
    let err = load_bytes_with(&bytes, None, &small).expect_err("model bytes");
    assert!(matches!(err, OnnxError::ModelTooLarge { path: None, limit_bytes: 10, .. }), "{err:?}");
    let path = dir.write("big.onnx", &bytes);
    let err = load_path_with(&path, &small).expect_err("model file");
    assert!(matches!(err, OnnxError::ModelTooLarge { path: Some(_), limit_bytes: 10, .. }), "{err:?}");
}

#[test]
fn structurally_empty_models_and_missing_files() {
    assert!(matches!(load_bytes(&[], None), Err(OnnxError::MissingGraph)));
    let mut no_ir = ModelBuilder::new(17).build();
    no_ir.ir_version = 0;
    let err = load_bytes(&prost::Message::encode_to_vec(&no_ir), None).expect_err("ir");
    assert!(matches!(err, OnnxError::MissingIrVersion { ir_version: 0 }));
    let dir = TempDir::new("nofile");
    let err = load_path(&dir.path().join("absent.onnx")).expect_err("absent");
    assert!(matches!(err, OnnxError::Io { .. }), "{err:?}");
    let err = load_path(dir.path()).expect_err("a directory is not a model");
    assert!(matches!(err, OnnxError::Io { .. }), "{err:?}");
}

#[test]
fn messages_name_the_tensor() {
    let err = load_one("message", ext("../w.bin", None, None));
    assert_eq!(err.to_string(), "tensor 'w': external data: location '../w.bin' contains '..'");
}
