//! YAML apply bodies decoded like the apiserver's `sigs.k8s.io/yaml`: YAML 1.1 scalars, so an
//! unquoted `n`, `no`, `off` (or `y`, `yes`, `on`) is a boolean, also as a map key, where it
//! becomes the string `"false"`/`"true"` (the "Norway problem", faithfully reproduced).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub fn parse(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str::<Yaml11>(text)
        .map(|y| y.0)
        .map_err(|e| e.to_string())
}

struct Yaml11(Value);

impl<'de> serde::Deserialize<'de> for Yaml11 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(Yaml11)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Yaml11(v)) = s.next_element::<Yaml11>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = m.next_key_seed(KeySeed)? {
            let Yaml11(v) = m.next_value::<Yaml11>()?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// Map keys are scalars of any type, rendered as the JSON object key YAML-to-JSON gives them.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let v = d.deserialize_any(ValueVisitor)?;
        Ok(match v {
            Value::String(s) => s,
            Value::Null => "null".to_string(),
            other => other.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_booleans_like_the_apiserver() {
        let v = parse("data:\n  n: \"1\"\n  \"y\": \"2\"\n  on: off\n  k: v\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"data": {"false": "1", "y": "2", "true": false, "k": "v"}})
        );
    }
}
