//! The shape and FLOP rules of the ONNX ops this crate understands, one function per op family.
//!
//! Dimensions are `i64` as in ONNX, always non-negative here; arithmetic on them goes through
//! `i128` and back, so no model can overflow it. Element counts and FLOPs are `f64`: they are
//! estimates, and a huge one becomes infinity, which the walker reports.

use crate::onnx::proto::{AttributeProto, NodeProto, data_type};

/// Most dimensions a tensor may have. ONNX models stay far below; the cap keeps a hostile file
/// from making every node copy a huge shape.
pub(crate) const MAX_RANK: usize = 64;

/// Most elements of an integer constant whose values are kept (for Reshape shapes, axes).
pub(crate) const CONSTANT_LIMIT: usize = 4096;

/// What is known about one tensor while walking the graph.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tensor {
    /// Every dimension, at the inference batch.
    pub shape: Vec<i64>,
    /// `TensorProto.DataType` (0 when unknown).
    pub elem_type: i32,
    /// The values of a small integer constant.
    pub ints: Option<Vec<i64>>,
    /// An initializer or a Constant's output (possibly through Identity or Cast): a weight.
    pub constant: bool,
}

impl Tensor {
    /// A computed (non-constant) tensor.
    pub(crate) fn new(shape: Vec<i64>, elem_type: i32) -> Self {
        Self {
            shape,
            elem_type,
            ints: None,
            constant: false,
        }
    }

    /// A computed tensor of `input`'s type.
    fn like(input: &Tensor, shape: Vec<i64>) -> Self {
        Self::new(shape, input.elem_type)
    }

    /// Number of elements.
    pub(crate) fn elements(&self) -> f64 {
        count(&self.shape)
    }

    /// Size in bytes; float32 when the element type is unknown.
    pub(crate) fn bytes(&self) -> f64 {
        let bits = data_type::bits(self.elem_type).unwrap_or(32);
        self.elements() * f64::from(bits) / 8.0
    }
}

/// One input of a node, as the walker found it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot<'a> {
    /// An optional input left out (an empty name).
    Absent,
    /// A tensor whose shape is known.
    Known(&'a Tensor),
    /// A tensor nothing describes: its name.
    Unknown(&'a str),
}

/// Why a node's outputs could not be inferred.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// An input the rule needs has unknown shape: its name.
    UnknownShape(String),
    /// An input that must be a constant (a Reshape shape, Squeeze axes) is computed: its name.
    /// The walker falls back to declared output shapes.
    NotConstant(String),
    /// The op is not one of ours. The walker falls back to declared output shapes.
    Unsupported,
    /// The inputs or attributes break the op's rules.
    Problem(String),
}

/// The outputs of a node, in order, and its forward FLOPs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inferred {
    pub outputs: Vec<Tensor>,
    pub flops: f64,
}

/// How a node is counted in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Conv,
    Linear,
    Activation,
    Other,
    /// Constant and Identity: not layers.
    Uncounted,
}

/// The activation ops: shape preserved, one FLOP per element, counted as activation layers.
pub(crate) const ACTIVATIONS: &[&str] = &[
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Sigmoid",
    "HardSigmoid",
    "Tanh",
    "Gelu",
    "Softmax",
    "LogSoftmax",
    "Clip",
    "HardSwish",
    "Elu",
    "Selu",
    "Celu",
    "Softplus",
    "Softsign",
    "Mish",
    "ThresholdedRelu",
];

/// Element-wise ops with numpy broadcasting: one FLOP per output element per extra input.
const BROADCASTING: &[&str] = &[
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean",
];

/// One-input element-wise math: one FLOP per element.
const UNARY: &[&str] = &[
    "Abs",
    "Neg",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Erf",
    "Floor",
    "Ceil",
];

/// Whether a node is in the default ONNX domain, the only one whose ops we know.
pub(crate) fn default_domain(node: &NodeProto) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// How `node` counts; `weight_operand` tells whether its second input is a constant.
pub(crate) fn kind(node: &NodeProto, weight_operand: bool) -> Kind {
    if !default_domain(node) {
        return Kind::Other;
    }
    match node.op_type.as_str() {
        "Conv" | "ConvTranspose" => Kind::Conv,
        "Gemm" => Kind::Linear,
        "MatMul" if weight_operand => Kind::Linear,
        "Constant" | "Identity" => Kind::Uncounted,
        op if ACTIVATIONS.contains(&op) => Kind::Activation,
        _ => Kind::Other,
    }
}

