//! Property tests: no input makes the crate panic, and whatever it accepts is a sane summary.

use proptest::prelude::*;
use tandem_declare::onnx::build::{self, Attr, Dim, ModelBuilder};
use tandem_declare::{ModelSummary, read_summary_json, summarize};

fn assert_sane(summary: &ModelSummary) {
    for value in [
        summary.params_mib,
        summary.activations_mib,
        summary.input_mib,
        summary.gflops,
    ] {
        assert!(value.is_finite() && value >= 0.0, "{summary:?}");
    }
    assert!(summary.batch_size >= 1, "{summary:?}");
}

/// Every op the crate knows, and one it does not.
const OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Relu",
    "Softmax",
    "BatchNormalization",
    "Add",
    "Mul",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Flatten",
    "Reshape",
    "Concat",
    "Dropout",
    "Identity",
    "Cast",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Constant",
    "Unknown",
];

const ATTRIBUTES: &[&str] = &[
    "axis",
    "axes",
    "perm",
    "kernel_shape",
    "strides",
    "pads",
    "dilations",
    "group",
    "ceil_mode",
    "auto_pad",
    "transA",
    "transB",
    "output_padding",
    "output_shape",
    "allowzero",
    "shape",
    "to",
    "value",
    "value_ints",
];

/// One node of a random chain: its op, attributes, and optional weight and int64 constant
/// inputs.
#[derive(Debug, Clone)]
struct RandomNode {
    op: usize,
    attributes: Vec<(usize, Vec<i64>)>,
    weight: Option<Vec<i64>>,
    constant: Option<Vec<i64>>,
}

fn random_node() -> impl Strategy<Value = RandomNode> {
    (
        0..OPS.len(),
        prop::collection::vec(
            (0..ATTRIBUTES.len(), prop::collection::vec(-3_i64..6, 0..5)),
            0..4,
        ),
        prop::option::of(prop::collection::vec(0_i64..5, 0..5)),
        prop::option::of(prop::collection::vec(-2_i64..5, 0..4)),
    )
        .prop_map(|(op, attributes, weight, constant)| RandomNode {
            op,
            attributes,
            weight,
            constant,
        })
}

fn attribute(name: &str, values: &[i64]) -> Attr {
    match name {
        "auto_pad" => {
            Attr::String(["NOTSET", "SAME_UPPER", "VALID", "bogus"][values.len() % 4].to_owned())
        }
        "value" => Attr::Int64Tensor(values.to_vec()),
        _ if values.len() == 1 => Attr::Int(values[0]),
        _ => Attr::Ints(values.to_vec()),
    }
}

/// A chain of random nodes over an input of random shape.
fn random_chain(input: &[i64], nodes: &[RandomNode]) -> Vec<u8> {
    let dims: Vec<Dim> = input.iter().map(|&d| Dim::Value(d)).collect();
    let mut model = ModelBuilder::new("random").input("t0", &dims);
    for (index, node) in nodes.iter().enumerate() {
        let (previous, output) = (format!("t{index}"), format!("t{}", index + 1));
        let mut inputs = vec![previous];
        if let Some(weight) = &node.weight {
            let name = format!("w{index}");
            model = model.weight(&name, weight);
            inputs.push(name);
        }
        if let Some(values) = &node.constant {
            let name = format!("c{index}");
            model = model.int64s(&name, values);
            inputs.push(name);
        }
        let attributes: Vec<(&str, Attr)> = node
            .attributes
            .iter()
            .map(|(name, values)| (ATTRIBUTES[*name], attribute(ATTRIBUTES[*name], values)))
            .collect();
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        model = model.node(OPS[node.op], &output, &inputs, &[&output], &attributes);
    }
    model.encode()
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..1024),
        batch in prop::option::of(0_u32..100),
    ) {
        if let Ok(summary) = summarize(&bytes, batch) {
            assert_sane(&summary);
        }
    }

    #[test]
    fn corrupted_models_never_panic(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        batch in prop::option::of(1_u32..100),
    ) {
        let mut bytes = build::lenet(None);
        for (index, byte) in flips {
            let at = index.index(bytes.len());
            bytes[at] = byte;
        }
        if let Ok(summary) = summarize(&bytes, batch) {
            assert_sane(&summary);
        }
    }

    #[test]
    fn random_graphs_never_panic(
        input in prop::collection::vec(0_i64..8, 0..5),
        nodes in prop::collection::vec(random_node(), 1..6),
        batch in prop::option::of(1_u32..100),
    ) {
        if let Ok(summary) = summarize(&random_chain(&input, &nodes), batch) {
            assert_sane(&summary);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        if let Ok(summary) = read_summary_json(&text) {
            assert_sane(&summary);
        }
    }

    #[test]
    fn summary_shaped_json_is_read_or_rejected_by_field(
        params in any::<f64>(),
        batch in any::<i64>(),
        layers in any::<i64>(),
    ) {
        let text = format!(
            r#"{{"params_mib": {params:e}, "activations_mib": 1, "input_mib": 1,
                "batch_size": {batch}, "gflops": 1, "conv_layers": {layers},
                "linear_layers": 0, "activation_layers": 0, "other_layers": 0}}"#
        );
        match read_summary_json(&text) {
            Ok(summary) => assert_sane(&summary),
            Err(e) => {
                let message = e.to_string();
                prop_assert!(
                    ["params_mib", "batch_size", "conv_layers"]
                        .iter()
                        .any(|field| message.contains(field)),
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn totals_but_parameters_grow_with_the_batch(batch in 1_u32..512) {
        let one = summarize(&build::lenet(None), Some(1)).unwrap();
        let many = summarize(&build::lenet(None), Some(batch)).unwrap();
        let b = batch as f32;
        prop_assert_eq!(many.params_mib, one.params_mib);
        for (single, batched) in [
            (one.gflops, many.gflops),
            (one.activations_mib, many.activations_mib),
            (one.input_mib, many.input_mib),
        ] {
            prop_assert!(
                (batched - single * b).abs() <= 1e-5 * batched,
                "{single} × {b} vs {batched}"
            );
        }
    }
}
