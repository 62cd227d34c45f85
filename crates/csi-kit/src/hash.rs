//! Input hashes on pod templates: when a Secret or ConfigMap a pod mounts changes, its hash
//! changes, the pod template changes, and the pods roll. The annotation key and value follow
//! library-go's `resourcehash` so objects written by either implementation agree.

use std::collections::BTreeMap;

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use sha2::{Digest, Sha256};

/// The prefix of every hash annotation key.
pub const HASH_ANNOTATION_PREFIX: &str = "operator.openshift.io/dep-";

/// The longest annotation key library-go writes before it shortens the key to a hash.
const MAX_KEY_LEN: usize = 63;

/// Which kind of object a hash annotation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashedKind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

impl HashedKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::ConfigMap => "configmap",
        }
    }
}

/// The annotation key for an object's hash: `operator.openshift.io/dep-<ns>.<name>.<kind>`, or,
/// when that is longer than 63 characters, the prefix followed by the SHA-256 (hex) of
/// `<ns>.<name>.<kind>`, cut to 63 characters, as library-go's hooks shorten it.
pub fn annotation_key(namespace: &str, name: &str, kind: HashedKind) -> String {
    let object = format!("{namespace}.{name}.{}", kind.as_str());
    let key = format!("{HASH_ANNOTATION_PREFIX}{object}");
    if key.len() <= MAX_KEY_LEN {
        return key;
    }
    let digest = Sha256::digest(object.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let mut short = format!("{HASH_ANNOTATION_PREFIX}{hex}");
    short.truncate(MAX_KEY_LEN);
    short
}

/// The hash of a ConfigMap's `data` as library-go computes it: FNV-1 (32 bit) of the JSON that
/// Go's `json.Encoder` writes for the map (keys sorted, HTML characters escaped, a trailing
/// newline; `null` when there is no data), as padded base64url.
pub fn config_map_data_hash(data: Option<&BTreeMap<String, String>>) -> String {
    hash_json(&go_json_map(
        data.map(|d| d.iter().map(|(k, v)| (k.as_str(), v.clone()))),
    ))
}

/// The hash of a Secret's `data`: as [`config_map_data_hash`], each value being encoded as
/// standard base64, as Go encodes `[]byte`.
pub fn secret_data_hash(data: Option<&BTreeMap<String, Vec<u8>>>) -> String {
    hash_json(&go_json_map(data.map(|d| {
        d.iter().map(|(k, v)| (k.as_str(), base64(v, &STANDARD)))
    })))
}

/// The hash of a Secret's data, for [`Inputs::secret_hashes`](crate::Inputs::secret_hashes).
pub fn secret_hash(secret: &k8s_openapi::api::core::v1::Secret) -> String {
    let data: Option<BTreeMap<String, Vec<u8>>> = secret
        .data
        .as_ref()
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect());
    secret_data_hash(data.as_ref())
}

/// The hash of a ConfigMap's data, for
/// [`Inputs::config_map_hashes`](crate::Inputs::config_map_hashes).
pub fn config_map_hash(config_map: &k8s_openapi::api::core::v1::ConfigMap) -> String {
    config_map_data_hash(config_map.data.as_ref())
}

/// What Go's `json.NewEncoder(w).Encode(m)` writes for a `map[string]string` whose entries
/// come sorted by key (as a `BTreeMap` iterates): `null` for a nil map.
fn go_json_map<'a>(entries: Option<impl Iterator<Item = (&'a str, String)>>) -> String {
    let Some(entries) = entries else {
        return "null\n".to_owned();
    };
    let mut out = String::from("{");
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(&mut out, k);
        out.push(':');
        go_json_string(&mut out, &v);
    }
    out.push_str("}\n");
    out
}

/// A JSON string as Go's encoder writes it (with its default HTML escaping). Written here
/// because serde_json does not escape `<`, `>` and `&`: its bytes, and so the hash, would differ
/// from library-go's.
fn go_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' | '\u{0}'..='\u{1f}' => {
                let n = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(char::from(HEX[((n >> shift) & 0xf) as usize]));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn hash_json(json: &str) -> String {
    base64(&fnv1_32(json.as_bytes()).to_be_bytes(), &URL_SAFE)
}

/// FNV-1 (multiply, then xor), 32 bits: Go's `hash/fnv.New32`. Written here because the hash
/// must equal library-go's byte for byte and no crate in the lock computes FNV-1 (the `fnv`
/// crate is FNV-1a: xor, then multiply, a different hash).
fn fnv1_32(bytes: &[u8]) -> u32 {
    const OFFSET: u32 = 2_166_136_261;
    const PRIME: u32 = 16_777_619;
    bytes
        .iter()
        .fold(OFFSET, |h, b| h.wrapping_mul(PRIME) ^ u32::from(*b))
}

