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

/// A list of `metav1.Condition`s keyed by type, with the limits the Kubernetes API declares for
/// that type: a qualified-name type, a CamelCase reason, a bounded message and a status of
/// True, False or Unknown.
pub fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "description": "One aspect of the object's state.",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "type": {
                    "description": "The aspect, CamelCase or prefixed with a domain (`example.com/Ready`).",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                },
                "status": {
                    "description": "True, False or Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                },
                "observedGeneration": {
                    "description": "The object's generation the condition was set for.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
                "lastTransitionTime": {
                    "description": "When the status last changed.",
                    "type": "string",
                    "format": "date-time",
                },
                "reason": {
                    "description": "Why the status is what it is, in one CamelCase word.",
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "message": {
                    "description": "Details for people; may be empty.",
                    "type": "string",
                    "maxLength": 32768,
                },
            },
        },
    })
}
