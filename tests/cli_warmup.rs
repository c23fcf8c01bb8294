//! `ferrofuse warmup` end to end: on a machine without a usable GPU it fails with a message and
//! exit status 1 (never a panic); with one, it fills an empty kernel cache — every kernel of the
//! device's flavour, then only a model's plan — compiling everything (shipped cubins switched off,
//! so nothing is taken from the binary), and refuses when the cache is switched off. The branch
//! is decided independently of the binary, by asking the driver here.

mod support;

use std::path::Path;
use std::process::Command;

/// Runs `ferrofuse warmup ARGS` with the kernel cache in `dir` (or switched off) and the shipped
/// cubins off: exit status, stdout, stderr.
fn warmup(args: &[&str], dir: &Path, cache_on: bool) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(support::ferrofuse_bin());
    cmd.arg("warmup").args(args).env("FERROFUSE_CACHE_DIR", dir).env("FERROFUSE_SHIPPED_CUBINS", "off");
    cmd.env("FERROFUSE_CACHE", if cache_on { "on" } else { "off" });
    let out = cmd.output().expect("running ferrofuse warmup");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!stderr.contains("panicked"), "warmup panicked:\n{stderr}");
    (out.status.code(), stdout.into_owned(), stderr.into_owned())
}

/// Files under `dir`, at any depth.
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries.flatten().map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum()
    })
}

/// The `N` of warmup's "N kernel(s) ready in the cache" line.
fn ready(stdout: &str) -> usize {
    let line = stdout.lines().find(|l| l.contains("kernel(s) ready in the cache")).unwrap_or_else(|| {
        panic!("no readiness line:\n{stdout}");
    });
    line.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

#[test]
fn warmup_fills_an_empty_kernel_cache_or_says_why_not() {
    let root = std::env::temp_dir().join(format!("ferrofuse-warmup-test-{}", std::process::id()));
    let (all, model_dir) = (root.join("all"), root.join("model"));
    let model = support::repo_dir().join("models/demo/physics_mlp.onnx");
    let model = model.to_str().expect("a UTF-8 path");
    match host::device::device_count() {
        Err(_) => {
            let (code, stdout, stderr) = warmup(&[], &all, true);
            assert_eq!(code, Some(1), "{stdout}{stderr}");
            assert!(stderr.contains("error:"), "{stderr}");
            assert_eq!(files_under(&all), 0, "nothing is written without a GPU");
        }
        Ok(_) => {
            // Every kernel of the flavour: all compiled (none shipped) and stored.
            let (code, stdout, stderr) = warmup(&[], &all, true);
            assert_eq!(code, Some(0), "{stdout}{stderr}");
            let n = ready(&stdout);
            assert!(n > 100 && stdout.contains(", 0 shipped in the binary"), "{stdout}");
            assert!(files_under(&all) > 0, "nothing written for {n} kernels:\n{stdout}");
            // Again, from the filled cache: the same kernels ready.
            let (code, again, stderr) = warmup(&[], &all, true);
            assert_eq!((code, ready(&again)), (Some(0), n), "{again}{stderr}");
            // Only a model's plan: a handful of kernels, a fresh cache holds just those.
            let (code, stdout, stderr) = warmup(&[model, "--bind", "batch=64"], &model_dir, true);
            assert_eq!(code, Some(0), "{stdout}{stderr}");
            let m = ready(&stdout);
            assert!(m > 0 && m < n && files_under(&model_dir) > 0, "{stdout}");
            // An unbound symbol is an error naming it; a switched-off cache has nothing to fill.
            let (code, stdout, stderr) = warmup(&[model], &model_dir, true);
            assert_eq!(code, Some(1), "{stdout}");
            assert!(stderr.contains("--bind"), "{stderr}");
            let (code, _, stderr) = warmup(&[], &root.join("off"), false);
            assert_eq!(code, Some(1));
            assert!(stderr.contains("nothing to fill"), "{stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
