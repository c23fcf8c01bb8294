//! [`HostError`], the one error type of the host crate. Variants carry what a user needs to act:
//! the kernel, the op and the shapes involved.

use cudarc::driver::DriverError;
use kernels_gpu::abi::KernelId;

/// Everything that can go wrong in the host crate.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `libcuda` could not be loaded.
    #[error("no NVIDIA driver found (libcuda.so could not be loaded); GPU execution needs an NVIDIA driver")]
    NoDriver,
    /// The driver loaded but reports no device.
    #[error("no CUDA device: the NVIDIA driver is installed but reports no GPU")]
    NoDevice,
    /// The requested ordinal is past the device count.
    #[error("CUDA device {ordinal} does not exist ({count} device(s) present)")]
    NoSuchDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// The device is older than the oldest PTX flavour supports.
    #[error("{name} has compute capability {major}.{minor}; ferrofuse needs 8.0 (Ampere) or newer")]
    UnsupportedDevice {
        /// Device name.
        name: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// A driver call outside kernel launches failed.
    #[error("CUDA driver call failed while {action}: {source}")]
    Driver {
        /// What the host was doing.
        action: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// The PTX module did not load (JIT compile or link failure).
    #[error("loading the {flavour} PTX module failed: {source}")]
    ModuleLoad {
        /// PTX flavour name.
        flavour: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// The driver's linker could not compile a kernel's PTX to machine code.
    #[error("compiling kernel `{}` failed: {source}{}", kernel.symbol(), if log.is_empty() { String::new() } else { format!("\n{log}") })]
    KernelCompile {
        /// The kernel.
        kernel: KernelId,
        /// The linker's error log.
        log: String,
        /// The driver's error.
        source: DriverError,
    },
    /// A kernel listed in `KernelId` is not in the loaded module.
    #[error("kernel `{}` is missing from the loaded PTX module: {source}", kernel.symbol())]
    MissingKernel {
        /// The kernel.
        kernel: KernelId,
        /// The driver's error.
        source: DriverError,
    },
    /// Launching a kernel, or the kernel itself, failed.
    #[error("kernel `{}` failed: {source}", kernel.symbol())]
    Launch {
        /// The kernel.
        kernel: KernelId,
        /// The driver's error (for asynchronous faults, reported at the next synchronisation).
        source: DriverError,
    },
    /// Two shapes do not broadcast together.
    #[error("{op}: shapes {lhs:?} and {rhs:?} do not broadcast")]
    Broadcast {
        /// The op.
        op: String,
        /// Left operand shape.
        lhs: Vec<usize>,
        /// Right operand shape.
        rhs: Vec<usize>,
    },
    /// A tensor's shape or length does not fit where it is used.
    #[error("{what}: expected shape {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// Which tensor, for which op.
        what: String,
        /// The required shape.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// Data length does not match the shape's element count (or the count overflows).
    #[error("{what}: shape {shape:?} needs {expected} elements, data has {got}")]
    DataLength {
        /// Which tensor.
        what: String,
        /// Shape.
        shape: Vec<usize>,
        /// Elements the shape needs (`usize::MAX` if it overflows).
        expected: usize,
        /// Elements present.
        got: usize,
    },
    /// A tensor of the wrong element type.
    #[error("{what}: expected {expected}, got {got}")]
    DType {
        /// Which tensor, for which op.
        what: String,
        /// The required dtype.
        expected: planner::DType,
        /// The dtype given.
        got: planner::DType,
    },
    /// A rank above what the kernels index, after collapsing contiguous dimensions.
    #[error("{op}: rank {rank} exceeds the supported {max} after collapsing dimensions")]
    RankTooHigh {
        /// The op.
        op: String,
        /// Rank after collapsing.
        rank: usize,
        /// `kernels_gpu::abi::MAX_RANK`.
        max: usize,
    },
    /// A graph node failed in the reference executor (bad attribute/input combination found at run
    /// time, index out of range, ...).
    #[error("node `{node}` ({op}): {detail}")]
    Op {
        /// Node name (or `#index` when unnamed).
        node: String,
        /// ONNX op type.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A GPU kernel found bad data in a node's inputs (an integer divisor of 0), reported after the
    /// run from the session's status word ([`planner::plan::Plan::checks`]).
    #[error("node `{node}` ({op}): {detail}")]
    Data {
        /// Node name, as the planner names it.
        node: String,
        /// ONNX op type.
        op: String,
        /// What is wrong.
        detail: String,
    },
    /// A tensor the model asks for exceeds the executor's size limits
    /// ([`crate::reference::Limits`]); found before allocating it.
    #[error("node `{node}` ({op}): too large: {detail}")]
    Limit {
        /// Node name (or `#index` when unnamed), or the initializer's name.
        node: String,
        /// ONNX op type (`initializer` for an initializer).
        op: &'static str,
        /// What is too large, and the limit.
        detail: String,
    },
    /// An operator (or one of its modes or dtypes) the executor does not implement.
    #[error("node `{node}` ({op}): not supported: {detail}")]
    Unsupported {
        /// Node name (or `#index` when unnamed).
        node: String,
        /// ONNX op type.
        op: &'static str,
        /// Which mode or dtype is missing.
        detail: String,
    },
    /// A graph input given at run time does not match the model (missing, unknown name, wrong
    /// dtype or shape).
    #[error("input `{name}`: {detail}")]
    Input {
        /// Input name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// Planning (shape inference, validation) failed.
    #[error(transparent)]
    Plan(#[from] planner::PlanError),
    /// A plan step failed (at launch, or reported at the next synchronisation).
    #[error("step #{step} ({label}, kernel `{kernel}`): {detail}")]
    Step {
        /// Step index in the plan.
        step: usize,
        /// The fused op types.
        label: String,
        /// The kernel's PTX symbol.
        kernel: &'static str,
        /// The driver's error.
        detail: String,
    },
    /// A host allocation for tensor data failed (the allocator refused it); the reference names
    /// the node when one was running.
    #[error("out of host memory allocating {bytes} bytes for {what}")]
    HostMemory {
        /// Bytes requested.
        bytes: u64,
        /// What was being allocated.
        what: String,
    },
    /// A device allocation failed.
    #[error("out of device memory allocating {bytes} bytes for {what}: {source}")]
    OutOfMemory {
        /// What was being allocated (the arena, the weights, an input or output, ...).
        what: String,
        /// Bytes requested.
        bytes: u64,
        /// The driver's error.
        source: DriverError,
    },
    /// A device allocation would take the session past its memory budget
    /// ([`crate::SessionOptions::max_memory`]); nothing was allocated.
    #[error(
        "{what} needs {bytes} bytes of device memory beside the {held} the session holds, over its \
         memory budget of {max} bytes (SessionOptions::max_memory, --max-memory)"
    )]
    Budget {
        /// What was to be allocated.
        what: String,
        /// Bytes it needs.
        bytes: u64,
        /// Device bytes the session held before.
        held: u64,
        /// The budget.
        max: u64,
    },
    /// An arena slot or dynamic block was used wrongly (outside the arena, double free, an
    /// external arena too small).
    #[error("arena: {detail}")]
    Arena {
        /// What is wrong.
        detail: String,
    },
    /// Persistent recurrent state was used wrongly (no such state, wrong size, a layout change in
    /// the middle of a sequence, a session that is not stateful).
    #[error("recurrent state: {detail}")]
    State {
        /// What is wrong.
        detail: String,
    },
    /// A device self-test produced a wrong value.
    #[error("self-test `{check}` failed: {detail}")]
    SelfTest {
        /// Which check.
        check: String,
        /// The first mismatch.
        detail: String,
    },
}

impl HostError {
    /// Wraps a driver error with what the host was doing.
    pub fn driver(action: &'static str) -> impl FnOnce(DriverError) -> HostError {
        move |source| HostError::Driver { action, source }
    }
}
