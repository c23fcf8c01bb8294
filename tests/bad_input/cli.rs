//! What a careful user meets at the command line: input files that are not regular files, a
//! closed stdout, a model with no outputs, `--bind` names that bind nothing, outputs whose file
//! names would clash.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use host::HostTensor;
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};

use super::{Encode, cli, cli_fails, path_str, scratch, small_model, support};

/// Writes `bytes` to `dir/m.onnx` and `x` to `dir/x.npy`; returns both paths.
fn model_and_input(dir: &Path, bytes: Vec<u8>, x: &HostTensor) -> (PathBuf, PathBuf) {
    let (path, npy) = (dir.join("m.onnx"), dir.join("x.npy"));
    std::fs::write(&path, bytes).expect("writing the model");
    std::fs::write(&npy, host::npy::write(x)).expect("writing the input");
    (path, npy)
}

#[test]
fn input_files_must_be_regular_files() {
    let dir = scratch("special-inputs");
    let model = dir.join("m.onnx");
    std::fs::write(&model, small_model().bytes()).expect("writing");
    let m = path_str(&model);
    // A character device that reads without end, and a folder: refused before reading.
    for special in ["/dev/zero", path_str(&dir)] {
        let start = std::time::Instant::now();
        let stderr = cli_fails(&["run", m, "--input", &format!("x={special}"), "--device", "cpu"]);
        assert!(stderr.contains("not a regular file") && stderr.contains("`x`"), "{stderr}");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
    // A FIFO nothing writes to: refused without opening it (opening would block).
    let fifo = dir.join("fifo.npy");
    let made = Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    if made {
        let stderr = cli_fails(&["run", m, "--input", &format!("x={}", path_str(&fifo)), "--device", "cpu"]);
        assert!(stderr.contains("not a regular file"), "{stderr}");
    }
}

#[test]
fn a_closed_stdout_ends_the_output_without_a_panic() {
    let out = Command::new(support::ferrofuse_bin())
        .args(["inspect", path_str(&support::repo_dir().join("models/demo/physics_mlp.onnx"))])
        .args(["--plan", "--bind", "batch=4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ferrofuse");
    // Close the reading end at once, as `| head -0` would.
    let mut child = out;
    drop(child.stdout.take());
    let status = child.wait().expect("waits");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr).expect("reads");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Either it finished before noticing, or SIGPIPE ended it (no exit code), never exit 101.
    assert_ne!(status.code(), Some(101), "{stderr}");
}

#[test]
fn a_model_without_outputs_is_an_error() {
    let dir = scratch("no-outputs");
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Relu", &["x"], &["y"]).name("act"))
        .bytes();
    let (path, npy) = model_and_input(&dir, bytes, &HostTensor::new(vec![2], vec![1f32, 2.0]).expect("t"));
    let stderr = cli_fails(&["run", path_str(&path), "--input", &format!("x={}", path_str(&npy))]);
    assert!(stderr.contains("no graph outputs"), "{stderr}");
}

/// `--dump-steps` writes the GPU plan's step values; on the CPU reference, which has no plan, it
/// is an error saying so, not an option silently ignored.
#[test]
fn dump_steps_on_the_cpu_is_an_error() {
    let dir = scratch("dump-cpu");
    let stderr = cli_fails(&["run", "--device", "cpu", "--dump-steps", path_str(&dir)]);
    assert!(stderr.contains("--dump-steps") && stderr.contains("CPU reference"), "{stderr}");
}

#[test]
fn bind_names_that_bind_nothing_or_twice_are_warned_about() {
    let demo = support::repo_dir().join("models/demo/physics_mlp.onnx");
    let (code, _, stderr) = cli(&[
        "inspect",
        path_str(&demo),
        "--plan",
        "--bind",
        "batch=2",
        "--bind",
        "batch=3",
        "--bind",
        "bacth=1",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("batch given twice") && stderr.contains("using 3"), "{stderr}");
    assert!(stderr.contains("`bacth`") && stderr.contains("its symbols: batch"), "{stderr}");
}

#[test]
fn outputs_whose_names_sanitise_alike_get_files_of_their_own() {
    let dir = scratch("clashing-outputs");
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Relu", &["x"], &["a/b"]).name("r"))
        .node_with(NodeBuilder::new("Neg", &["x"], &["a_b"]).name("n"))
        .output("a/b", DataType::Float, &[Dim::from(2)])
        .output("a_b", DataType::Float, &[Dim::from(2)])
        .bytes();
    let (path, npy) = model_and_input(&dir, bytes, &HostTensor::new(vec![2], vec![-1f32, 2.0]).expect("t"));
    let out = dir.join("out");
    let (code, stdout, stderr) = cli(&[
        "run",
        path_str(&path),
        "--input",
        &format!("x={}", path_str(&npy)),
        "--device",
        "cpu",
        "--out",
        path_str(&out),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let read =
        |f: &str| host::npy::read(&std::fs::read(out.join(f)).expect(f)).expect("npy").data().to_f64s();
    assert_eq!(read("a_b.npy"), [0.0, 2.0], "{stdout}");
    assert_eq!(read("a_b.1.npy"), [1.0, -2.0], "{stdout}");
    assert!(stdout.contains("output `a_b`") && stdout.contains("a_b.1.npy"), "{stdout}");
}

#[test]
fn a_cpu_run_makes_the_planners_checks_too() {
    // The output is declared int64[7, 7]; the Relu computes float[2, 3].
    let dir = scratch("declared-output");
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .node_with(NodeBuilder::new("Relu", &["x"], &["y"]).name("act"))
        .output("y", DataType::Int64, &[Dim::from(7), Dim::from(7)])
        .bytes();
    let (path, npy) = model_and_input(&dir, bytes, &HostTensor::new(vec![2, 3], vec![1f32; 6]).expect("t"));
    let stderr =
        cli_fails(&["run", path_str(&path), "--input", &format!("x={}", path_str(&npy)), "--device", "cpu"]);
    assert!(
        stderr.contains("act") && stderr.contains("mismatch") && stderr.contains("int64[7,7]"),
        "{stderr}"
    );
}