/// The outputs and FLOPs of `node`, whose inputs are `slots` (one per `node.input`).
pub(crate) fn infer(node: &NodeProto, slots: &[Slot<'_>]) -> Result<Inferred, Failure> {
    if !default_domain(node) {
        return Err(Failure::Unsupported);
    }
    let node = Node { proto: node, slots };
    match node.proto.op_type.as_str() {
        "Conv" => conv(&node),
        "ConvTranspose" => conv_transpose(&node),
        "Gemm" => gemm(&node),
        "MatMul" => matmul(&node),
        "BatchNormalization" => batch_normalization(&node),
        "MaxPool" | "AveragePool" => pool(&node),
        "GlobalAveragePool" | "GlobalMaxPool" => global_pool(&node),
        "Flatten" => flatten(&node),
        "Reshape" => reshape(&node),
        "Concat" => concat(&node),
        "Transpose" => transpose(&node),
        "Squeeze" => squeeze(&node),
        "Unsqueeze" => unsqueeze(&node),
        "Constant" => constant(&node),
        "Dropout" => dropout(&node),
        "Identity" | "Cast" => pass_through(&node),
        op if ACTIVATIONS.contains(&op) || UNARY.contains(&op) => unary(&node),
        op if BROADCASTING.contains(&op) => broadcasting(&node),
        _ => Err(Failure::Unsupported),
    }
}

/// A node with its resolved inputs.
struct Node<'a> {
    proto: &'a NodeProto,
    slots: &'a [Slot<'a>],
}

impl<'a> Node<'a> {
    /// The name of input `index` (empty when there is none).
    fn name(&self, index: usize) -> &'a str {
        self.proto.input.get(index).map_or("", String::as_str)
    }

    /// A required input; `role` says what it is for, for the message when it is missing.
    fn input(&self, index: usize, role: &str) -> Result<&'a Tensor, Failure> {
        self.optional(index)?
            .ok_or_else(|| problem(format!("missing input {index} ({role})")))
    }

    /// An optional input: `None` when left out.
    fn optional(&self, index: usize) -> Result<Option<&'a Tensor>, Failure> {
        match self.slots.get(index) {
            None | Some(Slot::Absent) => Ok(None),
            Some(Slot::Known(tensor)) => Ok(Some(tensor)),
            Some(Slot::Unknown(name)) => Err(Failure::UnknownShape((*name).to_owned())),
        }
    }

    /// The integer values of an optional constant input (a shape, axes).
    fn constant_ints(&self, index: usize) -> Result<Option<&'a [i64]>, Failure> {
        match self.optional(index)? {
            None => Ok(None),
            Some(tensor) => tensor
                .ints
                .as_deref()
                .map(Some)
                .ok_or_else(|| Failure::NotConstant(self.name(index).to_owned())),
        }
    }

    fn attribute(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    fn int(&self, name: &str, default: i64) -> i64 {
        self.attribute(name).map_or(default, |a| a.i)
    }

    fn ints(&self, name: &str) -> Option<&'a [i64]> {
        self.attribute(name).map(|a| a.ints.as_slice())
    }

    fn string(&self, name: &str) -> Option<String> {
        self.attribute(name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }

    /// An integer-list attribute of exactly `len` values, each at least `min`, or `default`
    /// repeated when absent.
    fn ints_or(&self, name: &str, len: usize, default: i64, min: i64) -> Result<Vec<i64>, Failure> {
        let Some(values) = self.ints(name) else {
            return Ok(vec![default; len]);
        };
        if values.len() != len {
            return Err(problem(format!(
                "attribute `{name}` has {} values, expected {len}",
                values.len()
            )));
        }
        if let Some(bad) = values.iter().find(|&&v| v < min) {
            return Err(problem(format!(
                "attribute `{name}` has value {bad}, less than {min}"
            )));
        }
        Ok(values.to_vec())
    }

    /// The inputs that are present, all required to be known.
    fn present_inputs(&self) -> Result<Vec<&'a Tensor>, Failure> {
        (0..self.slots.len())
            .filter_map(|index| self.optional(index).transpose())
            .collect()
    }
}

fn problem(text: String) -> Failure {
    Failure::Problem(text)
}

/// Number of elements of a shape, as an estimate.
pub(crate) fn count(shape: &[i64]) -> f64 {
    shape.iter().map(|&d| d as f64).product()
}

