//! The walk over an ONNX graph: parameters, the batch, the inputs, then every node in order,
//! inferring its outputs' shapes and adding up sizes, FLOPs and layers.

use std::collections::HashMap;

use prost::Message;
use tandem_api::ModelSummary;

use crate::onnx::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto};
use crate::ops::{self, CONSTANT_LIMIT, Failure, Inferred, Kind, MAX_RANK, Slot, Tensor};
use crate::{DeclareError, Result};

const MIB: f64 = 1024.0 * 1024.0;

/// A summary and the shapes behind it.
#[derive(Debug, Clone)]
pub(crate) struct Analysis {
    pub summary: ModelSummary,
    /// Every tensor the walk described, by name, at the inference batch (see [`Batch`]).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the unit tests check inferred shapes through it")
    )]
    pub tensors: HashMap<String, Tensor>,
}

pub(crate) fn analyze(onnx: &[u8], batch_size: Option<u32>) -> Result<Analysis> {
    if onnx.is_empty() {
        return Err(DeclareError::Empty);
    }
    if batch_size == Some(0) {
        return Err(DeclareError::ZeroBatch);
    }
    let model = ModelProto::decode(onnx).map_err(|source| DeclareError::Decode { source })?;
    let graph = model.graph.ok_or(DeclareError::NoGraph)?;
    analyze_graph(&graph, batch_size)
}

fn analyze_graph(graph: &GraphProto, batch_size: Option<u32>) -> Result<Analysis> {
    let mut tensors = HashMap::new();
    let mut params_bytes = 0.0;
    for initializer in &graph.initializer {
        let fail = |problem: String| DeclareError::Initializer {
            initializer: initializer.name.clone(),
            problem,
        };
        if let Some(&dim) = initializer.dims.iter().find(|&&d| d < 0) {
            return Err(fail(format!("has negative dimension {dim}")));
        }
        if initializer.dims.len() > MAX_RANK {
            let rank = initializer.dims.len();
            return Err(fail(format!("has rank {rank}, over {MAX_RANK}")));
        }
        let tensor = Tensor {
            ints: initializer.small_ints(CONSTANT_LIMIT),
            constant: true,
            ..Tensor::new(initializer.dims.clone(), initializer.data_type)
        };
        params_bytes += tensor.bytes();
        tensors.insert(initializer.name.clone(), tensor);
    }

    // Older exporters list every initializer among the graph inputs too; those are parameters.
    let inputs = graph
        .input
        .iter()
        .filter(|input| !tensors.contains_key(&input.name))
        .map(GraphInput::read)
        .collect::<Result<Vec<_>>>()?;
    let batch = Batch::resolve(&inputs, batch_size)?;
    let mut input_bytes = 0.0;
    for input in &inputs {
        let tensor = input.at(batch.inference);
        input_bytes += tensor.bytes();
        tensors.insert(input.name.clone(), tensor);
    }

    let declared: HashMap<&str, &ValueInfoProto> = graph
        .value_info
        .iter()
        .chain(&graph.output)
        .map(|info| (info.name.as_str(), info))
        .collect();
    let mut totals = Totals::default();
    for (index, node) in graph.node.iter().enumerate() {
        walk_node(
            index,
            node,
            &declared,
            batch.inference,
            &mut tensors,
            &mut totals,
        )?;
    }

    let scale = batch.scale;
    let summary = ModelSummary {
        params_mib: finite(params_bytes / MIB, "parameters")?,
        activations_mib: finite(totals.activation_bytes * scale / MIB, "activations")?,
        input_mib: finite(input_bytes * scale / MIB, "inputs")?,
        batch_size: batch.reported,
        gflops: finite(totals.flops * scale * 1e-9, "FLOPs")?,
        conv_layers: totals.conv_layers,
        linear_layers: totals.linear_layers,
        activation_layers: totals.activation_layers,
        other_layers: totals.other_layers,
    };
    Ok(Analysis { summary, tensors })
}

/// Sums over the nodes, at the inference batch.
#[derive(Debug, Default)]
struct Totals {
    activation_bytes: f64,
    flops: f64,
    conv_layers: u32,
    linear_layers: u32,
    activation_layers: u32,
    other_layers: u32,
}

