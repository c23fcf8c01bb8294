//! External data that resolves: tensors are read into `raw_data` from files beside the model.

use onnx::builder::tensor_external;
use onnx::proto::ModelProto;
use onnx::proto::tensor_proto::DataLocation;
use onnx::{DataType, ModelBuilder, NodeBuilder, load_bytes, load_path};

use crate::common::{TempDir, f32_bytes};

/// A model whose tensors `w` (offset 0), `b` (offset 48, to end of file), `k` (subfolder) and a
/// Constant attribute inside an `If` branch all live in external files.
fn external_model() -> ModelProto {
    let then_branch = ModelBuilder::new(17)
        .node_with(NodeBuilder::new("Constant", &[], &["t"]).attr_tensor(
            "value",
            tensor_external("", DataType::Float, &[2], "weights.bin", Some(4), Some(8)),
        ))
        .output("t", DataType::Float, &[])
        .build()
        .graph
        .expect("builder always has a graph");
    ModelBuilder::new(17)
        .input("cond", DataType::Bool, &[])
        .initializer(tensor_external("w", DataType::Float, &[4, 3], "weights.bin", None, Some(48)))
        .initializer(tensor_external("b", DataType::Float, &[3], "weights.bin", Some(48), None))
        .initializer(tensor_external("k", DataType::Int64, &[2], "data/k.bin", Some(0), Some(16)))
        .node_with(NodeBuilder::new("If", &["cond"], &["y"]).attr_graph("then_branch", then_branch))
        .output("y", DataType::Float, &[])
        .build()
}

fn write_external_files(dir: &TempDir) -> (Vec<f32>, Vec<f32>) {
    let w: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let b = vec![10.0, 20.0, 30.0];
    let mut weights = f32_bytes(&w);
    weights.extend(f32_bytes(&b));
    dir.write("weights.bin", &weights);
    let k: Vec<u8> = [7i64, -7].iter().flat_map(|v| v.to_le_bytes()).collect();
    dir.write("data/k.bin", &k);
    (w, b)
}

fn check_resolved(model: &onnx::Model, w: &[f32], b: &[f32]) {
    let init = |name| model.initializer(name).unwrap_or_else(|| panic!("initializer {name}"));
    assert_eq!(init("w").raw_data, f32_bytes(w));
    assert_eq!(init("b").raw_data, f32_bytes(b));
    assert_eq!(init("k").raw_data, [7i64, -7].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    for name in ["w", "b", "k"] {
        assert!(init(name).external_data.is_empty());
        assert_eq!(init(name).data_location, DataLocation::Default as i32);
    }
    let then_branch = model.graph().node[0].attribute[0].g.as_ref().expect("then_branch");
    let constant = then_branch.node[0].attribute[0].t.as_ref().expect("value");
    assert_eq!(constant.raw_data, f32_bytes(&w[1..3]));
}

#[test]
fn load_path_reads_external_tensors_everywhere() {
    let dir = TempDir::new("ext-ok");
    let (w, b) = write_external_files(&dir);
    let path = dir.write("model.onnx", &prost::Message::encode_to_vec(&external_model()));
    let model = load_path(&path).expect("load");
    check_resolved(&model, &w, &b);
    // Once resolved, the model is self-contained.
    let reloaded = load_bytes(&model.to_bytes(), None).expect("inline reload");
    assert_eq!(reloaded, model);
}

#[test]
fn load_bytes_with_base_dir_reads_external_tensors() {
    let dir = TempDir::new("ext-bytes");
    let (w, b) = write_external_files(&dir);
    let bytes = prost::Message::encode_to_vec(&external_model());
    let model = load_bytes(&bytes, Some(dir.path())).expect("load");
    check_resolved(&model, &w, &b);
}

#[cfg(unix)]
#[test]
fn symlinks_inside_the_model_folder_are_followed() {
    let dir = TempDir::new("ext-link-in");
    let (w, _) = write_external_files(&dir);
    std::fs::create_dir_all(dir.path().join("links")).expect("mkdir");
    std::os::unix::fs::symlink(dir.path().join("weights.bin"), dir.path().join("links/w.bin"))
        .expect("symlink");
    let model = ModelBuilder::new(17)
        .initializer(tensor_external("w", DataType::Float, &[4, 3], "links/w.bin", None, Some(48)))
        .build();
    let path = dir.write("model.onnx", &prost::Message::encode_to_vec(&model));
    let loaded = load_path(&path).expect("load");
    assert_eq!(loaded.initializer("w").expect("w").raw_data, f32_bytes(&w));
}

#[test]
fn checksum_and_unknown_keys_are_ignored() {
    let dir = TempDir::new("ext-keys");
    dir.write("w.bin", &f32_bytes(&[1.0, 2.0]));
    let mut tensor = tensor_external("w", DataType::Float, &[2], "w.bin", None, None);
    for (key, value) in [("checksum", "da39a3ee"), ("basepath", "ignored")] {
        tensor
            .external_data
            .push(onnx::proto::StringStringEntryProto { key: key.into(), value: value.into() });
    }
    let bytes = ModelBuilder::new(17).initializer(tensor).to_bytes();
    let model = load_bytes(&bytes, Some(dir.path())).expect("load");
    assert_eq!(model.initializer("w").expect("w").raw_data, f32_bytes(&[1.0, 2.0]));
}