/// Exact number of elements of a shape, or a problem if it overflows.
fn exact_count(shape: &[i64]) -> Result<i64, Failure> {
    shape
        .iter()
        .try_fold(1_i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| problem(format!("the element count of {} overflows", show(shape))))
}

/// A dimension computed in `i128`, back in range.
fn dimension(value: i128) -> Result<i64, Failure> {
    i64::try_from(value).map_err(|_| problem(format!("a dimension ({value}) overflows")))
}

/// A shape as `[1, 6, 28, 28]`.
pub(crate) fn show(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// `axis` (negative counts from the end) as an index below `rank`.
fn axis_index(axis: i64, rank: usize, what: &str) -> Result<usize, Failure> {
    let rank_wide = rank as i128;
    let wide = i128::from(axis);
    let normalized = if wide < 0 { wide + rank_wide } else { wide };
    usize::try_from(normalized)
        .ok()
        .filter(|&index| index < rank)
        .ok_or_else(|| problem(format!("{what} {axis} is out of range for rank {rank}")))
}

/// Numpy (multidirectional) broadcasting; `None` when the shapes do not broadcast.
pub(crate) fn broadcast(shapes: &[&[i64]]) -> Option<Vec<i64>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1; rank];
    for (axis, slot) in out.iter_mut().enumerate() {
        for shape in shapes {
            let offset = rank - shape.len();
            let Some(&dim) = axis.checked_sub(offset).and_then(|i| shape.get(i)) else {
                continue;
            };
            if dim == 1 {
                continue;
            }
            if *slot == 1 {
                *slot = dim;
            } else if *slot != dim {
                return None;
            }
        }
    }
    Some(out)
}

/// The rank a convolution or pooling input must have (N, C, then at least one spatial axis);
/// returns the number of spatial axes.
fn spatial_axes(node: &Node<'_>, index: usize, tensor: &Tensor) -> Result<usize, Failure> {
    match tensor.shape.len() {
        rank @ 3.. => Ok(rank - 2),
        rank => Err(problem(format!(
            "input `{}` has shape {} (rank {rank}); {} needs N, C and at least one spatial axis",
            node.name(index),
            show(&tensor.shape),
            node.proto.op_type
        ))),
    }
}

/// `auto_pad` of convolutions and pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AutoPad {
    NotSet,
    Same,
    Valid,
}

/// The sliding window of a convolution or pool.
#[derive(Debug, Clone, PartialEq)]
struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// Begins of every spatial axis, then ends.
    pads: Vec<i64>,
    auto_pad: AutoPad,
}

impl Window {
    /// Reads the window attributes; `kernel` comes from `kernel_shape`, else `weight_kernel`.
    fn read(
        node: &Node<'_>,
        spatial: usize,
        weight_kernel: Option<&[i64]>,
    ) -> Result<Self, Failure> {
        let kernel = match (node.ints("kernel_shape"), weight_kernel) {
            (Some(_), _) => node.ints_or("kernel_shape", spatial, 1, 1)?,
            (None, Some(kernel)) => kernel.to_vec(),
            (None, None) => return Err(problem("attribute `kernel_shape` is required".to_owned())),
        };
        if kernel.len() != spatial || kernel.iter().any(|&k| k < 1) {
            return Err(problem(format!(
                "kernel {} does not fit {spatial} spatial axes",
                show(&kernel)
            )));
        }
        let auto_pad = match node.string("auto_pad").as_deref() {
            None | Some("" | "NOTSET") => AutoPad::NotSet,
            Some("SAME_UPPER" | "SAME_LOWER") => AutoPad::Same,
            Some("VALID") => AutoPad::Valid,
            Some(other) => {
                return Err(problem(format!(
                    "attribute `auto_pad` has unknown value `{other}`"
                )));
            }
        };
        let pads = match auto_pad {
            AutoPad::NotSet => node.ints_or("pads", 2 * spatial, 0, 0)?,
            AutoPad::Same | AutoPad::Valid => vec![0; 2 * spatial],
        };
        Ok(Self {
            kernel,
            strides: node.ints_or("strides", spatial, 1, 1)?,
            dilations: node.ints_or("dilations", spatial, 1, 1)?,
            pads,
            auto_pad,
        })
    }

