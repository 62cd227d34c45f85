//! Schema helpers shared by the wire types: the pieces of OpenAPI that schemars cannot infer
//! from a Rust type (arbitrary embedded JSON, list-map keys, CEL rules).

use schemars::{Schema, SchemaGenerator, json_schema};

/// `runtime.RawExtension` fields such as `unsupportedConfigOverrides`: any JSON object, kept
/// whole by the API server.
pub fn raw_extension(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Objects that carry fields this crate does not model one by one (they are kept in an `extra`
/// map): the API server must keep them too.
pub fn preserve_unknown_fields(schema: &mut Schema) {
    schema.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
}

/// `managementState` of OpenShift's operator CRs: a pattern rather than an enum, as openshift/api
/// declares it.
pub fn management_state(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "^(Managed|Unmanaged|Force|Removed)$",
    })
}
