//! JSON Schema `format`s the decoder enforces, each as the regular expression a whole string
//! must match (RFC 3339 dates and times, RFC 4122 UUIDs, RFC 5321-shaped e-mail addresses
//! without quoted local parts or address literals, dotted-quad IPv4). Any other format is an
//! annotation, as the specification allows.

const DATE: &str = "[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])";
const TIME: &str = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]{1,9})?\
                    (?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const OCTET: &str = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
const LABEL: &str = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

/// The regular expression (matched whole) of a format the decoder enforces.
pub(super) fn regex(format: &str) -> Option<String> {
    Some(match format {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        "date-time" => format!("{DATE}[Tt]{TIME}"),
        "uuid" => "[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}".to_string(),
        "email" => format!("[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]{{1,64}}@{LABEL}(?:\\.{LABEL})+"),
        "ipv4" => format!("(?:{OCTET}\\.){{3}}{OCTET}"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(format: &str, text: &str) -> bool {
        let re = ::regex::Regex::new(&format!("^(?:{})$", regex(format).unwrap())).unwrap();
        re.is_match(text)
    }

    #[test]
    fn each_format_takes_its_examples_and_refuses_near_misses() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "date",
                &["2026-11-27", "2000-02-29"],
                &["2026-13-01", "26-11-27", "2026-11-32"],
            ),
            (
                "time",
                &["23:59:60Z", "08:30:00.125+01:00"],
                &["24:00:00Z", "08:30:00", "8:30:00Z"],
            ),
            (
                "date-time",
                &["2026-11-27T14:00:00Z", "2026-11-27t14:00:00.5-05:30"],
                &["2026-11-27 14:00:00Z", "2026-11-27T14:00Z"],
            ),
            (
                "uuid",
                &["123e4567-e89b-12d3-a456-426614174000"],
                &[
                    "123e4567e89b12d3a456426614174000",
                    "123e4567-e89b-12d3-a456-42661417400g",
                ],
            ),
            (
                "email",
                &["a.b+c@example.co.uk"],
                &["@example.com", "a@b", "a b@example.com"],
            ),
            (
                "ipv4",
                &["192.168.0.1", "255.255.255.255"],
                &["256.1.1.1", "1.2.3", "01.2.3.4"],
            ),
        ];
        for (format, good, bad) in cases {
            for text in *good {
                assert!(matches(format, text), "{format} refuses {text}");
            }
            for text in *bad {
                assert!(!matches(format, text), "{format} takes {text}");
            }
        }
        assert_eq!(regex("uri"), None, "an annotation");
    }
}