    /// The output sizes of the spatial axes `input`.
    fn output(&self, input: &[i64], ceil_mode: bool) -> Result<Vec<i64>, Failure> {
        let mut out = Vec::with_capacity(input.len());
        for (axis, &size) in input.iter().enumerate() {
            let at = |values: &[i64], i: usize| i128::from(values.get(i).copied().unwrap_or(0));
            let size = i128::from(size);
            let stride = at(&self.strides, axis).max(1);
            if self.auto_pad == AutoPad::Same {
                out.push(dimension((size + stride - 1) / stride)?);
                continue;
            }
            let extent = (at(&self.kernel, axis) - 1) * at(&self.dilations, axis) + 1;
            let begin = at(&self.pads, axis);
            let padded = size + begin + at(&self.pads, axis + input.len());
            let span = padded - extent;
            if span < 0 {
                return Err(problem(format!(
                    "kernel extent {extent} is larger than the padded input ({padded}) along \
                     spatial axis {axis}"
                )));
            }
            let mut steps = if ceil_mode {
                (span + stride - 1) / stride
            } else {
                span / stride
            };
            // A last window that would start inside the end padding is dropped (as PyTorch and
            // ONNX Runtime do).
            if ceil_mode && steps * stride >= size + begin {
                steps -= 1;
            }
            out.push(dimension(steps + 1)?);
        }
        Ok(out)
    }
}

fn conv(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    let w = node.input(1, "W, the weight")?;
    let bias = node.optional(2)?;
    let spatial = spatial_axes(node, 0, x)?;
    if w.shape.len() != x.shape.len() {
        return Err(problem(format!(
            "weight `{}` has shape {}, but input `{}` has rank {}",
            node.name(1),
            show(&w.shape),
            node.name(0),
            x.shape.len()
        )));
    }
    let window = Window::read(node, spatial, Some(&w.shape[2..]))?;
    let group = node.int("group", 1);
    if group < 1 {
        return Err(problem(format!(
            "attribute `group` is {group}, less than 1"
        )));
    }
    let (batch, channels) = (x.shape[0], x.shape[1]);
    let (filters, channels_per_group) = (w.shape[0], w.shape[1]);
    if i128::from(channels_per_group) * i128::from(group) != i128::from(channels) {
        return Err(problem(format!(
            "weight `{}` takes {channels_per_group} channels per group in {group} groups, but \
             input `{}` has {channels}",
            node.name(1),
            node.name(0)
        )));
    }
    if filters % group != 0 {
        return Err(problem(format!(
            "weight `{}` has {filters} filters, not a multiple of group {group}",
            node.name(1)
        )));
    }
    let out_spatial = window.output(&x.shape[2..], false)?;
    let positions = count(&out_spatial);
    let outputs = batch as f64 * filters as f64 * positions;
    let macs = outputs * channels_per_group as f64 * count(&window.kernel);
    let flops = 2.0 * macs + if bias.is_some() { outputs } else { 0.0 };
    let mut shape = vec![batch, filters];
    shape.extend(out_spatial);
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops,
    })
}

fn conv_transpose(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    let w = node.input(1, "W, the weight")?;
    let bias = node.optional(2)?;
    let spatial = spatial_axes(node, 0, x)?;
    if w.shape.len() != x.shape.len() || w.shape[0] != x.shape[1] {
        return Err(problem(format!(
            "weight `{}` has shape {}, which does not fit input `{}` of shape {}",
            node.name(1),
            show(&w.shape),
            node.name(0),
            show(&x.shape)
        )));
    }
    let window = Window::read(node, spatial, Some(&w.shape[2..]))?;
    let group = node.int("group", 1);
    if group < 1 {
        return Err(problem(format!(
            "attribute `group` is {group}, less than 1"
        )));
    }
    let filters = dimension(i128::from(w.shape[1]) * i128::from(group))?;
    let output_padding = node.ints_or("output_padding", spatial, 0, 0)?;
    let out_spatial = match node.ints("output_shape") {
        // Some exporters write the whole output shape, N and C included.
        Some(shape) if shape.len() == spatial + 2 => {
            node.ints_or("output_shape", spatial + 2, 0, 0)?[2..].to_vec()
        }
        Some(_) => node.ints_or("output_shape", spatial, 0, 0)?,
        None => {
            let mut out = Vec::with_capacity(spatial);
            for (axis, (&size, &padding)) in x.shape[2..].iter().zip(&output_padding).enumerate() {
                let size = i128::from(size);
                let stride = i128::from(window.strides[axis]);
                let grown = if window.auto_pad == AutoPad::Same {
                    size.checked_mul(stride)
                } else {
                    let extent = (i128::from(window.kernel[axis]) - 1)
                        * i128::from(window.dilations[axis])
                        + 1;
                    let pads =
                        i128::from(window.pads[axis]) + i128::from(window.pads[axis + spatial]);
                    stride
                        .checked_mul(size - 1)
                        .and_then(|strided| strided.checked_add(i128::from(padding) + extent))
                        .map(|unpadded| unpadded - pads)
                };
                let size = grown.ok_or_else(|| {
                    problem(format!(
                        "the output size overflows along spatial axis {axis}"
                    ))
                })?;
                if size < 0 {
                    return Err(problem(format!(
                        "the output would have negative size {size} along spatial axis {axis}"
                    )));
                }
                out.push(dimension(size)?);
            }
            out
        }
    };
    let (batch, channels) = (x.shape[0], x.shape[1]);
    let macs = batch as f64
        * channels as f64
        * w.shape[1] as f64
        * count(&window.kernel)
        * count(&x.shape[2..]);
    let bias_flops = if bias.is_some() {
        batch as f64 * filters as f64 * count(&out_spatial)
    } else {
        0.0
    };
    let mut shape = vec![batch, filters];
    shape.extend(out_spatial);
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 2.0 * macs + bias_flops,
    })
}

