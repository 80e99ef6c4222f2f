//! The one error type of the crate.

/// Everything that can go wrong reading a model summary, from an ONNX file or from JSON. Every
/// message names the input, node, tensor or field at fault; node errors start with the node,
/// as in ``node `conv1` (Conv): input `x` has unknown shape`` (an unnamed node is called by its
/// position, ``node #3 (Conv)``).
#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    /// The ONNX bytes are empty.
    #[error("not an ONNX model: the file is empty")]
    Empty,

    /// The bytes are not a protobuf `ModelProto` (the source names the field that failed).
    #[error("not an ONNX model: protobuf decode failed")]
    Decode {
        /// Where and why decoding stopped.
        #[source]
        source: prost::DecodeError,
    },

    /// The model decoded but has no graph (field 7 of `ModelProto`).
    #[error("the model has no graph")]
    NoGraph,

    /// A batch size of 0 was asked for.
    #[error("the batch size must be at least 1")]
    ZeroBatch,

    /// A graph input's first dimension is symbolic (or 0, or unset), no graph input fixes the
    /// batch, and no batch size was given.
    #[error("graph input `{input}` has symbolic batch dimension `{dim}`; pass a batch size")]
    SymbolicBatch {
        /// The graph input.
        input: String,
        /// The dimension's name (`?` when it has none).
        dim: String,
    },

    /// A graph input's shape is missing, not a tensor's, has a negative size, or is symbolic
    /// beyond the batch dimension.
    #[error("graph input `{input}` {problem}")]
    Input {
        /// The graph input.
        input: String,
        /// What is wrong, such as ``has symbolic dimension `seq` at axis 1``.
        problem: String,
    },

    /// An initializer has a negative dimension, or too many.
    #[error("initializer `{initializer}` {problem}")]
    Initializer {
        /// The initializer.
        initializer: String,
        /// What is wrong, such as `has negative dimension -3`.
        problem: String,
    },

    /// A node reads a tensor that no earlier node, initializer, graph input or static
    /// `value_info` describes.
    #[error("{node}: input `{input}` has unknown shape")]
    UnknownShape {
        /// The node, as ``node `conv1` (Conv)``.
        node: String,
        /// The tensor it reads.
        input: String,
    },

    /// A node's op is not one this crate infers shapes for (or not in the default ONNX domain),
    /// and an output's shape is not declared statically in `value_info` or the graph outputs.
    #[error(
        "{node}: op `{op}` is not supported and output `{output}` has no static shape in \
         value_info or the graph outputs"
    )]
    UnsupportedOp {
        /// The node, as ``node `attn` (FusedAttention)``.
        node: String,
        /// The op, with its domain when that is not the default one.
        op: String,
        /// The first output without a declared shape.
        output: String,
    },

    /// A node's inputs or attributes break its op's rules: shapes that do not broadcast, a
    /// kernel larger than its input, a missing input, an attribute of the wrong length, a
    /// Reshape shape that is not a constant, and so on.
    #[error("{node}: {problem}")]
    Node {
        /// The node, as ``node `conv1` (Conv)``.
        node: String,
        /// What is wrong.
        problem: String,
    },

    /// A total (parameters, activations, input or FLOPs) does not fit a finite `f32`.
    #[error("the model's {what} are too large to report")]
    TooLarge {
        /// Which total, such as `activations`.
        what: &'static str,
    },

    /// A JSON model summary is not JSON of the summary's shape: a syntax error (`NaN` is not
    /// JSON), a missing or unknown field, a value of the wrong type or range.
    #[error("model summary: {field}: {message}")]
    Json {
        /// Path of the offending field, such as `conv_layers` (`.` for the whole document).
        field: String,
        /// What is wrong, with the line and column.
        message: String,
    },

    /// A JSON model summary is well-formed but a value is out of range: a negative or
    /// non-finite size or FLOP count, or a batch size of 0.
    #[error("model summary: `{field}` {problem}")]
    InvalidSummary {
        /// The field, such as `params_mib`.
        field: &'static str,
        /// What is wrong, with the value.
        problem: String,
    },
}

/// `Result` with this crate's [`DeclareError`].
pub type Result<T, E = DeclareError> = std::result::Result<T, E>;
