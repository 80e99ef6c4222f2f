//! Small ONNX models for tests, so that tests in other crates can write model files without
//! depending on `prost`.
//!
//! [`lenet`] and [`mlp`] are the models this crate's own tests check by hand (their doc
//! comments give the expected summaries); [`ModelBuilder`] writes others. Weights are zeros:
//! only shapes matter to [`summarize`](crate::summarize). The files are ONNX IR version 8 with
//! opset 13 of the default domain.
//!
//! ```
//! use tandem_declare::onnx::build::{Attr, Dim, ModelBuilder};
//!
//! let onnx = ModelBuilder::new("tiny")
//!     .input("x", &[Dim::param("N"), Dim::Value(8)])
//!     .weight("w", &[8, 4])
//!     .node("MatMul", "fc", &["x", "w"], &["h"], &[])
//!     .node("Softmax", "softmax", &["h"], &["y"], &[("axis", Attr::Int(-1))])
//!     .output("y", &[Dim::param("N"), Dim::Value(4)])
//!     .encode();
//! let summary = tandem_declare::summarize(&onnx, Some(2))?;
//! assert_eq!((summary.linear_layers, summary.activation_layers), (1, 1));
//! # Ok::<(), tandem_declare::DeclareError>(())
//! ```

use prost::Message;

use super::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TensorTypeProto, TypeProto, ValueInfoProto, attribute_type, data_type,
};

/// Largest weight [`ModelBuilder::weight`] writes the zeros of, in bytes (64 MiB).
pub const MAX_WEIGHT_BYTES: usize = 64 << 20;

/// One dimension of a declared tensor shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Value(i64),
    /// A symbolic size, such as the batch `N`.
    Param(String),
}

impl Dim {
    /// A symbolic dimension named `name`.
    pub fn param(name: &str) -> Self {
        Dim::Param(name.to_owned())
    }

    /// The batch dimension: `batch` when fixed, symbolic `N` otherwise.
    pub fn batch(batch: Option<u32>) -> Self {
        batch.map_or_else(|| Dim::param("N"), |b| Dim::Value(i64::from(b)))
    }
}

/// A node attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// An integer, such as `group` or `axis`.
    Int(i64),
    /// Integers, such as `kernel_shape`, `pads` or `perm`.
    Ints(Vec<i64>),
    /// A float, such as LeakyRelu's `alpha`.
    Float(f32),
    /// Floats.
    Floats(Vec<f32>),
    /// A string, such as `auto_pad`.
    String(String),
    /// A one-dimensional int64 tensor, such as a Constant's `value`.
    Int64Tensor(Vec<i64>),
}

/// Writes an ONNX model one graph element at a time. Inputs, weights and outputs are float32.
#[derive(Debug, Clone, Default)]
pub struct ModelBuilder {
    graph: GraphProto,
}

impl ModelBuilder {
    /// An empty graph named `name`.
    pub fn new(name: &str) -> Self {
        Self {
            graph: GraphProto {
                name: name.to_owned(),
                ..GraphProto::default()
            },
        }
    }

    /// Adds a float32 graph input of shape `dims`.
    pub fn input(mut self, name: &str, dims: &[Dim]) -> Self {
        self.graph.input.push(value_info(name, dims));
        self
    }

    /// Adds a float32 initializer (a weight) of shape `dims`, all zeros. A weight over
    /// [`MAX_WEIGHT_BYTES`] (or with a negative dimension) is written without data: its shape
    /// is all a summary reads.
    pub fn weight(mut self, name: &str, dims: &[i64]) -> Self {
        let bytes = dims
            .iter()
            .try_fold(4_usize, |bytes, &d| {
                bytes.checked_mul(usize::try_from(d).ok()?)
            })
            .filter(|&bytes| bytes <= MAX_WEIGHT_BYTES)
            .unwrap_or(0);
        self.graph.initializer.push(TensorProto {
            name: name.to_owned(),
            dims: dims.to_vec(),
            data_type: data_type::FLOAT,
            raw_data: vec![0; bytes],
            ..TensorProto::default()
        });
        self
    }

    /// Adds a one-dimensional int64 initializer holding `values` (a Reshape shape, axes).
    pub fn int64s(mut self, name: &str, values: &[i64]) -> Self {
        self.graph.initializer.push(int64_tensor(name, values));
        self
    }

    /// Adds a node of the default domain.
    pub fn node(
        mut self,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attributes: &[(&str, Attr)],
    ) -> Self {
        self.graph.node.push(NodeProto {
            input: inputs.iter().map(|&s| s.to_owned()).collect(),
            output: outputs.iter().map(|&s| s.to_owned()).collect(),
            name: name.to_owned(),
            op_type: op_type.to_owned(),
            attribute: attributes
                .iter()
                .map(|(name, value)| attribute(name, value.clone()))
                .collect(),
            domain: String::new(),
        });
        self
    }

    /// Adds a float32 graph output of shape `dims`.
    pub fn output(mut self, name: &str, dims: &[Dim]) -> Self {
        self.graph.output.push(value_info(name, dims));
        self
    }

    /// Declares the float32 shape of an intermediate tensor (`value_info`).
    pub fn value_info(mut self, name: &str, dims: &[Dim]) -> Self {
        self.graph.value_info.push(value_info(name, dims));
        self
    }

    /// The model file.
    pub fn encode(&self) -> Vec<u8> {
        ModelProto {
            ir_version: 8,
            producer_name: "tandem-declare".to_owned(),
            graph: Some(self.graph.clone()),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 13,
            }],
        }
        .encode_to_vec()
    }
}