fn gemm(node: &Node<'_>) -> Result<Inferred, Failure> {
    let a = node.input(0, "A")?;
    let b = node.input(1, "B")?;
    let c = node.optional(2)?;
    let (&[a0, a1], &[b0, b1]) = (a.shape.as_slice(), b.shape.as_slice()) else {
        return Err(problem(format!(
            "inputs `{}` {} and `{}` {} must both have rank 2",
            node.name(0),
            show(&a.shape),
            node.name(1),
            show(&b.shape)
        )));
    };
    let (m, k) = if node.int("transA", 0) != 0 {
        (a1, a0)
    } else {
        (a0, a1)
    };
    let (k_b, n) = if node.int("transB", 0) != 0 {
        (b1, b0)
    } else {
        (b0, b1)
    };
    if k != k_b {
        return Err(problem(format!(
            "inner dimensions differ: `{}` gives {k}, `{}` gives {k_b}",
            node.name(0),
            node.name(1)
        )));
    }
    let shape = vec![m, n];
    if let Some(c) = c
        && broadcast(&[&c.shape, &shape]).as_ref() != Some(&shape)
    {
        return Err(problem(format!(
            "input `{}` of shape {} does not broadcast to {}",
            node.name(2),
            show(&c.shape),
            show(&shape)
        )));
    }
    let products = m as f64 * n as f64;
    let bias_flops = if c.is_some() { products } else { 0.0 };
    Ok(Inferred {
        outputs: vec![Tensor::like(a, shape)],
        flops: 2.0 * products * k as f64 + bias_flops,
    })
}

fn matmul(node: &Node<'_>) -> Result<Inferred, Failure> {
    let a = node.input(0, "A")?;
    let b = node.input(1, "B")?;
    let mismatch = || {
        problem(format!(
            "shapes {} of `{}` and {} of `{}` do not multiply",
            show(&a.shape),
            node.name(0),
            show(&b.shape),
            node.name(1)
        ))
    };
    // A vector operand is a matrix of one row (on the left) or column (on the right) whose
    // extra dimension is dropped from the result.
    let (a_batch, m, k) = match a.shape.as_slice() {
        [] => return Err(mismatch()),
        [k] => (&[][..], None, *k),
        [batch @ .., m, k] => (batch, Some(*m), *k),
    };
    let (b_batch, k_b, n) = match b.shape.as_slice() {
        [] => return Err(mismatch()),
        [k] => (&[][..], *k, None),
        [batch @ .., k, n] => (batch, *k, Some(*n)),
    };
    if k != k_b {
        return Err(mismatch());
    }
    let mut shape = broadcast(&[a_batch, b_batch]).ok_or_else(mismatch)?;
    let flops = 2.0 * count(&shape) * m.unwrap_or(1) as f64 * k as f64 * n.unwrap_or(1) as f64;
    shape.extend(m);
    shape.extend(n);
    Ok(Inferred {
        outputs: vec![Tensor::like(a, shape)],
        flops,
    })
}

