//! `compile`: Graph -> Plan, the contract the GPU session executes.
//!
//! Reads like its stages: bind the symbolic input dims and infer shapes, lift exporter patterns
//! to the operators they spell (`lifts`: scans, rolled-up maps, RMS norms, causal convolutions,
//! concatenated gathers), make exporter spellings canonical (`canon`) and merge sibling
//! projections (`siblings`), fuse activations into the GEMM that feeds them (and the other fusion
//! passes), size the scratch buffers some lowerings need, order the steps of the weights alone
//! first (`hoist`: run once per binding, [`Plan::hoisted`]), plan the arena, pack the weights of
//! the tensor-core GEMMs (`tc_pack`), then lower each node (in the memory plan's order) to kernel
//! launches or a device copy. Every node without a kernel is reported at once
//! ([`PlanError::NoKernel`]); nothing falls back to the CPU silently. The plan is plain serde data
//! and prints one line per step.
//!
//! Recurrent state: compiled with [`PlanOptions::stateful`], each sequence node that keeps state
//! across calls gets a persistent slot in [`Plan::states`], named after the node; its kernel reads
//! the initial state from [`Arg::State`] and writes the final state back to the same slot, which
//! the session keeps on the device between runs (see `sequence` for which ops keep state).

mod attention;
mod attention_op;
mod blocks;
mod canon;
#[cfg(test)]
mod clip_tests;
mod contract;
mod conv;
mod conv_lift;
mod dead;
mod decompose;
mod display;
mod elementwise;
mod epilogue;
#[cfg(test)]
mod epilogue_tests;
mod ew_ops;
mod fuse;
mod gather_concat;
mod gather_grid;
mod gemm;
mod gemm_cat;
mod hoist;
mod indexing;
mod integers;
mod linear_attention;
mod logic;
mod loss;
mod lower;
mod mlp;
mod movement;
mod noop;
mod norm;
mod norm_gemm;
mod norm_lift;
mod precision;
mod quantize_fold;
#[cfg(test)]
mod quantize_tests;
mod recurrent;
mod reduce;
mod reroll;
mod resize;
mod rotary;
mod rotary_lift;
mod row_views;
mod rows;
mod sampling;
mod scan_lift;
pub(crate) mod scan_program;
mod select;
mod sequence;
mod siblings;
mod ssd_epilogue;
mod ssd_lift;
mod tc_pack;
mod vision;
mod widen;

use kernels_gpu::abi::KernelId;
use serde::{Deserialize, Serialize};

pub use elementwise::{binary_params, broadcast_strides};
pub use movement::transpose_params;
pub use precision::Precision;
pub use reduce::reduce_params;
pub use select::{Nms, NonZero, UniqueSteps};

use crate::error::PlanError;
use crate::graph::{Graph, NodeId, ValueId};
use crate::memory::{self, MemoryOptions, MemoryPlan, Scratch};
use crate::shape_infer;
use crate::tensor_info::{Binding, DType, TensorInfo};

/// Threads per block of the grid-stride kernels (elementwise, data movement, row kernels).
pub const GRID_STRIDE_THREADS: u32 = 256;
/// Resident blocks per multiprocessor their grids are capped at (the kernels grid-stride beyond).
const BLOCKS_PER_SM: u32 = 16;

/// A 1-D grid of `blocks` blocks, at least one and capped at a few resident waves of a device with
/// `sm_count` multiprocessors.
pub fn capped_grid(sm_count: u32, blocks: u64) -> [u32; 3] {
    let cap = (sm_count.max(1) * BLOCKS_PER_SM) as u64;
    [blocks.clamp(1, cap) as u32, 1, 1]
}

