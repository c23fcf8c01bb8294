//! Builds `kernels-gpu` to PTX, the role rust-cuda's `cuda_builder` plays, in two flavours:
//! - `portable`: `-C target-cpu=sm_80` (Ampere and newer, through the driver's JIT);
//! - `hopper`: `-C target-cpu=sm_90a -C target-feature=+ptx86 --cfg ferrofuse_hopper` (H100/H200
//!   only: sm_90a code does not run on any other architecture).
//!
//! Each flavour is a separate `cargo rustc --crate-type cdylib --target nvptx64-nvidia-cuda
//! -Zbuild-std=core` with its own target directory under `OUT_DIR` and a filtered environment (the
//! outer build's `RUSTFLAGS`, `CARGO_*` and profile variables must not leak into the device build).
//! The PTX lands in `OUT_DIR/kernels-{flavour}.ptx`, where `host::device::ptx` embeds it.
//!
//! With `FERROFUSE_PTXAS` naming a `ptxas` (`scripts/fetch-ptxas.sh` fetches NVIDIA's), every kernel
//! module of each flavour is also compiled to machine code for the flavour's architecture (sm_80,
//! sm_90a), in parallel, into `OUT_DIR/cubins-{flavour}.bin` (`host::device::shipped` embeds it), so
//! a first run on such a device compiles nothing. The cubins are kept by PTX-module hash and
//! compiler under the target folder (`ferrofuse-cubins/`): a rebuild compiles only the kernels
//! whose PTX changed. Without it the archives are empty and kernels compile on first use (then
//! the kernel cache keeps them).

#[path = "src/device/cubin_archive.rs"]
#[allow(dead_code)]
mod cubin_archive;
#[path = "src/device/ptx_split.rs"]
#[allow(dead_code)]
mod ptx_split;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Flavour {
    name: &'static str,
    rustflags: &'static str,
    /// `ptxas -arch` of its shipped cubins.
    arch: &'static str,
}

const FLAVOURS: [Flavour; 2] = [
    Flavour { name: "portable", rustflags: "-C target-cpu=sm_80", arch: "sm_80" },
    Flavour {
        name: "hopper",
        rustflags: "-C target-cpu=sm_90a -C target-feature=+ptx86 --cfg ferrofuse_hopper",
        arch: "sm_90a",
    },
];

/// The environment variable naming the `ptxas` that compiles the shipped cubins.
const PTXAS_VAR: &str = "FERROFUSE_PTXAS";

