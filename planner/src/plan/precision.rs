//! How the GEMMs on the tensor cores form their products: a plan option, recorded in the plan.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The precision of a plan's tensor-core products (`PlanOptions::precision`, `Plan::precision`).
/// It selects the large-tile GEMM entries (`gemm_tc128_*` / `gemm_tc64_*`: `_f32` exact, `_tf32`
/// TF32); every other kernel computes in f32 whatever it is: the CUDA-core ones (small GEMMs,
/// convolutions, the batch-1 MLP) and, for now, the small-`m` tensor-core GEMMs (`gemm_tc_*`) and
/// the tensor-core attention, whose TF32 entries are not built yet.
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
        let e = "bf16".parse::<Precision>().unwrap_err();
        assert!(e.contains("`bf16`") && e.contains("not implemented") && e.contains("exact, tf32"), "{e}");
        assert!("fp64".parse::<Precision>().unwrap_err().contains("`fp64`"));
    }
}
