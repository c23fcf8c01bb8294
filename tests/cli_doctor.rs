//! `ferrofuse doctor` end to end: on a machine without a usable GPU it must say so and exit with
//! status 2 (never panic); with one, every self-test must pass (exit 0). Whichever machine runs the
//! test, the branch taken is decided independently of the binary, by asking the driver here.

mod support;

use std::process::Command;

#[test]
fn doctor_reports_the_gpu_or_its_absence() {
    let out =
        Command::new(support::ferrofuse_bin()).arg("doctor").output().expect("running ferrofuse doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "doctor panicked:\n{stderr}");
    assert!(stdout.contains("embedded PTX: portable") && stdout.contains("embedded PTX: hopper"), "{stdout}");
    match host::device::device_count() {
        Ok(_) => {
            assert_eq!(out.status.code(), Some(0), "doctor failed on a GPU machine:\n{stdout}");
            assert!(stdout.contains("all checks passed") && stdout.contains("kernel load"), "{stdout}");
        }
        Err(e) => {
            assert_eq!(out.status.code(), Some(2), "{stdout}");
            assert!(stdout.contains("no GPU") && stdout.contains(&e.to_string()), "{stdout}");
        }
    }
}
