//! The Gemma 3 vision fixture (fixtures/models/gemma3-vision, scripts/make_vision_fixtures.py):
//! its directory and the per-image references transformers wrote.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The fixture's `reference.json`, per image.
#[derive(Deserialize)]
pub struct ImagesReference {
    pub images: BTreeMap<String, ImageReference>,
}

/// One image: the processor's pixel values and transformers' image features.
#[derive(Deserialize)]
pub struct ImageReference {
    /// The processor's pixel values are `(level - 127.5) / 127.5` in f32 of these.
    pub pixel_levels: Vec<u8>,
    pub features_shape: Vec<usize>,
    pub features: Vec<f32>,
}

impl ImageReference {
    pub fn pixel_values(&self) -> Vec<f32> {
        (self.pixel_levels.iter())
            .map(|&l| (f32::from(l) - 127.5) / 127.5)
            .collect()
    }
}

pub fn fixture() -> PathBuf {
    super::fixture_dir("gemma3-vision")
}

pub fn reference() -> ImagesReference {
    let text = std::fs::read_to_string(fixture().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The largest `|a - b| / max(1, |b|)`.
pub fn max_error(ours: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    (ours.iter().zip(expected))
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0, f32::max)
}

/// Pause points every `rows` rows that never stop, counting the points reached.
pub struct Units {
    pub rows: usize,
    pub points: std::sync::atomic::AtomicUsize,
}

impl Units {
    pub fn of(rows: usize) -> Self {
        Units {
            rows,
            points: Default::default(),
        }
    }

    pub fn points(&self) -> usize {
        self.points.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl sluice_model::vision::Pause for Units {
    fn point(&self) {
        self.points
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn unit_rows(&self) -> usize {
        self.rows
    }
}
