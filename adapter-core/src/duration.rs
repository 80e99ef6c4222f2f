//! The one way every adapter reads a duration on its command line.

use std::time::Duration;

/// A duration like `500ms`, `4s`, `10m` or `1h` (a bare number is seconds), for `clap`'s
/// `value_parser`; the error names the text and the units.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |i| text.split_at(i));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms, 4s, 10m or 1h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3_600))),
        _ => Err(format!("`{text}`: the unit must be ms, s, m or h")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit_and_bad_ones_are_named() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("4s"), Ok(Duration::from_secs(4)));
        assert_eq!(parse_duration("4"), Ok(Duration::from_secs(4)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7_200)));
        assert!(parse_duration("4d").unwrap_err().contains("4d"));
        assert!(parse_duration("ms").unwrap_err().contains("`ms`"));
    }
}
