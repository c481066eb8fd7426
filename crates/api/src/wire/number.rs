//! Integer fields as JSON clients send them. JavaScript has one number type and some clients
//! write every number as a float, so `11.0` is the integer 11; a fraction (`1.5`) or a
//! non-number is a parse error. Values are read into `i128`, which holds every JSON integer a
//! client can mean (seeds go up to 2^64 - 1), so validation can name the real bound of an
//! out-of-range value instead of a parse error about the Rust type.

use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// A JSON integer, possibly written as a float with no fraction.
pub type WholeNumber = i128;

struct WholeVisitor;

impl Visitor<'_> for WholeVisitor {
    type Value = WholeNumber;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<WholeNumber, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<WholeNumber, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<WholeNumber, E> {
        if v.is_finite() && v.fract() == 0.0 {
            // Saturates beyond i128's range; validation refuses such values anyway.
            Ok(v as WholeNumber)
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }
}

struct Whole(WholeNumber);

impl<'de> serde::Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(WholeVisitor).map(Whole)
    }
}

/// `#[serde(default, deserialize_with = "number::optional")]` on an `Option<WholeNumber>`.
pub fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WholeNumber>, D::Error> {
    Ok(Option::<Whole>::deserialize(d)?.map(|w| w.0))
}

/// `#[serde(default, deserialize_with = "number::optional_list")]` on an
/// `Option<Vec<WholeNumber>>`.
pub fn optional_list<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<WholeNumber>>, D::Error> {
    struct ListVisitor;
    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Option<Vec<WholeNumber>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of integers")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(Whole(v)) = seq.next_element()? {
                out.push(v);
            }
            Ok(Some(out))
        }
    }
    d.deserialize_option(ListVisitor)
}

/// `#[serde(deserialize_with = "number::list")]` on a required `Vec<WholeNumber>`.
pub fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WholeNumber>, D::Error> {
    optional_list(d)?.ok_or_else(|| de::Error::custom("expected a list of integers, got null"))
}

use serde::Deserialize;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Probe {
        #[serde(default, deserialize_with = "optional")]
        n: Option<WholeNumber>,
        #[serde(default, deserialize_with = "optional_list")]
        ids: Option<Vec<WholeNumber>>,
    }

    fn probe(json: &str) -> Result<Probe, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn integers_may_be_written_as_floats_without_a_fraction() {
        let p = probe(r#"{"n": 11.0, "ids": [1, 2.0]}"#).unwrap();
        assert_eq!((p.n, p.ids), (Some(11), Some(vec![1, 2])));
        assert_eq!(
            probe(r#"{"n": 18446744073709551615}"#).unwrap().n,
            Some(u64::MAX as i128)
        );
        assert_eq!(probe(r#"{"n": null}"#).unwrap().n, None);
        assert_eq!(probe(r#"{}"#).unwrap().ids, None);
    }

    #[test]
    fn fractions_and_strings_are_parse_errors_naming_an_integer() {
        for bad in [r#"{"n": 1.5}"#, r#"{"n": "3"}"#, r#"{"ids": ["eos"]}"#] {
            let err = probe(bad).unwrap_err().to_string();
            assert!(err.contains("an integer"), "{bad}: {err}");
        }
    }
}
