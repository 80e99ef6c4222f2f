//! The walk's tests: shapes, sizes, FLOPs and layers of small hand-built graphs.

use super::*;
use crate::onnx::build::{self, Attr, Dim, ModelBuilder};

fn analyze_ok(model: &ModelBuilder, batch: Option<u32>) -> Analysis {
    analyze(&model.encode(), batch).unwrap_or_else(|e| panic!("{e}"))
}

fn shape(analysis: &Analysis, name: &str) -> Vec<i64> {
    match analysis.tensors.get(name) {
        Some(tensor) => tensor.shape.clone(),
        None => panic!("no tensor `{name}`"),
    }
}

fn error(model: &ModelBuilder, batch: Option<u32>) -> String {
    match analyze(&model.encode(), batch) {
        Ok(analysis) => panic!("expected an error, got {:?}", analysis.summary),
        Err(e) => e.to_string(),
    }
}

fn dims(values: &[i64]) -> Vec<Dim> {
    values.iter().map(|&v| Dim::Value(v)).collect()
}

/// A model whose only input is `x` of shape `input`.
fn with_input(input: &[i64]) -> ModelBuilder {
    ModelBuilder::new("test").input("x", &dims(input))
}

#[test]
fn lenet_shapes_follow_pads_strides_and_pools() {
    let onnx = build::lenet(Some(4));
    let analysis = analyze(&onnx, None).unwrap();
    // Conv 5×5 with pads 2 keeps 28; the 2×2/2 pool halves it; the second conv has no
    // pads: 14 - 5 + 1 = 10.
    assert_eq!(shape(&analysis, "conv1.out"), [4, 6, 28, 28]);
    assert_eq!(shape(&analysis, "pool1.out"), [4, 6, 14, 14]);
    assert_eq!(shape(&analysis, "conv2.out"), [4, 16, 10, 10]);
    assert_eq!(shape(&analysis, "gap.out"), [4, 16, 1, 1]);
    assert_eq!(shape(&analysis, "flatten.out"), [4, 16]);
    assert_eq!(shape(&analysis, "logits"), [4, 10]);
}

#[test]
fn conv_handles_groups_strides_and_dilations() {
    // 4 channels in 2 groups of 2, 8 filters. A dilated 3×3 spans 5; with pads 1 and
    // stride 2: floor((9 + 2 - 5) / 2) + 1 = 4.
    let model = with_input(&[1, 4, 9, 9]).weight("w", &[8, 2, 3, 3]).node(
        "Conv",
        "conv",
        &["x", "w"],
        &["y"],
        &[
            ("group", Attr::Int(2)),
            ("strides", Attr::Ints(vec![2, 2])),
            ("dilations", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ],
    );
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "y"), [1, 8, 4, 4]);
    // 2 × N 1 × Cout 8 × Cin/group 2 × kernel 9 × positions 16 = 4608, no bias.
    assert_eq!(analysis.summary.gflops, (4608.0 * 1e-9) as f32);
}

#[test]
fn conv_with_same_auto_pad_keeps_size_over_stride() {
    let model = with_input(&[1, 3, 15, 15]).weight("w", &[4, 3, 4, 4]).node(
        "Conv",
        "conv",
        &["x", "w"],
        &["y"],
        &[
            ("auto_pad", Attr::String("SAME_UPPER".into())),
            ("strides", Attr::Ints(vec![2, 2])),
        ],
    );
    // ceil(15 / 2) = 8.
    assert_eq!(shape(&analyze_ok(&model, None), "y"), [1, 4, 8, 8]);
}

#[test]
fn conv_transpose_grows_by_the_stride() {
    // Weight [Cin 4, Cout/group 2, 3, 3]; size 2 × (5 - 1) + 3 = 11.
    let model = with_input(&[1, 4, 5, 5]).weight("w", &[4, 2, 3, 3]).node(
        "ConvTranspose",
        "up",
        &["x", "w"],
        &["y"],
        &[("strides", Attr::Ints(vec![2, 2]))],
    );
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "y"), [1, 2, 11, 11]);
    // 2 × N 1 × Cin 4 × Cout 2 × kernel 9 × input positions 25 = 3600.
    assert_eq!(analysis.summary.gflops, (3600.0 * 1e-9) as f32);
    assert_eq!(analysis.summary.conv_layers, 1);
}

