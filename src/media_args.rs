//! `sluice serve`'s image flags: which hosts image URLs may be fetched from and within which
//! limits (`--allowed-media-domains`, `--media-fetch-*`), and the `--mmproj` projector files
//! paired with the `--model`s.

use std::path::PathBuf;
use std::time::Duration;

use sluice_api::media::MediaFetchConfig;
use sluice_engine::pool::DirectoryLoader;

use crate::cli_parse::parse_seconds;

/// Where image URLs may be fetched from, and within which limits.
#[derive(Debug, clap::Args)]
pub struct MediaArgs {
    /// Fetch `http` and `https` image URLs whose host is one of these (names or IP addresses,
    /// matched exactly; redirects only to them too, never from https down to http);
    /// repeatable or comma-separated. Certificates are checked against the system's roots and
    /// Mozilla's. Default: none, and an image URL is a 400 (send images inline as data URLs).
    #[arg(
        long = "allowed-media-domains",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub allowed_media_domains: Vec<String>,
    /// Seconds one image fetch may take in all (redirects and body included).
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_seconds)]
    pub media_fetch_timeout: f64,
    /// MiB one fetched image may have; a larger one is a 400 (reading stops there).
    #[arg(long, value_name = "MIB", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub media_fetch_max_mib: u64,
}

impl MediaArgs {
    /// The limits the API applies to every image fetch.
    pub fn fetch_config(&self) -> MediaFetchConfig {
        MediaFetchConfig {
            allowed_domains: (self.allowed_media_domains.iter())
                .map(|d| d.trim().to_string())
                .filter(|d| !d.is_empty())
                .collect(),
            timeout: Duration::from_secs_f64(self.media_fetch_timeout),
            max_bytes: (self.media_fetch_max_mib << 20) as usize,
        }
    }
}

/// `loader` with each `--mmproj` as the projector file of the `--model` at its place; a
/// projector for a model that is not a GGUF file, or with no model, is an error.
pub fn with_projectors(
    mut loader: DirectoryLoader,
    models: &[PathBuf],
    mmproj: &[PathBuf],
) -> anyhow::Result<DirectoryLoader> {
    anyhow::ensure!(
        mmproj.len() <= models.len(),
        "{} --mmproj given for {} --model: a projector file is the image half of a GGUF \
         language model, named with --model",
        mmproj.len(),
        models.len()
    );
    for (model, projector) in models.iter().zip(mmproj) {
        anyhow::ensure!(
            sluice_model::ModelFiles::is_gguf(model),
            "--mmproj {}: --model {} is not a GGUF file (a model directory carries its own \
             image encoder)",
            projector.display(),
            model.display()
        );
        anyhow::ensure!(
            sluice_model::ModelFiles::is_mmproj(projector) && projector.is_file(),
            "--mmproj {}: not a projector file (mmproj*.gguf)",
            projector.display()
        );
        loader = loader.with_projector(model.clone(), projector.clone());
    }
    Ok(loader)
}

#[cfg(test)]
#[path = "media_args_tests.rs"]
mod tests;
