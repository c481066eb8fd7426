//! Broken model directories are reported as errors naming the file and tensor, never panics.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::fixture_dir;
use sluice_model::{LoadError, LoadOptions, Model};

/// A scratch copy of a fixture, removed on drop.
struct ScratchCopy(PathBuf);

impl ScratchCopy {
    fn of(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-model-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(fixture_dir(name)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn edit_config(&self, edit: impl FnOnce(&mut serde_json::Value)) {
        let path = self.0.join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut config);
        std::fs::write(path, config.to_string()).unwrap();
    }
}

impl Drop for ScratchCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load(dir: &Path) -> Result<Model, LoadError> {
    Model::load(dir, &LoadOptions::default())
}

#[test]
fn unsupported_architecture_is_named() {
    let copy = ScratchCopy::of("llama");
    copy.edit_config(|c| c["architectures"] = serde_json::json!(["GPT2LMHeadModel"]));
    let err = load(copy.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::UnsupportedArchitecture { ref architecture, .. } if architecture == "GPT2LMHeadModel")
    );
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn missing_tensor_is_named() {
    let copy = ScratchCopy::of("llama");
    // One more layer than the checkpoint holds.
    copy.edit_config(|c| c["num_hidden_layers"] = serde_json::json!(3));
    let err = load(copy.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::MissingTensor { ref tensor, .. } if tensor.starts_with("model.layers.2.")),
        "{err}"
    );
}

#[test]
fn wrong_shape_names_file_tensor_and_shapes() {
    let copy = ScratchCopy::of("llama");
    copy.edit_config(|c| c["intermediate_size"] = serde_json::json!(96));
    let err = load(copy.path()).unwrap_err();
    let LoadError::WrongShape {
        path,
        tensor,
        expected,
        found,
    } = &err
    else {
        panic!("expected WrongShape, got {err}");
    };
    assert!(path.ends_with("model.safetensors"));
    assert_eq!(tensor, "model.layers.0.mlp.gate_proj.weight");
    assert_eq!(
        (expected.as_slice(), found.as_slice()),
        (&[96, 64][..], &[128, 64][..])
    );
}

#[test]
fn truncated_file_names_the_first_cut_tensor() {
    let copy = ScratchCopy::of("llama");
    let file = copy.path().join("model.safetensors");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len - 1000).unwrap();
    let err = load(copy.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::Truncated { ref path, .. } if path == &file),
        "{err}"
    );
}

#[test]
fn truncated_shard_in_a_sharded_checkpoint_is_named() {
    let copy = ScratchCopy::of("qwen2");
    let file = copy.path().join("model-00002-of-00004.safetensors");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(100)
        .unwrap();
    let err = load(copy.path()).unwrap_err();
    assert!(
        err.to_string().contains("model-00002-of-00004.safetensors"),
        "{err}"
    );
}

#[test]
fn missing_config_and_missing_weights_are_io_errors() {
    let copy = ScratchCopy::of("llama");
    std::fs::remove_file(copy.path().join("model.safetensors")).unwrap();
    assert!(
        matches!(load(copy.path()), Err(LoadError::Io { ref path, .. }) if path.ends_with("model.safetensors"))
    );
    std::fs::remove_file(copy.path().join("config.json")).unwrap();
    assert!(
        matches!(load(copy.path()), Err(LoadError::Io { ref path, .. }) if path.ends_with("config.json"))
    );
}

#[test]
fn malformed_config_is_a_config_error() {
    let copy = ScratchCopy::of("llama");
    std::fs::write(copy.path().join("config.json"), "{\"architectures\": [").unwrap();
    assert!(matches!(load(copy.path()), Err(LoadError::Config { .. })));
}