/// Compile options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanOptions {
    /// Multiprocessors of the target device (grid sizing of grid-stride kernels).
    pub sm_count: u32,
    /// Memory-planning options.
    pub memory: MemoryOptions,
    /// Fuse an activation that is a GEMM's only consumer into the GEMM's epilogue.
    pub fuse_activations: bool,
    /// Fuse chains of f32 elementwise ops into elementwise programs (one kernel each).
    pub fuse_elementwise: bool,
    /// The target runs the Hopper flavour (thread-block clusters): chains of small-`m` GEMM
    /// layers (batch-1 MLPs) become one `mlp_f32` launch.
    pub cluster_mlp: bool,
    /// Fuse an elementwise program (or op) that is the only reader of a Gemm / MatMul result into
    /// the GEMM kernel's epilogue.
    pub fuse_gemm_programs: bool,
    /// Fuse `MatMul -> [elementwise] -> Softmax -> MatMul` attention chains (operands read in place
    /// through strides) into one attention kernel each.
    pub fuse_attention: bool,
    /// Keep the state of sequence nodes in persistent slots ([`Plan::states`]) read and written by
    /// every run, instead of reading it from the node's optional initial-state input (stateful
    /// decoding: a run of L = 1 continues where the previous run stopped).
    pub stateful: bool,
    /// Run the GEMMs whose output tiles cannot fill the device on the tensor cores
    /// (`gemm_tc_f32`, 3xTF32 with f32 accuracy) instead of split-K launches on the CUDA cores.
    pub tensor_core_gemm: bool,
    /// Run the GEMMs whose output tiles fill the device on the large-tile tensor-core kernels
    /// (`gemm_tc128_*_f32`, `gemm_tc64_*_f32`: 3xTF32 through a `cp.async` pipeline) instead of
    /// the CUDA-core `gemm_f32`, where their operands are unit-stride along a dimension
    /// (`gemm::tile_launch`).
    pub tile_gemm: bool,
    /// Pack the weight B of each GEMM that runs on the tensor cores at plan time, split into its
    /// TF32 parts and laid out as the kernel's lanes read it (`gemm_tc_packed_f32`: no B
    /// splitting, 16-byte loads); the packed constant replaces the weight on the device.
    pub pack_gemm_weights: bool,
    /// With [`PlanOptions::pack_gemm_weights`], also pack the B (W) of such GEMMs (and `wgmma`
    /// convolutions) that the device computes from the weights alone, as an int8 model's
    /// dequantized weights, on the device right after computing it (once per binding where that
    /// is hoisted; `tc_pack::DevicePack`), instead of reading it unpacked.
    pub pack_computed_weights: bool,
    /// In `exact` precision, run the GEMMs and convolutions whose two operands hold integers that
    /// TF32 represents exactly (`integers.rs`: a quantized model's products of integers less their
    /// zero points) on the TF32 entries: the same result, one product instead of three.
    pub tf32_integer_products: bool,
    /// Apply an elementwise program after a `wgmma` convolution in its epilogue (when its inputs'
    /// offsets are linear in the image, the channel and the position) rather than as a step after
    /// it. Off by default: on the H100 (session 35) the interpreter in the convolution's epilogue
    /// cost more than the separate pass it saves (CNN int8 at batch 64 2031 µs on, 1470 off).
    pub conv_program_epilogue: bool,
    /// Fold a LayerNormalization read only by a GEMM on the packed tensor-core path into that
    /// GEMM (it normalizes A's rows as it loads them).
    pub fuse_layer_norm_gemm: bool,
    /// Run attention on the tensor cores (`attention_tc_f32`, 16-row query tiles, 3xTF32 with f32
    /// accuracy) where the value head fits it, the score program is arithmetic only and the tiles
    /// fill at least half the device (`attention::tensor_core_attention`).
    pub tensor_core_attention: bool,
    /// Take `attention_flash_f32` (a warp per 16 query rows over all their keys, K and V tiles
    /// shared by the block) where both heads are at most 64 (`attention::flash_warps`). Off by
    /// default: slower than `attention_tc_f32` / `attention_f32` on every shape measured (session
    /// 37, H100: BERT and GPT-2 at batch 16 91 against 59 µs a launch, at batch 1 two to three
    /// times slower, the TICL encoders at sequence 2048 1.9 times), its warps too few and their
    /// chains too long for a kernel this latency-bound (see its module doc).
    pub flash_attention: bool,
    /// Keep a short-k `wgmma` GEMM's whole B in shared memory over several row tiles
    /// (`gemm_wg64_cat_resident_f32`, where `gemm::resident_rows` takes it). Off by default: on
    /// the GNN at 100k nodes (H100, session 48) its six GEMMs took 2515 µs against the plain
    /// entry's 1961 (each block restarts its pipeline at every row tile).
    pub resident_b: bool,
    /// Lift transformers' chunked Mamba-2 SSD (segment sums over `CumSum`, `exp`, the chunk
    /// contractions) to the one `SSDScan` it computes (`ssd_lift.rs`; default on).
    pub lift_ssd: bool,
    /// Lift spelled-out rotary embeddings (`x·cos + rotate_half(x)·sin` of Slices, Neg and
    /// Concats) to `RotaryEmbedding` (`rotary_lift.rs`; default on).
    pub lift_rotary: bool,
    /// Read operands where they lie through row strides (`row_views.rs`): a causal conv between
    /// transposes to and from `(B, L, D)` runs channels-last, and the `SSDScan` / conv inputs
    /// that are parts of a last-axis Split or Slice are read from the split tensor (default on).
    pub row_views: bool,
    /// Split a chunked `SSDScan` whose blocks leave multiprocessors idle into spans of chunks run
    /// in parallel (`ssd_chunk_states_f32`, `ssd_chunk_pass_f32`, then `ssd_chunk_f32` per span;
    /// default on: Mamba2 at batch 1 x 256 346 → 296 µs on the H200, x 2048 1958 → 1172 lifted);
    /// with it on, long sequences lift at any batch, off the 512-step gate applies.
    pub ssd_spans: bool,
    /// Run the Mamba-1 selective scan of more than one step with state size N <= 32 chunked over
    /// time (`selective_scan_chunked_f32`: a warp per 8-step chunk of a window, the chunks' carries
    /// folded in shared memory), not sequentially (`selective_scan_f32`). Default on (H100, the
    /// OPS.md Mamba block at batch 1 x 2048: 4057 → 858 µs; SOFIE's Mamba 2560 → 806 µs).
    pub chunked_selective_scan: bool,
    /// Run a WKV6 whose `(b, head)` blocks leave multiprocessors idle in spans of the sequence in
    /// parallel (`wkv6_f32` over the spans from zero, `wkv6_pass_f32` chaining their states, then
    /// `wkv6_f32` over the spans from their first states). Default on (H100, the OPS.md RWKV block
    /// at batch 1 x 2048: 5008 → 712 µs, x 256: 726 → 303 µs).
    pub wkv_spans: bool,
    /// The target runs the Hopper flavour (thread-block clusters): a tensor-core GEMM whose tiles
    /// fill at most half the device and want more than `GEMM_TC_MAX_WARPS` warps each splits every
    /// column tile's k rounds over a pair of blocks (`gemm_tc_*_pair_f32`).
    pub pair_gemm: bool,
    /// The target runs the Hopper flavour: a GEMM that takes a large-tile tensor-core kernel
    /// and whose B is a weight runs on `wgmma` (`gemm_wg_*`), its weight packed at plan time
    /// (with [`PlanOptions::pack_gemm_weights`]).
    pub wgmma_gemm: bool,
    /// A `wgmma` GEMM whose 64 x 64 tiles number fewer than two per multiprocessor still splits its
    /// k into chunks reduced by a second launch, as the `mma.sync` tiles do (`gemm::tile_launch`);
    /// off (the default), it runs unsplit (`gemm::splits_of`).
    pub split_k_wgmma: bool,
    /// Attention whose mask hides every key past a diagonal (the ONNX `is_causal` flag, or a
    /// constant additive mask of `-inf` or the f32 minimum above it) does not read the hidden
    /// keys (`ATTN_CAUSAL_SKIP`). A NaN or infinite key at a hidden position then no longer turns
    /// the rows that hide it into NaN, as the unfused softmax does; off keeps that exact.
    pub skip_hidden_keys: bool,
    /// How the tensor-core GEMMs form their products ([`Precision`]).
    pub precision: Precision,
    /// A graph widened from f16 / bf16 whose MatMul / Gemm operands all have one of those types
    /// (`widen::Widened::gemms`) plans its GEMMs in that precision when `precision` is the
    /// default exact and the target has no `wgmma` GEMMs (default on): the model asks for
    /// products of f16 / bf16 operands, which the `mma.sync` tiles form twice as fast as TF32
    /// ones; on Hopper the exact `wgmma` entries are as fast and more accurate. The plan records
    /// the precision it took.
    pub narrow_gemms: bool,
    /// Compute graphs with f16 / bf16 values in f32 (`widen.rs`; default on); off, the nodes
    /// without an f16 / bf16 kernel of their own are refused by name.
    pub widen_narrow_floats: bool,
    /// How close (relative to `1 + |x|`) a spelled-out activation must come to a built-in one to
    /// run as it (`epilogue::as_activation`, the closest one that fits; default 2e-6, f32
    /// rounding). In a graph widened from f16 / bf16, programs whose constants are all values of
    /// those types get 2e-5 / 5e-4 (GPT-2's GELU-tanh with f16 constants is 5.7e-6 from the
    /// exact one, with bf16 ones 1.5e-4); a tolerance set tighter than the default is kept.
    pub activation_tolerance: f32,
    /// Order the steps that read only weights (and each other's results) first, as
    /// [`Plan::hoisted`], to be run once per binding instead of every run (`hoist.rs`; default
    /// on). Their results that later steps read keep their arena slots for the whole run.
    pub hoist_constants: bool,
    /// Most bytes of hoisted results kept in the arena across runs (default
    /// [`HOIST_MAX_BYTES`]): past it, the largest are computed every run again. Weights the
    /// device packs for the tensor cores (`tc_pack::DevicePack`) stand for weights and are not
    /// counted.
    pub hoist_max_bytes: u64,
}

