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
mod tests;
