//! Attribute structs of the signal-processing operators (`DFT`).

use serde::{Deserialize, Serialize};

/// `DFT(input, dft_length?, axis?)` (opsets 17 and 20): the input's last dim holds 1 (real) or
/// 2 (real, imaginary) components; the transform runs along `axis` of the full-rank input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dft {
    /// Opset 17-19 `axis` attribute (default 1); `None` from opset 20, where input 2 gives the
    /// axis (default -2).
    pub axis: Option<i64>,
    /// Inverse transform (scaled by 1/N).
    pub inverse: bool,
    /// Forward: keep the first `N/2 + 1` frequencies; inverse: the input is such a one-sided
    /// spectrum and the output is real.
    pub onesided: bool,
}

/// `STFT(signal (B, L, 1|2), frame_step, window?, frame_length?)` (opset 17) ->
/// `(B, frames, bins, 2)` with `frames = 1 + (L − frame_length) / frame_step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stft {
    /// Keep only the first `frame_length / 2 + 1` bins (default true).
    pub onesided: bool,
}

impl Default for Stft {
    fn default() -> Self {
        Stft { onesided: true }
    }
}

/// `MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz)`
/// (opset 17): the `[dft_length / 2 + 1, num_mel_bins]` matrix of triangular filters spaced
/// evenly on the mel scale between the two edges, which maps a one-sided spectrum to mel bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MelWeightMatrix {
    /// The output dtype (`output_datatype`, default float32).
    pub output_dtype: crate::DType,
}

/// How [`TfIdfVectorizer`] weighs the n-gram counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TfIdfMode {
    /// The counts.
    Tf,
    /// The weight where the count is positive (1 without weights), else 0.
    Idf,
    /// The weight times the count (the count without weights).
    TfIdf,
}

/// `TfIdfVectorizer` (opset 9) over integer token rows: counts, per row, the n-grams of the pool
/// (`min_gram_length ..= max_gram_length` long, items up to `max_skip_count` apart) into the
/// output columns `ngram_indexes` gives them, weighted per `mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TfIdfVectorizer {
    /// The shortest n-gram counted.
    pub min_gram_length: usize,
    /// The longest n-gram counted.
    pub max_gram_length: usize,
    /// The most items skipped between an n-gram's consecutive items.
    pub max_skip_count: usize,
    /// How the counts are weighed.
    pub mode: TfIdfMode,
    /// Where the `n`-grams start in `pool` (entry `n - 1`).
    pub ngram_counts: Vec<i64>,
    /// The output column of each n-gram, in pool order.
    pub ngram_indexes: Vec<i64>,
    /// The n-grams' items, the 1-grams first, then the 2-grams, ...
    pub pool: Vec<i64>,
    /// One weight per output column (or none).
    pub weights: Vec<f32>,
}

impl TfIdfVectorizer {
    /// Output columns: one past the largest `ngram_indexes` entry (0 without entries); `None`
    /// when that entry is negative or the count overflows.
    pub fn width(&self) -> Option<usize> {
        match self.ngram_indexes.iter().max() {
            None => Some(0),
            Some(&m) => usize::try_from(m).ok()?.checked_add(1),
        }
    }
}

/// The window of a [`SignalWindow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WindowKind {
    /// `HannWindow`: `0.5 − 0.5 cos(2πn/N)`.
    Hann,
    /// `HammingWindow`: `25/46 − 21/46 cos(2πn/N)`.
    Hamming,
    /// `BlackmanWindow`: `0.42 − 0.5 cos(2πn/N) + 0.08 cos(4πn/N)`.
    Blackman,
}

/// `HannWindow` / `HammingWindow` / `BlackmanWindow(size)` (opset 17): `size` values, with
/// `N = size` (periodic, the default) or `size − 1` (symmetric).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalWindow {
    /// Which window.
    pub kind: WindowKind,
    /// Periodic (`N = size`) or symmetric (`N = size − 1`).
    pub periodic: bool,
    /// The output dtype (`output_datatype`, default float32).
    pub output_dtype: crate::DType,
}