#[test]
fn matmul_broadcasts_batches_and_drops_vector_dimensions() {
    let model = ModelBuilder::new("test")
        .input("a", &dims(&[2, 1, 3, 4]))
        .input("b", &dims(&[5, 4, 6]))
        .input("v", &dims(&[4]))
        .node("MatMul", "batched", &["a", "b"], &["ab"], &[])
        .node("MatMul", "row", &["v", "b"], &["vb"], &[])
        .node("MatMul", "column", &["a", "v"], &["av"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "ab"), [2, 5, 3, 6]);
    assert_eq!(shape(&analysis, "vb"), [5, 6]);
    assert_eq!(shape(&analysis, "av"), [2, 1, 3]);
    // Batch [2, 5] (10 matrices) of 3×4 by 4×6: 2·10·3·4·6 = 1440; the row vector is 1×4
    // by 5 matrices 4×6: 2·5·4·6 = 240; batch [2, 1] of 3×4 by a column: 2·2·3·4 = 48.
    assert_eq!(analysis.summary.gflops, (1728.0 * 1e-9) as f32);
    // No second operand is a weight: these are not linear layers.
    assert_eq!(analysis.summary.linear_layers, 0);
    assert_eq!(analysis.summary.other_layers, 3);
}

#[test]
fn reshape_copies_zeros_and_infers_minus_one() {
    let model = with_input(&[2, 3, 4, 5])
        .int64s("keep_first", &[0, -1, 5])
        .int64s("all", &[-1])
        .node("Reshape", "r1", &["x", "keep_first"], &["y1"], &[])
        .node("Reshape", "r2", &["x", "all"], &["y2"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "y1"), [2, 12, 5]);
    assert_eq!(shape(&analysis, "y2"), [120]);
    // Shape tensors are parameters: 4 int64 values, 32 bytes.
    assert_eq!(analysis.summary.params_mib, (32.0 / MIB) as f32);
}

#[test]
fn reshape_to_another_element_count_is_an_error() {
    let model = with_input(&[2, 3]).int64s("shape", &[4, 2]).node(
        "Reshape",
        "r",
        &["x", "shape"],
        &["y"],
        &[],
    );
    assert_eq!(
        error(&model, None),
        "node `r` (Reshape): cannot reshape [2, 3] (6 elements) to [4, 2]"
    );
}

#[test]
fn reshape_with_a_computed_shape_uses_the_declared_output() {
    let computed = with_input(&[2, 3, 4])
        .int64s("half", &[6, 4])
        .node("Identity", "same", &["half"], &["half2"], &[])
        .node("Abs", "not_constant", &["half2"], &["shape"], &[])
        .node("Reshape", "r", &["x", "shape"], &["y"], &[]);
    assert_eq!(
        error(&computed, None),
        "node `r` (Reshape): input `shape` is not a constant, and output `y` has no static \
         shape in value_info or the graph outputs"
    );
    let declared = computed.value_info("y", &dims(&[6, 4]));
    assert_eq!(shape(&analyze_ok(&declared, None), "y"), [6, 4]);
}

#[test]
fn constants_feed_reshape_and_are_not_activations() {
    let model = with_input(&[2, 3, 4])
        .node(
            "Constant",
            "shape",
            &[],
            &["shape"],
            &[("value", Attr::Int64Tensor(vec![0, -1]))],
        )
        .node(
            "Constant",
            "axes",
            &[],
            &["axes"],
            &[("value_ints", Attr::Ints(vec![1]))],
        )
        .node("Reshape", "r", &["x", "shape"], &["y"], &[])
        .node("Unsqueeze", "u", &["y", "axes"], &["z"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "y"), [2, 12]);
    assert_eq!(shape(&analysis, "z"), [2, 1, 12]);
    // Only y and z (24 floats each) are activations; the Constants count nowhere.
    assert_eq!(analysis.summary.activations_mib, (192.0 / MIB) as f32);
    assert_eq!(analysis.summary.other_layers, 2);
}

