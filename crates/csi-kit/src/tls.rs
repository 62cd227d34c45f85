//! The cluster's TLS security profile (`APIServer/cluster` `spec.tlsSecurityProfile`) as the
//! settings of the metrics proxies: the minimum TLS version and the cipher suites, in the IANA
//! names that kube-rbac-proxy's `--tls-cipher-suites` takes. The profiles are openshift/api's
//! (Mozilla's Old, Intermediate and Modern); no profile means Intermediate, as on OpenShift.
//!
//! OpenSSL names without an IANA suite that Go can serve (the `DHE-` suites,
//! `AES256-SHA256`) are left out, as library-go does; a Custom profile left with no cipher a
//! TLS 1.2 server could use is an error, so the proxies never start with an empty list.

use api::config_v1::{TLSProfileType, TLSSecurityProfile};

use crate::inputs::ServingTls;

const TLS13: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

const INTERMEDIATE_TLS12: [&str; 8] = [
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
];

const OLD_EXTRA: [&str; 18] = [
    "DHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "DHE-RSA-AES128-SHA256",
    "DHE-RSA-AES256-SHA256",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// The IANA name of an OpenSSL cipher name, when Go can serve that suite.
pub fn iana_cipher(openssl: &str) -> Option<&'static str> {
    Some(match openssl {
        "TLS_AES_128_GCM_SHA256" => "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384" => "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256" => "TLS_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-AES128-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-RSA-AES128-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-ECDSA-AES128-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "ECDHE-RSA-AES128-SHA" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "ECDHE-ECDSA-AES256-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "ECDHE-RSA-AES256-SHA" => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "AES128-GCM-SHA256" => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "AES256-GCM-SHA384" => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "AES128-SHA256" => "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "AES128-SHA" => "TLS_RSA_WITH_AES_128_CBC_SHA",
        "AES256-SHA" => "TLS_RSA_WITH_AES_256_CBC_SHA",
        "DES-CBC3-SHA" => "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        _ => return None,
    })
}

const VERSIONS: [&str; 4] = [
    "VersionTLS10",
    "VersionTLS11",
    "VersionTLS12",
    "VersionTLS13",
];

fn settings<'a>(min: &str, ciphers: impl IntoIterator<Item = &'a str>) -> ServingTls {
    let mut suites: Vec<String> = Vec::new();
    for name in ciphers.into_iter().filter_map(iana_cipher) {
        if !suites.iter().any(|s| s == name) {
            suites.push(name.to_owned());
        }
    }
    ServingTls {
        min_version: Some(min.to_owned()),
        cipher_suites: suites,
    }
}

/// Where a standalone cluster keeps its TLS profile.
pub const CLUSTER_PROFILE_FIELD: &str = "APIServer/cluster spec.tlsSecurityProfile";

/// The proxies' TLS settings for the cluster's profile (`APIServer/cluster`). The error names
/// the field and the fix.
pub fn serving_tls(profile: Option<&TLSSecurityProfile>) -> Result<ServingTls, String> {
    serving_tls_of(profile, CLUSTER_PROFILE_FIELD)
}

/// The TLS settings for a profile read from `field` (as errors name it, e.g.
/// [`CLUSTER_PROFILE_FIELD`]).
pub fn serving_tls_of(
    profile: Option<&TLSSecurityProfile>,
    field: &str,
) -> Result<ServingTls, String> {
    let kind = profile
        .and_then(|p| p.type_.clone())
        .unwrap_or(TLSProfileType::Intermediate);
    match kind {
        TLSProfileType::Old => Ok(settings(
            "VersionTLS10",
            TLS13
                .iter()
                .chain(&INTERMEDIATE_TLS12)
                .chain(&OLD_EXTRA)
                .copied(),
        )),
        TLSProfileType::Intermediate => Ok(settings(
            "VersionTLS12",
            TLS13.iter().chain(&INTERMEDIATE_TLS12).copied(),
        )),
        TLSProfileType::Modern => Ok(settings("VersionTLS13", TLS13)),
        TLSProfileType::Custom => {
            let custom = profile.and_then(|p| p.custom.as_ref()).ok_or_else(|| {
                format!(
                    "{field}.custom is required when its type is Custom; \
                     set custom.ciphers and custom.minTLSVersion, or choose another type"
                )
            })?;
            let min = custom.min_tls_version.as_deref().unwrap_or("VersionTLS12");
            if !VERSIONS.contains(&min) {
                return Err(format!(
                    "{field}.custom.minTLSVersion {min:?} is not one of {}",
                    VERSIONS.join(", ")
                ));
            }
            let tls = settings(min, custom.ciphers.iter().map(String::as_str));
            let usable_below_13 = tls
                .cipher_suites
                .iter()
                .any(|s| !TLS13.contains(&s.as_str()));
            if min != "VersionTLS13" && !usable_below_13 {
                return Err(format!(
                    "{field}.custom.ciphers has no cipher a {min} server can use \
                     (known OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256); add one or raise minTLSVersion to VersionTLS13"
                ));
            }
            Ok(tls)
        }
        TLSProfileType::Other(other) => Err(format!(
            "{field}.type {other:?} is not Old, Intermediate, Modern or Custom"
        )),
    }
}

