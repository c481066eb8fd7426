//! How an embedding model turns a prompt's final hidden states into one vector, as its
//! sentence-transformers files say: `modules.json` names a `Pooling` module whose directory holds
//! a `config.json` with one `pooling_mode_*` flag set.

use std::path::Path;

use serde::Deserialize;

use crate::error::LoadError;

/// A pooling mode sluice computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooling {
    /// The last prompt token's state: causal embedders (Qwen3-Embedding), and the default for a
    /// model without sentence-transformers files (its last state has seen the whole prompt).
    #[default]
    LastToken,
    /// The mean of every prompt token's state.
    Mean,
    /// The first prompt token's state.
    Cls,
}

impl Pooling {
    /// The sentence-transformers name (`lasttoken`, `mean`, `cls`).
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::LastToken => "lasttoken",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }
}

#[derive(Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// `1_Pooling/config.json`: the flags sluice reads (the others must be off).
#[derive(Deserialize, Default)]
#[serde(default)]
struct PoolingConfig {
    pooling_mode_cls_token: bool,
    pooling_mode_mean_tokens: bool,
    pooling_mode_lasttoken: bool,
    pooling_mode_max_tokens: bool,
    pooling_mode_mean_sqrt_len_tokens: bool,
    pooling_mode_weightedmean_tokens: bool,
}

/// The pooling `dir`'s sentence-transformers files ask for; `None` without a `modules.json` or
/// without a pooling module in it.
pub fn pooling_of(dir: &Path) -> Result<Option<Pooling>, LoadError> {
    let modules_path = dir.join("modules.json");
    if !modules_path.exists() {
        return Ok(None);
    }
    let modules: Vec<Module> = read_json(&modules_path)?;
    let Some(module) = modules.iter().find(|m| m.kind.ends_with("models.Pooling")) else {
        return Ok(None);
    };
    let config_path = dir.join(&module.path).join("config.json");
    let c: PoolingConfig = read_json(&config_path)?;
    let unsupported = c.pooling_mode_max_tokens
        || c.pooling_mode_mean_sqrt_len_tokens
        || c.pooling_mode_weightedmean_tokens;
    let chosen: Vec<Pooling> = [
        (c.pooling_mode_lasttoken, Pooling::LastToken),
        (c.pooling_mode_mean_tokens, Pooling::Mean),
        (c.pooling_mode_cls_token, Pooling::Cls),
    ]
    .into_iter()
    .filter_map(|(on, mode)| on.then_some(mode))
    .collect();
    match (unsupported, chosen.as_slice()) {
        (false, [mode]) => Ok(Some(*mode)),
        _ => Err(LoadError::Config {
            path: config_path,
            message: "exactly one of pooling_mode_lasttoken, pooling_mode_mean_tokens and \
                      pooling_mode_cls_token must be set (max and weighted-mean pooling are \
                      not supported)"
                .into(),
        }),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| LoadError::Config {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, pooling_flags: &str) {
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        let modules = r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
            {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]"#;
        std::fs::write(dir.join("modules.json"), modules).unwrap();
        let config = format!(r#"{{"word_embedding_dimension": 64, {pooling_flags}}}"#);
        std::fs::write(dir.join("1_Pooling/config.json"), config).unwrap();
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-pooling-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_pooling_module_config_names_the_mode() {
        let dir = temp_dir("mean");
        write(
            &dir,
            r#""pooling_mode_mean_tokens": true, "pooling_mode_cls_token": false"#,
        );
        assert_eq!(pooling_of(&dir).unwrap(), Some(Pooling::Mean));
        write(&dir, r#""pooling_mode_lasttoken": true"#);
        assert_eq!(pooling_of(&dir).unwrap(), Some(Pooling::LastToken));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_model_without_sentence_transformers_files_has_no_pooling_config() {
        let dir = temp_dir("none");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(pooling_of(&dir).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn max_pooling_is_refused_with_the_file_named() {
        let dir = temp_dir("max");
        write(&dir, r#""pooling_mode_max_tokens": true"#);
        let message = pooling_of(&dir).unwrap_err().to_string();
        assert!(message.contains("1_Pooling"), "{message}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