fn batch_normalization(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    let Some(&channels) = x.shape.get(1) else {
        return Err(problem(format!(
            "input `{}` has shape {}; BatchNormalization needs N and C",
            node.name(0),
            show(&x.shape)
        )));
    };
    // Outputs after Y (running or saved statistics, by opset) are per channel.
    let statistics = Tensor::like(x, vec![channels]);
    let mut outputs = vec![Tensor::like(x, x.shape.clone())];
    outputs.extend(std::iter::repeat_n(statistics, 4));
    Ok(Inferred {
        outputs,
        // Normalizing is a scale and a shift per element: one multiply-add.
        flops: 2.0 * x.elements(),
    })
}

fn pool(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    let spatial = spatial_axes(node, 0, x)?;
    let window = Window::read(node, spatial, None)?;
    let out_spatial = window.output(&x.shape[2..], node.int("ceil_mode", 0) != 0)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(out_spatial);
    let y = Tensor::like(x, shape);
    let flops = count(&window.kernel) * y.elements();
    // MaxPool's optional second output holds the indices.
    let indices = Tensor::new(y.shape.clone(), data_type::INT64);
    Ok(Inferred {
        outputs: vec![y, indices],
        flops,
    })
}

fn global_pool(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    let spatial = spatial_axes(node, 0, x)?;
    let mut shape = x.shape[..2].to_vec();
    shape.extend(std::iter::repeat_n(1, spatial));
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        // The kernel is the whole spatial extent: every input element is read once.
        flops: x.elements(),
    })
}

fn flatten(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "input")?;
    let rank = x.shape.len();
    let axis = node.int("axis", 1);
    let wide = i128::from(axis);
    let normalized = if wide < 0 { wide + rank as i128 } else { wide };
    // Flatten's axis may equal the rank: everything goes to the first dimension.
    let axis = usize::try_from(normalized)
        .ok()
        .filter(|&index| index <= rank)
        .ok_or_else(|| problem(format!("axis {axis} is out of range for rank {rank}")))?;
    let shape = vec![
        exact_count(&x.shape[..axis])?,
        exact_count(&x.shape[axis..])?,
    ];
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 0.0,
    })
}

fn reshape(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "data")?;
    // Opset 5 moved the target shape from an attribute to a (constant) input.
    let target = match node.constant_ints(1)? {
        Some(target) => target,
        None => node
            .ints("shape")
            .ok_or_else(|| problem("missing input 1 (shape)".to_owned()))?,
    };
    let allow_zero = node.int("allowzero", 0) != 0;
    let total = exact_count(&x.shape)?;
    let mut shape = Vec::with_capacity(target.len());
    let mut inferred_axis = None;
    for (axis, &dim) in target.iter().enumerate() {
        let dim = match dim {
            -1 if inferred_axis.is_some() => {
                return Err(problem(format!(
                    "shape {} has more than one -1",
                    show(target)
                )));
            }
            -1 => {
                inferred_axis = Some(axis);
                1
            }
            0 if !allow_zero => *x.shape.get(axis).ok_or_else(|| {
                problem(format!(
                    "shape {} copies axis {axis} (0), which input {} lacks",
                    show(target),
                    show(&x.shape)
                ))
            })?,
            dim if dim < 0 => {
                return Err(problem(format!(
                    "shape {} has dimension {dim}",
                    show(target)
                )));
            }
            dim => dim,
        };
        shape.push(dim);
    }
    let known = exact_count(&shape)?;
    let mismatch = || {
        problem(format!(
            "cannot reshape {} ({total} elements) to {}",
            show(&x.shape),
            show(target)
        ))
    };
    match inferred_axis {
        Some(axis) => {
            if known == 0 || total % known != 0 {
                return Err(mismatch());
            }
            shape[axis] = total / known;
        }
        None if known != total => return Err(mismatch()),
        None => {}
    }
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 0.0,
    })
}

fn concat(node: &Node<'_>) -> Result<Inferred, Failure> {
    let inputs = node.present_inputs()?;
    let Some(first) = inputs.first() else {
        return Err(problem("has no inputs".to_owned()));
    };
    let axis_attribute = node
        .attribute("axis")
        .ok_or_else(|| problem("attribute `axis` is required".to_owned()))?
        .i;
    let rank = first.shape.len();
    let axis = axis_index(axis_attribute, rank, "axis")?;
    let mut shape = first.shape.clone();
    let mut along = 0_i128;
    for input in &inputs {
        let fits = input.shape.len() == rank
            && input
                .shape
                .iter()
                .zip(&shape)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !fits {
            return Err(problem(format!(
                "input shapes {} and {} do not concatenate along axis {axis}",
                show(&first.shape),
                show(&input.shape)
            )));
        }
        along += i128::from(input.shape[axis]);
    }
    shape[axis] = dimension(along)?;
    Ok(Inferred {
        outputs: vec![Tensor::like(first, shape)],
        flops: 0.0,
    })
}