fn walk_node(
    index: usize,
    node: &NodeProto,
    declared: &HashMap<&str, &ValueInfoProto>,
    batch: i64,
    tensors: &mut HashMap<String, Tensor>,
    totals: &mut Totals,
) -> Result<()> {
    let label = if node.name.is_empty() {
        format!("node #{index} ({})", node.op_type)
    } else {
        format!("node `{}` ({})", node.name, node.op_type)
    };
    // A tensor produced by something we skipped may still be described statically.
    for name in &node.input {
        if !name.is_empty()
            && !tensors.contains_key(name)
            && let Some(tensor) = declared_tensor(declared, name, batch)
        {
            tensors.insert(name.clone(), tensor);
        }
    }
    let slots: Vec<Slot<'_>> = node
        .input
        .iter()
        .map(|name| match tensors.get(name) {
            _ if name.is_empty() => Slot::Absent,
            Some(tensor) => Slot::Known(tensor),
            None => Slot::Unknown(name),
        })
        .collect();
    let weight_operand = matches!(slots.get(1), Some(Slot::Known(tensor)) if tensor.constant);
    let inferred = ops::infer(node, &slots);
    drop(slots);

    let inferred = match inferred {
        Ok(inferred) => inferred,
        Err(Failure::UnknownShape(input)) => {
            return Err(DeclareError::UnknownShape { node: label, input });
        }
        Err(Failure::Problem(problem)) => {
            return Err(DeclareError::Node {
                node: label,
                problem,
            });
        }
        Err(Failure::NotConstant(input)) => {
            declared_outputs(node, declared, batch).map_err(|output| DeclareError::Node {
                node: label.clone(),
                problem: format!(
                    "input `{input}` is not a constant, and output `{output}` has no static \
                     shape in value_info or the graph outputs"
                ),
            })?
        }
        Err(Failure::Unsupported) => declared_outputs(node, declared, batch).map_err(|output| {
            DeclareError::UnsupportedOp {
                node: label.clone(),
                op: if ops::default_domain(node) {
                    node.op_type.clone()
                } else {
                    format!("{}.{}", node.domain, node.op_type)
                },
                output,
            }
        })?,
    };

    let kind = ops::kind(node, weight_operand);
    for (position, name) in node.output.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let tensor = match inferred.outputs.get(position) {
            Some(tensor) => tensor.clone(),
            None => declared_tensor(declared, name, batch).ok_or_else(|| DeclareError::Node {
                node: label.clone(),
                problem: format!(
                    "output {position} (`{name}`) is not one this op has, and has no static \
                     shape in value_info or the graph outputs"
                ),
            })?,
        };
        if tensor.shape.len() > MAX_RANK {
            return Err(DeclareError::Node {
                node: label,
                problem: format!(
                    "output `{name}` would have rank {}, over {MAX_RANK}",
                    tensor.shape.len()
                ),
            });
        }
        // Constants (and weights passed through Identity or Cast) are data, not activations.
        if !tensor.constant {
            totals.activation_bytes += tensor.bytes();
        }
        tensors.insert(name.clone(), tensor);
    }
    totals.flops += inferred.flops;
    let counter = match kind {
        Kind::Conv => &mut totals.conv_layers,
        Kind::Linear => &mut totals.linear_layers,
        Kind::Activation => &mut totals.activation_layers,
        Kind::Other => &mut totals.other_layers,
        Kind::Uncounted => return Ok(()),
    };
    *counter = counter.saturating_add(1);
    Ok(())
}

/// The node's outputs from their declared shapes (no FLOPs), or the first output without one.
fn declared_outputs(
    node: &NodeProto,
    declared: &HashMap<&str, &ValueInfoProto>,
    batch: i64,
) -> std::result::Result<Inferred, String> {
    let outputs = node
        .output
        .iter()
        .map(|name| {
            if name.is_empty() {
                // Placeholder for a left-out optional output; never stored.
                return Ok(Tensor::new(Vec::new(), 0));
            }
            declared_tensor(declared, name, batch).ok_or_else(|| name.clone())
        })
        .collect::<std::result::Result<_, _>>()?;
    Ok(Inferred {
        outputs,
        flops: 0.0,
    })
}