/// Padded base64: standard for Secret values (Go's `[]byte` in JSON), URL-safe for the hash.
fn base64(bytes: &[u8], engine: &base64::engine::GeneralPurpose) -> String {
    use base64::Engine as _;
    engine.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1_matches_published_vectors() {
        // Test vectors of FNV-1 32 (Go's hash/fnv test table).
        assert_eq!(fnv1_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1_32(b"a"), 0x050c_5d7e);
        assert_eq!(fnv1_32(b"ab"), 0x70772d38);
        assert_eq!(fnv1_32(b"abc"), 0x439c_2f4b);
    }

    #[test]
    fn base64_pads_and_uses_the_alphabet() {
        assert_eq!(base64(b"", &STANDARD), "");
        assert_eq!(base64(b"f", &STANDARD), "Zg==");
        assert_eq!(base64(b"fo", &STANDARD), "Zm8=");
        assert_eq!(base64(b"foo", &STANDARD), "Zm9v");
        assert_eq!(base64(&[0xfb, 0xff], &STANDARD), "+/8=");
        assert_eq!(base64(&[0xfb, 0xff], &URL_SAFE), "-_8=");
    }

    #[test]
    fn short_keys_are_readable_and_long_keys_are_hashed() {
        assert_eq!(
            annotation_key("ns", "creds", HashedKind::Secret),
            "operator.openshift.io/dep-ns.creds.secret"
        );
        let long = annotation_key(
            "openshift-cluster-csi-drivers",
            "gcp-pd-cloud-credentials",
            HashedKind::Secret,
        );
        assert_eq!(long.len(), 63);
        // SHA-256 of `openshift-cluster-csi-drivers.gcp-pd-cloud-credentials.secret`.
        assert_eq!(
            long,
            "operator.openshift.io/dep-3003c66d1e7cfab0b092cf87127145aa0f888"
        );
        assert!(long.starts_with(HASH_ANNOTATION_PREFIX));
        assert!(
            long[HASH_ANNOTATION_PREFIX.len()..]
                .chars()
                .all(|c| c.is_ascii_hexdigit())
        );
        assert_ne!(
            long,
            annotation_key(
                "openshift-cluster-csi-drivers",
                "gcp-pd-cloud-credentials",
                HashedKind::ConfigMap
            )
        );
    }

    #[test]
    fn data_hashes_change_with_content() {
        let a = BTreeMap::from([("k".to_owned(), b"v1".to_vec())]);
        let b = BTreeMap::from([("k".to_owned(), b"v2".to_vec())]);
        assert_ne!(secret_data_hash(Some(&a)), secret_data_hash(Some(&b)));
        assert_eq!(
            secret_data_hash(Some(&a)),
            secret_data_hash(Some(&a.clone()))
        );
        // 4 hash bytes are 8 padded base64 characters.
        assert_eq!(secret_data_hash(Some(&a)).len(), 8);
        let cm = BTreeMap::from([("ca-bundle.crt".to_owned(), "pem".to_owned())]);
        assert_eq!(config_map_data_hash(Some(&cm)).len(), 8);
        assert_ne!(
            config_map_data_hash(Some(&cm)),
            config_map_data_hash(Some(&BTreeMap::new()))
        );
        assert_ne!(
            config_map_data_hash(None),
            config_map_data_hash(Some(&BTreeMap::new()))
        );
    }

    #[test]
    fn json_is_what_gos_encoder_writes() {
        let cm = BTreeMap::from([
            ("b".to_owned(), "<a&b>\n\"q\"\\\u{1}\u{2028}é".to_owned()),
            ("a".to_owned(), String::new()),
        ]);
        assert_eq!(
            go_json_map(Some(cm.iter().map(|(k, v)| (k.as_str(), v.clone())))),
            "{\"a\":\"\",\"b\":\"\\u003ca\\u0026b\\u003e\\n\\\"q\\\"\\\\\\u0001\\u2028é\"}\n"
        );
        assert_eq!(
            go_json_map(None::<std::iter::Empty<(&str, String)>>),
            "null\n"
        );
        let secret = BTreeMap::from([("k".to_owned(), b"foo".to_vec())]);
        // FNV-1 of `{"k":"Zm9v"}\n`, computed independently.
        assert_eq!(secret_data_hash(Some(&secret)), "PBbDWg==");
        assert_eq!(
            secret_data_hash(Some(&secret)),
            base64(&fnv1_32(b"{\"k\":\"Zm9v\"}\n").to_be_bytes(), &URL_SAFE)
        );
    }
}
