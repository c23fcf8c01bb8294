//! [`SessionOptions`]: the switches of a session, settable by name (`ferrofuse run --set`), and
//! its precision (`ferrofuse run --precision`).

pub use planner::plan::Precision;

/// Session options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionOptions {
    /// Capture each binding's steps as a CUDA graph and replay it (default on).
    pub cuda_graph: bool,
    /// Fuse activations into GEMM epilogues (default on).
    pub fuse_activations: bool,
    /// Fuse chains of elementwise ops into elementwise programs (default on).
    pub fuse_elementwise: bool,
    /// Fuse an elementwise program (or op) that alone reads a GEMM's result into the GEMM's
    /// epilogue (default on).
    pub fuse_gemm_programs: bool,
    /// Keep the state of sequence nodes on the device across runs, named after the node, until
    /// [`Session::reset_state`](crate::Session::reset_state) (default off: each run starts from
    /// the nodes' initial-state inputs, or zeros). For step-by-step decoding: a run of length 1
    /// continues the previous run.
    pub stateful: bool,
    /// Run the GEMMs too small to fill the device with CUDA-core tiles on the tensor cores
    /// (3xTF32, f32 accuracy) instead of split-K launches (default on).
    pub tensor_core_gemm: bool,
    /// Run the GEMMs large enough to fill the device with 64 x 64 tiles on the large-tile
    /// tensor-core kernels (3xTF32, f32 accuracy, a `cp.async` pipeline) instead of the CUDA-core
    /// kernel (default on).
    pub tile_gemm: bool,
    /// Fold a LayerNormalization read only by a tensor-core GEMM with a constant B into that GEMM
    /// (default on).
    pub fuse_layer_norm_gemm: bool,
    /// Upload the weight B of each tensor-core GEMM packed at plan time, split into its TF32 parts
    /// in the order the kernel reads it (`gemm_tc_packed_f32`), instead of the weight itself
    /// (default on).
    pub pack_gemm_weights: bool,
    /// With `pack_gemm_weights`, also pack such a weight that the device computes from the
    /// model's weights (an int8 model's dequantized weights), on the device once per binding
    /// (default on).
    pub pack_computed_weights: bool,
    /// In `exact` precision, run the GEMMs and convolutions whose operands are integers TF32
    /// holds exactly (a quantized model's) on the TF32 entries: the same result, a third of the
    /// tensor-core work (default on).
    pub tf32_integer_products: bool,
    /// Apply an elementwise program after a `wgmma` convolution in its epilogue rather than as a
    /// step after it (default off: slower on the H100, the interpreter in the convolution).
    pub conv_program_epilogue: bool,
    /// Launch each kernel as a programmatic dependent of the previous one where the loaded kernels
    /// support it (Hopper): its launch overlaps the previous kernel's completion and its blocks
    /// wait for that kernel on the device, which shortens the gaps between steps (default on).
    pub programmatic_launch: bool,
    /// Run attention on the tensor cores where it fits (`attention_tc_f32`, 3xTF32 with f32
    /// accuracy; default on).
    pub tensor_core_attention: bool,
    /// Take `attention_flash_f32` where both heads are at most 64 (a warp per 16 query rows over
    /// all their keys; default off: slower than `attention_tc_f32` on every shape measured).
    pub flash_attention: bool,
    /// Keep a short-k `wgmma` GEMM's whole B in shared memory over several row tiles (the
    /// GNN's segmented GEMMs; default off: slower there, 2515 against 1961 µs on the H100).
    pub resident_b: bool,
    /// Lift transformers' chunked Mamba-2 SSD to one `SSDScan` (past 512 steps only where the
    /// chunked scan kernel's blocks fill the device; default on).
    pub lift_ssd: bool,
    /// Lift spelled-out rotary embeddings (`x·cos + rotate_half(x)·sin`) to one
    /// `RotaryEmbedding` launch each (default on).
    pub lift_rotary: bool,
    /// Read sequence operands where they lie through row strides: causal convs between
    /// transposes run channels-last, `SSDScan` / conv inputs that are Split or Slice parts are
    /// read from the split tensor (default on).
    pub row_views: bool,
    /// Run a chunked `SSDScan` whose blocks leave multiprocessors idle in spans of chunks in
    /// parallel (default on; off, sequences past 512 steps lift only where the blocks fill the
    /// device).
    pub ssd_spans: bool,
    /// Run Mamba-1 selective scans of more than one step with state size N <= 32 chunked over time
    /// (`selective_scan_chunked_f32`), not sequentially (default on).
    pub chunked_selective_scan: bool,
    /// Run WKV6 whose heads leave multiprocessors idle in spans of the sequence in parallel
    /// (default on).
    pub wkv_spans: bool,
    /// Fuse attention chains (`MatMul -> [elementwise] -> Softmax -> MatMul`) into one kernel
    /// each (default on).
    pub fuse_attention: bool,
    /// Split the k rounds of each column tile of a tensor-core GEMM whose tiles fill at most half
    /// the device over a pair of blocks (a thread-block cluster of two; Hopper only, default on).
    pub pair_gemm: bool,
    /// Run the GEMMs that take a large-tile tensor-core kernel and whose B is a weight on
    /// Hopper's `wgmma` (`gemm_wg_*`, the weight packed at plan time; Hopper only, default on).
    pub wgmma_gemm: bool,
    /// On Hopper, split the k of a `wgmma` GEMM whose tiles number fewer than two per
    /// multiprocessor into chunks reduced by a second launch, as the `mma.sync` tiles do
    /// (default off: measured slower).
    pub split_k_wgmma: bool,
    /// Mark the weights' accesses as persisting in L2 (an access-policy window on every launch,
    /// with L2 set aside for the context where the device has it), so that they stay cached from
    /// one run to the next (default on).
    pub l2_persist_weights: bool,
    /// Run graphs with f16 / bf16 values computed and stored in f32 (weights widened when the
    /// plan is made, inputs cast up and outputs cast down on the device; default on, until
    /// native f16 / bf16 kernels take them); off refuses the nodes without such kernels by name.
    pub widen_narrow_floats: bool,
    /// The GEMMs of an f16 / bf16 model (every MatMul / Gemm operand of that type) multiply in
    /// its type on the large-tile tensor cores when `precision` is the default exact and the
    /// device has no `wgmma` GEMMs (default on; on Hopper the exact `wgmma` entries are as fast
    /// and more accurate; `PlanOptions::narrow_gemms`).
    pub narrow_gemms: bool,
    /// Skip the keys that an attention's causal mask hides (the ONNX `is_causal` flag, or a
    /// constant additive mask of `-inf` or the f32 minimum past a diagonal) instead of reading
    /// and masking them (default on). A NaN or infinite key at a hidden position then no longer
    /// turns the rows that hide it into NaN, as in the unfused graph and the CPU reference (and
    /// as in other fused causal attention); off keeps that exact.
    pub skip_hidden_keys: bool,
    /// Run the steps that compute values of the weights alone (masks built from constant
    /// positions, position-embedding lookups, weights dequantized or rearranged by the graph) once
    /// per binding instead of every run (default on). Their results keep their arena slots.
    pub hoist_constants: bool,
    /// How the tensor-core GEMMs form their products (default [`Precision::Exact`]: f32
    /// accuracy; [`Precision::Tf32`]: operands reduced to TF32, one product instead of three).
    pub precision: Precision,
    /// Most iterations one Loop node may run before the run fails naming it (default
    /// [`MAX_LOOP_ITERATIONS`](crate::reference::MAX_LOOP_ITERATIONS), as on the CPU reference):
    /// a server can refuse models whose loops would run for ever (`ferrofuse run
    /// --max-loop-iterations`).
    pub max_loop_iterations: u64,
    /// Most device bytes the session may hold (weights, arena, inputs and outputs, state, the
    /// run-time region): an allocation that would pass it fails before it is made with
    /// [`HostError::Budget`](crate::HostError::Budget) naming what it was for (`ferrofuse run
    /// --max-memory`). `None` (the default): the device's memory is the limit, and running out of
    /// it is [`HostError::OutOfMemory`](crate::HostError::OutOfMemory), also naming it.
    pub max_memory: Option<u64>,
}

