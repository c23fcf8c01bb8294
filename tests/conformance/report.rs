//! The conformance report: counts, a per-op table (cases containing the op, by outcome, with the
//! worst passing error) and one line per non-passing case.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::case::Outcome;

#[derive(Default)]
struct OpRow {
    pass: usize,
    fail: usize,
    unsupported: usize,
    error: usize,
    out_of_scope: usize,
    worst: f64,
}

/// Writes the markdown report to `path` and returns the one-paragraph summary.
pub fn write(results: &[(String, Outcome)], path: &Path) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_op: BTreeMap<String, OpRow> = BTreeMap::new();
    for (_, o) in results {
        *counts.entry(o.label()).or_default() += 1;
        let ops = if o.ops().is_empty() { vec!["?".to_owned()] } else { o.ops().to_vec() };
        for op in ops {
            let row = per_op.entry(op).or_default();
            match o {
                Outcome::Pass { worst, .. } => {
                    row.pass += 1;
                    row.worst = row.worst.max(*worst);
                }
                Outcome::Fail { .. } => row.fail += 1,
                Outcome::Unsupported { .. } => row.unsupported += 1,
                Outcome::Error { .. } | Outcome::Timeout { .. } => row.error += 1,
                Outcome::OutOfScope { .. } => row.out_of_scope += 1,
            }
        }
    }
    let in_scope = results.len() - counts.get("out of scope").copied().unwrap_or(0);
    let pass = counts.get("pass").copied().unwrap_or(0);
    let mut summary = format!(
        "ONNX node tests (onnx 1.22.0): {} cases, {in_scope} in scope (every dtype the reference holds), {pass} pass",
        results.len()
    );
    for (label, n) in &counts {
        if *label != "pass" {
            let _ = write!(summary, ", {n} {label}");
        }
    }
    let mut md = format!("# Conformance report\n\n{summary}\n\n## Per op\n\n");
    md.push_str("| op | pass | fail | unsupported | error | out of scope | worst passing abs error |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    for (op, r) in &per_op {
        let _ = writeln!(
            md,
            "| {op} | {} | {} | {} | {} | {} | {:.1e} |",
            r.pass, r.fail, r.unsupported, r.error, r.out_of_scope, r.worst
        );
    }
    md.push_str("\n## Cases not passing\n\n");
    for (name, o) in results {
        if !matches!(o, Outcome::Pass { .. }) {
            let _ = writeln!(md, "- `{name}`: {o}");
        }
    }
    if let Err(e) = std::fs::write(path, md) {
        eprintln!("could not write {}: {e}", path.display());
    }
    summary
}
