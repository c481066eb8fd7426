use proptest::prelude::*;

use super::*;

/// The expression anchored, as the schema compiles it.
fn matcher(min: Option<(f64, bool)>, max: Option<(f64, bool)>) -> Option<regex::Regex> {
    decimal_range_regex(min, max).map(|p| regex::Regex::new(&format!("^(?:{p})$")).unwrap())
}

fn in_range(x: f64, min: Option<(f64, bool)>, max: Option<(f64, bool)>) -> bool {
    let above = min.is_none_or(|(m, incl)| if incl { x >= m } else { x > m });
    let below = max.is_none_or(|(m, incl)| if incl { x <= m } else { x < m });
    above && below
}

/// A JSON number without exponent: sign, integer part, optional fraction (leading and
/// trailing zeros included).
fn number_text() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        0u32..3000,
        proptest::option::of("[0-9]{1,4}"),
    )
        .prop_map(|(negative, int, frac)| {
            let sign = if negative { "-" } else { "" };
            match frac {
                Some(f) => format!("{sign}{int}.{f}"),
                None => format!("{sign}{int}"),
            }
        })
}

/// A bound with at most two decimals in -1500..1500.
fn bound() -> impl Strategy<Value = Option<(f64, bool)>> {
    proptest::option::of(
        (-150_000i32..150_000, any::<bool>()).prop_map(|(hundredths, incl)| {
            let f: f64 = format!("{}", f64::from(hundredths) / 100.0)
                .parse()
                .unwrap();
            (f, incl)
        }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A number matches exactly when its value is in the range (`-0` and its forms aside:
    /// 0 is written unsigned).
    #[test]
    fn matches_exactly_the_numbers_in_range(
        min in bound(),
        max in bound(),
        numbers in proptest::collection::vec(number_text(), 40),
    ) {
        let Some(re) = matcher(min, max) else {
            // Empty only when no real number lies between the bounds.
            let (lo, hi) = (min.unwrap(), max.unwrap());
            prop_assert!(lo.0 > hi.0 || (lo.0 == hi.0 && !(lo.1 && hi.1)));
            return Ok(());
        };
        for text in &numbers {
            let x: f64 = text.parse().unwrap();
            let canonical = !text.starts_with("-0") || x != 0.0;
            let leading_zero = text.trim_start_matches('-').starts_with('0')
                && text.trim_start_matches('-').len() > 1
                && !text.trim_start_matches('-').starts_with("0.");
            if leading_zero {
                prop_assert!(!re.is_match(text), "{text} has a leading zero");
                continue;
            }
            let expected = canonical && in_range(x, min, max);
            prop_assert_eq!(re.is_match(text), expected, "{} in {:?}..{:?}", text, min, max);
        }
    }
}

#[test]
fn ranges_people_write() {
    type Case = (
        Option<(f64, bool)>,
        Option<(f64, bool)>,
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: &[Case] = &[
        (
            Some((0.0, true)),
            Some((1.0, true)),
            &["0", "0.5", "1", "1.0", "0.999", "0.0001", "1.000"],
            &["1.01", "-0.5", "2", "1.5", "-1"],
        ),
        (
            Some((-90.0, true)),
            Some((90.0, true)),
            &["-90", "-89.999", "0", "45.5", "90", "90.00", "-0.5"],
            &["-90.01", "90.1", "100", "-91"],
        ),
        (
            Some((0.0, false)),
            None,
            &["0.1", "0.0001", "1", "123456789.5"],
            &["0", "0.0", "-1", "-0.1"],
        ),
        (
            None,
            Some((-1.5, false)),
            &["-1.51", "-2", "-1000"],
            &["-1.5", "-1", "0", "3"],
        ),
        (
            Some((0.1, true)),
            Some((0.1, true)),
            &["0.1", "0.10", "0.100"],
            &["0.11", "0.09", "0", "1"],
        ),
    ];
    for (min, max, yes, no) in cases {
        let re = matcher(*min, *max).unwrap();
        for y in *yes {
            assert!(re.is_match(y), "{y} should be in {min:?}..{max:?}");
        }
        for n in *no {
            assert!(!re.is_match(n), "{n} should not be in {min:?}..{max:?}");
        }
    }
    assert!(matcher(Some((1.0, false)), Some((1.0, true))).is_none());
    assert!(matcher(Some((2.0, true)), Some((1.0, true))).is_none());
}

#[test]
fn the_expression_compiles_for_the_schema() {
    let p = decimal_range_regex(Some((-273.15, true)), Some((1e6, false))).unwrap();
    let regex = crate::constraint::regex::Regex::compile(&p).unwrap();
    assert!(regex.is_match(b"-273.15"));
    assert!(regex.is_match(b"999999.9999"));
    assert!(!regex.is_match(b"1000000"));
    assert!(!regex.is_match(b"-273.151"));
}

#[test]
fn digits_are_bounded() {
    let re = matcher(Some((0.0, true)), Some((1.0, true))).unwrap();
    assert!(re.is_match(&format!("0.{}", "3".repeat(16))));
    assert!(!re.is_match(&format!("0.{}", "3".repeat(17))));
    assert!(re.is_match(&format!("1.{}", "0".repeat(16))));
    let above = matcher(Some((0.0, false)), None).unwrap();
    assert!(above.is_match(&format!("0.{}1", "0".repeat(15))));
    assert!(!above.is_match(&format!("0.{}1", "0".repeat(16))));
    assert!(above.is_match(&"9".repeat(20)));
    assert!(!above.is_match(&"9".repeat(21)));
    // A bound with more digits than that keeps its own.
    let fine = matcher(Some((0.12345678901234566, true)), None).unwrap();
    assert!(fine.is_match("0.12345678901234566"));
    assert!(!fine.is_match("0.12345678901234565"));
}