/// A switch of [`SessionOptions`] by name, for [`SessionOptions::set`].
type Switch = (&'static str, fn(&mut SessionOptions) -> &mut bool);

impl SessionOptions {
    /// Every option, by its field name.
    const SWITCHES: [Switch; 31] = [
        ("cuda_graph", |o| &mut o.cuda_graph),
        ("fuse_activations", |o| &mut o.fuse_activations),
        ("fuse_elementwise", |o| &mut o.fuse_elementwise),
        ("fuse_gemm_programs", |o| &mut o.fuse_gemm_programs),
        ("stateful", |o| &mut o.stateful),
        ("tensor_core_gemm", |o| &mut o.tensor_core_gemm),
        ("tile_gemm", |o| &mut o.tile_gemm),
        ("fuse_layer_norm_gemm", |o| &mut o.fuse_layer_norm_gemm),
        ("pack_gemm_weights", |o| &mut o.pack_gemm_weights),
        ("pack_computed_weights", |o| &mut o.pack_computed_weights),
        ("tf32_integer_products", |o| &mut o.tf32_integer_products),
        ("conv_program_epilogue", |o| &mut o.conv_program_epilogue),
        ("programmatic_launch", |o| &mut o.programmatic_launch),
        ("tensor_core_attention", |o| &mut o.tensor_core_attention),
        ("flash_attention", |o| &mut o.flash_attention),
        ("resident_b", |o| &mut o.resident_b),
        ("lift_ssd", |o| &mut o.lift_ssd),
        ("row_views", |o| &mut o.row_views),
        ("lift_rotary", |o| &mut o.lift_rotary),
        ("ssd_spans", |o| &mut o.ssd_spans),
        ("chunked_selective_scan", |o| &mut o.chunked_selective_scan),
        ("wkv_spans", |o| &mut o.wkv_spans),
        ("fuse_attention", |o| &mut o.fuse_attention),
        ("pair_gemm", |o| &mut o.pair_gemm),
        ("wgmma_gemm", |o| &mut o.wgmma_gemm),
        ("split_k_wgmma", |o| &mut o.split_k_wgmma),
        ("l2_persist_weights", |o| &mut o.l2_persist_weights),
        ("skip_hidden_keys", |o| &mut o.skip_hidden_keys),
        ("widen_narrow_floats", |o| &mut o.widen_narrow_floats),
        ("narrow_gemms", |o| &mut o.narrow_gemms),
        ("hoist_constants", |o| &mut o.hoist_constants),
    ];

    /// The options' names (their field names), as [`SessionOptions::set`] takes them.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::SWITCHES.iter().map(|(name, _)| *name)
    }

    /// Sets the option `name` (a field name, as in [`SessionOptions::names`], or `fusion`: every
    /// fusion pass at once, [`SessionOptions::with_fusion`]) to `on`; an unknown name is an error
    /// that lists the known ones.
    pub fn set(&mut self, name: &str, on: bool) -> Result<(), String> {
        if name == "fusion" {
            *self = self.with_fusion(on);
            return Ok(());
        }
        let Some((_, field)) = Self::SWITCHES.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = Self::names().collect();
            return Err(format!("unknown session option `{name}` (known: fusion, {})", known.join(", ")));
        };
        *field(self) = on;
        Ok(())
    }

    /// These options with every fusion pass on or off: activations and elementwise programs,
    /// GEMM epilogue programs, LayerNorm folds into GEMMs, attention (and with it the merged
    /// Q / K / V projections). Lifts of exporter patterns and hoisting are not fusion and stay.
    pub fn with_fusion(self, on: bool) -> Self {
        SessionOptions {
            fuse_activations: on,
            fuse_elementwise: on,
            fuse_gemm_programs: on,
            fuse_layer_norm_gemm: on,
            fuse_attention: on,
            ..self
        }
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            cuda_graph: true,
            fuse_activations: true,
            fuse_elementwise: true,
            fuse_gemm_programs: true,
            stateful: false,
            tensor_core_gemm: true,
            tile_gemm: true,
            fuse_layer_norm_gemm: true,
            pack_gemm_weights: true,
            pack_computed_weights: true,
            tf32_integer_products: true,
            conv_program_epilogue: false,
            programmatic_launch: true,
            tensor_core_attention: true,
            flash_attention: false,
            resident_b: false,
            lift_ssd: true,
            row_views: true,
            lift_rotary: true,
            ssd_spans: true,
            chunked_selective_scan: true,
            wkv_spans: true,
            fuse_attention: true,
            pair_gemm: true,
            wgmma_gemm: true,
            split_k_wgmma: false,
            l2_persist_weights: true,
            skip_hidden_keys: true,
            widen_narrow_floats: true,
            narrow_gemms: true,
            hoist_constants: true,
            precision: Precision::Exact,
            max_loop_iterations: crate::reference::MAX_LOOP_ITERATIONS,
            max_memory: None,
        }
    }
}

