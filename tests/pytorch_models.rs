//! Models exported from PyTorch (`scripts/export_pytorch_fixtures.py`: a GPT-2-style and a
//! BERT-style model from transformers with random weights, a small CNN with batch norm, and two
//! small Mamba2 models with transformers' reference chunked SSD, symbolic batch and sequence, a
//! small RecurrentGemma and a small Llama-style decoder, their rotary embeddings spelled out) run
//! through load → convert → CPU reference, and match PyTorch's own outputs within 1e-4 relative
//! error (‖ours − torch‖ / ‖torch‖), with no element off by more than 1e-4 · max |torch|.

mod support;

use std::path::{Path, PathBuf};

use host::HostTensor;

fn fixtures() -> PathBuf {
    support::repo_dir().join("tests/fixtures/pytorch")
}

fn npy(path: &Path) -> HostTensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    host::npy::read(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// ‖got − want‖ / ‖want‖.
fn relative_error(got: &HostTensor, want: &HostTensor) -> f64 {
    let (g, w) = (got.data().to_f64s(), want.data().to_f64s());
    let diff = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    diff / w.iter().map(|b| b * b).sum::<f64>().sqrt()
}

/// Token-id fixture `name` as `compile` sees it before fusion (`planner::plan::decomposed`).
struct Lifted {
    graph: planner::Graph,
    feeds: Vec<(String, HostTensor)>,
    binding: planner::Binding,
    lifted: planner::Graph,
}

impl Lifted {
    fn of(name: &str) -> Lifted {
        let dir = fixtures();
        let model = onnx::load_path(&dir.join(format!("{name}.onnx"))).expect("model loads");
        let graph = onnx::to_graph(&model).expect("model converts");
        let feeds = vec![("input_ids".to_owned(), npy(&dir.join(format!("{name}.in.input_ids.npy"))))];
        let binding = host::session::binding_of(&graph, &feeds).expect("inputs bind");
        let bound = planner::fold::run(&planner::memory::bind_inputs(&graph, &binding).unwrap()).unwrap();
        let lifted = planner::plan::decomposed(&bound).expect("decomposes");
        Lifted { graph, feeds, binding, lifted }
    }

    /// The lifted graph computes on the reference what PyTorch does, within 1e-5.
    fn matches_pytorch(&self, name: &str) {
        let got =
            host::reference::eval(&self.lifted, &self.feeds).expect("the lifted graph runs on the reference");
        let rel = relative_error(&got[0].1, &npy(&fixtures().join(format!("{name}.out.0.npy"))));
        println!("{name} lifted: relative error {rel:.2e}");
        assert!(rel <= 1e-5, "{name}: the lifted graph is {rel:e} from PyTorch");
    }
}

fn check_model(name: &str, inputs: &[&str], outputs: usize) {
    let dir = fixtures();
    let model = onnx::load_path(&dir.join(format!("{name}.onnx"))).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    let feeds: Vec<(String, HostTensor)> =
        inputs.iter().map(|i| (i.to_string(), npy(&dir.join(format!("{name}.in.{i}.npy"))))).collect();
    let got = host::reference::eval(&graph, &feeds).expect("model runs on the reference executor");
    assert_eq!(got.len(), outputs, "{name}: output count");
    for (k, (out_name, t)) in got.iter().enumerate() {
        let want = npy(&dir.join(format!("{name}.out.{k}.npy")));
        assert_eq!(t.shape(), want.shape(), "{name} output {k} `{out_name}` shape");
        let rel = relative_error(t, &want);
        let (g, w) = (t.data().to_f64s(), want.data().to_f64s());
        let scale = w.iter().fold(0.0f64, |m, b| m.max(b.abs()));
        let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        println!("{name} output {k} `{out_name}`: relative error {rel:.2e}, worst element {worst:.2e}");
        assert!(rel <= 1e-4, "{name} output {k}: relative error {rel:e} > 1e-4");
        assert!(worst <= 1e-4 * scale, "{name} output {k}: element error {worst:e} > 1e-4 * {scale:e}");
    }
}

#[test]
fn gpt2_style_matches_pytorch() {
    check_model("gpt2", &["input_ids"], 1);
}

#[test]
fn bert_style_matches_pytorch() {
    check_model("bert", &["input_ids", "attention_mask", "token_type_ids"], 2);
}

#[test]
fn small_cnn_matches_pytorch() {
    check_model("cnn", &["x"], 1);
}

#[test]
fn mamba2_matches_pytorch() {
    check_model("mamba2", &["input_ids"], 1);
    check_model("mamba2_pad", &["input_ids"], 1);
}

/// transformers' chunked SSD (segment sums over CumSum, exp, the chunk contractions, and for
/// `mamba2_pad` its padding to whole chunks and two groups of B / C) lifts to one `SSDScan` per
/// layer, with no CumSum left, and the lifted graph computes on the reference what PyTorch does.
/// Its GPU plan keeps it, and with `lift_ssd` off plans the chunked form instead.
#[test]
fn mamba2_chunked_ssd_lifts_to_one_ssd_scan_a_layer_that_matches_pytorch() {
    for (name, layers) in [("mamba2", 2), ("mamba2_pad", 1)] {
        let fixture = Lifted::of(name);
        let (graph, binding, lifted) = (&fixture.graph, &fixture.binding, &fixture.lifted);
        let count =
            |g: &planner::Graph, f: fn(&planner::Op) -> bool| g.nodes.iter().filter(|n| f(&n.op)).count();
        assert_eq!(count(lifted, |o| matches!(o, planner::Op::SsdScan(_))), layers, "{name}: SSDScans");
        assert_eq!(count(lifted, |o| matches!(o, planner::Op::CumSum(_))), 0, "{name}: CumSums left");
        // The skip `y + D x` and the gate `y silu(z)` after the scan are its D and z (not yet
        // through the padded form's Pad and Slice).
        let folded = lifted
            .nodes
            .iter()
            .filter(|n| {
                matches!(n.op, planner::Op::SsdScan(_))
                    && n.inputs.get(5..7).is_some_and(|d| d.iter().all(Option::is_some))
            })
            .count();
        let sigmoids = count(lifted, |o| matches!(o, planner::Op::Sigmoid));
        assert_eq!((folded, sigmoids), if name == "mamba2" { (layers, 0) } else { (0, layers) }, "{name}");
        // The conv runs channels-last between no transposes, and reads its input, as the scan
        // reads x, dt, B, C and z, where the in-projection's and the conv's Splits left them (the
        // padded form pads x, B and C to whole chunks first: those parts stay copies).
        let windows = |o: &planner::Op| o.input_windows().map_or(0, |w| w.0.len());
        let convs_last =
            count(lifted, |o| matches!(o, planner::Op::CausalConvWithState(a) if a.channels_last));
        let windowed: usize = lifted.nodes.iter().map(|n| windows(&n.op)).sum();
        let want = if name == "mamba2" { (layers, 6 * layers, 0) } else { (layers, 5, 2) };
        let splits = count(lifted, |o| matches!(o, planner::Op::Split(_)));
        assert_eq!((convs_last, windowed, splits), want, "{name}: channels-last convs, windows, Splits");
        fixture.matches_pytorch(name);
        for (lift, scans) in [(true, layers), (false, 0)] {
            let options = planner::plan::PlanOptions { lift_ssd: lift, ..Default::default() };
            let plan = planner::plan::compile(graph, binding, &options).expect("a GPU plan").to_string();
            assert_eq!(ssd_scans(&plan), scans, "{name}, lift_ssd {lift}:\n{plan}");
            assert_eq!(plan.contains("chunked SSD"), lift, "{name}: the lift is said\n{plan}");
        }
    }
    // In one span, past 512 steps only where the chunked scan's blocks (batch x 4 heads x 2 tiles
    // of 8 head channels) fill the 132 multiprocessors: batch 17, not 16; in spans (opt-in)
    // always.
    let dir = fixtures();
    let graph = onnx::to_graph(&onnx::load_path(&dir.join("mamba2.onnx")).unwrap()).unwrap();
    let feeds = vec![("input_ids".to_owned(), npy(&dir.join("mamba2.in.input_ids.npy")))];
    let [batch, seq] = feeds[0].1.shape().try_into().unwrap();
    let traced = host::session::binding_of(&graph, &feeds).unwrap();
    for (b, steps, scans, spans) in
        [(1, 512, 2, false), (16, 2048, 0, false), (17, 2048, 2, false), (1, 2048, 2, true)]
    {
        let mut binding = traced.clone();
        binding.0.values_mut().for_each(|v| {
            *v = if *v == seq {
                steps
            } else if *v == batch {
                b
            } else {
                *v
            }
        });
        let options = planner::plan::PlanOptions { ssd_spans: spans, ..Default::default() };
        let plan = planner::plan::compile(&graph, &binding, &options).expect("a GPU plan").to_string();
        assert_eq!(ssd_scans(&plan), scans, "batch {b} x {steps} steps, spans {spans}:\n{plan}");
    }
}

/// transformers' rotary embeddings as exported (`apply_rotary_pos_emb`: `x·cos + rotate_half(x)·sin`
/// of Slices, Neg and Concats) lift to one `RotaryEmbedding` per query and key: RecurrentGemma's
/// over half of each head (the rest concatenated back), the Llama-style decoder's over whole
/// heads; both straight from the projection's `(B, S, H·D)` (no head transpose copied before
/// it). The lifted graphs compute on the reference what PyTorch does, and the GPU plans launch
/// `rotary_f32` with no Neg left (with `lift_rotary` off, the spelled-out form).
#[test]
fn spelled_out_rotary_embeddings_lift_to_one_op_each_and_match_pytorch() {
    check_model("recurrentgemma", &["input_ids"], 1);
    check_model("llama", &["input_ids"], 1);
    for (name, rotations, rot) in [("recurrentgemma", 2, 8), ("llama", 4, 8)] {
        let fixture = Lifted::of(name);
        let (graph, binding, lifted) = (&fixture.graph, &fixture.binding, &fixture.lifted);
        let ropes: Vec<&planner::op::RotaryEmbedding> = (lifted.nodes.iter())
            .filter_map(|n| match &n.op {
                planner::Op::RotaryEmbedding(r) => Some(r),
                _ => None,
            })
            .collect();
        assert_eq!(ropes.len(), rotations, "{name}: RotaryEmbeddings");
        for r in &ropes {
            assert!(r.full_caches && r.num_heads.is_some() && r.rotary_embedding_dim == rot, "{name}: {r:?}");
        }
        assert!(!lifted.nodes.iter().any(|n| matches!(n.op, planner::Op::Neg)), "{name}: a Neg is left");
        fixture.matches_pytorch(name);
        for lift in [true, false] {
            let options = planner::plan::PlanOptions { lift_rotary: lift, ..Default::default() };
            let plan = planner::plan::compile(graph, binding, &options).expect("a GPU plan").to_string();
            let steps = |k: &str| plan.lines().filter(|l| l.starts_with('#') && l.contains(k)).count();
            let want = if lift { (rotations, 0) } else { (0, rotations) };
            assert_eq!((steps("rotary_f32"), steps("neg_f32")), want, "{name}, lift_rotary {lift}:\n{plan}");
        }
    }
}

/// `SSDScan` steps of a printed plan (recurrent or chunked kernel).
fn ssd_scans(plan: &str) -> usize {
    plan.matches("ssd_scan_f32").count() + plan.matches("ssd_chunk_f32").count()
}

/// The CNN (Conv+Relu, MaxPool, Conv+Relu, ReduceMean, Gemm) compiles to a GPU plan with no node
/// left without a kernel: checked here without a GPU; `tests/gpu_models.rs` runs it.
#[test]
fn small_cnn_compiles_to_a_gpu_plan() {
    let model = onnx::load_path(&fixtures().join("cnn.onnx")).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    // The portable flavour (CUDA-core convolutions) and Hopper's (both on wgmma).
    let portable = planner::plan::PlanOptions { wgmma_gemm: false, ..planner::plan::PlanOptions::default() };
    let hopper = planner::plan::PlanOptions::default();
    for (options, symbols) in [
        (
            portable,
            ["Conv+Relu conv_direct_f32", "pool_f32", "Conv+Relu conv_gemm_f32", "ReduceMean reduce_f32"],
        ),
        (hopper, ["#0 Conv+Relu conv_wg", "pool_f32", "#2 Conv+Relu conv_wg", "ReduceMean reduce_f32"]),
    ] {
        let plan = planner::plan::compile(&graph, &planner::Binding::new(), &options)
            .unwrap_or_else(|e| panic!("cnn.onnx has no GPU plan: {e}"));
        let text = plan.to_string();
        for symbol in symbols {
            assert!(text.contains(symbol), "{symbol} missing:\n{text}");
        }
        plan.validate().expect("the plan's invariants hold");
    }
}

/// The GPU plans of GPT-2 and BERT with and without the GEMM-epilogue fusion: every elementwise
/// program or op that alone reads a GEMM result (residual adds, biases, GELU, the attention mask)
/// moves into the GEMM's epilogue, and the plans stay valid. BERT's MatMul bias rows become the
/// GEMMs' C and its GELU their activation, so only the residual adds and the mask stay programs.
#[test]
fn transformer_plans_fuse_programs_into_gemm_epilogues() {
    use planner::plan::{PlanOptions, compile};
    for (name, unfused_steps, fused_steps, fused_gemms) in [("gpt2", 36, 27, 6), ("bert", 46, 31, 6)] {
        let model = onnx::load_path(&fixtures().join(format!("{name}.onnx"))).expect("model loads");
        let graph = onnx::to_graph(&model).expect("model converts");
        // (The attention fusion off in both, so that this counts the epilogue pass alone.)
        let on = PlanOptions { fuse_attention: false, ..PlanOptions::default() };
        let off = PlanOptions { fuse_gemm_programs: false, ..on };
        let before = compile(&graph, &planner::Binding::new(), &off).expect("unfused plan");
        let after = compile(&graph, &planner::Binding::new(), &on).expect("fused plan");
        after.validate().expect("the plan's invariants hold");
        let text = after.to_string();
        assert_eq!(before.steps.len(), unfused_steps, "{name} unfused:\n{before}");
        assert_eq!(after.steps.len(), fused_steps, "{name} fused:\n{text}");
        let fused = text.lines().filter(|l| l.contains("gemm") && l.contains("_program_f32")).count();
        assert_eq!(fused, fused_gemms, "{name}:\n{text}");
        // What remains of the elementwise launches reads no GEMM result.
        let ew_after_gemm = |p: &planner::plan::Plan| {
            let lines: Vec<String> = p.to_string().lines().map(str::to_string).collect();
            lines
                .windows(2)
                .filter(|w| {
                    w[0].contains("gemm") && (w[1].contains("add_f32") || w[1].contains("ew_program_f32"))
                })
                .count()
        };
        assert!(ew_after_gemm(&before) > 0, "{name}: the unfused plan has GEMM -> elementwise pairs");
        assert_eq!(ew_after_gemm(&after), 0, "{name}:\n{text}");
    }
    // GPT-2: the residual adds after the attention projection and after the MLP projection are
    // in the tensor-core GEMMs' epilogues, and the 8-op GELU after FC1 is the epilogue's GeluTanh.
    let model = onnx::load_path(&fixtures().join("gpt2.onnx")).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    let text = compile(&graph, &planner::Binding::new(), &PlanOptions::default()).unwrap().to_string();
    // (The fixture's rows of 64 are below NORM_GEMM_MIN_K: its LayerNorms stay launches.)
    assert_eq!(text.matches("Gemm+GeluTanh gemm_tc_packed_f32").count(), 2, "{text}");
    assert_eq!(text.matches("Gemm+Add gemm_tc_packed_program_f32").count(), 4, "{text}");
    assert!(!text.contains("Sum[8 ops] ew_program_f32"), "{text}");
    // The embedding add runs in the token embedding Gather (`gather_program_f32`).
    assert!(!text.contains("add_f32") && text.contains("Gather+Add gather_program_f32"), "{text}");
}

/// Each attention of the GPT-2-style and BERT-style fixtures (QKV projection, split or per-head
/// projections, reshapes and transposes, scaled and masked scores, softmax, `· V`, transpose back)
/// compiles to one `attention_f32` launch (too few query tiles for the tensor cores) reading the
/// projections in place: GPT-2 36 -> 24 steps (its reshaped input_ids read in place, no copy;
/// unfused, the score and context GEMMs already read and write the heads through strides),
/// BERT 46 -> 32 (its Q, K and V projections of each layer one GEMM, `plan/siblings.rs`, whose
/// bias rows no longer need adds of their own). Checked without a GPU; `host/tests/gpu_kernels/models.rs` runs them.
#[test]
fn fixture_attentions_fuse_into_one_launch_each() {
    use planner::plan::{Arg, PlanOptions, Step, compile};
    let binding = planner::Binding::new();
    for (name, unfused_steps, fused_steps) in [("gpt2", 36, 24), ("bert", 46, 32)] {
        let model = onnx::load_path(&fixtures().join(format!("{name}.onnx"))).expect("model loads");
        let graph = onnx::to_graph(&model).expect("model converts");
        // (The GEMM-epilogue fusion off in both, so that this counts the attention pass alone.)
        let on = PlanOptions { fuse_gemm_programs: false, ..PlanOptions::default() };
        let off = PlanOptions { fuse_attention: false, ..on };
        let unfused = compile(&graph, &binding, &off).expect("unfused plan");
        let plan = compile(&graph, &binding, &on).expect("fused plan");
        plan.validate().expect("the plan's invariants hold");
        let text = plan.to_string();
        assert_eq!((unfused.steps.len(), plan.steps.len()), (unfused_steps, fused_steps), "{name}:\n{text}");
        let attention: Vec<&Step> = plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Kernel { kernel: kernels_gpu::abi::KernelId::AttentionF32, .. }))
            .collect();
        assert_eq!(attention.len(), 2, "{name}: one launch per layer:\n{text}");
        assert!(!text.contains("softmax_f32") && !text.contains("strided_copy_b4"), "{name}:\n{text}");
        // Scores and probabilities have no buffer: nothing the launches write or read is
        // [B, H, S, S].
        for step in attention {
            let Step::Kernel { args, .. } = step else { unreachable!() };
            for a in args {
                if let Arg::Value(v) = a {
                    let dims = plan.values[v.index()].dims.clone().unwrap_or_default();
                    assert!(dims.len() < 4 || dims[2] != dims[3] || dims[1] == 1, "{name}: {v} {dims:?}");
                }
            }
        }
    }
}

