//! `--mmproj` files beside `--model`s.

use super::*;
use sluice_engine::pool::LoadSettings;

fn loader() -> DirectoryLoader {
    DirectoryLoader::new(LoadSettings::with_fixed_kv(16, 1 << 20))
}

#[test]
fn an_mmproj_needs_a_gguf_model_at_its_place_and_must_be_a_projector_file() {
    let gguf = |name: &str| PathBuf::from("fixtures/gguf").join(name);
    let mmproj = gguf("mmproj-gemma3-vision-f16.gguf");
    let text = gguf("gemma3-vision-f16.gguf");
    let err = |models: &[PathBuf], mmproj: &[PathBuf]| {
        with_projectors(loader(), models, mmproj)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[], std::slice::from_ref(&mmproj)).contains("1 --mmproj given for 0 --model"));
    let dir = PathBuf::from("fixtures/models/gemma3-vision");
    assert!(err(&[dir], std::slice::from_ref(&mmproj)).contains("is not a GGUF file"));
    assert!(
        err(std::slice::from_ref(&text), std::slice::from_ref(&text))
            .contains("not a projector file")
    );
    let loader = with_projectors(
        loader(),
        std::slice::from_ref(&text),
        std::slice::from_ref(&mmproj),
    )
    .unwrap();
    assert_eq!(loader.projector(&text, "Gemma3ForCausalLM"), Some(mmproj));
}
