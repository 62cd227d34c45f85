//! A resource quantity (`10Gi`, `1.5T`, `500M`, `1e9`) read as a whole number of bytes, the way
//! the API server reads a storage request: binary (`Ki` .. `Ei`) and decimal (`n` .. `E`)
//! suffixes and `e`/`E` exponents, a fraction of a byte rounded up.

use thiserror::Error;

/// Why a quantity could not be read as bytes.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// Not the quantity grammar (`<sign><digits>.<digits><suffix>`).
    #[error("{0:?} is not a quantity")]
    Syntax(String),
    /// A size below zero.
    #[error("{0:?} is negative")]
    Negative(String),
    /// More bytes than this reader counts (above about 10^38).
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// The bytes of `text`, rounded up to a whole byte.
pub fn parse_bytes(text: &str) -> Result<u128, QuantityError> {
    let syntax = || QuantityError::Syntax(text.to_owned());
    let too_large = || QuantityError::TooLarge(text.to_owned());
    let trimmed = text.trim();
    let (negative, unsigned) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(syntax());
    }
    let (base, power) = suffix_scale(suffix).ok_or_else(syntax)?;

    // The value is digits * 10^-fraction_len * base^power; kept exact as a fraction.
    let mut digits: u128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        let digit = u128::from(c.to_digit(10).ok_or_else(syntax)?);
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(digit))
            .ok_or_else(too_large)?;
    }
    if negative && digits != 0 {
        return Err(QuantityError::Negative(text.to_owned()));
    }
    let fraction_len = i32::try_from(fraction.len()).map_err(|_| too_large())?;
    let mut numerator = digits;
    let mut denominator: u128 = 1;
    let scale_up = |value: u128, factor: u128, times: i32| -> Option<u128> {
        (0..times).try_fold(value, |acc, _| acc.checked_mul(factor))
    };
    if base == 10 {
        let exponent = power - fraction_len;
        if exponent >= 0 {
            numerator = scale_up(numerator, 10, exponent).ok_or_else(too_large)?;
        } else {
            denominator = scale_up(1, 10, -exponent).ok_or_else(too_large)?;
        }
    } else {
        numerator = scale_up(numerator, base, power).ok_or_else(too_large)?;
        denominator = scale_up(1, 10, fraction_len).ok_or_else(too_large)?;
    }
    Ok(numerator.div_ceil(denominator))
}

/// The base and power a suffix stands for: `Gi` is 1024^3, `G` and `e9` are 10^9.
fn suffix_scale(suffix: &str) -> Option<(u128, i32)> {
    let binary = match suffix {
        "Ki" => Some(1),
        "Mi" => Some(2),
        "Gi" => Some(3),
        "Ti" => Some(4),
        "Pi" => Some(5),
        "Ei" => Some(6),
        _ => None,
    };
    if let Some(power) = binary {
        return Some((1024, power));
    }
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(power) = decimal {
        return Some((10, power));
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    exponent.parse::<i32>().ok().map(|power| (10, power))
}

/// Bytes in the largest binary unit that divides them, as a person would write them
/// (`10Gi`, `1536Mi`, `1000000000`).
pub fn format_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"];
    for (i, unit) in UNITS.iter().enumerate() {
        let size = 1u128 << (10 * (UNITS.len() - i));
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(parse_bytes("10Gi"), Ok(10 * 1024 * 1024 * 1024));
        assert_eq!(parse_bytes("1Ki"), Ok(1024));
        assert_eq!(parse_bytes("2Ei"), Ok(2 << 60));
        assert_eq!(parse_bytes("500M"), Ok(500_000_000));
        assert_eq!(parse_bytes("1k"), Ok(1000));
        assert_eq!(parse_bytes("3T"), Ok(3_000_000_000_000));
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("+7"), Ok(7));
    }

    #[test]
    fn fractions_and_exponents() {
        assert_eq!(parse_bytes("1.5Gi"), Ok(1_610_612_736));
        assert_eq!(parse_bytes("0.5Ki"), Ok(512));
        assert_eq!(parse_bytes("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("1E3"), Ok(1000));
        assert_eq!(parse_bytes("2.5e+2"), Ok(250));
        assert_eq!(parse_bytes(".5k"), Ok(500));
        // A fraction of a byte rounds up, as the API server's Value() does.
        assert_eq!(parse_bytes("1500m"), Ok(2));
        assert_eq!(parse_bytes("1e-3"), Ok(1));
        assert_eq!(parse_bytes("0.1"), Ok(1));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("-0"), Ok(0));
    }

    #[test]
    fn refuses_what_is_not_a_size() {
        for bad in [
            "", "Gi", "10GB", "1.2.3", "ten", "1e", "1e+", "10 Gi", "1Gii",
        ] {
            assert_eq!(
                parse_bytes(bad),
                Err(QuantityError::Syntax(bad.to_owned())),
                "{bad}"
            );
        }
        assert_eq!(
            parse_bytes("-1Gi"),
            Err(QuantityError::Negative("-1Gi".to_owned()))
        );
        assert_eq!(
            parse_bytes("1e60"),
            Err(QuantityError::TooLarge("1e60".to_owned()))
        );
    }

    #[test]
    fn formats_in_the_largest_unit_that_divides() {
        assert_eq!(format_bytes(10 << 30), "10Gi");
        assert_eq!(format_bytes(1536 << 20), "1536Mi");
        assert_eq!(format_bytes(16 << 40), "16Ti");
        assert_eq!(format_bytes(1_000_000_000), "1000000000");
        assert_eq!(format_bytes(0), "0");
    }
}