/// Default [`PlanOptions::hoist_max_bytes`]: 16 MiB (a causal mask of 2048 x 2048 f32 fits;
/// the zero-filled scatter targets of a 100k-node GNN do not, and are filled every run).
pub const HOIST_MAX_BYTES: u64 = 16 << 20;

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            sm_count: 132,
            memory: MemoryOptions::default(),
            fuse_activations: true,
            fuse_elementwise: true,
            cluster_mlp: true,
            fuse_gemm_programs: true,
            fuse_attention: true,
            stateful: false,
            tensor_core_gemm: true,
            tile_gemm: true,
            fuse_layer_norm_gemm: true,
            pack_gemm_weights: true,
            pack_computed_weights: true,
            tf32_integer_products: true,
            conv_program_epilogue: false,
            pair_gemm: true,
            wgmma_gemm: true,
            split_k_wgmma: false,
            tensor_core_attention: true,
            flash_attention: false,
            resident_b: false,
            lift_ssd: true,
            row_views: true,
            lift_rotary: true,
            ssd_spans: true,
            chunked_selective_scan: true,
            wkv_spans: true,
            skip_hidden_keys: true,
            precision: Precision::Exact,
            narrow_gemms: true,
            widen_narrow_floats: true,
            activation_tolerance: epilogue::F32_ACTIVATION_TOLERANCE,
            hoist_constants: true,
            hoist_max_bytes: HOIST_MAX_BYTES,
        }
    }
}

/// A kernel argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    /// The device address of a value (graph input or output, weight, or arena slot).
    Value(ValueId),
    /// A null pointer (an optional operand that is absent).
    Null,
    /// A `#[repr(C)]` parameter struct, as its bytes.
    Params(Vec<u8>),
    /// The device address of the persistent state slot of this name ([`Plan::states`]); the kernel
    /// may read and write it. Only plans compiled with [`PlanOptions::stateful`] have them.
    State(String),
    /// The device address of a value the kernel writes besides its output (the last
    /// [`Arg::Value`]), such as a sequence op's final state.
    Output(ValueId),
    /// The device address of the session's status word (a u32, zero before each run): a kernel
    /// that finds bad data (a zero integer divisor) raises it to its node's code, which
    /// [`Plan::checks`] maps back to the node for the error the session reports.
    Status,
}

/// A node whose kernel checks its data on the device ([`Arg::Status`]): the code it raises the
/// status word to, and the error the session reports when it finds it there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The status word's value when this node found bad data.
    pub code: u32,
    /// The node, as the planner names it.
    pub node: String,
    /// Its operator.
    pub op: String,
    /// What it found.
    pub detail: String,
}

impl Step {
    /// What the step reads and what it writes: a kernel writes the [`Arg::Value`]s among its last
    /// `written_args()` arguments and every [`Arg::Output`], and only reads its other values; a
    /// copy reads its source and writes its destination. `None` for a kernel with fewer arguments
    /// than it writes.
    pub fn reads_writes(&self) -> Option<(Vec<ValueId>, Vec<ValueId>)> {
        match self {
            Step::Kernel { kernel, args, .. } => {
                let split = args.len().checked_sub(kernel.written_args())?;
                let value = |a: &Arg| if let Arg::Value(v) = a { Some(*v) } else { None };
                let output = |a: &Arg| if let Arg::Output(v) = a { Some(*v) } else { None };
                let writes = args[split..].iter().filter_map(value).chain(args.iter().filter_map(output));
                Some((args[..split].iter().filter_map(value).collect(), writes.collect()))
            }
            Step::Copy { src, dst, .. } => Some((vec![*src], vec![*dst])),
        }
    }

    /// The values the step reads or writes.
    pub fn values(&self) -> Vec<ValueId> {
        match self {
            Step::Kernel { args, .. } => args
                .iter()
                .filter_map(|a| if let Arg::Value(v) | Arg::Output(v) = a { Some(*v) } else { None })
                .collect(),
            Step::Copy { src, dst, .. } => vec![*src, *dst],
        }
    }
}

/// A persistent recurrent-state slot of a stateful plan: f32, kept on the device across runs,
/// zeroed by a reset. Named after the node that owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSlot {
    /// Slot name (the owning node's name, or its id when unnamed).
    pub name: String,
    /// Dims of the state (the node's final-state shape).
    pub dims: Vec<usize>,
}

impl StateSlot {
    /// Bytes of the slot (f32 elements).
    pub fn bytes(&self) -> u64 {
        self.dims.iter().fold(4u64, |acc, &d| acc.saturating_mul(d as u64))
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// A kernel launch.
    Kernel {
        /// The graph nodes this launch computes (more than one when fused).
        nodes: Vec<NodeId>,
        /// Op types, for display and error messages.
        label: String,
        /// The kernel.
        kernel: KernelId,
        /// Grid dimensions.
        grid: [u32; 3],
        /// Block dimensions.
        block: [u32; 3],
        /// Dynamic shared memory bytes.
        shared_bytes: u32,
        /// Arguments in the kernel's parameter order.
        args: Vec<Arg>,
    },
    /// A device-to-device copy (reshapes and identities whose output cannot share the input's
    /// buffer; a graph output that is a constant or a graph input, then `src == dst`: the source
    /// is the weight or input buffer, the destination the output buffer).
    Copy {
        /// The node.
        node: NodeId,
        /// Source value.
        src: ValueId,
        /// Destination value.
        dst: ValueId,
        /// Bytes copied.
        bytes: u64,
    },
}

/// Name, dtype and bound shape of a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedValue {
    /// Value name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Concrete dims, when known after binding (data-dependent values have none).
    pub dims: Option<Vec<usize>>,
}

impl PlannedValue {
    /// The planned values of `g` from its shape inference `infos` (one per value, in order).
    pub(crate) fn of_graph(g: &Graph, infos: &[crate::TensorInfo]) -> Vec<PlannedValue> {
        g.values
            .iter()
            .zip(infos)
            .map(|(v, i)| PlannedValue { name: v.name.clone(), dtype: i.dtype, dims: i.shape.as_known() })
            .collect()
    }

    /// Bytes of the value, when its dims are known.
    pub fn bytes(&self) -> Option<u64> {
        let dims = self.dims.as_ref()?;
        dims.iter().try_fold(self.dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d as u64))
    }
}

