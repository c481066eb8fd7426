//! Which model directories the server offers and under which ids, and loading one directly for
//! `sluice generate`. The loading itself lives in `sluice_engine::pool::DirectoryLoader`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sluice_api::model_names::ModelNames;
use sluice_engine::pool::{DirectoryLoader, LoadSettings, LoadedModel, ModelLoader, ModelSpec};
use sluice_model::ModelFiles;

/// The model `sluice serve` uses when no `--model` is given.
pub const BUNDLED_MODEL: &str = "models/sluice-kjv-mini";

/// Where the bundled model is: beside the working directory, else in the source tree this
/// binary was built from.
pub fn bundled_model_dir() -> PathBuf {
    let here = PathBuf::from(BUNDLED_MODEL);
    if here.join("config.json").is_file() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED_MODEL)
}

/// Loads `dir` and starts its engine, outside any pool.
pub fn launch(dir: &Path, settings: &LoadSettings) -> anyhow::Result<LoadedModel> {
    DirectoryLoader::new(settings.clone())
        .load(dir)
        .with_context(|| format!("loading model from {}", dir.display()))
}

/// The id a model is served under: a directory's name, a GGUF file's stem.
pub fn default_model_id(path: &Path) -> String {
    ModelFiles::default_name(path)
}

/// The models to offer: each `--model` (named by `--served-model-name` in order, else by its
/// folder or file stem), then every folder of each `--models-dir` that holds a `config.json`
/// and every `.gguf` file in it (a split set once; projector files are not models) and every
/// folder holding one GGUF model (served under the folder's name), sorted by path, less those
/// whose config cannot be read (logged as errors).
/// `pinned` names the models never to unload; each must be one of them.
pub fn model_specs(
    models: &[PathBuf],
    served_model_names: &[String],
    models_dirs: &[PathBuf],
    pinned: &[String],
) -> anyhow::Result<Vec<ModelSpec>> {
    anyhow::ensure!(
        served_model_names.len() <= models.len(),
        "{} --served-model-name given for {} --model",
        served_model_names.len(),
        models.len()
    );
    let mut specs: Vec<ModelSpec> = Vec::new();
    for (i, dir) in models.iter().enumerate() {
        anyhow::ensure!(
            !ModelFiles::is_mmproj(dir),
            "--model {}: a projector file (the image half of a GGUF model); give the language \
             model's GGUF as --model and this as --mmproj",
            dir.display()
        );
        anyhow::ensure!(
            ModelFiles::is_model(dir),
            "--model {}: neither a directory with a config.json nor a .gguf file",
            dir.display()
        );
        let id = served_model_names
            .get(i)
            .and_then(|names| names.split(',').map(str::trim).next())
            .filter(|id| !id.is_empty())
            .map_or_else(|| default_model_id(dir), str::to_string);
        specs.push(ModelSpec {
            id,
            dir: dir.clone(),
            pinned: false,
        });
    }
    for parent in models_dirs {
        let entries = std::fs::read_dir(parent)
            .with_context(|| format!("--models-dir {}", parent.display()))?;
        let mut dirs: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter_map(|p| match ModelFiles::is_model(&p) {
                true => Some((default_model_id(&p), p)),
                false => gguf_folder_model(&p).map(|gguf| (default_model_id(&p), gguf)),
            })
            .collect();
        dirs.sort_by(|a, b| a.1.cmp(&b.1));
        anyhow::ensure!(
            !dirs.is_empty(),
            "--models-dir {}: it holds no .gguf file and no folder with a config.json",
            parent.display()
        );
        // A folder of downloads may hold a hostile or broken file: it is left out (and named
        // in the log) rather than keeping the others from being served.
        let found = dirs.len();
        dirs.retain(|(_, dir)| match ModelFiles::config_at(dir) {
            Ok(_) => true,
            Err(err) => {
                tracing::error!(model = %dir.display(), error = %err, "not served: its config cannot be read");
                false
            }
        });
        anyhow::ensure!(
            !dirs.is_empty(),
            "--models-dir {}: none of its {found} models has a config that can be read (logged above)",
            parent.display()
        );
        for (id, dir) in dirs {
            specs.push(ModelSpec {
                id,
                dir,
                pinned: false,
            });
        }
    }
    for name in pinned {
        let spec = specs
            .iter_mut()
            .find(|s| &s.id == name)
            .with_context(|| format!("--pin {name}: no model is served under that name"))?;
        spec.pinned = true;
    }
    Ok(specs)
}

/// The GGUF model of a folder without a config.json that holds exactly one (a split set once),
/// beside projector files or not: llama.cpp's router layout for a multimodal or split model.
fn gguf_folder_model(folder: &Path) -> Option<PathBuf> {
    if !folder.is_dir() || folder.join("config.json").exists() {
        return None;
    }
    let mut models = std::fs::read_dir(folder)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| ModelFiles::is_gguf(p) && ModelFiles::is_model(p));
    let only = models.next()?;
    models.next().is_none().then_some(only)
}

