//! String enums that keep values they do not know.
//!
//! OpenShift's API says consumers must treat unknown enum values as a no-op (an unknown platform
//! is `None`, an unknown `driverType` does nothing). A plain serde enum would instead fail to decode
//! the whole object, so a newer cluster could crash an older operator. Every enum of the wire types
//! is declared with [`string_enum!`]: known values are variants, anything else is kept verbatim in
//! `Other` so a read-modify-write never loses it, and the generated CRD schema still lists only
//! the known values, so our own CRDs reject them.

/// Declares a wire enum of string values; see the module docs.
#[macro_export]
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version of the API does not know, kept exactly as it was sent.
            Other(String),
        }

        impl $name {
            /// Every value this version knows, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(other) => other.as_str(),
                }
            }

            /// Whether this is one of the values this version knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Ok(Self::from(value))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <::std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                Ok(Self::from(value.as_ref()))
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({
                    "type": "string",
                    "enum": [$($value),+],
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    string_enum! {
        /// A test enum.
        pub enum Colour {
            Red = "Red",
            Empty = "",
        }
    }

    #[test]
    fn known_values_round_trip() {
        for known in Colour::KNOWN {
            let parsed: Colour = serde_json::from_value(serde_json::json!(known)).unwrap();
            assert!(parsed.is_known());
            assert_eq!(
                serde_json::to_value(&parsed).unwrap(),
                serde_json::json!(known)
            );
        }
        assert_eq!(Colour::from(""), Colour::Empty);
    }

    #[test]
    fn unknown_values_are_kept_not_rejected() {
        let parsed: Colour = serde_json::from_value(serde_json::json!("Ultraviolet")).unwrap();
        assert_eq!(parsed, Colour::Other("Ultraviolet".into()));
        assert!(!parsed.is_known());
        assert_eq!(serde_json::to_string(&parsed).unwrap(), "\"Ultraviolet\"");
    }

    #[test]
    fn schema_lists_only_known_values() {
        let schema = schemars::schema_for!(Colour);
        assert_eq!(schema.get("enum").unwrap(), &serde_json::json!(["Red", ""]));
    }
}
