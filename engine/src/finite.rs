//! Every number a snapshot holds is finite: a serializer adapter that writes a non-finite float
//! as the nearest finite one.
//!
//! JSON has no NaN or infinity; serde_json writes them as `null`, which no `f64` field reads
//! back, so one non-finite statistic would make a saved knowledge base impossible to load (and
//! every restart of a host that resumes from it fail). The engine keeps its statistics finite
//! by construction (observations are bounded, `tandem_api::bounds`, and every accumulator
//! guards its arithmetic), and a property test checks it over extreme sequences of accepted
//! observations; this adapter is the defence behind that: should a non-finite number ever
//! appear, `save` writes NaN as 0 and an infinity as the largest finite number of its sign, so
//! the snapshot still loads.

use serde::ser::{
    Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};

/// `value`, serialized with every float finite.
pub(crate) struct Finite<'a, T: ?Sized>(pub(crate) &'a T);

impl<T: Serialize + ?Sized> Serialize for Finite<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(Clamp(serializer))
    }
}

/// A finite `f64`: NaN as 0, infinities as the largest finite number of their sign.
pub(crate) fn clamp_f64(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(f64::MIN, f64::MAX)
    }
}

/// [`clamp_f64`] for `f32`.
fn clamp_f32(value: f32) -> f32 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(f32::MIN, f32::MAX)
    }
}

/// A serializer (or one of its compound parts) whose floats are clamped before they reach
/// the one it wraps.
struct Clamp<S>(S);

impl<S: Serializer> Serializer for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Clamp<S::SerializeSeq>;
    type SerializeTuple = Clamp<S::SerializeTuple>;
    type SerializeTupleStruct = Clamp<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Clamp<S::SerializeTupleVariant>;
    type SerializeMap = Clamp<S::SerializeMap>;
    type SerializeStruct = Clamp<S::SerializeStruct>;
    type SerializeStructVariant = Clamp<S::SerializeStructVariant>;

    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        self.0.serialize_f32(clamp_f32(v))
    }

    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.0.serialize_f64(clamp_f64(v))
    }

    fn serialize_bool(self, v: bool) -> Result<S::Ok, S::Error> {
        self.0.serialize_bool(v)
    }

    fn serialize_i8(self, v: i8) -> Result<S::Ok, S::Error> {
        self.0.serialize_i8(v)
    }

    fn serialize_i16(self, v: i16) -> Result<S::Ok, S::Error> {
        self.0.serialize_i16(v)
    }

    fn serialize_i32(self, v: i32) -> Result<S::Ok, S::Error> {
        self.0.serialize_i32(v)
    }

    fn serialize_i64(self, v: i64) -> Result<S::Ok, S::Error> {
        self.0.serialize_i64(v)
    }

    fn serialize_i128(self, v: i128) -> Result<S::Ok, S::Error> {
        self.0.serialize_i128(v)
    }

    fn serialize_u8(self, v: u8) -> Result<S::Ok, S::Error> {
        self.0.serialize_u8(v)
    }

    fn serialize_u16(self, v: u16) -> Result<S::Ok, S::Error> {
        self.0.serialize_u16(v)
    }

    fn serialize_u32(self, v: u32) -> Result<S::Ok, S::Error> {
        self.0.serialize_u32(v)
    }

    fn serialize_u64(self, v: u64) -> Result<S::Ok, S::Error> {
        self.0.serialize_u64(v)
    }

    fn serialize_u128(self, v: u128) -> Result<S::Ok, S::Error> {
        self.0.serialize_u128(v)
    }

    fn serialize_char(self, v: char) -> Result<S::Ok, S::Error> {
        self.0.serialize_char(v)
    }

    fn serialize_str(self, v: &str) -> Result<S::Ok, S::Error> {
        self.0.serialize_str(v)
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<S::Ok, S::Error> {
        self.0.serialize_bytes(v)
    }

    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_none()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.0.serialize_some(&Finite(value))
    }

    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit()
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_struct(name)
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_variant(name, index, variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_newtype_struct(name, &Finite(value))
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0
            .serialize_newtype_variant(name, index, variant, &Finite(value))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.0.serialize_seq(len).map(Clamp)
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.0.serialize_tuple(len).map(Clamp)
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.0.serialize_tuple_struct(name, len).map(Clamp)
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        self.0
            .serialize_tuple_variant(name, index, variant, len)
            .map(Clamp)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.0.serialize_map(len).map(Clamp)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len).map(Clamp)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        self.0
            .serialize_struct_variant(name, index, variant, len)
            .map(Clamp)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

impl<S: SerializeSeq> SerializeSeq for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), S::Error> {
        self.0.serialize_element(&Finite(value))
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeTuple> SerializeTuple for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), S::Error> {
        self.0.serialize_element(&Finite(value))
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeTupleStruct> SerializeTupleStruct for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), S::Error> {
        self.0.serialize_field(&Finite(value))
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeTupleVariant> SerializeTupleVariant for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), S::Error> {
        self.0.serialize_field(&Finite(value))
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeMap> SerializeMap for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), S::Error> {
        self.0.serialize_key(&Finite(key))
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), S::Error> {
        self.0.serialize_value(&Finite(value))
    }

    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), S::Error> {
        self.0.serialize_entry(&Finite(key), &Finite(value))
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeStruct> SerializeStruct for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), S::Error> {
        self.0.serialize_field(key, &Finite(value))
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
        self.0.skip_field(key)
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

impl<S: SerializeStructVariant> SerializeStructVariant for Clamp<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), S::Error> {
        self.0.serialize_field(key, &Finite(value))
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
        self.0.skip_field(key)
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}

/// Whether `value` serializes with no non-finite float: what the property tests check of a
/// knowledge base (serde_json writes a non-finite float as `null`, the adapter never does, so
/// the two agree exactly when there is none).
#[cfg(test)]
pub(crate) fn is_finite<T: Serialize + ?Sized>(value: &T) -> bool {
    serde_json::to_vec(value).ok() == serde_json::to_vec(&Finite(value)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Stats {
        mean: f64,
        spread: Option<f32>,
        cells: Vec<(u32, f64)>,
    }

    #[test]
    fn non_finite_floats_are_written_as_the_nearest_finite_number() {
        let stats = Stats {
            mean: f64::NAN,
            spread: Some(f32::INFINITY),
            cells: vec![(1, f64::NEG_INFINITY), (2, 0.5)],
        };
        assert!(!is_finite(&stats));
        // serde_json alone writes `null`s that do not read back.
        let plain = serde_json::to_vec(&stats).unwrap();
        assert!(serde_json::from_slice::<Stats>(&plain).is_err());
        let json = serde_json::to_vec(&Finite(&stats)).unwrap();
        let read: Stats = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            read,
            Stats {
                mean: 0.0,
                spread: Some(f32::MAX),
                cells: vec![(1, f64::MIN), (2, 0.5)],
            }
        );
        let finite = Stats {
            mean: 1.5,
            spread: None,
            cells: vec![],
        };
        assert!(is_finite(&finite));
        assert_eq!(json_of(&finite), serde_json::to_vec(&finite).unwrap());
    }

    fn json_of<T: Serialize>(value: &T) -> Vec<u8> {
        serde_json::to_vec(&Finite(value)).unwrap()
    }
}