/// The names clients may use beyond the served ids: the names after the first in each
/// `--served-model-name a,b,c` (for the `--model` at its place), the `--model-alias` rules and
/// `--default-model`; each must lead to a served model.
pub fn model_names(
    served_model_names: &[String],
    specs: &[ModelSpec],
    aliases: &[String],
    default_model: Option<&str>,
) -> anyhow::Result<ModelNames> {
    let mut names = ModelNames::default();
    for (list, spec) in served_model_names.iter().zip(specs) {
        for name in list.split(',').map(str::trim).skip(1) {
            anyhow::ensure!(
                !name.is_empty(),
                "--served-model-name {list:?}: an empty name"
            );
            names = names.with_name(name, &spec.id);
        }
    }
    for rule in aliases {
        names = names.with_alias(rule).map_err(anyhow::Error::msg)?;
    }
    if let Some(default) = default_model {
        names = names.with_default(default);
    }
    let ids: Vec<String> = specs.iter().map(|s| s.id.clone()).collect();
    for target in names.targets() {
        anyhow::ensure!(
            names.resolve(target, &ids).is_some(),
            "no model is served under the name {target:?} (served: {})",
            ids.join(", ")
        );
    }
    Ok(names)
}

/// The default `--max-memory`: three quarters of the machine's RAM (8 GiB when it cannot be
/// read).
pub fn default_max_memory_bytes() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        });
    match total_kib {
        Some(kib) => kib / 4 * 3 * 1024,
        None => 8 << 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models")
    }

    #[test]
    fn models_dir_offers_every_model_folder_by_name_after_explicit_models() {
        let specs = model_specs(
            &[bundled_model_dir()],
            &["kjv".to_string()],
            &[fixtures()],
            &["qwen2".to_string()],
        )
        .unwrap();
        let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids[0], "kjv");
        for id in ["llama", "mistral", "qwen2", "qwen3"] {
            assert!(ids.contains(&id), "{ids:?}");
        }
        let pinned: Vec<&str> = specs
            .iter()
            .filter(|s| s.pinned)
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(pinned, ["qwen2"]);
    }

    #[test]
    fn pinning_an_unknown_model_or_a_folder_without_config_is_an_error() {
        let err = model_specs(&[fixtures().join("llama")], &[], &[], &["nope".into()]);
        assert!(err.unwrap_err().to_string().contains("--pin nope"));
        let err = model_specs(&[fixtures()], &[], &[], &[]);
        assert!(err.unwrap_err().to_string().contains("nor a .gguf file"));
    }

    #[test]
    fn served_model_names_give_an_id_then_extra_names_and_every_name_must_lead_somewhere() {
        let llama = fixtures().join("llama");
        let names = ["llama,tiny, small".to_string()];
        let specs = model_specs(std::slice::from_ref(&llama), &names, &[], &[]).unwrap();
        assert_eq!(specs[0].id, "llama");
        let aliases = ["claude-*=tiny".to_string()];
        let resolved = model_names(&names, &specs, &aliases, Some("small")).unwrap();
        let ids = ["llama".to_string()];
        assert_eq!(
            resolved.resolve("claude-opus", &ids).as_deref(),
            Some("llama")
        );
        assert_eq!(resolved.default_id(&ids).as_deref(), Some("llama"));
        for (aliases, default, wanted) in [
            (vec!["gpt-*=nope".to_string()], None, "\"nope\""),
            (vec![], Some("missing"), "\"missing\""),
            (vec!["gpt-4o".to_string()], None, "PATTERN=MODEL"),
        ] {
            let err = model_names(&names, &specs, &aliases, default).unwrap_err();
            assert!(err.to_string().contains(wanted), "{err}");
        }
    }

    #[test]
    fn gguf_files_are_served_under_their_stem() {
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf");
        let specs = model_specs(&[gguf.join("llama-f16.gguf")], &[], &[gguf], &[]).unwrap();
        let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids[0], "llama-f16");
        assert!(ids.contains(&"qwen3-f16"), "{ids:?}");
    }

    #[test]
    fn projector_files_are_not_models_and_a_folder_of_one_gguf_is_served_under_its_name() {
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf");
        let models = tempfile::tempdir().unwrap();
        let link = |from: &str, to: &Path| std::os::unix::fs::symlink(gguf.join(from), to).unwrap();
        // llama.cpp's router layout: a folder per multimodal model.
        let folder = models.path().join("gemma-vision");
        std::fs::create_dir(&folder).unwrap();
        link(
            "gemma3-vision-f16.gguf",
            &folder.join("gemma3-vision-f16.gguf"),
        );
        link(
            "mmproj-gemma3-vision-f16.gguf",
            &folder.join("mmproj-F16.gguf"),
        );
        link("llama-f16.gguf", &models.path().join("llama-f16.gguf"));
        link(
            "mmproj-gemma3-vision-q8_0.gguf",
            &models.path().join("mmproj-q8_0.gguf"),
        );
        let specs = model_specs(&[], &[], &[models.path().to_path_buf()], &[]).unwrap();
        let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["gemma-vision", "llama-f16"]);
        assert_eq!(specs[0].dir, folder.join("gemma3-vision-f16.gguf"));
        let err = model_specs(&[gguf.join("mmproj-gemma3-vision-f16.gguf")], &[], &[], &[]);
        assert!(err.unwrap_err().to_string().contains("--mmproj"));
    }

    #[test]
    fn default_budget_is_a_share_of_ram() {
        assert!(default_max_memory_bytes() >= 1 << 20);
    }
}
