//! Opt-in model summaries: what a job's model looks like, for placing the job before it has
//! been profiled.
//!
//! The engine's [`ModelSummary`] is the only description of a model Tandem ever takes (never its
//! name or weights). A user declares it either by handing over the model's ONNX file, which
//! [`summarize`] reduces to the summary here on the submitting side, or by writing the summary
//! as JSON, which [`read_summary_json`] reads and checks. [`onnx::build`] writes small ONNX
//! files for tests.
//!
//! ```
//! use tandem_declare::{onnx::build, summarize};
//!
//! // A LeNet-like CNN whose batch dimension is symbolic: the batch size must be given.
//! let summary = summarize(&build::lenet(None), Some(32))?;
//! assert_eq!(summary.batch_size, 32);
//! assert_eq!((summary.conv_layers, summary.linear_layers), (2, 1));
//! # Ok::<(), tandem_declare::DeclareError>(())
//! ```
//!
//! # What an ONNX summary counts
//!
//! The ONNX file is decoded with hand-written `prost` messages covering the part of
//! `onnx.proto` needed (no `protoc`); every other field is skipped. Nothing is executed.
//!
//! - **`params_mib`**: every initializer's element count times its element size (float32 4
//!   bytes, float16 2, int64 8, 4-bit types half a byte, …), over 2²⁰. Initializers that are
//!   also listed as graph inputs count here, not as input. Weights stored in Constant nodes
//!   do not count.
//! - **The batch**: the first dimension of every graph input that is not an initializer. A
//!   symbolic (or 0) first dimension takes `batch_size`, which is then required unless another
//!   graph input fixes the batch. A graph that fixes its batch is analysed at that batch; when
//!   `batch_size` is given and differs, input, activations and FLOPs are scaled by
//!   `batch_size / fixed batch`. The summary reports `batch_size` when given, else the fixed
//!   batch (1 when no input is batched). Only the first dimension may be symbolic.
//! - **`input_mib`**: the graph inputs that are not initializers, at the batch.
//! - **Shapes** are inferred node by node, in file order (ONNX requires topological order),
//!   for Conv (`pads`, `strides`, `dilations`, `group`, `auto_pad`, kernel from the weight or
//!   `kernel_shape`), ConvTranspose, Gemm (`transA`, `transB`), MatMul (batched, numpy rules),
//!   the activations (Relu, LeakyRelu, PRelu, Sigmoid, HardSigmoid, Tanh, Gelu, Softmax,
//!   LogSoftmax, Clip, HardSwish, Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu),
//!   BatchNormalization, the broadcasting element-wise ops (Add, Sub, Mul, Div, Pow, Max, Min,
//!   Sum, Mean), unary math (Abs, Neg, Exp, Log, Sqrt, Reciprocal, Erf, Floor, Ceil), Cast,
//!   MaxPool and AveragePool (`kernel_shape`, `strides`, `pads`, `dilations`, `ceil_mode`),
//!   GlobalAveragePool, GlobalMaxPool, Flatten, Reshape (a constant shape with 0 and -1),
//!   Concat, Dropout, Identity, Transpose, Squeeze and Unsqueeze (axes from the attribute or a
//!   constant input) and Constant. Any other op (or an op of another domain), and a Reshape,
//!   Squeeze or Unsqueeze whose shape or axes are computed, takes its output shapes from the
//!   graph's `value_info` or outputs (a symbolic first dimension there is the batch); without
//!   them the summary fails, naming the node and op.
//! - **`activations_mib`**: the sizes of every node output (float32 unless its type is
//!   known) for one batch, the forward activations; Constant outputs, and weights passed
//!   through Identity or Cast, are data and do not count.
//! - **`gflops`**: an *estimate* of one forward pass over one batch, × 10⁻⁹, counting a
//!   multiply-add as 2 FLOPs. Conv: `2·N·Cout·(Cin/group)·kernel·output positions`, plus
//!   `N·Cout·positions` with a bias (ConvTranspose alike, over input positions); Gemm and
//!   MatMul: `2·M·K·N` per batch matrix, plus `M·N` for Gemm's `C`; BatchNormalization: 2 per
//!   element (a scale and a shift); element-wise ops and activations: 1 per output element (per
//!   extra input for variadic ones); pools: the kernel size per output element (the whole
//!   spatial extent for global pools); everything else 0. Memory traffic, which often bounds
//!   real speed, is not counted.
//! - **Layers**: `conv_layers` are Conv and ConvTranspose; `linear_layers` are Gemm and the
//!   MatMuls whose second operand is a weight (an initializer or Constant, possibly through
//!   Identity or Cast); `activation_layers` are the activations above; `other_layers` are every
//!   other node except Constant and Identity.
//!
//! No input makes [`summarize`] or [`read_summary_json`] panic; a property test feeds them
//! arbitrary bytes and text.

mod analysis;
mod error;
mod json;
pub mod onnx;
mod ops;

pub use error::{DeclareError, Result};
pub use json::{check_summary, read_summary_json};
pub use tandem_api::ModelSummary;

/// Summarizes the ONNX model in `onnx` for a batch of `batch_size` (see the [crate
/// documentation](crate) for what is counted and how the batch is chosen).
///
/// Fails when the bytes are not an ONNX model, the model has no graph, `batch_size` is 0 or
/// is needed and missing, or a node's output shapes can be neither inferred nor read from the
/// graph's declarations.
pub fn summarize(onnx: &[u8], batch_size: Option<u32>) -> Result<ModelSummary> {
    analysis::analyze(onnx, batch_size).map(|analysis| analysis.summary)
}