/// `Ok` when `bytes` more beside `held` stays within `budget` ([`SessionOptions::max_memory`]; `None`: no budget); else the
/// held bytes and the budget.
pub(super) fn within_budget(budget: Option<u64>, held: u64, bytes: u64) -> Result<(), (u64, u64)> {
    match budget {
        Some(max) if held.saturating_add(bytes) > max => Err((held, max)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::SessionOptions;

    #[test]
    fn every_named_option_is_a_distinct_field() {
        let mut seen = Vec::new();
        for name in SessionOptions::names() {
            let (mut on, mut off) = (SessionOptions::default(), SessionOptions::default());
            on.set(name, true).unwrap();
            off.set(name, false).unwrap();
            assert_ne!(on, off, "{name}");
            assert!(!seen.contains(&(on, off)), "{name} sets the same field as another name");
            seen.push((on, off));
        }
        assert!(SessionOptions::default().set("no_such_option", true).unwrap_err().contains("known: fusion"));
        // The master switch sets every fusion pass and nothing else.
        let mut off = SessionOptions::default();
        off.set("fusion", false).unwrap();
        assert_eq!(off, SessionOptions::default().with_fusion(false));
        assert!(!off.fuse_attention && !off.fuse_elementwise && off.hoist_constants && off.cuda_graph);
        off.set("fusion", true).unwrap();
        assert_eq!(off, SessionOptions::default());
    }

    #[test]
    fn the_budget_counts_what_is_held() {
        use super::within_budget;
        assert_eq!(within_budget(None, u64::MAX, 1), Ok(()));
        assert_eq!(within_budget(Some(100), 60, 40), Ok(()));
        assert_eq!(within_budget(Some(100), 60, 41), Err((60, 100)));
        assert_eq!(within_budget(Some(100), u64::MAX, 1), Err((u64::MAX, 100)));
    }
}