fn transpose(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "data")?;
    let rank = x.shape.len();
    let perm: Vec<i64> = match node.ints("perm") {
        Some(perm) => perm.to_vec(),
        None => (0..rank as i64).rev().collect(),
    };
    let mut seen = vec![false; rank];
    let mut shape = Vec::with_capacity(rank);
    for &p in &perm {
        let index = usize::try_from(p).ok().filter(|&i| i < rank && !seen[i]);
        let Some(index) = index else {
            return Err(problem(format!(
                "attribute `perm` {} is not a permutation of the {rank} axes",
                show(&perm)
            )));
        };
        seen[index] = true;
        shape.push(x.shape[index]);
    }
    if shape.len() != rank {
        return Err(problem(format!(
            "attribute `perm` {} is not a permutation of the {rank} axes",
            show(&perm)
        )));
    }
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 0.0,
    })
}

/// The axes of Squeeze and Unsqueeze: a constant input since opset 13, an attribute before.
fn axes<'a>(node: &Node<'a>) -> Result<Option<&'a [i64]>, Failure> {
    Ok(node.constant_ints(1)?.or_else(|| node.ints("axes")))
}

fn squeeze(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "data")?;
    let rank = x.shape.len();
    let mut drop = vec![false; rank];
    match axes(node)? {
        Some(axes) => {
            for &axis in axes {
                let index = axis_index(axis, rank, "axis")?;
                if x.shape[index] != 1 {
                    return Err(problem(format!(
                        "axis {axis} of input {} has size {}, not 1",
                        show(&x.shape),
                        x.shape[index]
                    )));
                }
                drop[index] = true;
            }
        }
        None => {
            for (flag, &dim) in drop.iter_mut().zip(&x.shape) {
                *flag = dim == 1;
            }
        }
    }
    let shape = x
        .shape
        .iter()
        .zip(&drop)
        .filter(|(_, dropped)| !**dropped)
        .map(|(&dim, _)| dim)
        .collect();
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 0.0,
    })
}

fn unsqueeze(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "data")?;
    let axes =
        axes(node)?.ok_or_else(|| problem("needs axes (input 1 or attribute)".to_owned()))?;
    let rank = x.shape.len() + axes.len();
    if rank > MAX_RANK {
        return Err(problem(format!(
            "the output would have rank {rank}, over {MAX_RANK}"
        )));
    }
    let mut inserted = vec![false; rank];
    for &axis in axes {
        let index = axis_index(axis, rank, "axis")?;
        if inserted[index] {
            return Err(problem(format!("axes {} repeat an axis", show(axes))));
        }
        inserted[index] = true;
    }
    let mut dims = x.shape.iter();
    let shape = inserted
        .iter()
        .map(|&new| {
            if new {
                1
            } else {
                dims.next().copied().unwrap_or(1)
            }
        })
        .collect();
    Ok(Inferred {
        outputs: vec![Tensor::like(x, shape)],
        flops: 0.0,
    })
}

fn constant(node: &Node<'_>) -> Result<Inferred, Failure> {
    let attribute = node
        .proto
        .attribute
        .first()
        .ok_or_else(|| problem("has no value attribute".to_owned()))?;
    let mut tensor = match attribute.name.as_str() {
        "value" => {
            let value = attribute
                .t
                .as_ref()
                .ok_or_else(|| problem("attribute `value` holds no tensor".to_owned()))?;
            if let Some(dim) = value.dims.iter().find(|&&d| d < 0) {
                return Err(problem(format!(
                    "attribute `value` has negative dimension {dim}"
                )));
            }
            if value.dims.len() > MAX_RANK {
                return Err(problem(format!(
                    "attribute `value` has rank {}, over {MAX_RANK}",
                    value.dims.len()
                )));
            }
            let mut tensor = Tensor::new(value.dims.clone(), value.data_type);
            tensor.ints = value.small_ints(CONSTANT_LIMIT);
            tensor
        }
        "value_int" => Tensor {
            ints: Some(vec![attribute.i]),
            ..Tensor::new(Vec::new(), data_type::INT64)
        },
        "value_ints" => Tensor {
            ints: Some(attribute.ints.clone()),
            ..Tensor::new(vec![attribute.ints.len() as i64], data_type::INT64)
        },
        "value_float" => Tensor::new(Vec::new(), data_type::FLOAT),
        "value_floats" => Tensor::new(vec![attribute.floats.len() as i64], data_type::FLOAT),
        _ => return Err(Failure::Unsupported),
    };
    tensor.constant = true;
    Ok(Inferred {
        outputs: vec![tensor],
        flops: 0.0,
    })
}

