//! The errors a user sees for files that cannot be summarized.

use std::error::Error as _;

use tandem_declare::onnx::build::{self, Attr, Dim, ModelBuilder};
use tandem_declare::{DeclareError, summarize};

fn message(onnx: &[u8], batch: Option<u32>) -> String {
    match summarize(onnx, batch) {
        Ok(summary) => panic!("expected an error, got {summary:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn empty_bytes_are_not_a_model() {
    assert_eq!(
        message(&[], Some(1)),
        "not an ONNX model: the file is empty"
    );
}

#[test]
fn random_bytes_fail_to_decode_and_say_where() {
    // Eleven 0xff bytes: a varint tag that never ends.
    let err = summarize(&[0xff; 11], None).unwrap_err();
    assert!(matches!(err, DeclareError::Decode { .. }), "{err:?}");
    assert_eq!(err.to_string(), "not an ONNX model: protobuf decode failed");
    let cause = err.source().map(ToString::to_string).unwrap_or_default();
    assert!(cause.contains("varint"), "{cause}");
}

#[test]
fn a_model_without_a_graph_is_rejected() {
    // A ModelProto with only `ir_version = 8` (field 1, varint): valid protobuf, no graph.
    assert_eq!(message(&[0x08, 0x08], None), "the model has no graph");
}

#[test]
fn an_unknown_op_without_declared_shapes_names_the_node_and_op() {
    let onnx = ModelBuilder::new("test")
        .input("x", &[Dim::Value(1), Dim::Value(8)])
        .node("FancyAttention", "attn", &["x"], &["y"], &[])
        .encode();
    assert_eq!(
        message(&onnx, None),
        "node `attn` (FancyAttention): op `FancyAttention` is not supported and output `y` has \
         no static shape in value_info or the graph outputs"
    );
}

#[test]
fn a_symbolic_batch_needs_a_batch_size() {
    assert_eq!(
        message(&build::lenet(None), None),
        "graph input `input` has symbolic batch dimension `N`; pass a batch size"
    );
}

#[test]
fn a_batch_size_of_zero_is_rejected() {
    assert_eq!(
        message(&build::lenet(None), Some(0)),
        "the batch size must be at least 1"
    );
}

#[test]
fn a_conv_whose_weight_is_missing_names_it() {
    let model = ModelBuilder::new("test").input(
        "x",
        &[Dim::Value(1), Dim::Value(3), Dim::Value(8), Dim::Value(8)],
    );
    let named = model
        .clone()
        .node("Conv", "conv1", &["x", "conv1.weight"], &["y"], &[])
        .encode();
    assert_eq!(
        message(&named, None),
        "node `conv1` (Conv): input `conv1.weight` has unknown shape"
    );
    let left_out = model.node("Conv", "conv1", &["x"], &["y"], &[]).encode();
    assert_eq!(
        message(&left_out, None),
        "node `conv1` (Conv): missing input 1 (W, the weight)"
    );
}

#[test]
fn a_kernel_larger_than_its_input_is_rejected() {
    let onnx = ModelBuilder::new("test")
        .input(
            "x",
            &[Dim::Value(1), Dim::Value(1), Dim::Value(4), Dim::Value(4)],
        )
        .node(
            "MaxPool",
            "",
            &["x"],
            &["y"],
            &[("kernel_shape", Attr::Ints(vec![5, 5]))],
        )
        .encode();
    assert_eq!(
        message(&onnx, None),
        "node #0 (MaxPool): kernel extent 5 is larger than the padded input (4) along spatial \
         axis 0"
    );
}
