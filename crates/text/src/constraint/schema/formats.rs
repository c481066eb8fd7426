//! JSON Schema `format`s the decoder enforces, each as the regular expression a whole string
//! must match (RFC 3339 dates and times, RFC 4122 UUIDs, RFC 5321-shaped e-mail addresses
//! without quoted local parts or address literals, dotted-quad IPv4). Any other format is an
//! annotation, as the specification allows.

/// A calendar date: years 0001-9999, each month's own number of days, February 29 in leap
/// years only (as RFC 3339's `full-date` with its section 5.7 restrictions, and as
/// `datetime.date` and jsonschema's checker read it).
const DATE: &str = "(?:(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-\
                    (?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])\
                    |(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)\
                    |02-(?:0[1-9]|1[0-9]|2[0-8]))\
                    |(?:[0-9]{2}(?:[02468][48]|[13579][26]|[2468]0)\
                    |(?:[02468][48]|[13579][26]|[2468]0)00)-02-29)";
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

    /// Every day of every month of years that test the leap rules, against chrono's calendar.
    #[test]
    fn dates_are_the_calendar_s_dates() {
        for year in [
            1, 4, 100, 400, 1900, 1996, 2000, 2023, 2024, 2100, 2400, 9999,
        ] {
            for month in 0..=13 {
                for day in 0..=32 {
                    let text = format!("{year:04}-{month:02}-{day:02}");
                    let real = chrono::NaiveDate::from_ymd_opt(year, month, day).is_some();
                    assert_eq!(matches("date", &text), real, "{text}");
                }
            }
        }
    }

    #[test]
    fn each_format_takes_its_examples_and_refuses_near_misses() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "date",
                &[
                    "2026-11-27",
                    "2000-02-29",
                    "2024-02-29",
                    "0001-01-31",
                    "2026-04-30",
                ],
                &[
                    "2026-13-01",
                    "26-11-27",
                    "2026-11-32",
                    "0000-01-14",
                    "2023-02-29",
                    "1900-02-29",
                    "2026-04-31",
                    "2026-02-30",
                ],
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
