//! The checked-in demo model is exactly what `ferrofuse::demo::physics_mlp` writes (regenerate with
//! `FERROFUSE_REGENERATE_DEMO=1 cargo test --test demo_model`), and it loads and converts.

mod support;

#[test]
fn checked_in_demo_matches_its_generator() {
    let bytes = ferrofuse::demo::physics_mlp();
    let path = support::repo_dir().join("models/demo/physics_mlp.onnx");
    if std::env::var_os("FERROFUSE_REGENERATE_DEMO").is_some() {
        std::fs::write(&path, &bytes).expect("writing the demo model");
    }
    let on_disk = std::fs::read(&path).expect("reading the demo model");
    assert!(
        on_disk == bytes,
        "{} differs from demo::physics_mlp(); regenerate with FERROFUSE_REGENERATE_DEMO=1",
        path.display()
    );
    assert!(ferrofuse::demo::PHYSICS_MLP_ONNX == bytes.as_slice(), "rebuild: the embedded copy is stale");
}

#[test]
fn demo_loads_and_converts() {
    let model = onnx::load_bytes(ferrofuse::demo::PHYSICS_MLP_ONNX, None).expect("demo loads");
    let graph = onnx::to_graph(&model).expect("demo converts");
    assert_eq!(graph.inputs.len(), 1);
    assert_eq!(graph.nodes.len(), 10);
    planner::shape_infer::infer(&graph).expect("demo shapes infer");
}