/// A tensor from a static declaration: every dimension known, except a symbolic (or 0) first
/// one, which takes the inference batch.
fn declared_tensor(
    declared: &HashMap<&str, &ValueInfoProto>,
    name: &str,
    batch: i64,
) -> Option<Tensor> {
    let tensor_type = declared.get(name)?.r#type.as_ref()?.tensor_type.as_ref()?;
    let dims = &tensor_type.shape.as_ref()?.dim;
    if dims.len() > MAX_RANK {
        return None;
    }
    let shape = dims
        .iter()
        .enumerate()
        .map(|(axis, dim)| match dim.dim_value {
            Some(value) if value > 0 || (value == 0 && axis > 0) => Some(value),
            Some(value) if value < 0 => None,
            _ if axis == 0 => Some(batch),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Tensor::new(shape, tensor_type.elem_type))
}

/// A graph input that is not an initializer: the model's data.
#[derive(Debug, Clone)]
struct GraphInput {
    name: String,
    elem_type: i32,
    /// The first dimension, the batch; `None` for a scalar.
    leading: Option<Leading>,
    /// The other dimensions.
    rest: Vec<i64>,
}

#[derive(Debug, Clone)]
enum Leading {
    Fixed(i64),
    /// A named dimension (`?` when unnamed: unset, or 0).
    Symbolic(String),
}

impl GraphInput {
    fn read(info: &ValueInfoProto) -> Result<Self> {
        let fail = |problem: String| DeclareError::Input {
            input: info.name.clone(),
            problem,
        };
        let tensor_type = info
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .ok_or_else(|| fail("is not a tensor, or has no type".to_owned()))?;
        let dims = &tensor_type
            .shape
            .as_ref()
            .ok_or_else(|| fail("has no shape".to_owned()))?
            .dim;
        if dims.len() > MAX_RANK {
            return Err(fail(format!("has rank {}, over {MAX_RANK}", dims.len())));
        }
        let mut leading = None;
        let mut rest = Vec::with_capacity(dims.len());
        for (axis, dim) in dims.iter().enumerate() {
            let param = || {
                dim.dim_param
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "?".to_owned())
            };
            match (axis, dim.dim_value) {
                (_, Some(value)) if value < 0 => {
                    return Err(fail(format!(
                        "has negative dimension {value} at axis {axis}"
                    )));
                }
                (0, Some(value)) if value > 0 => leading = Some(Leading::Fixed(value)),
                (0, _) => leading = Some(Leading::Symbolic(param())),
                (_, Some(value)) => rest.push(value),
                (_, None) => {
                    return Err(fail(format!(
                        "has symbolic dimension `{}` at axis {axis}; only the batch dimension \
                         (axis 0) may be symbolic",
                        param()
                    )));
                }
            }
        }
        Ok(Self {
            name: info.name.clone(),
            elem_type: tensor_type.elem_type,
            leading,
            rest,
        })
    }

    /// The input's tensor, with a symbolic batch set to `batch`.
    fn at(&self, batch: i64) -> Tensor {
        let mut shape = Vec::with_capacity(self.rest.len() + 1);
        match self.leading {
            Some(Leading::Fixed(value)) => shape.push(value),
            Some(Leading::Symbolic(_)) => shape.push(batch),
            None => {}
        }
        shape.extend(&self.rest);
        Tensor::new(shape, self.elem_type)
    }
}

/// The batch the graph is walked at, and how the totals scale to the batch reported.
///
/// A graph that fixes its batch (the first graph input with a fixed first dimension) is walked
/// at that batch, because its constants (a Reshape to `[1, -1]`) may depend on it; a requested
/// batch size that differs scales the batch-proportional totals.
#[derive(Debug, Clone, Copy)]
struct Batch {
    inference: i64,
    scale: f64,
    reported: u32,
}

impl Batch {
    fn resolve(inputs: &[GraphInput], requested: Option<u32>) -> Result<Self> {
        let fixed = inputs.iter().find_map(|input| match input.leading {
            Some(Leading::Fixed(value)) => Some((input, value)),
            _ => None,
        });
        match (fixed, requested) {
            (Some((_, model)), Some(requested)) => Ok(Self {
                inference: model,
                scale: f64::from(requested) / model as f64,
                reported: requested,
            }),
            (Some((input, model)), None) => Ok(Self {
                inference: model,
                scale: 1.0,
                reported: u32::try_from(model).map_err(|_| DeclareError::Input {
                    input: input.name.clone(),
                    problem: format!("has batch dimension {model}, too large for a batch size"),
                })?,
            }),
            (None, Some(requested)) => Ok(Self {
                inference: i64::from(requested),
                scale: 1.0,
                reported: requested,
            }),
            (None, None) => {
                let symbolic = inputs.iter().find_map(|input| match &input.leading {
                    Some(Leading::Symbolic(dim)) => Some((input, dim)),
                    _ => None,
                });
                match symbolic {
                    Some((input, dim)) => Err(DeclareError::SymbolicBatch {
                        input: input.name.clone(),
                        dim: dim.clone(),
                    }),
                    // Nothing is batched: the walk does not depend on the batch.
                    None => Ok(Self {
                        inference: 1,
                        scale: 1.0,
                        reported: 1,
                    }),
                }
            }
        }
    }
}

fn finite(value: f64, what: &'static str) -> Result<f32> {
    let narrow = value as f32;
    if narrow.is_finite() {
        Ok(narrow)
    } else {
        Err(DeclareError::TooLarge { what })
    }
}

#[cfg(test)]
mod tests {
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
        let model = with_input(&[2, 3, 4]).weight("row", &[4]).node(
            "Add",
            "add",
            &["x", "row"],
            &["y"],
            &[],
        );
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
        let model =
            ModelBuilder::new("test").input("tokens", &[Dim::param("N"), Dim::param("seq")]);
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
}