/// An executable plan for one binding of the symbolic dims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The binding this plan was compiled for.
    pub binding: Binding,
    /// Graph inputs, in order.
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in order.
    pub outputs: Vec<ValueId>,
    /// Every value of the (fused) graph, indexed by `ValueId`.
    pub values: Vec<PlannedValue>,
    /// Initializers the steps read (original weights and constants folded for this binding),
    /// uploaded to the device with the plan.
    pub weights: Vec<ValueId>,
    /// Their data, by value.
    pub constants: std::collections::BTreeMap<ValueId, crate::ConstTensor>,
    /// Steps, in execution order.
    pub steps: Vec<Step>,
    /// The arena plan.
    pub memory: MemoryPlan,
    /// Persistent recurrent-state slots (stateful plans only), each used by one step.
    #[serde(default)]
    pub states: Vec<StateSlot>,
    /// The first `hoisted` steps compute values of the weights alone (`hoist.rs`): a session
    /// runs them once per binding, before the first run (and again only after something else
    /// used the arena), and every run the steps after them.
    #[serde(default)]
    pub hoisted: usize,
    /// The precision its tensor-core GEMMs were planned in.
    #[serde(default)]
    pub precision: Precision,
    /// The graph rewrites made before fusion, one line each: f16 / bf16 values widened to f32,
    /// and the exporter patterns lifted to one operator (unrolled recurrences as `LinearScan`s,
    /// unrolled maps rolled up, spelled-out RMS normalizations).
    #[serde(default)]
    pub lifted: Vec<String>,
    /// The nodes whose kernels check their data on the device ([`Arg::Status`]); empty when none
    /// does (the session then neither clears nor reads the status word).
    #[serde(default)]
    pub checks: Vec<Check>,
    /// GEMM results written in the layout of the transpose that reads them (`fuse::transposes`):
    /// result -> that transpose's output, whose layout the shared buffer holds. A dump of the
    /// result's buffer is the transpose's value, not the result's.
    #[serde(default)]
    pub stored_as: std::collections::BTreeMap<ValueId, ValueId>,
}

/// The names of the values of `graph` (every input dim known) that its MatMuls, Gemms and
/// Convs read, or that those operands are moved from, proven to hold integers of magnitude at most
/// 2048 (or NaN / infinities), which TF32 represents exactly (`integers.rs`): the operands whose
/// products an exact plan runs on the TF32 entries.
pub fn small_integer_values(graph: &Graph) -> Result<std::collections::HashSet<String>, PlanError> {
    let infos = shape_infer::infer(graph)?;
    Ok(integers::small_integers(graph, &infos))
}

/// `graph` (every input dim known) with its f16 / bf16 values widened to f32 (`widen.rs`), the
/// operators that have no GPU kernel of their own
/// replaced by the simpler ones the plan computes them with (`decompose.rs`: Einsum as batched
/// MatMuls and views, the training optimizers, ...; `contract.rs`: summed broadcast products as
/// Einsums first), unrolled recurrences lifted to scans (`scan_lift.rs`), unrolled maps rolled
/// up (`reroll.rs`) and spelled-out RMS
/// normalizations to `RMSNormalization` (`norm_lift.rs`), exporter spellings made canonical
/// (`canon.rs`), sibling projections merged (`siblings.rs`) and sequence operands read where they
/// lie (`row_views.rs`), as [`compile`] sees it before fusion; `graph`
/// itself when there are none. The CPU reference computes both alike, which is how the expansions
/// are tested.
pub fn decomposed(graph: &Graph) -> Result<Graph, PlanError> {
    let widened = widen::run(graph)?.map(|w| w.graph);
    let graph = widened.as_ref().unwrap_or(graph);
    let ssd = ssd_lift::run(graph, None).map(|(g, _)| g);
    let graph = ssd.as_ref().unwrap_or(graph);
    let g = contract::run(graph).unwrap_or_else(|| graph.clone());
    let g = decompose::run(&g)?.unwrap_or(g);
    let Ok(infos) = shape_infer::infer(&g) else { return Ok(g) };
    let (g, infos, _) = lifts(g, infos, true)?;
    // The canonical spellings and merged projections the fusion passes read.
    let g = canon::run(&g, &infos).unwrap_or(g);
    let Ok(infos) = shape_infer::infer(&g) else { return Ok(g) };
    let g = gather_grid::run(&g, &infos).map_or(g, |(g, _)| g);
    let Ok(infos) = shape_infer::infer(&g) else { return Ok(g) };
    let g = siblings::run(&g, &infos).unwrap_or(g);
    // Sequence operands read where they lie (`row_views.rs`, on by default).
    let Ok(infos) = shape_infer::infer(&g) else { return Ok(g) };
    let g = row_views::channels_last(&g, &infos).map_or(g, |(g, _)| g);
    let Ok(infos) = shape_infer::infer(&g) else { return Ok(g) };
    Ok(row_views::windows(&g, &infos).map_or(g, |(g, _)| g))
}

/// `graph` (of shapes `infos`) with the exporter patterns lifted to one operator each (unrolled
/// recurrences as `LinearScan`s, unrolled maps as one computation over their axis, spelled-out
/// RMS norms as `RMSNormalization`s, spelled-out rotary embeddings as `RotaryEmbedding`s unless
/// `rotary` is off), its shapes, and one line per lift; shapes are inferred again only after a
/// lift.
fn lifts(
    graph: Graph,
    infos: Vec<TensorInfo>,
    rotary: bool,
) -> Result<(Graph, Vec<TensorInfo>, Vec<String>), PlanError> {
    // Ops that change nothing would hide a loop's steps from the walks below.
    let without_noops = noop::run(&graph, &infos);
    let (graph, infos) = reinferred((graph, infos), without_noops)?;
    let (graph, infos, mut lifted) = match scan_lift::run(&graph, &infos) {
        Some((g, lifted)) => {
            let infos = shape_infer::infer(&g)?;
            (g, infos, lifted)
        }
        None => (graph, infos, Vec::new()),
    };
    // Unrolled recurrences of elementwise steps with any carried states, as Scans.
    let scans = scan_lift::recurrence::run(&graph, &infos).map(|(g, scans)| {
        lifted.extend(scans);
        g
    });
    let (graph, infos) = reinferred((graph, infos), scans)?;
    // The steps' other reads (now of the scans' outputs) and every other unrolled map.
    let rolled = reroll::run(&graph, &infos).map(|(g, rolled)| {
        lifted.extend(rolled);
        g
    });
    let (graph, infos) = reinferred((graph, infos), rolled)?;
    let (graph, infos) = counted_lift(graph, infos, norm_lift::run, &mut lifted, |n| {
        format!("{n} RMS normalization(s) spelled out as elementwise ops and a mean: RMSNormalization")
    })?;
    let (graph, infos) = if rotary {
        counted_lift(graph, infos, rotary_lift::run, &mut lifted, |n| {
            format!("{n} rotary embedding(s) spelled out (x·cos + rotate_half(x)·sin): RotaryEmbedding")
        })?
    } else {
        (graph, infos)
    };
    let (graph, infos) = counted_lift(graph, infos, conv_lift::run, &mut lifted, |n| {
        format!(
            "{n} depthwise Conv(s) padded on both sides, sliced to the sequence (and SiLU): CausalConvWithState"
        )
    })?;
    let (graph, infos) = counted_lift(graph, infos, ssd_epilogue::run, &mut lifted, |n| {
        format!("{n} SSDScan skip(s) and gate(s) spelled after the scan (y + D x, y silu(z)): its D and z")
    })?;
    let (graph, infos) = counted_lift(graph, infos, gather_concat::run, &mut lifted, |n| {
        format!("{n} concatenation(s) of rows gathered from one table: one gather of the stacked indices")
    })?;
    Ok((graph, infos, lifted))
}

