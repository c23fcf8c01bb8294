//! ONNX node-test conformance on the GPU: every case that passes on the CPU reference
//! (`tests/conformance/expected-pass.txt`, embedded at build time) runs through a GPU `Session`
//! and is compared with the expected outputs by the same rule (rtol 1e-3, atol 1e-7; integers and
//! bools exactly). Prints both counts and writes `gpu-conformance-report.md` next to the data (or
//! to `FERROFUSE_REPORT_DIR`). Fails on any case the GPU runs and gets wrong, or that errors, unless
//! `tests/conformance/gpu-known-failures.txt` lists it with what is known (and fails when a listed
//! case passes); cases whose operators (or operators at their dtypes) have no GPU kernel yet are
//! counted and listed, not failed. Every dtype is in scope: f16 / bf16 graphs run widened to f32,
//! QDQ graphs as their arithmetic, and a dtype without kernels is refused by node.
//!
//! Data: `FERROFUSE_ONNX_NODE_TESTS` (default `target/onnx-node-tests`, fetched by
//! `scripts/fetch-onnx-node-tests.sh`). Needs a GPU (the `gpu` feature); fails loudly without one.

#[path = "../support/mod.rs"]
mod support;

#[path = "../conformance/case.rs"]
mod case;
#[path = "../conformance/report.rs"]
mod report;

use std::path::PathBuf;
use std::sync::OnceLock;

use case::{Executor, Outcome, run_case};

const EXPECTED_PASS: &str = include_str!("../conformance/expected-pass.txt");
const KNOWN_FAILURES: &str = include_str!("../conformance/gpu-known-failures.txt");

fn ctx() -> &'static host::Context {
    static CTX: OnceLock<host::Context> = OnceLock::new();
    CTX.get_or_init(|| host::Context::new(0).unwrap_or_else(|e| panic!("GPU conformance needs a GPU: {e}")))
}

#[test]
fn onnx_node_tests_on_the_gpu() {
    let dir: PathBuf = std::env::var_os("FERROFUSE_ONNX_NODE_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| support::repo_dir().join("target/onnx-node-tests"));
    let names: Vec<&str> =
        EXPECTED_PASS.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let missing: Vec<&&str> = names.iter().filter(|n| !dir.join(n).join("model.onnx").is_file()).collect();
    assert!(
        missing.is_empty(),
        "{} cases missing from {} (fetch the node tests first)",
        missing.len(),
        dir.display()
    );
    let results: Vec<(String, Outcome)> =
        names.iter().map(|n| (n.to_string(), run_case(&dir.join(n), Executor::Gpu(ctx())))).collect();
    let report_dir =
        std::env::var_os("FERROFUSE_REPORT_DIR").map(PathBuf::from).unwrap_or_else(|| dir.clone());
    let report_path = report_dir.join("gpu-conformance-report.md");
    let summary = report::write(&results, &report_path);
    let pass = results.iter().filter(|(_, o)| matches!(o, Outcome::Pass { .. })).count();
    let no_kernel = results.iter().filter(|(_, o)| matches!(o, Outcome::Unsupported { .. })).count();
    let no_dtype = results.iter().filter(|(_, o)| matches!(o, Outcome::OutOfScope { .. })).count();
    println!("{summary}");
    println!(
        "GPU conformance: {pass} of the {} cases that pass on the CPU reference also pass on the GPU; \
         {no_kernel} need an operator without a GPU kernel, {no_dtype} a dtype the GPU does not take \
         yet; report: {}",
        names.len(),
        report_path.display()
    );
    let known: Vec<&str> = KNOWN_FAILURES
        .lines()
        .filter_map(|l| l.split('#').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let wrong: Vec<String> = results
        .iter()
        .filter(|(n, o)| {
            !matches!(o, Outcome::Pass { .. } | Outcome::Unsupported { .. } | Outcome::OutOfScope { .. })
                && !known.contains(&n.as_str())
        })
        .map(|(n, o)| format!("{n}: {o}"))
        .collect();
    let mended: Vec<&&str> = known
        .iter()
        .filter(|k| results.iter().any(|(n, o)| n == **k && matches!(o, Outcome::Pass { .. })))
        .collect();
    println!("known GPU failures (tests/conformance/gpu-known-failures.txt): {}", known.len());
    assert!(wrong.is_empty(), "{} case(s) run on the GPU and fail:\n{}", wrong.len(), wrong.join("\n"));
    assert!(mended.is_empty(), "known failures that now pass (remove them from the list): {mended:?}");
}