fn dropout(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "data")?;
    Ok(Inferred {
        // Inference-time Dropout passes its input through; the optional mask is boolean.
        outputs: vec![
            Tensor::like(x, x.shape.clone()),
            Tensor::new(x.shape.clone(), data_type::BOOL),
        ],
        flops: 0.0,
    })
}

/// Identity and Cast: same shape and values, so a weight stays a weight.
fn pass_through(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "input")?;
    let mut tensor = x.clone();
    if node.proto.op_type == "Cast" {
        tensor.elem_type = i32::try_from(node.int("to", 0)).unwrap_or(0);
    }
    Ok(Inferred {
        outputs: vec![tensor],
        flops: 0.0,
    })
}

fn unary(node: &Node<'_>) -> Result<Inferred, Failure> {
    let x = node.input(0, "X")?;
    Ok(Inferred {
        outputs: vec![Tensor::like(x, x.shape.clone())],
        flops: x.elements(),
    })
}

fn broadcasting(node: &Node<'_>) -> Result<Inferred, Failure> {
    let inputs = node.present_inputs()?;
    let Some(first) = inputs.first() else {
        return Err(problem("has no inputs".to_owned()));
    };
    let shapes: Vec<&[i64]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let shape = broadcast(&shapes).ok_or_else(|| {
        let shown: Vec<String> = shapes.iter().map(|s| show(s)).collect();
        problem(format!("shapes {} do not broadcast", shown.join(" and ")))
    })?;
    let flops = count(&shape) * inputs.len().saturating_sub(1) as f64;
    Ok(Inferred {
        outputs: vec![Tensor::like(first, shape)],
        flops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[&[2, 3, 4], &[4]]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast(&[&[2, 1, 4], &[3, 1]]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast(&[&[0, 1], &[1, 5]]), Some(vec![0, 5]));
        assert_eq!(broadcast(&[&[], &[7]]), Some(vec![7]));
        assert_eq!(broadcast(&[&[2, 3], &[4]]), None);
    }

    #[test]
    fn axes_count_from_the_end_when_negative() {
        assert_eq!(axis_index(-1, 4, "axis"), Ok(3));
        assert_eq!(axis_index(0, 4, "axis"), Ok(0));
        assert!(axis_index(4, 4, "axis").is_err());
        assert!(axis_index(i64::MIN, 4, "axis").is_err());
    }

    fn window(kernel: i64, stride: i64, pads: [i64; 2], dilation: i64) -> Window {
        Window {
            kernel: vec![kernel],
            strides: vec![stride],
            dilations: vec![dilation],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
        }
    }

    #[test]
    fn window_output_sizes_match_the_onnx_formula() {
        // floor((28 + 2 + 2 - 5) / 1) + 1 = 28.
        assert_eq!(window(5, 1, [2, 2], 1).output(&[28], false), Ok(vec![28]));
        // Dilation 2 makes a 3-kernel span 5: floor((10 - 5) / 1) + 1 = 6.
        assert_eq!(window(3, 1, [0, 0], 2).output(&[10], false), Ok(vec![6]));
        // floor((7 - 2) / 2) + 1 = 3, ceil((7 - 2) / 2) + 1 = 4.
        assert_eq!(window(2, 2, [0, 0], 1).output(&[7], false), Ok(vec![3]));
        assert_eq!(window(2, 2, [0, 0], 1).output(&[7], true), Ok(vec![4]));
        // ceil((4 + 0 + 1 - 2) / 2) + 1 = 3, but the third window would start in the end padding
        // (at 4 >= 4 = input + begin padding), so ceil_mode gives 2 — as PyTorch does.
        assert_eq!(window(2, 2, [0, 1], 1).output(&[4], true), Ok(vec![2]));
        assert!(window(5, 1, [0, 0], 1).output(&[4], false).is_err());
    }
}