fn value_info(name: &str, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Dim::Value(value) => Dimension {
                dim_value: Some(*value),
                dim_param: None,
            },
            Dim::Param(param) => Dimension {
                dim_value: None,
                dim_param: Some(param.clone()),
            },
        })
        .collect();
    ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
    }
}

fn int64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: name.to_owned(),
        dims: vec![values.len() as i64],
        data_type: data_type::INT64,
        int64_data: values.to_vec(),
        ..TensorProto::default()
    }
}

fn attribute(name: &str, value: Attr) -> AttributeProto {
    let mut attribute = AttributeProto {
        name: name.to_owned(),
        ..AttributeProto::default()
    };
    attribute.r#type = match value {
        Attr::Int(i) => {
            attribute.i = i;
            attribute_type::INT
        }
        Attr::Ints(ints) => {
            attribute.ints = ints;
            attribute_type::INTS
        }
        Attr::Float(f) => {
            attribute.f = f;
            attribute_type::FLOAT
        }
        Attr::Floats(floats) => {
            attribute.floats = floats;
            attribute_type::FLOATS
        }
        Attr::String(s) => {
            attribute.s = s.into_bytes();
            attribute_type::STRING
        }
        Attr::Int64Tensor(values) => {
            attribute.t = Some(int64_tensor("", &values));
            attribute_type::TENSOR
        }
    };
    attribute
}

/// A LeNet-like CNN on 1×28×28 images, `batch` fixed or symbolic `N` when `None`:
///
/// ```text
/// input [B,1,28,28] → Conv 6×5×5 pad 2 → Relu → MaxPool 2×2/2 → Conv 16×5×5 → Relu
///       → GlobalAveragePool → Flatten → Gemm 16→10 → logits [B,10]
/// ```
///
/// Per sample: 2,742 float32 parameters (10,968 bytes), 784 input floats, 13,826 activation
/// floats and 734,442 FLOPs; 2 conv, 1 linear, 2 activation and 3 other layers.
pub fn lenet(batch: Option<u32>) -> Vec<u8> {
    let b = || Dim::batch(batch);
    ModelBuilder::new("lenet")
        .input(
            "input",
            &[b(), Dim::Value(1), Dim::Value(28), Dim::Value(28)],
        )
        .weight("conv1.weight", &[6, 1, 5, 5])
        .weight("conv1.bias", &[6])
        .weight("conv2.weight", &[16, 6, 5, 5])
        .weight("conv2.bias", &[16])
        .weight("fc.weight", &[10, 16])
        .weight("fc.bias", &[10])
        .node(
            "Conv",
            "conv1",
            &["input", "conv1.weight", "conv1.bias"],
            &["conv1.out"],
            &[("pads", Attr::Ints(vec![2, 2, 2, 2]))],
        )
        .node("Relu", "relu1", &["conv1.out"], &["relu1.out"], &[])
        .node(
            "MaxPool",
            "pool1",
            &["relu1.out"],
            &["pool1.out"],
            &[
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
        )
        .node(
            "Conv",
            "conv2",
            &["pool1.out", "conv2.weight", "conv2.bias"],
            &["conv2.out"],
            &[("kernel_shape", Attr::Ints(vec![5, 5]))],
        )
        .node("Relu", "relu2", &["conv2.out"], &["relu2.out"], &[])
        .node(
            "GlobalAveragePool",
            "gap",
            &["relu2.out"],
            &["gap.out"],
            &[],
        )
        .node(
            "Flatten",
            "flatten",
            &["gap.out"],
            &["flatten.out"],
            &[("axis", Attr::Int(1))],
        )
        .node(
            "Gemm",
            "fc",
            &["flatten.out", "fc.weight", "fc.bias"],
            &["logits"],
            &[("transB", Attr::Int(1))],
        )
        .output("logits", &[b(), Dim::Value(10)])
        .encode()
}

/// A multilayer perceptron on flattened 28×28 images, `batch` fixed or symbolic `N` when
/// `None`:
///
/// ```text
/// input [B,784] → MatMul 784→128 → Add → Relu → MatMul 128→10 → Add → logits [B,10]
/// ```
///
/// Per sample: 101,770 float32 parameters (407,080 bytes), 784 input floats, 404 activation
/// floats and 203,530 FLOPs; 2 linear, 1 activation and 2 other layers.
pub fn mlp(batch: Option<u32>) -> Vec<u8> {
    let b = || Dim::batch(batch);
    ModelBuilder::new("mlp")
        .input("input", &[b(), Dim::Value(784)])
        .weight("fc1.weight", &[784, 128])
        .weight("fc1.bias", &[128])
        .weight("fc2.weight", &[128, 10])
        .weight("fc2.bias", &[10])
        .node("MatMul", "fc1", &["input", "fc1.weight"], &["fc1.mm"], &[])
        .node("Add", "fc1.add", &["fc1.mm", "fc1.bias"], &["fc1.out"], &[])
        .node("Relu", "relu", &["fc1.out"], &["relu.out"], &[])
        .node(
            "MatMul",
            "fc2",
            &["relu.out", "fc2.weight"],
            &["fc2.mm"],
            &[],
        )
        .node("Add", "fc2.add", &["fc2.mm", "fc2.bias"], &["logits"], &[])
        .output("logits", &[b(), Dim::Value(10)])
        .encode()
}