/// Variables the device build may see; everything else is cleared.
const PASSED_ENV: [&str; 6] = ["PATH", "HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN", "TMPDIR"];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir.parent().expect("host/ lives in the workspace root");
    let kernels = root.join("kernels-gpu");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    for path in ["src", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", kernels.join(path).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("rust-toolchain.toml").display());
    println!("cargo:rerun-if-changed={}", root.join("Cargo.lock").display());
    println!("cargo:rerun-if-env-changed={PTXAS_VAR}");
    let ptxas = env::var_os(PTXAS_VAR).filter(|p| !p.is_empty()).map(PathBuf::from);
    if let Some(p) = &ptxas {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustc = env::var("RUSTC").ok();
    let children: Vec<_> = FLAVOURS
        .iter()
        .map(|f| {
            let target_dir = out_dir.join(format!("ptx-{}", f.name));
            let mut cmd = Command::new(&cargo);
            cmd.env_clear();
            for key in PASSED_ENV {
                if let Ok(v) = env::var(key) {
                    cmd.env(key, v);
                }
            }
            if let Some(rustc) = &rustc {
                cmd.env("RUSTC", rustc);
            }
            cmd.env("RUSTFLAGS", f.rustflags)
                // The device build is always optimised, without debug info (PTX with debug sections
                // is ten times larger and slower to load), and aborts on panic.
                .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
                .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
                .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
                .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
                .current_dir(&kernels)
                .args(["rustc", "--quiet", "--release", "--lib", "--crate-type", "cdylib"])
                .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core", "--target-dir"])
                .arg(&target_dir)
                .stdout(Stdio::inherit())
                .stderr(Stdio::piped());
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cargo} for the PTX build: {e}"));
            (f, target_dir, child)
        })
        .collect();

    for (f, target_dir, child) in children {
        let output = child.wait_with_output().expect("waiting for the PTX build");
        if !output.status.success() {
            panic!(
                "building the {} PTX flavour of kernels-gpu failed ({}):\n{}\n\
                 (the pinned toolchain of rust-toolchain.toml with rust-src and llvm-bitcode-linker \
                 is needed: run `rustup toolchain install` in the repository root)",
                f.name,
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        // The device build's warnings (an unused import in a kernel module) would otherwise be
        // dropped with its captured stderr: cargo shows them on every host build that reruns it.
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("warning") {
            for line in stderr.lines() {
                println!("cargo:warning=[{} PTX] {line}", f.name);
            }
        }
        let ptx = target_dir.join("nvptx64-nvidia-cuda/release/kernels_gpu.ptx");
        let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("reading {}: {e}", ptx.display()));
        let dest = out_dir.join(format!("kernels-{}.ptx", f.name));
        let ptx = with_directives(&text, f.name);
        std::fs::write(&dest, &ptx).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
        let archive = match &ptxas {
            Some(ptxas) => ship_cubins(f, &ptx, ptxas, &out_dir),
            None => cubin_archive::encode("", "", &[]),
        };
        let dest = out_dir.join(format!("cubins-{}.bin", f.name));
        std::fs::write(&dest, archive).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
    }
}

/// The archive of every kernel of `ptx` compiled by `ptxas` for `f.arch`: each kernel's module cut
/// as the host cuts it (`ptx_split`), compiled on one thread per core, kept under the target
/// folder by module hash and compiler so that a rebuild compiles only what changed.
fn ship_cubins(f: &Flavour, ptx: &str, ptxas: &Path, out_dir: &Path) -> Vec<u8> {
    let version = Command::new(ptxas)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{PTXAS_VAR}={}: cannot run it: {e}", ptxas.display()));
    let version = String::from_utf8_lossy(&version.stdout);
    let compiler = version
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or_else(|| {
            panic!("{PTXAS_VAR}={}: not a ptxas (`--version` said {version:?})", ptxas.display())
        })
        .trim()
        .to_owned();
    let index = ptx_split::PtxIndex::parse(ptx).expect("the PTX parses into functions");
    // OUT_DIR is <target>/<profile>/build/host-<hash>/out (or .../build/host/<hash>/out): keep the
    // cubins in <target>, so every profile and feature set of the host shares them.
    let keep = out_dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .unwrap_or(out_dir)
        .join("ferrofuse-cubins")
        .join(f.arch);
    std::fs::create_dir_all(&keep).unwrap_or_else(|e| panic!("creating {}: {e}", keep.display()));
    let compiler_hash = ptx_split::fnv1a(compiler.as_bytes());
    let jobs: Vec<(&str, String, u64, PathBuf)> = ptx_split::entry_names(ptx)
        .map(|entry| {
            let module = index.module(entry).unwrap_or_else(|| panic!("{entry}: no module"));
            let hash = ptx_split::fnv1a(module.as_bytes());
            let path = keep.join(format!("{entry}-{hash:016x}-{compiler_hash:016x}.cubin"));
            (entry, module, hash, path)
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((entry, module, _, path)) = jobs.get(i) else { return };
                    if !path.exists() {
                        compile_cubin(ptxas, f.arch, entry, module, path);
                    }
                }
            });
        }
    });
    let cubins: Vec<(String, u64, Vec<u8>)> = jobs
        .into_iter()
        .map(|(entry, _, hash, path)| {
            let cubin = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (entry.to_owned(), hash, cubin)
        })
        .collect();
    cubin_archive::encode(f.arch, &compiler, &cubins)
}