/// Both transformer fusions together (attention, then GEMM epilogues) with the default options:
/// GPT-2 17 steps (the tied LM-head weight and the reshaped input_ids read in place, the position
/// embedding added in the token embedding Gather; its rows of 64 are too
/// short for the LayerNorm fold), BERT 23 (one GEMM for each layer's Q, K and V), and the plans
/// stay valid.
#[test]
fn transformer_plans_with_every_fusion() {
    use planner::plan::{PlanOptions, compile};
    for (name, steps) in [("gpt2", 17), ("bert", 23)] {
        let model = onnx::load_path(&fixtures().join(format!("{name}.onnx"))).expect("model loads");
        let graph = onnx::to_graph(&model).expect("model converts");
        let plan = compile(&graph, &planner::Binding::new(), &PlanOptions::default()).expect("plan");
        plan.validate().expect("the plan's invariants hold");
        let text = plan.to_string();
        assert_eq!(plan.steps.len(), steps, "{name}:\n{text}");
        assert_eq!(text.matches("attention_f32").count(), 2, "{name}:\n{text}");
        assert!(
            !text.contains("softmax_f32") && !text.contains("Sum[8 ops] ew_program_f32"),
            "{name}:\n{text}"
        );
    }
}

/// The session's constant folding (`host::fold_constants`, which runs before every GPU compile)
/// changes no result: the fixtures give the same bits on the reference executor folded and not,
/// and GPT-2's causal mask (built from a constant buffer by comparisons and `Where`) is folded.
#[test]
fn constant_folding_keeps_the_fixtures_results() {
    let dir = fixtures();
    for (name, inputs) in [
        ("gpt2", &["input_ids"][..]),
        ("bert", &["input_ids", "attention_mask", "token_type_ids"][..]),
        ("cnn", &["x"][..]),
    ] {
        let model = onnx::load_path(&dir.join(format!("{name}.onnx"))).expect("model loads");
        let graph = onnx::to_graph(&model).expect("model converts");
        let folded = host::fold_constants(graph.clone());
        let feeds: Vec<(String, HostTensor)> =
            inputs.iter().map(|i| (i.to_string(), npy(&dir.join(format!("{name}.in.{i}.npy"))))).collect();
        let want = host::reference::eval(&graph, &feeds).expect("original runs");
        let got = host::reference::eval(&folded, &feeds).expect("folded runs");
        assert_eq!(got, want, "{name}: folding changed a result");
        if name == "gpt2" {
            assert!(folded.nodes.len() < graph.nodes.len(), "gpt2: nothing folded");
            assert!(
                !folded.nodes.iter().any(|n| matches!(n.op, planner::Op::Where)),
                "gpt2: the mask's Where stays"
            );
        }
    }
}
