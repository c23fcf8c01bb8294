//! Run-time inputs: names, dtypes, shapes, corrupt .npy files.

use crate::*;
use host::reference::eval;
use host::{HostError, HostTensor};

#[test]
fn run_time_inputs_are_checked_by_name_dtype_and_shape() {
    let graph = front_end(&small_model().bytes()).expect("valid");
    let good = x_input();
    assert!(eval(&graph, std::slice::from_ref(&good)).is_ok());
    let input_err = |inputs: &[(String, HostTensor)], name: &str, needle: &str| {
        let e = eval(&graph, inputs).expect_err("bad inputs");
        assert!(matches!(&e, HostError::Input { name: n, .. } if n == name), "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    };
    input_err(&[], "x", "missing");
    input_err(&[("q".into(), good.1.clone())], "q", "not an input");
    input_err(&[good.clone(), good.clone()], "x", "more than once");
    let ints = HostTensor::new(vec![2, 3], vec![1i64; 6]).expect("i64");
    input_err(&[("x".into(), ints)], "x", "dtype");
    let wide = HostTensor::new(vec![2, 4], vec![0f32; 8]).expect("2x4");
    input_err(&[("x".into(), wide.clone())], "x", "dim 1 must be 3");
    let flat = HostTensor::new(vec![6], vec![0f32; 6]).expect("6");
    input_err(&[("x".into(), flat)], "x", "shape");

    // The same through the CLI, with .npy files.
    let dir = scratch("inputs");
    let model = dir.join("m.onnx");
    std::fs::write(&model, small_model().bytes()).expect("writing");
    let m = path_str(&model);
    let npy = |name: &str, t: &HostTensor| {
        let p = dir.join(name);
        std::fs::write(&p, host::npy::write(t)).expect("writing npy");
        format!("{}", p.display())
    };
    let ok = npy("ok.npy", &good.1);
    let (code, _, stderr) = cli(&["run", m, "--input", &format!("x={ok}"), "--out", path_str(&dir)]);
    assert_eq!(code, Some(0), "{stderr}");
    let stderr = cli_fails(&["run", m, "--input", &format!("nope={ok}")]);
    assert!(stderr.contains("nope") || stderr.contains("`x`"), "{stderr}");
    let stderr = cli_fails(&["run", m, "--input", &format!("x={ok}"), "--input", &format!("nope={ok}")]);
    assert!(stderr.contains("nope"), "{stderr}");
    let stderr = cli_fails(&["run", m]);
    assert!(stderr.contains('x'), "{stderr}");
    let i64s = npy("ints.npy", &HostTensor::new(vec![2, 3], vec![1i64; 6]).expect("i64"));
    let stderr = cli_fails(&["run", m, "--input", &format!("x={i64s}")]);
    assert!(stderr.contains("`x`") && stderr.contains("dtype"), "{stderr}");
    let wide = npy("wide.npy", &wide);
    let stderr = cli_fails(&["run", m, "--input", &format!("x={wide}")]);
    assert!(stderr.contains("`x`") && stderr.contains("dim 1"), "{stderr}");
}

#[test]
fn corrupt_npy_inputs_name_the_input() {
    let dir = scratch("npy");
    let model = dir.join("m.onnx");
    std::fs::write(&model, small_model().bytes()).expect("writing");
    let good = host::npy::write(&x_input().1);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.npy", Vec::new()),
        ("garbage.npy", noise(3, 300)),
        ("truncated.npy", good[..good.len() - 5].to_vec()),
        ("header.npy", good[..20].to_vec()),
    ];
    for (file, bytes) in cases {
        assert!(host::npy::read(&bytes).is_err(), "{file} parsed");
        let p = dir.join(file);
        std::fs::write(&p, &bytes).expect("writing");
        let stderr = cli_fails(&["run", path_str(&model), "--input", &format!("x={}", path_str(&p))]);
        assert!(stderr.contains("input `x`") && stderr.contains(file), "{file}: {stderr}");
    }
    let stderr = cli_fails(&["run", path_str(&model), "--input", "x=/nonexistent/x.npy"]);
    assert!(stderr.contains("input `x`"), "{stderr}");
    let stderr = cli_fails(&["run", path_str(&model), "--input", "x"]);
    assert!(stderr.contains("NAME=FILE"), "{stderr}");
}

/// [`small_model`] with its weight `w` also listed as a graph input: ONNX's input with a default
/// value.
fn model_with_default_weight() -> Vec<u8> {
    small_model().input("w", DataType::Float, &[Dim::from(3), Dim::from(4)]).bytes()
}

#[test]
fn initializers_listed_as_inputs_can_be_fed() {
    let graph = front_end(&model_with_default_weight()).expect("valid");
    assert_eq!(graph.default_names(), ["w"]);
    assert_eq!(graph.inputs.len(), 1, "w stays a constant until a run feeds it");
    let x = x_input();
    let y = |inputs: &[(String, HostTensor)]| -> Vec<f32> {
        let out = eval(&graph, inputs).expect("runs");
        out[0].1.f32s("y").expect("f32").to_vec()
    };
    // The default: x (all 0.5) @ w, then Relu.
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    let want: Vec<f32> =
        (0..8).map(|k| (0..3).map(|p| 0.5 * w[p * 4 + k % 4]).sum::<f32>().max(0.0)).collect();
    assert_eq!(y(std::slice::from_ref(&x)), want);
    // Fed: the run's w replaces the initializer.
    let ones = HostTensor::new(vec![3, 4], vec![1f32; 12]).expect("w");
    assert_eq!(y(&[x.clone(), ("w".into(), ones.clone())]), vec![1.5f32; 8]);
    // A fed default is checked like any input.
    let wrong = HostTensor::new(vec![4, 3], vec![1f32; 12]).expect("w");
    let e = eval(&graph, &[x.clone(), ("w".into(), wrong)]).expect_err("declared [3, 4]");
    assert!(matches!(&e, HostError::Input { name, .. } if name == "w"), "{e}");
    // A GPU session checks its inputs first (binding_of): it says how to feed a default.
    let e = host::session::binding_of(&graph, &[x.clone(), ("w".into(), ones.clone())]).expect_err("w");
    assert!(e.to_string().contains("overriding"), "{e}");
    let over = graph.overriding(&["w"]).expect("w is a default");
    assert!(host::session::binding_of(&over, &[x.clone(), ("w".into(), ones.clone())]).is_ok());
    assert!(graph.overriding(&["x"]).is_err(), "x is no initializer");

    // Through the CLI, on either device.
    let dir = scratch("defaults");
    let model = dir.join("m.onnx");
    std::fs::write(&model, model_with_default_weight()).expect("writing");
    let npy = |name: &str, t: &HostTensor| {
        let p = dir.join(name);
        std::fs::write(&p, host::npy::write(t)).expect("writing npy");
        format!("{}", p.display())
    };
    let (xs, ws) = (format!("x={}", npy("x.npy", &x.1)), format!("w={}", npy("w.npy", &ones)));
    for device in [&["--device", "cpu"][..], &[]] {
        let mut args = vec!["run", path_str(&model), "--input", &xs, "--input", &ws];
        args.extend_from_slice(device);
        let (code, stdout, stderr) = cli(&args);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("1.5"), "w fed as ones gives 1.5 everywhere: {stdout}");
    }
}
