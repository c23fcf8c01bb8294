//! How the GEMMs on the tensor cores form their products: a plan option, recorded in the plan.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The precision of a plan's tensor-core products (`PlanOptions::precision`, `Plan::precision`).
/// It selects the large-tile GEMM entries (`gemm_tc128_*` / `gemm_tc64_*`: `_f32` exact, `_tf32`
/// TF32, `_f16` and `_bf16`) and, exact or TF32, the `wgmma` ones and the convolutions'; every
/// other kernel computes in f32 whatever it is: the CUDA-core ones (small GEMMs, the batch-1 MLP)
/// and, for now, the small-`m` tensor-core GEMMs (`gemm_tc_*`) and the tensor-core attention,
/// whose reduced-precision entries are not built yet. In f16 and bf16 the large GEMMs run on the
/// `mma.sync` tiles (there is no half-precision `wgmma` entry yet) and the convolutions in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Precision {
    /// f32 accuracy (the default): each operand split into a TF32 part and its TF32 remainder,
    /// three products (3xTF32), within f32 GEMM error of the CPU reference.
    #[default]
    Exact,
    /// Operands reduced to TF32 (10 explicit mantissa bits), one product, f32 accumulation: what
    /// cuBLAS and PyTorch (`allow_tf32`) call TF32; a relative error near 2^-11 per product (up
    /// to 2^-10). Weights are rounded to nearest when packed; the `mma.sync` tiles round A to
    /// nearest too, while the `wgmma` entries read A from shared memory as it lies and the tensor
    /// cores drop its low 13 mantissa bits (truncation, as cuBLAS's TF32 GEMMs on f32 data).
    /// Integers of magnitude up to 2048 are exact either way.
    Tf32,
    /// Operands rounded to f16 (to nearest even), one product, f32 accumulation: a relative error
    /// near 2^-11 per product, and operands beyond f16's range (65504) become infinite.
    F16,
    /// Operands rounded to bf16 (to nearest even), one product, f32 accumulation: f32's range, a
    /// relative error near 2^-8 per product.
    Bf16,
}

impl Precision {
    /// Whether the `wgmma` GEMMs and the convolutions have entries of this precision (exact and
    /// TF32); in the others the large GEMMs take the `mma.sync` tiles and convolutions stay f32.
    pub fn has_wgmma(self) -> bool {
        matches!(self, Precision::Exact | Precision::Tf32)
    }

    /// Whether the `wgmma` convolutions run in TF32; in every other precision they run exact
    /// (3xTF32, their weights packed in two planes): there are no half-precision convolution
    /// entries yet. The entry (`conv::wg_launch`) and its packed weight (`tc_pack`) both follow it.
    pub fn tf32_convolutions(self) -> bool {
        self == Precision::Tf32
    }
}

impl Precision {
    /// Every precision, in the order `--precision` lists them.
    pub const ALL: [Precision; 4] = [Precision::Exact, Precision::Tf32, Precision::F16, Precision::Bf16];

    /// The name `--precision` takes.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Exact => "exact",
            Precision::Tf32 => "tf32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(p) = Precision::ALL.into_iter().find(|p| p.name() == s) {
            return Ok(p);
        }
        let known: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        Err(format!("unknown precision `{s}`; known: {}", known.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_named() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
        }
        assert_eq!(Precision::default(), Precision::Exact);
        let e = "fp64".parse::<Precision>().unwrap_err();
        assert!(e.contains("`fp64`") && e.contains("exact, tf32, f16, bf16"), "{e}");
    }
}
