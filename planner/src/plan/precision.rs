//! How the GEMMs on the tensor cores form their products: a plan option, recorded in the plan.

use std::fmt;
use std::str::FromStr;

use kernels_gpu::abi::{GEMM_EXACT, GEMM_TF32};
use serde::{Deserialize, Serialize};

/// The precision of a plan's tensor-core products (`PlanOptions::precision`, `Plan::precision`).
/// The CUDA-core kernels (small GEMMs, convolutions, the batch-1 MLP) and the tensor-core attention
/// compute in f32 whatever it is; only the tensor-core GEMMs change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Precision {
    /// f32 accuracy (the default): each operand split into a TF32 part and its TF32 remainder,
    /// three products (3xTF32), within f32 GEMM error of the CPU reference.
    #[default]
    Exact,
    /// Operands rounded to TF32 (10 explicit mantissa bits, to nearest), one product, f32
    /// accumulation: what cuBLAS and PyTorch (`allow_tf32`) call TF32; a relative error near
    /// 2^-11 per product.
    Tf32,
}

impl Precision {
    /// Every precision, in the order `--precision` lists them.
    pub const ALL: [Precision; 2] = [Precision::Exact, Precision::Tf32];

    /// The `GemmParams::precision` code of the tensor-core GEMM kernels.
    pub fn gemm_code(self) -> u32 {
        match self {
            Precision::Exact => GEMM_EXACT,
            Precision::Tf32 => GEMM_TF32,
        }
    }

    /// The name `--precision` takes.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Exact => "exact",
            Precision::Tf32 => "tf32",
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
        let later =
            if matches!(s, "bf16" | "f16") { " (bf16 and f16 products are not implemented yet)" } else { "" };
        Err(format!("unknown precision `{s}`{later}; known: {}", known.join(", ")))
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
        assert_ne!(Precision::Exact.gemm_code(), Precision::Tf32.gemm_code());
        let e = "bf16".parse::<Precision>().unwrap_err();
        assert!(e.contains("`bf16`") && e.contains("not implemented") && e.contains("exact, tf32"), "{e}");
        assert!("fp64".parse::<Precision>().unwrap_err().contains("`fp64`"));
    }
}
