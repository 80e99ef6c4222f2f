//! The part of ONNX's `onnx.proto` this crate reads and writes, declared by hand for `prost`'s
//! derive (there is no `protoc` to generate it).
//!
//! Field numbers are those of `onnx.proto` (IR version 10). Fields not declared here are skipped
//! on decode, as protobuf requires. Two `oneof`s are declared as plain optional fields, which is
//! the same on the wire: `TypeProto.value` (only `tensor_type` is read) and
//! `TensorShapeProto.Dimension.value` (`dim_value` or `dim_param`).

/// `TensorProto.DataType` values whose element size we know.
pub(crate) mod data_type {
    pub(crate) const FLOAT: i32 = 1;
    pub(crate) const INT32: i32 = 6;
    pub(crate) const INT64: i32 = 7;
    pub(crate) const BOOL: i32 = 9;

    /// Bits per element of a `TensorProto.DataType`; `None` for `UNDEFINED`, `STRING` and
    /// types newer than this table.
    pub(crate) fn bits(data_type: i32) -> Option<u32> {
        Some(match data_type {
            // UINT8, INT8, BOOL, and the 8-bit floats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0).
            2 | 3 | 9 | 17..=20 | 24 => 8,
            // UINT16, INT16, FLOAT16, BFLOAT16.
            4 | 5 | 10 | 16 => 16,
            // FLOAT, INT32, UINT32.
            1 | 6 | 12 => 32,
            // INT64, DOUBLE, UINT64, COMPLEX64.
            7 | 11 | 13 | 14 => 64,
            // COMPLEX128.
            15 => 128,
            // UINT4, INT4, FLOAT4E2M1.
            21..=23 => 4,
            _ => return None,
        })
    }
}

/// `AttributeProto.AttributeType` values the builder writes.
pub(crate) mod attribute_type {
    pub(crate) const FLOAT: i32 = 1;
    pub(crate) const INT: i32 = 2;
    pub(crate) const STRING: i32 = 3;
    pub(crate) const TENSOR: i32 = 4;
    pub(crate) const FLOATS: i32 = 6;
    pub(crate) const INTS: i32 = 7;
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, tag = "7")]
    pub domain: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorTypeProto {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`: a size, a symbolic name, or neither (unknown).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

impl TensorProto {
    /// The values of a small integer tensor (`INT64` or `INT32`, from the typed field or from
    /// `raw_data`, little-endian), as Reshape shapes and Squeeze axes are stored; `None` for
    /// other types, for tensors over `limit` elements (we never need big ones) and when the
    /// stored values do not match `dims`.
    pub(crate) fn small_ints(&self, limit: usize) -> Option<Vec<i64>> {
        let count = self.dims.iter().try_fold(1_usize, |count, &dim| {
            count.checked_mul(usize::try_from(dim).ok()?)
        })?;
        if count > limit {
            return None;
        }
        let values: Vec<i64> = match self.data_type {
            data_type::INT64 if !self.int64_data.is_empty() => self.int64_data.clone(),
            data_type::INT32 if !self.int32_data.is_empty() => {
                self.int32_data.iter().map(|&v| i64::from(v)).collect()
            }
            data_type::INT64 => self
                .raw_data
                .chunks_exact(8)
                .take(limit.saturating_add(1))
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect(),
            data_type::INT32 => self
                .raw_data
                .chunks_exact(4)
                .take(limit.saturating_add(1))
                .map(|b| i64::from(i32::from_le_bytes(b.try_into().unwrap_or([0; 4]))))
                .collect(),
            _ => return None,
        };
        (values.len() == count).then_some(values)
    }
}