/// Compiles one kernel module with `ptxas -arch ARCH` into `dest` (through a temporary file and a
/// rename, so an interrupted build never leaves a torn cubin under its final name).
fn compile_cubin(ptxas: &Path, arch: &str, entry: &str, module: &str, dest: &Path) {
    let stem = format!("{}.{}", dest.display(), std::process::id());
    let (src, tmp) = (PathBuf::from(format!("{stem}.ptx")), PathBuf::from(format!("{stem}.tmp")));
    std::fs::write(&src, module).unwrap_or_else(|e| panic!("writing {}: {e}", src.display()));
    let out = Command::new(ptxas)
        .args(["-arch", arch, "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&src);
    if !out.status.success() {
        panic!("ptxas -arch {arch} failed on kernel {entry}:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::rename(&tmp, dest).unwrap_or_else(|e| panic!("renaming {}: {e}", tmp.display()));
}

/// Kernels launched with large blocks and many registers per thread, and the largest block each
/// is launched with: rustc has no launch-bounds attribute for `ptx-kernel` functions, so the
/// `.maxntid` directive is added to the PTX here. It makes ptxas keep registers per thread within
/// what a block of that size may use (otherwise the launch fails with "too many resources
/// requested"). The planner's launch shapes stay within these (tested there).
const LAUNCH_BOUNDS: &[(&str, u32)] = &[
    // `wkv_threads(WKV_SMALL_HEAD)` and `wkv_threads(WKV_MAX_HEAD)`.
    ("wkv6_f32", 128),
    ("wkv6_wide_f32", 512),
    // `32 * SCAN_MAX_CHUNKS`.
    ("selective_scan_chunked_f32", 512),
    // `SSD_CHUNK_THREADS`.
    ("ssd_chunk_f32", 128),
    ("ssd_chunk_states_f32", 128),
    ("gemv_program_f32", 512),
    ("attention_f32", 128),
    ("attention_tc_f32", 128),
    ("attention_small_f32", 128),
    ("attention_flash_f32", 128),
    // `plan::rows::LAYER_NORM_MAX_THREADS`.
    ("layer_norm_f32", 512),
    // `RECURRENT_MAX_THREADS`: compiled through the driver's linker (the kernel cache), lstm_f32
    // took more registers than 512 threads may have (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on the
    // H200) where the JIT of the whole PTX module had fit.
    ("lstm_f32", 512),
    ("gru_f32", 512),
    ("rnn_f32", 512),
    // Two warpgroups, 64 accumulators and the A fragments of four k steps per thread.
    ("gemm_wg128_f32", 256),
    ("gemm_wg128_tf32", 256),
    ("gemm_wg64_f32", 128),
    ("gemm_wg64_tf32", 128),
    ("gemm_wg128_cat_f32", 256),
    ("gemm_wg128_cat_tf32", 256),
    ("gemm_wg64_cat_f32", 128),
    ("gemm_wg64_cat_resident_f32", 128),
    ("gemm_wg64_cat_tf32", 128),
    ("conv_wg128_f32", 256),
    ("conv_wg128_tf32", 256),
    ("conv_wg64_f32", 128),
    ("conv_wg64_tf32", 128),
    ("conv_wg32_f32", 128),
    ("conv_wg32_tf32", 128),
];

/// Kernels that run as one thread-block cluster of a fixed size on the Hopper flavour, and that
/// size: `.reqnctapercluster` (CUDA's `__cluster_dims__`) makes every launch of the kernel use
/// clusters of it, so the host launches it like any other kernel (grid a multiple of the size).
const CLUSTER_DIMS: &[(&str, u32)] = &[
    ("mlp_f32", 8),
    ("gemm_tc_pair_f32", 2),
    ("gemm_tc_program_pair_f32", 2),
    ("gemm_tc_packed_pair_f32", 2),
    ("gemm_tc_packed_program_pair_f32", 2),
    ("gemm_tc_packed_norm_pair_f32", 2),
];

/// `ptx` with the directives of [`LAUNCH_BOUNDS`] (every flavour) and [`CLUSTER_DIMS`] (Hopper)
/// after the parameter list of their kernels.
fn with_directives(ptx: &str, flavour: &str) -> String {
    let clusters: &[(&str, u32)] = if flavour == "hopper" { CLUSTER_DIMS } else { &[] };
    let directives = LAUNCH_BOUNDS
        .iter()
        .map(|(name, threads)| (*name, format!(".maxntid {threads}, 1, 1")))
        .chain(clusters.iter().map(|(name, size)| (*name, format!(".reqnctapercluster {size}, 1, 1"))));
    let mut out = ptx.to_string();
    for (name, directive) in directives {
        let head = format!(".entry {name}(");
        let Some(start) = out.find(&head) else {
            panic!("kernel {name} of the build's directives is not in the PTX")
        };
        let close = start + out[start..].find("\n)").expect("an entry's parameter list ends with `)`") + 2;
        out.insert_str(close, &format!("\n{directive}"));
    }
    if flavour == "hopper" { with_grid_dependency(&out) } else { out }
}

/// Entries of the Hopper flavour that release the next kernel only as they exit
/// ([`with_grid_dependency`]): long, or launched with grids of several waves.
const RELEASE_AT_EXIT: &[&str] = &[
    "gemm_f32",
    "gemm_program_f32",
    "gemm_reduce_f32",
    "gemm_reduce_program_f32",
    "gemm_tc128_n_f32",
    "gemm_tc128_k_f32",
    "gemm_tc64_n_f32",
    "gemm_tc64_k_f32",
    "gemm_tc128_n_tf32",
    "gemm_tc128_k_tf32",
    "gemm_tc64_n_tf32",
    "gemm_tc64_k_tf32",
    "gemm_wg128_f32",
    "gemm_wg64_f32",
    "gemm_wg128_tf32",
    "gemm_wg64_tf32",
    "gemm_wg128_cat_f32",
    "gemm_wg64_cat_f32",
    "gemm_wg64_cat_resident_f32",
    "gemm_wg128_cat_tf32",
    "gemm_wg64_cat_tf32",
    "conv_wg128_f32",
    "conv_wg64_f32",
    "conv_wg128_tf32",
    "conv_wg64_tf32",
    "conv_wg32_f32",
    "conv_wg32_tf32",
    "gemv_f32",
    "gemv_program_f32",
    "mlp_f32",
    "conv_gemm_f32",
    "conv_direct_f32",
    "conv_transpose_f32",
    "deform_conv_f32",
    "attention_tc_f32",
    "attention_small_f32",
    "attention_flash_f32",
    "attention_scores_f32",
    "linear_attention_f32",
    "lstm_f32",
    "gru_f32",
    "rnn_f32",
    "selective_scan_f32",
    "selective_scan_chunked_f32",
    "ssd_scan_f32",
    "ssd_chunk_f32",
    "ssd_chunk_states_f32",
    "ssd_chunk_pass_f32",
    "rglru_f32",
    "wkv6_f32",
    "wkv6_wide_f32",
    "wkv6_pass_f32",
    "causal_conv_f32",
    "causal_conv_rows_f32",
    "dft_f32",
    "stft_f32",
    "tree_ensemble_f32",
];

/// Programmatic dependent launch (Hopper's PDL): `griddepcontrol.wait` at the start of every
/// entry's body blocks until the grids this one depends on have finished and their writes are
/// visible, so nothing of theirs is read (or overwritten) before it. The host launches with the
/// programmatic stream-serialization attribute only where this flavour is loaded; a kernel launched
/// without it has no dependency to wait for and the instruction does nothing. An entry that calls
/// `intrinsics::grid_dependency_wait` itself (the tensor-core GEMMs, after their address set-up and
/// first weight loads; attention, after its set-up) keeps that wait instead: what comes before it
/// overlaps the previous kernel's completion.
///
/// The next kernel is released (`griddepcontrol.launch_dependents`) when every block of this one
/// has executed that or exited; its blocks then launch (and load their weights) while this one
/// finishes, and wait in their own `griddepcontrol.wait`. Entries that wait themselves (the
/// tensor-core GEMMs, attention) release it once only their epilogue is left (after the block
/// barrier that precedes it); the short kernels (gathers, copies, row and elementwise kernels, whose
/// grids are one resident wave) right after their wait, inserted here. The long or many-wave
/// kernels of [`RELEASE_AT_EXIT`] release it as they exit: the next kernel's blocks, waiting on
/// the SMs, would take the room their later blocks need. Measured on the H200 with graph replay
/// (session 11, interleaved A/B): GPT-2 of issue 5 162.3–163.1 us with no explicit release (each
/// kernel released at exit) against 152.8–153.5 us; the BERT fixture 131.5–132.0 against 121.5–121.7
/// us; the GPT-2 fixture 75.0–75.1 against 68.9–69.2 us. Releasing every kernel at its start
/// measured slower (GPT-2 233.5 us against 212.4 us, an early session), and so did releasing the
/// GEMMs and attention right after their wait (session 9: 176.0–176.8 us against 168.7–169.6 us)
/// or before their k loop (session 11: 164.1–164.5 us against 153.0–153.3 us): the next kernel's
/// blocks are then placed on the SMs while this one still needs them, unevenly.
fn with_grid_dependency(ptx: &str) -> String {
    const PDL: &str = "\tgriddepcontrol.wait;\n";
    const RELEASE: &str = "\tgriddepcontrol.launch_dependents;\n";
    let mut out = String::with_capacity(ptx.len() + 64 * 128);
    let (mut in_entry, mut in_decls, mut entries, mut marked) = (false, false, 0usize, 0usize);
    let lines: Vec<&str> = ptx.split_inclusive('\n').collect();
    let mut early = false;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(".visible .entry ") {
            in_entry = true;
            entries += 1;
            let name = rest.split('(').next().unwrap_or_default();
            early = !RELEASE_AT_EXIT.contains(&name);
        } else if in_entry && t == "{" {
            (in_entry, in_decls) = (false, true);
        } else if in_decls
            && !(t.is_empty() || t.starts_with(".reg") || t.starts_with(".shared") || t.starts_with(".local"))
        {
            // An entry that waits itself (`intrinsics::grid_dependency_wait`, after what it may do
            // first) keeps its own wait. Its body runs to the next top-level directive or function
            // (a line of an inline asm template may be a bare `}`).
            let body =
                lines[i..].iter().take_while(|l| !(l.starts_with('.') || l.contains("// -- Begin function")));
            if !body.clone().any(|l| l.contains("griddepcontrol.wait")) {
                out.push_str(PDL);
                if early && !body.clone().any(|l| l.contains("griddepcontrol.launch_dependents")) {
                    out.push_str(RELEASE);
                }
            }
            in_decls = false;
            marked += 1;
        }
        out.push_str(line);
    }
    assert_eq!(entries, marked, "every entry of the Hopper PTX waits with griddepcontrol.wait");
    out
}