#[test]
fn concat_transpose_squeeze_and_unsqueeze() {
    let model = ModelBuilder::new("test")
        .input("a", &dims(&[2, 3, 1, 4]))
        .input("b", &dims(&[2, 5, 1, 4]))
        .int64s("last", &[-1])
        .node(
            "Concat",
            "cat",
            &["a", "b"],
            &["ab"],
            &[("axis", Attr::Int(1))],
        )
        .node(
            "Transpose",
            "t",
            &["ab"],
            &["t"],
            &[("perm", Attr::Ints(vec![0, 3, 1, 2]))],
        )
        .node("Squeeze", "s", &["t", "last"], &["s"], &[])
        .node(
            "Unsqueeze",
            "u",
            &["s"],
            &["u"],
            &[("axes", Attr::Ints(vec![0, -1]))],
        )
        .node("Squeeze", "all_ones", &["u"], &["squeezed"], &[])
        .node("Transpose", "reverse", &["squeezed"], &["reversed"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "ab"), [2, 8, 1, 4]);
    assert_eq!(shape(&analysis, "t"), [2, 4, 8, 1]);
    assert_eq!(shape(&analysis, "s"), [2, 4, 8]);
    assert_eq!(shape(&analysis, "u"), [1, 2, 4, 8, 1]);
    assert_eq!(shape(&analysis, "squeezed"), [2, 4, 8]);
    assert_eq!(shape(&analysis, "reversed"), [8, 4, 2]);
}

#[test]
fn squeezing_an_axis_larger_than_one_is_an_error() {
    let model = with_input(&[2, 3]).node(
        "Squeeze",
        "s",
        &["x"],
        &["y"],
        &[("axes", Attr::Ints(vec![1]))],
    );
    assert_eq!(
        error(&model, None),
        "node `s` (Squeeze): axis 1 of input [2, 3] has size 3, not 1"
    );
}

#[test]
fn flatten_accepts_negative_and_end_axes() {
    let model = with_input(&[2, 3, 4, 5])
        .node(
            "Flatten",
            "last",
            &["x"],
            &["a"],
            &[("axis", Attr::Int(-1))],
        )
        .node(
            "Flatten",
            "first",
            &["x"],
            &["b"],
            &[("axis", Attr::Int(0))],
        )
        .node("Flatten", "end", &["x"], &["c"], &[("axis", Attr::Int(4))]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "a"), [24, 5]);
    assert_eq!(shape(&analysis, "b"), [1, 120]);
    assert_eq!(shape(&analysis, "c"), [120, 1]);
}

#[test]
fn batch_normalization_and_ceil_mode_pooling() {
    let pool = |name: &str, output: &str, ceil_mode| {
        (
            name.to_owned(),
            output.to_owned(),
            [
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("ceil_mode", Attr::Int(ceil_mode)),
            ],
        )
    };
    let (floor_name, floor_out, floor_attrs) = pool("floor", "floor.out", 0);
    let (ceil_name, ceil_out, ceil_attrs) = pool("ceil", "ceil.out", 1);
    let model = with_input(&[1, 3, 7, 7])
        .weight("scale", &[3])
        .weight("bias", &[3])
        .weight("mean", &[3])
        .weight("var", &[3])
        .node(
            "BatchNormalization",
            "bn",
            &["x", "scale", "bias", "mean", "var"],
            &["bn.out"],
            &[],
        )
        .node(
            "AveragePool",
            &floor_name,
            &["bn.out"],
            &[&floor_out],
            &floor_attrs,
        )
        .node(
            "MaxPool",
            &ceil_name,
            &["bn.out"],
            &[&ceil_out],
            &ceil_attrs,
        );
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "bn.out"), [1, 3, 7, 7]);
    // floor((7 - 2) / 2) + 1 = 3; ceil((7 - 2) / 2) + 1 = 4.
    assert_eq!(shape(&analysis, "floor.out"), [1, 3, 3, 3]);
    assert_eq!(shape(&analysis, "ceil.out"), [1, 3, 4, 4]);
    // BN 2 × 147; pools 4 per output element: 4 × 27 + 4 × 48.
    assert_eq!(
        analysis.summary.gflops,
        ((294.0 + 108.0 + 192.0) * 1e-9) as f32
    );
    assert_eq!(analysis.summary.other_layers, 3);
}