/// Dynamic shared memory any kernel may take without opting in (`KernelId::large_shared_bytes`).
const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// What `inspect --fusion` says of `n` lifted chunked SSDs.
fn ssd_line(n: usize) -> String {
    format!(
        "{n} chunked SSD(s) (transformers' Mamba-2 reference scan: segment sums over CumSum, exp, \
         the chunk contractions): SSDScan"
    )
}

/// A lift that returns the rewritten graph and how many patterns it lifted (`None`: none).
type CountedLift = fn(&Graph, &[TensorInfo]) -> Option<(Graph, usize)>;

/// `graph` after the lift `pass`, with its shapes inferred again and `line(count)` added to
/// `lifted`.
fn counted_lift(
    graph: Graph,
    infos: Vec<TensorInfo>,
    pass: CountedLift,
    lifted: &mut Vec<String>,
    line: impl Fn(usize) -> String,
) -> Result<(Graph, Vec<TensorInfo>), PlanError> {
    let rewritten = pass(&graph, &infos).map(|(g, n)| {
        lifted.push(line(n));
        g
    });
    reinferred((graph, infos), rewritten)
}

/// `rewritten` with its shapes inferred, when a pass rewrote the graph; else `current` as it is.
fn reinferred(
    current: (Graph, Vec<TensorInfo>),
    rewritten: Option<Graph>,
) -> Result<(Graph, Vec<TensorInfo>), PlanError> {
    Ok(match rewritten {
        Some(g) => {
            let infos = shape_infer::infer(&g)?;
            (g, infos)
        }
        None => current,
    })
}