#[test]
fn config_reports_generation_eos_ids_and_shapes() {
    let model = load(&fixture_dir("llama-odd-head-dim")).unwrap();
    let c = model.config();
    assert_eq!(c.eos_token_ids, vec![1, 3]);
    assert_eq!(
        (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
        (4, 2, 24)
    );
    assert_eq!(c.architecture, "LlamaForCausalLM");
    assert!(model.weight_bytes() > 0);
}

/// `llama-f16.gguf` with `edit` applied to its bytes, written to a scratch file.
fn broken_gguf(tag: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let source = fixture_dir("llama").join("../../gguf/llama-f16.gguf");
    let mut bytes = std::fs::read(source).unwrap();
    edit(&mut bytes);
    let path = std::env::temp_dir().join(format!("sluice-{tag}-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The offset just past the first occurrence of the length-prefixed string `s` in `bytes`.
fn after_string(bytes: &[u8], s: &str) -> usize {
    let mut needle = (s.len() as u64).to_le_bytes().to_vec();
    needle.extend(s.as_bytes());
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("string in header")
        + needle.len()
}

fn gguf_error(path: &Path) -> String {
    let err = Model::load(path, &LoadOptions::default()).unwrap_err();
    std::fs::remove_file(path).unwrap();
    err.to_string()
}

#[test]
fn broken_gguf_files_are_clear_errors() {
    let truncated = broken_gguf("truncated", |b| b.truncate(b.len() / 2));
    let err = gguf_error(&truncated);
    assert!(err.contains("truncated") && err.contains(".gguf"), "{err}");

    let magic = broken_gguf("magic", |b| b[0] = b'X');
    assert!(gguf_error(&magic).contains("not a GGUF file"));

    let unknown_type = broken_gguf("type", |b| {
        // A tensor entry: name, dimension count, dimensions, type.
        let at = after_string(b, "blk.0.attn_q.weight");
        let dims = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        let type_at = at + 4 + 8 * dims;
        b[type_at..type_at + 4].copy_from_slice(&39u32.to_le_bytes());
    });
    let err = gguf_error(&unknown_type);
    assert!(
        err.contains("blk.0.attn_q.weight") && err.contains("type 39"),
        "{err}"
    );

    let missing_key = broken_gguf("key", |b| {
        let at = after_string(b, "llama.embedding_length");
        b[at - 1] = b'X';
    });
    let err = gguf_error(&missing_key);
    assert!(
        err.contains("llama.embedding_length") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn config_sizes_beyond_the_weight_files_are_config_errors() {
    let copy = ScratchCopy::of("gemma3");
    // gemma3's layer pattern builds a per-layer table from the config alone.
    for layers in [1u64 << 32, 1 << 63] {
        copy.edit_config(|c| c["num_hidden_layers"] = layers.into());
        let err = sluice_model::ModelFiles::config_at(copy.path()).unwrap_err();
        assert!(
            matches!(err, LoadError::Config { .. })
                && (err.to_string().contains("weight files") || err.to_string().contains("2^64")),
            "{err}"
        );
    }
    let copy = ScratchCopy::of("llama");
    copy.edit_config(|c| c["hidden_size"] = (1u64 << 40).into());
    assert!(matches!(load(copy.path()), Err(LoadError::Config { .. })));
}

#[test]
fn a_config_claiming_more_layers_than_the_checkpoint_has_tensors_is_refused() {
    let copy = ScratchCopy::of("llama");
    // 50 layers of this shape fit in the file's bytes, but it has tensors for 2.
    copy.edit_config(|c| c["num_hidden_layers"] = 50.into());
    let err = load(copy.path()).unwrap_err().to_string();
    assert!(err.contains("num_hidden_layers is 50"), "{err}");
}

#[test]
fn shard_index_and_headers_cannot_point_outside_their_bytes() {
    let copy = ScratchCopy::of("llama");
    std::fs::write(
        copy.path().join("model.safetensors.index.json"),
        r#"{"weight_map": {"lm_head.weight": "../../etc/passwd"}}"#,
    )
    .unwrap();
    let err = load(copy.path()).unwrap_err().to_string();
    assert!(err.contains("is not a file name"), "{err}");

    let copy = ScratchCopy::of("llama");
    let path = copy.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    // A shape that claims far more elements than the tensor's byte range, same header length.
    let (at, _) = header.match_indices("\"shape\":[").next().unwrap();
    let mut edited = bytes.clone();
    let digits = 8 + at + "\"shape\":[".len();
    edited[digits] = b'9';
    edited[digits + 1] = b'9';
    std::fs::write(&path, edited).unwrap();
    let err = load(copy.path()).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
}