#[test]
fn add_broadcasts_and_mismatches_are_named() {
    let model =
        with_input(&[2, 3, 4])
            .weight("row", &[4])
            .node("Add", "add", &["x", "row"], &["y"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "y"), [2, 3, 4]);
    assert_eq!(analysis.summary.gflops, (24.0 * 1e-9) as f32);

    let bad =
        with_input(&[2, 3])
            .weight("row", &[4])
            .node("Mul", "mul", &["x", "row"], &["y"], &[]);
    assert_eq!(
        error(&bad, None),
        "node `mul` (Mul): shapes [2, 3] and [4] do not broadcast"
    );
}

#[test]
fn dropout_identity_and_activations_keep_shapes() {
    let model = with_input(&[2, 5])
        .node("Dropout", "drop", &["x"], &["d", "mask"], &[])
        .node("Identity", "id", &["d"], &["i"], &[])
        .node(
            "LeakyRelu",
            "act",
            &["i"],
            &["y"],
            &[("alpha", Attr::Float(0.1))],
        );
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "mask"), [2, 5]);
    assert_eq!(shape(&analysis, "y"), [2, 5]);
    let summary = &analysis.summary;
    // Identity is not a layer; Dropout is "other".
    assert_eq!((summary.activation_layers, summary.other_layers), (1, 1));
    // d 40 bytes, the boolean mask 10, i 40, y 40.
    assert_eq!(summary.activations_mib, (130.0 / MIB) as f32);
}

#[test]
fn a_weight_through_identity_still_makes_a_linear_layer() {
    let model = with_input(&[2, 5])
        .weight("w", &[5, 3])
        .node("Identity", "id", &["w"], &["w2"], &[])
        .node("MatMul", "fc", &["x", "w2"], &["y"], &[]);
    let summary = analyze_ok(&model, None).summary;
    assert_eq!(summary.linear_layers, 1);
    // Only y (2×3 floats) is an activation, not the weight's Identity copy.
    assert_eq!(summary.activations_mib, (24.0 / MIB) as f32);
}

#[test]
fn initializers_listed_as_inputs_are_parameters() {
    let model = with_input(&[1, 5])
        .input("w", &dims(&[5, 3]))
        .weight("w", &[5, 3])
        .node("MatMul", "fc", &["x", "w"], &["y"], &[]);
    let summary = analyze_ok(&model, None).summary;
    assert_eq!(summary.params_mib, (60.0 / MIB) as f32);
    assert_eq!(summary.input_mib, (20.0 / MIB) as f32);
    assert_eq!(summary.linear_layers, 1);
}

#[test]
fn unknown_ops_take_declared_shapes_with_the_batch() {
    let model = ModelBuilder::new("test")
        .input("x", &[Dim::param("N"), Dim::Value(8)])
        .node("FancyAttention", "attn", &["x"], &["a"], &[])
        .value_info("a", &[Dim::param("N"), Dim::Value(8)])
        .node("Relu", "relu", &["a"], &["y"], &[]);
    let analysis = analyze_ok(&model, Some(3));
    assert_eq!(shape(&analysis, "a"), [3, 8]);
    assert_eq!(shape(&analysis, "y"), [3, 8]);
    assert_eq!(analysis.summary.other_layers, 1);
    // Only Relu's 24 elements: unknown ops count no FLOPs.
    assert_eq!(analysis.summary.gflops, (24.0 * 1e-9) as f32);
}

#[test]
fn only_the_batch_dimension_may_be_symbolic() {
    let model = ModelBuilder::new("test").input("tokens", &[Dim::param("N"), Dim::param("seq")]);
    assert_eq!(
        error(&model, Some(2)),
        "graph input `tokens` has symbolic dimension `seq` at axis 1; only the batch \
         dimension (axis 0) may be symbolic"
    );
}

#[test]
fn a_fixed_batch_elsewhere_sets_a_symbolic_one() {
    let model = ModelBuilder::new("test")
        .input("a", &dims(&[4, 3]))
        .input("b", &[Dim::param("N"), Dim::Value(3)])
        .node("Add", "add", &["a", "b"], &["y"], &[]);
    let analysis = analyze_ok(&model, None);
    assert_eq!(shape(&analysis, "b"), [4, 3]);
    assert_eq!(analysis.summary.batch_size, 4);
}
