//! Which llama.cpp projector file (`mmproj-*.gguf`) gives a GGUF language model its images:
//! the one named for it (`--mmproj`), else one found beside it.
//!
//! Beside it means in the same folder, as llama.cpp's router (`llama-server --models-dir`:
//! a model's folder holds its GGUF and a file whose name starts with `mmproj`) and LM Studio
//! (one folder per model) lay models out: in a folder holding one language model, the one
//! `mmproj*.gguf` there; in a folder of several, the `mmproj*.gguf` named after the model
//! (`mmproj-NAME.gguf` beside `NAME.gguf`, the names Hugging Face repositories use).

use std::path::{Path, PathBuf};

use sluice_model::ModelFiles;

/// The projector file found beside the GGUF model `model`, if any (see the module
/// documentation); several candidates none of which is named for it give none, with a warning.
pub fn projector_beside(model: &Path) -> Option<PathBuf> {
    let folder = model.parent().filter(|p| !p.as_os_str().is_empty());
    let entries = std::fs::read_dir(folder.unwrap_or(Path::new("."))).ok()?;
    let mut projectors = Vec::new();
    let mut models = 0;
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if ModelFiles::is_mmproj(&path) {
            projectors.push(path);
        } else if ModelFiles::is_model(&path) && ModelFiles::is_gguf(&path) {
            models += 1;
        }
    }
    projectors.sort();
    let stem = ModelFiles::default_name(model).to_lowercase();
    let named = projectors.iter().find(|p| {
        let name = ModelFiles::default_name(p).to_lowercase();
        let rest = name
            .get(6..)
            .unwrap_or("")
            .trim_start_matches(['-', '_', '.']);
        rest == stem
    });
    match (named, projectors.as_slice()) {
        (Some(found), _) => Some(found.clone()),
        (None, [only]) if models == 1 => Some(only.clone()),
        (None, []) => None,
        (None, _) => {
            tracing::warn!(
                model = %model.display(),
                projectors = ?projectors,
                "no projector file is named for this model among those beside it \
                 (mmproj-{stem}.gguf): it is served without images; name one with --mmproj"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(dir.path().join(f), b"GGUF").unwrap();
        }
        dir
    }

    #[test]
    fn a_folder_of_one_model_gives_its_one_projector() {
        let dir = folder(&["gemma-3-4b-it-Q4_K_M.gguf", "mmproj-F16.gguf"]);
        let model = dir.path().join("gemma-3-4b-it-Q4_K_M.gguf");
        assert_eq!(
            projector_beside(&model),
            Some(dir.path().join("mmproj-F16.gguf"))
        );
    }

    #[test]
    fn in_a_folder_of_several_models_the_projector_is_the_one_named_for_the_model() {
        let dir = folder(&[
            "a.gguf",
            "b-f16.gguf",
            "mmproj-b-f16.gguf",
            "mmproj-b-q8_0.gguf",
        ]);
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b-f16.gguf"));
        assert_eq!(projector_beside(&a), None);
        assert_eq!(
            projector_beside(&b),
            Some(dir.path().join("mmproj-b-f16.gguf"))
        );
        let alone = folder(&["a.gguf", "b.gguf", "mmproj-F16.gguf"]);
        assert_eq!(projector_beside(&alone.path().join("a.gguf")), None);
    }

    #[test]
    fn a_folder_without_projectors_gives_none() {
        let dir = folder(&["a.gguf"]);
        assert_eq!(projector_beside(&dir.path().join("a.gguf")), None);
    }
}