#[cfg(test)]
mod tests {
    use api::config_v1::CustomTLSProfile;

    use super::*;

    fn profile(type_: &str, custom: Option<CustomTLSProfile>) -> TLSSecurityProfile {
        TLSSecurityProfile {
            type_: Some(TLSProfileType::from(type_)),
            custom,
            ..TLSSecurityProfile::default()
        }
    }

    #[test]
    fn no_profile_is_intermediate_without_dhe() {
        let tls = serving_tls(None).unwrap();
        assert_eq!(tls.min_version.as_deref(), Some("VersionTLS12"));
        assert_eq!(
            tls.cipher_suites,
            [
                "TLS_AES_128_GCM_SHA256",
                "TLS_AES_256_GCM_SHA384",
                "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            ]
        );
        assert_eq!(
            serving_tls(Some(&profile("Intermediate", None))).unwrap(),
            tls
        );
    }

    #[test]
    fn old_and_modern() {
        let old = serving_tls(Some(&profile("Old", None))).unwrap();
        assert_eq!(old.min_version.as_deref(), Some("VersionTLS10"));
        assert!(
            old.cipher_suites
                .contains(&"TLS_RSA_WITH_3DES_EDE_CBC_SHA".to_owned())
        );
        assert_eq!(old.cipher_suites.len(), 3 + 6 + 12);
        let modern = serving_tls(Some(&profile("Modern", None))).unwrap();
        assert_eq!(modern.min_version.as_deref(), Some("VersionTLS13"));
        assert_eq!(modern.cipher_suites, TLS13);
    }

    #[test]
    fn custom_profiles_are_checked() {
        let custom = |ciphers: &[&str], min: Option<&str>| {
            profile(
                "Custom",
                Some(CustomTLSProfile {
                    ciphers: ciphers.iter().map(|c| (*c).to_owned()).collect(),
                    min_tls_version: min.map(str::to_owned),
                }),
            )
        };
        let ok = serving_tls(Some(&custom(
            &["ECDHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES128-GCM-SHA256"],
            Some("VersionTLS11"),
        )))
        .unwrap();
        assert_eq!(ok.min_version.as_deref(), Some("VersionTLS11"));
        assert_eq!(ok.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);

        let none_usable = serving_tls(Some(&custom(
            &["DHE-RSA-AES128-GCM-SHA256"],
            Some("VersionTLS12"),
        )))
        .unwrap_err();
        assert!(
            none_usable.contains("custom.ciphers") && none_usable.contains("VersionTLS13"),
            "{none_usable}"
        );
        assert!(serving_tls(Some(&custom(&[], Some("VersionTLS13")))).is_ok());

        let bad_version = serving_tls(Some(&custom(
            &["ECDHE-RSA-AES128-GCM-SHA256"],
            Some("TLSv1.2"),
        )))
        .unwrap_err();
        assert!(
            bad_version.contains("custom.minTLSVersion"),
            "{bad_version}"
        );
        let missing = serving_tls(Some(&profile("Custom", None))).unwrap_err();
        assert!(missing.contains("custom is required"), "{missing}");
        let unknown = serving_tls(Some(&profile("Paranoid", None))).unwrap_err();
        assert!(unknown.contains("\"Paranoid\""), "{unknown}");
    }
}