/// Compiles `graph` for `binding` (every symbolic input dim bound).
pub fn compile(graph: &Graph, binding: &Binding, options: &PlanOptions) -> Result<Plan, PlanError> {
    let folded = crate::fold::run(&memory::bind_inputs(graph, binding)?)?;
    // f16 / bf16 values computed in f32, until kernels take them natively.
    let widening = if options.widen_narrow_floats { widen::run(&folded)? } else { None };
    let (folded, widened, options) = match widening {
        Some(w) => {
            // (A caller who tightened the tolerance keeps it.)
            let loose = options.activation_tolerance >= epilogue::F32_ACTIVATION_TOLERANCE;
            let tolerance = if loose {
                options.activation_tolerance.max(widen::rounding(w.coarsest))
            } else {
                options.activation_tolerance
            };
            // An f16 / bf16 model's GEMMs multiply in its type, as it asks (unless the caller
            // chose a precision or switched this off), where that is faster: without `wgmma`.
            // On Hopper the exact `wgmma` entries run level with the f16 `mma.sync` tiles (H100,
            // GPT-2 f16 at batch 16: 848 µs exact, 842 µs in f16) and are more accurate, so they stay.
            let narrow = match w.gemms {
                Some(DType::F16) => Some(Precision::F16),
                Some(DType::BF16) => Some(Precision::Bf16),
                _ => None,
            };
            let precision = match narrow {
                Some(p)
                    if options.narrow_gemms
                        && options.precision == Precision::Exact
                        && !options.wgmma_gemm =>
                {
                    p
                }
                _ => options.precision,
            };
            let mut lines = vec![w.line];
            if precision != options.precision {
                lines.push(format!(
                    "GEMMs in {precision}: every MatMul / Gemm operand of the model is {precision} \
                     (the large-tile tensor-core products round to it, f32 accumulation)"
                ));
            }
            (w.graph, Some(lines), &PlanOptions { activation_tolerance: tolerance, precision, ..*options })
        }
        None => (folded, None, options),
    };
    // transformers' chunked Mamba-2 SSD as the scan it computes (before `contract` and the
    // decomposition take its contractions apart).
    // In spans the chunked scan fills the device at any batch: no gate on long sequences.
    let gate = (!options.ssd_spans).then_some(options.sm_count);
    let ssd = if options.lift_ssd { ssd_lift::run(&folded, gate) } else { None };
    let (folded, ssd) = match ssd {
        Some((g, n)) => (g, Some(ssd_line(n))),
        None => (folded, None),
    };
    // Summed broadcast products as the Einsums they are, which the decomposition expands.
    let folded = contract::run(&folded).unwrap_or(folded);
    // What a decomposition adds (an inlined FlexAttention modifier's shape arithmetic) folds too.
    let bound = match decompose::run(&folded)? {
        Some(g) => crate::fold::run(&g)?,
        None => folded,
    };
    let infos = shape_infer::infer(&bound)?;
    logic::native_dtypes(&bound, &infos)?;
    // Exporter patterns as the operators they spell (before fusion would split them up).
    let (bound, infos, mut lifted) = lifts(bound, infos, options.lift_rotary)?;
    lifted.splice(0..0, widened.into_iter().flatten().chain(ssd));
    let canonical = canon::run(&bound, &infos);
    let (bound, infos) = reinferred((bound, infos), canonical)?;
    let (bound, infos) = counted_lift(bound, infos, gather_grid::run, &mut lifted, |n| {
        format!("{n} GatherND(s) of their output's coordinate grid: a Reshape and an Expand of the data")
    })?;
    // Q, K and V projections of one value as one GEMM, read by the attention through a Split.
    let sibling = if options.fuse_attention { siblings::run(&bound, &infos) } else { None };
    let (bound, infos) = reinferred((bound, infos), sibling)?;
    // Sequence operands read where they lie: convs channels-last, Split parts as column windows.
    let (bound, infos) = if options.row_views {
        let (bound, infos) = counted_lift(bound, infos, row_views::channels_last, &mut lifted, |n| {
            format!("{n} CausalConvWithState(s) between transposes from and to (B, L, D): channels-last")
        })?;
        counted_lift(bound, infos, row_views::windows, &mut lifted, |n| {
            format!("{n} SSDScan / conv input(s) that are Split or Slice parts: read where they lie")
        })?
    } else {
        (bound, infos)
    };
    // The values holding integers TF32 represents exactly (by name: the fusion passes rebuild the
    // graph), for the products of them (`integers.rs`).
    let small_integers = if options.precision == Precision::Exact && options.tf32_integer_products {
        integers::small_integers(&bound, &infos)
    } else {
        Default::default()
    };
    let (fused, epilogues) =
        if options.fuse_activations { fuse::activations(&bound, &infos) } else { (bound, Vec::new()) };
    let infos = shape_infer::infer(&fused)?;
    let (fused, epilogues, programs) = if options.fuse_elementwise {
        fuse::elementwise_programs(fused, &infos, epilogues)
    } else {
        (fused, epilogues, fuse::Programs::new())
    };
    let infos = shape_infer::infer(&fused)?;
    let (fused, epilogues, programs, attentions) = if options.fuse_attention {
        attention::fuse(fused, &infos, epilogues, programs)
    } else {
        (fused, epilogues, programs, attention::Attentions::new())
    };
    let infos = shape_infer::infer(&fused)?;
    // After the attention pass: its score programs (scale, mask) would otherwise become epilogues
    // of the score MatMuls and hide the pattern.
    let (fused, epilogues, programs, attentions, gemm_programs) = if options.fuse_gemm_programs {
        epilogue::gemm_programs(fused, &infos, epilogues, programs, attentions)
    } else {
        (fused, epilogues, programs, attentions, epilogue::GemmPrograms::new())
    };
    let infos = shape_infer::infer(&fused)?;
    let (fused, epilogues, programs, attentions, gemm_programs, norms) = if options.fuse_layer_norm_gemm {
        norm_gemm::fuse(fused, &infos, epilogues, programs, attentions, gemm_programs, options)
    } else {
        (fused, epilogues, programs, attentions, gemm_programs, norm_gemm::NormGemms::new())
    };
    let infos = shape_infer::infer(&fused)?;
    let mut values = PlannedValue::of_graph(&fused, &infos);
    // An attention's result is written by its own kernel, not through a transpose's strides.
    let (absorbed, operand_perms) = fuse::transposes(&fused, &infos, |y| attentions.contains_key(&y));
    let stored_as =
        (operand_perms.iter()).filter_map(|(y, slots)| Some((*y, slots[2].as_ref()?.1))).collect();
    // Scratch buffers become values after the graph's (the memory plan numbers them the same way).
    let scratch: Vec<(NodeId, PlannedValue)> = (0..fused.nodes.len() as u32)
        .flat_map(|i| {
            lower::scratch(&fused, NodeId(i), &values, &operand_perms, options)
                .into_iter()
                .map(move |v| (NodeId(i), v))
        })
        .collect();
    let mut requests: Vec<Scratch> = (scratch.iter())
        .map(|(node, v)| Scratch { node: *node, bytes: v.bytes().unwrap_or(0), readers: Vec::new() })
        .collect();
    let chains = mlp::Chains::find(&fused, &values, &operand_perms, &epilogues, options);
    // Values no step writes: chain intermediates, and transposes of weights that a MatMul reads in
    // the weight's own layout.
    let defs = fused.definitions();
    let mut elided = chains.elided(&fused);
    elided.extend(absorbed.iter().filter(|t| {
        match defs[t.index()] {
            Some(crate::graph::Definition::Node { node, .. }) => fused.nodes[node.index()]
                .inputs
                .first()
                .copied()
                .flatten()
                .is_some_and(|s| fused.initializers.contains_key(&s)),
            _ => false,
        }
    }));
    // A operands read where they lie: their gathers and concatenations are not lowered.
    let cats = gemm_cat::find(
        &fused,
        &values,
        &operand_perms,
        |id| {
            chains.of(id).is_some()
                || fused.nodes[id.index()]
                    .output(0)
                    .is_some_and(|o| norms.contains_key(&o) || attentions.contains_key(&o))
        },
        options,
    );
    elided.extend(cats.elided.iter().copied());
    // Scratch buffers become values after the graph's (the memory plan numbers them the same way),
    // then the weights the device packs (scratch too), then the weights packed on the host
    // (constants: no arena slot).
    let first_scratch = values.len();
    values.extend(scratch.iter().map(|(_, v)| v.clone()));
    // GEMMs and convolutions of two operands holding small integers: exact on the TF32 entries.
    let integer_products = integers::products(&fused, &values, &operand_perms, &norms, &small_integers);
    let tf32_options = PlanOptions { precision: Precision::Tf32, ..*options };
    let options_of = |id: NodeId| if integer_products.contains(&id) { tf32_options } else { *options };
    if !integer_products.is_empty() {
        lifted.push(format!(
            "{} GEMMs / convolutions multiply integers TF32 holds exactly (a quantized model's): \
             their large-tile and wgmma entries run in TF32, exact for them",
            integer_products.len()
        ));
    }
    let packed = if options.pack_gemm_weights {
        let lowered: Vec<NodeId> = (crate::validate::topo_order(&fused)?.into_iter())
            .filter(|&id| chains.of(id).is_none())
            .filter(|&id| {
                let outs = &fused.nodes[id.index()].outputs;
                !outs.iter().flatten().any(|v| absorbed.contains(v) || attentions.contains_key(v))
            })
            .collect();
        tc_pack::pack_weights(&fused, &lowered, &mut values, &operand_perms, &options_of)
    } else {
        tc_pack::PackedWeights::default()
    };
    // A packed weight lives from its producer's step to its last reader's.
    requests.extend(packed.device.iter().map(|d| Scratch {
        node: d.producer,
        bytes: d.params.len * 4,
        readers: d.readers.clone(),
    }));
    let unread = packed.unread(&fused);
    // Steps of the weights alone, run once per binding: first in the order.
    let hoisted = hoist::nodes(
        &fused,
        &values,
        options,
        |id| {
            // (A transpose of an arena value read or written through strides is a view: the
            // memory plan keeps its source's slot as long as it; one of a weight is read in the
            // weight's place and is not.)
            let node = &fused.nodes[id.index()];
            chains.of(id).is_some()
                || cats.absorbed.contains(&id)
                || (node.outputs.iter().flatten().any(|v| absorbed.contains(v))
                    && node.input(0).is_none_or(|x| fused.initializers.contains_key(&x)))
        },
        &cats.reads,
        &unread,
    );
    let memory = memory::plan_with(
        &fused,
        &Binding::new(),
        &options.memory,
        memory::Extras {
            views: &absorbed,
            scratch: &requests,
            elided: &elided,
            reads: &cats.reads,
            unread: &unread,
            hoisted: &hoisted,
        },
    )?;
    let hoisted: std::collections::HashSet<NodeId> = hoisted.into_iter().collect();
    let mut hoisted_steps = 0;
    let mut steps = Vec::new();
    let mut missing = Vec::new();
    let mut states = Vec::new();
    for &id in &memory.order {
        let node = &fused.nodes[id.index()];
        let act = epilogues.iter().find(|(n, _, _)| *n == id).map(|&(_, a, alpha)| (a, alpha));
        let absorbed_here = node.outputs.iter().flatten().any(|v| absorbed.contains(v));
        if absorbed_here || cats.absorbed.contains(&id) {
            continue; // a transpose the MatMul reading it walks through strides, or A's segments
        }
        // A node whose results are all empty has nothing to compute (a NonZero count of 0 makes
        // the rows of everything downstream empty); one that keeps recurrent state still runs.
        let empty = node.outputs.iter().flatten().all(|v| values[v.index()].bytes() == Some(0));
        if empty && !matches!(sequence::persistent_state(&fused, id, &values, options), Ok(Some(_))) {
            continue;
        }
        if let Some((chain, last)) = chains.of(id) {
            if last {
                match mlp::step(&fused, chain, &values, &operand_perms, &epilogues) {
                    Ok(s) => steps.push(s),
                    Err(why) => missing.push((fused.node_label(id), node.op.name(), why)),
                }
            }
            continue;
        }
        let own: Vec<ValueId> = (scratch.iter().enumerate())
            .filter(|(_, (n, _))| *n == id)
            .map(|(i, _)| ValueId((first_scratch + i) as u32))
            .collect();
        let fusion = lower::Fusion {
            act,
            perms: &operand_perms,
            programs: &programs,
            gemm_programs: &gemm_programs,
            packed_b: packed.by_node.get(&id).copied(),
            packed_b_computed: packed.device.iter().any(|d| d.readers.contains(&id)),
            norm: node.output(0).and_then(|o| norms.get(&o).copied()),
            cat: cats.by_node.get(&id),
        };
        let out = node.output(0);
        let lowered = match out.and_then(|o| attentions.get(&o)) {
            Some(p) => attention::lower(&fused, id, p, &values, options),
            None => lower::node(&fused, id, &values, &own, &fusion, &options_of(id)),
        };
        // A GEMM reading A in place computes the gathers and concatenation it took over too.
        let lowered = match (lowered, cats.by_node.get(&id)) {
            (Ok(mut s), Some(cat)) => {
                let ops: Vec<&str> = cat.nodes.iter().map(|n| fused.nodes[n.index()].op.name()).collect();
                for step in &mut s {
                    if let Step::Kernel { nodes, label, .. } = step {
                        nodes.splice(0..0, cat.nodes.iter().copied());
                        *label = format!("{}+{label}", ops.join("+"));
                    }
                }
                Ok(s)
            }
            (lowered, _) => lowered,
        };
        match lowered {
            Ok(s) => {
                // A view shares its source's slot, and so does a scatter's output written over its
                // data in place: their copies would move bytes onto themselves.
                let moves_nothing = |st: &Step| {
                    matches!(st, Step::Copy { src, dst, .. }
                        if memory.views.contains(&(*src, *dst)) || memory.in_place.contains(&(*src, *dst)))
                };
                steps.extend(s.into_iter().filter(|st| !moves_nothing(st)));
                // The weights it computes that GEMMs and convolutions read packed.
                steps.extend(packed.steps_after(&fused, id, options));
                if hoisted.contains(&id) {
                    hoisted_steps = steps.len();
                }
                if let Ok(Some(slot)) = sequence::persistent_state(&fused, id, &values, options) {
                    states.push(slot);
                }
            }
            Err(why) => missing.push((fused.node_label(id), node.op.name(), why)),
        }
    }
    // A launch past the default 48 KiB of dynamic shared memory needs its kernel opted in to as
    // much when its module loads (`KernelId::large_shared_bytes`): else the launch fails.
    for step in &steps {
        if let Step::Kernel { nodes, kernel, shared_bytes, .. } = step
            && *shared_bytes > DEFAULT_SHARED_BYTES
            && kernel.large_shared_bytes().is_none_or(|most| *shared_bytes > most)
        {
            let id = nodes.first().copied().unwrap_or(NodeId(0));
            let why = format!(
                "`{}` takes {shared_bytes} bytes of shared memory, more than it is set up for",
                kernel.symbol()
            );
            missing.push((fused.node_label(id), fused.nodes[id.index()].op.name(), why));
        }
    }
    if !missing.is_empty() {
        return Err(PlanError::NoKernel { nodes: missing });
    }
    // Outputs no step writes: constants (folded) and graph inputs passed through are copied in.
    let mut written = vec![false; values.len()];
    for step in &steps {
        match step {
            Step::Kernel { args, .. } => args.iter().for_each(|a| {
                if let Arg::Value(v) | Arg::Output(v) = a {
                    written[v.index()] = true;
                }
            }),
            Step::Copy { dst, .. } => written[dst.index()] = true,
        }
    }
    for &(src, view) in &memory.views {
        written[view.index()] |= written[src.index()];
    }
    // A weight packed on the device is packed by a step after its producer's (which has steps).
    if let Some(d) = packed.device.iter().find(|d| !written[d.value.index()]) {
        let (r, source) = (d.readers[0], &values[d.source.index()].name);
        let why = format!("its weight `{source}` is packed by the device, but no step computes it");
        return Err(PlanError::NoKernel {
            nodes: vec![(fused.node_label(r), fused.nodes[r.index()].op.name(), why)],
        });
    }
    for &o in &fused.outputs {
        let passthrough = fused.initializers.contains_key(&o) || fused.inputs.contains(&o);
        if !written[o.index()] && passthrough && values[o.index()].bytes() != Some(0) {
            let bytes = values[o.index()].bytes().unwrap_or(0);
            let node = memory.order.first().copied().unwrap_or(NodeId(0));
            steps.push(Step::Copy { node, src: o, dst: o, bytes });
        }
    }
    // Steps whose results nothing reads (a Split's unread parts).
    let aliases: Vec<(ValueId, ValueId)> = memory.views.iter().chain(&memory.in_place).copied().collect();
    let (steps, hoisted_steps) = dead::drop(steps, hoisted_steps, &fused.outputs, &aliases, values.len());
    let mut read = vec![false; values.len()];
    for step in &steps {
        if let Step::Kernel { args, .. } = step {
            for a in args {
                if let Arg::Value(v) = a {
                    read[v.index()] = true;
                }
            }
        } else if let Step::Copy { src, .. } = step {
            read[src.index()] = true;
        }
    }
    let constants: std::collections::BTreeMap<ValueId, crate::ConstTensor> = (fused.initializers.iter())
        .chain(&packed.constants)
        .filter(|(v, _)| read[v.index()])
        .map(|(v, c)| (*v, c.clone()))
        .collect();
    let weights = constants.keys().copied().collect();
    let checks = checks_of(&fused, &steps);
    let plan = Plan {
        binding: binding.clone(),
        inputs: fused.inputs.clone(),
        outputs: fused.outputs.clone(),
        values,
        weights,
        constants,
        steps,
        memory,
        states,
        hoisted: hoisted_steps,
        precision: options.precision,
        lifted,
        checks,
        stored_as,
    };
    plan.validate()?;
    Ok(plan)
}

