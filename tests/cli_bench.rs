//! `ferrofuse bench` end to end. Its arguments are checked before anything runs, on any machine:
//! a `--bind` naming no symbol of the model, or a symbolic input left unbound, is an error naming
//! them. On a GPU machine the sweep runs and its JSON holds every figure; without a GPU it says so
//! and exits 1 (never a panic).

mod support;

use std::process::Command;

fn bench(args: &[&str]) -> (Option<i32>, String, String) {
    let model = support::repo_dir().join("models/demo/physics_mlp.onnx");
    let out = Command::new(support::ferrofuse_bin())
        .arg("bench")
        .arg(&model)
        .args(args)
        .output()
        .expect("running ferrofuse bench");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "bench panicked:\n{stderr}");
    (out.status.code(), stdout, stderr)
}

#[test]
fn bad_sweeps_are_refused_before_anything_runs() {
    let (code, _, err) = bench(&["--bind", "bacth=1,8"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`bacth`") && err.contains("batch"), "{err}");
    let (code, _, err) = bench(&[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`batch`") && err.contains("--bind batch="), "{err}");
    let (code, _, err) = bench(&["--bind", "batch=1", "--input", "y=/nonexistent.npy"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent.npy"), "{err}");
}

#[test]
fn bench_sweeps_the_batch_and_writes_every_figure() {
    let dir = std::env::temp_dir().join(format!("ferrofuse-cli-bench-{}", std::process::id()));
    let json = dir.join("bench.json");
    let outs = dir.join("out");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, stdout, err) = bench(&[
        "--bind",
        "batch=1,64",
        "--runs",
        "20",
        "--json",
        json.to_str().unwrap(),
        "--out",
        outs.to_str().unwrap(),
    ]);
    if let Err(e) = host::device::device_count() {
        assert_eq!(code, Some(1), "{stdout}{err}");
        assert!(err.contains("measures the GPU") && err.contains(&e.to_string()), "{err}");
        return;
    }
    assert_eq!(code, Some(0), "bench failed on a GPU machine:\n{stdout}\n{err}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(report["gpu"]["sm_count"].as_u64().unwrap() > 0);
    let cold = &report["cold_start"];
    for key in ["empty_cache", "filled_cache"] {
        let runs = cold[key].as_array().unwrap_or_else(|| panic!("cold start: {cold}"));
        assert_eq!(runs.len(), 1, "{cold}");
        assert!(runs[0]["wall_ms"].as_f64().unwrap() > 0.0 && runs[0]["to_outputs_ms"].as_f64().is_some());
    }
    let points = report["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, batch) in points.iter().zip([1u64, 64]) {
        assert_eq!(p["binding"]["batch"], batch, "{p}");
        assert_eq!(p["inputs"][0]["shape"], serde_json::json!([batch, 64]));
        let f = &p["fused"];
        for key in ["graph_us", "eager_us", "h2d_us", "d2h_us", "full_run_wall_us"] {
            let s = &f[key];
            assert!(s["p50"].as_f64().unwrap() > 0.0 && s["p99"].as_f64() >= s["p50"].as_f64(), "{key}: {s}");
            assert_eq!(s["n"], 20, "{key}");
        }
        assert!(f["steps"].as_u64().unwrap() >= 1);
        assert!(f["memory"]["session_device_bytes"].as_u64().unwrap() > 0);
        assert_eq!(f["memory"]["allocations_after_warmup"], 0);
        let top = f["profile"]["top_steps"].as_array().unwrap();
        assert!(!top.is_empty());
        // Each time is named by its own step's plan line.
        for s in top {
            let line = s["plan"].as_str().unwrap();
            assert!(line.starts_with(&format!("#{} ", s["step"])), "{s}");
        }
        // Fusion off computes the same outputs.
        let u = &p["unfused"];
        assert!(u["steps"].as_u64().unwrap() >= f["steps"].as_u64().unwrap(), "{u}");
        assert!(u["max_abs_diff_vs_fused"].as_f64().unwrap() <= 1e-4, "{u}");
        assert!(p["throughput_items_per_s"].as_f64().unwrap() > 0.0);
        let out = outs.join(format!("batch_{batch}"));
        let files: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
        assert_eq!(files.len(), 1, "{}", out.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