/// The [`Check`]s of the steps that take the status word, one per node.
fn checks_of(g: &Graph, steps: &[Step]) -> Vec<Check> {
    let mut checks: Vec<Check> = Vec::new();
    for step in steps {
        let Step::Kernel { nodes, kernel, args, .. } = step else { continue };
        let Some(&id) = nodes.last() else { continue };
        if !args.iter().any(|a| matches!(a, Arg::Status)) {
            continue;
        }
        let code = logic::status_code(id);
        if checks.iter().any(|c| c.code == code) {
            continue;
        }
        let detail = match kernel {
            KernelId::IntArith => "integer division by zero (a divisor element is 0; found on the GPU)",
            _ => "bad data found on the GPU",
        };
        let op = g.nodes[id.index()].op.name().to_string();
        checks.push(Check { code, node: g.node_label(id), op, detail: detail.into() });
    }
    checks
}

impl Plan {
    /// The kernels the steps launch, each once, in order of first use.
    pub fn kernels(&self) -> Vec<KernelId> {
        let mut out: Vec<KernelId> = Vec::new();
        for s in &self.steps {
            if let Step::Kernel { kernel, .. } = s
                && !out.contains(kernel)
            {
                out.push(*kernel);
            }
        }
        out
    }

    /// Checks the plan's invariants: every value a step reads is a graph input, a weight, a view
    /// of a value written earlier, or written by an earlier step; every written value (the last
    /// `written_args()` [`Arg::Value`]s of its kernel and every [`Arg::Output`]) has a home (arena
    /// slot or graph output); every [`Arg::State`] names a declared slot, and every slot is
    /// non-empty, uniquely named and used by exactly one step.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |detail: String| PlanError::Memory { detail: format!("plan: {detail}") };
        self.validate_states()?;
        let mut ready: Vec<bool> = vec![false; self.values.len()];
        for &v in self.inputs.iter().chain(&self.weights) {
            ready[v.index()] = true;
        }
        // Empty tensors hold nothing to write.
        for (r, v) in ready.iter_mut().zip(&self.values) {
            *r |= v.bytes() == Some(0);
        }
        // Views of graph inputs are ready with them.
        for &(src, view) in &self.memory.views {
            ready[view.index()] |= ready[src.index()];
        }
        if self.hoisted > self.steps.len() {
            return Err(bad(format!("{} hoisted steps of {}", self.hoisted, self.steps.len())));
        }
        // What the hoisted steps may read: weights, empty values and their own results.
        let mut once: Vec<bool> = self.values.iter().map(|v| v.bytes() == Some(0)).collect();
        for &v in &self.weights {
            once[v.index()] = true;
        }
        // The arena bytes of the hoisted results the runs read: no step after the hoisted ones
        // writes over them (the runs read what the hoisted steps wrote once).
        let slot = |v: ValueId| self.memory.slots.get(self.memory.home(v).index()).copied().flatten();
        let kept: Vec<(ValueId, crate::memory::BufferSlot)> =
            self.hoisted_results().into_iter().filter_map(|v| slot(v).map(|s| (v, s))).collect();
        for (i, step) in self.steps.iter().enumerate() {
            let (reads, writes) = step.reads_writes().ok_or_else(|| {
                let what = if let Step::Kernel { kernel, .. } = step { kernel.symbol() } else { "a copy" };
                bad(format!("step {i} has fewer arguments than {what} writes"))
            })?;
            if writes.is_empty() {
                return Err(bad(format!("step {i} writes nothing")));
            }
            for r in &reads {
                if !ready[r.index()] {
                    return Err(bad(format!("step {i} reads {r} before anything writes it")));
                }
            }
            if i < self.hoisted {
                let stateful = matches!(step, Step::Kernel { args, .. } if args.iter().any(|a| matches!(a, Arg::State(_))));
                if let Some(r) = reads.iter().find(|r| !once[r.index()]) {
                    return Err(bad(format!(
                        "hoisted step {i} reads {r}, which is not computed from weights alone"
                    )));
                }
                if stateful || writes.iter().any(|w| self.outputs.contains(w)) {
                    return Err(bad(format!("hoisted step {i} writes a graph output or recurrent state")));
                }
                writes.iter().for_each(|w| once[w.index()] = true);
                for &(src, view) in &self.memory.views {
                    once[view.index()] |= once[src.index()];
                }
            }
            for w in writes {
                let homed = self.memory.slots[w.index()].is_some() || self.outputs.contains(&w);
                if !homed {
                    return Err(bad(format!("step {i} writes {w}, which has no buffer")));
                }
                let over = |ws: crate::memory::BufferSlot| {
                    kept.iter().find(|(_, s)| {
                        s.offset < ws.offset + ws.bytes.max(1) && ws.offset < s.offset + s.bytes.max(1)
                    })
                };
                if let Some((k, _)) = slot(w).filter(|_| i >= self.hoisted).and_then(over) {
                    return Err(bad(format!(
                        "step {i} writes {w} over {k}, which the hoisted steps computed once"
                    )));
                }
                ready[w.index()] = true;
            }
            // Views (in schedule order, so chains resolve in one pass) are ready with their source.
            for &(src, view) in &self.memory.views {
                ready[view.index()] |= ready[src.index()];
            }
        }
        for &o in &self.outputs {
            if !ready[o.index()] {
                return Err(bad(format!("output {o} is never written")));
            }
        }
        Ok(())
    }

    /// The values the hoisted steps compute that a later step reads (itself or through a view
    /// of it): what the runs read of the hoisted steps' work, each as the value whose buffer it
    /// is (they keep their arena slots across runs).
    pub fn hoisted_results(&self) -> Vec<ValueId> {
        // The value whose buffer each is, through the plan's views.
        let mut root: Vec<ValueId> = (0..self.values.len() as u32).map(ValueId).collect();
        for &(src, view) in &self.memory.views {
            if let (Some(&r), true) = (root.get(src.index()), view.index() < root.len()) {
                root[view.index()] = r;
            }
        }
        let home = |v: ValueId| root.get(v.index()).copied().unwrap_or(v);
        let (before, after) = self.steps.split_at(self.hoisted.min(self.steps.len()));
        let computed: std::collections::HashSet<ValueId> =
            before.iter().flat_map(Step::values).filter(|v| !self.weights.contains(v)).map(home).collect();
        let mut out: Vec<ValueId> =
            after.iter().flat_map(Step::values).map(home).filter(|v| computed.contains(v)).collect();
        out.sort();
        out.dedup();
        out
    }

    /// The state invariants of [`Plan::validate`].
    fn validate_states(&self) -> Result<(), PlanError> {
        let bad = |detail: String| PlanError::Memory { detail: format!("plan: {detail}") };
        let mut users = vec![0usize; self.states.len()];
        for (i, s) in self.states.iter().enumerate() {
            if s.dims.contains(&0) {
                return Err(bad(format!("state `{}` {:?} is empty", s.name, s.dims)));
            }
            if self.states[..i].iter().any(|o| o.name == s.name) {
                return Err(bad(format!("two state slots are named `{}`", s.name)));
            }
        }
        for (i, step) in self.steps.iter().enumerate() {
            let Step::Kernel { args, .. } = step else { continue };
            let mut used = vec![false; self.states.len()];
            for a in args {
                if let Arg::State(name) = a {
                    let k = self
                        .states
                        .iter()
                        .position(|s| &s.name == name)
                        .ok_or_else(|| bad(format!("step {i} uses undeclared state `{name}`")))?;
                    used[k] = true;
                }
            }
            for (n, u) in users.iter_mut().zip(used) {
                *n += u as usize;
            }
        }
        if let Some((s, n)) = self.states.iter().zip(&users).find(|&(_, &n)| n != 1) {
            return Err(bad(format!("state `{}` is used by {n} steps (must be one)", s.name)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
