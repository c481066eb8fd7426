//! The directory loader: estimates equal loads, context limits, pool sizing and dtypes.

use super::*;

use crate::pool::MemoryShare;
use crate::testkit::fixture;

fn loader(dtype: WeightDtype) -> DirectoryLoader {
    DirectoryLoader::new(LoadSettings {
        dtype: Some(dtype),
        max_model_len: Some(128),
        ..LoadSettings::with_fixed_kv(16, 1 << 20)
    })
}

/// `--kv-cache-memory auto` with one model and a budget of `budget_bytes`.
fn auto(budget_bytes: usize) -> KvCacheMemory {
    KvCacheMemory::Auto(MemoryShare {
        budget_bytes,
        models: 1,
    })
}

#[test]
fn estimate_is_what_a_load_really_holds() {
    for memory in [KvCacheMemory::Fixed(1 << 20), auto(1 << 30)] {
        for name in ["llama", "qwen2", "mistral", "gemma3"] {
            for dtype in [WeightDtype::F32, WeightDtype::F16] {
                let loader = DirectoryLoader::new(LoadSettings {
                    kv_cache_memory: memory,
                    ..loader(dtype).settings().clone()
                });
                let estimate = loader.estimate_bytes(&fixture(name)).unwrap();
                let loaded = loader.load(&fixture(name)).unwrap();
                loaded.engine.shutdown();
                assert_eq!(estimate, loaded.memory_bytes, "{name} {dtype:?} {memory:?}");
                assert_eq!(loader.context_length(&fixture(name)).unwrap(), 128);
                assert_eq!(loaded.max_model_len, 128);
            }
        }
    }
}

#[test]
fn an_auto_pool_takes_at_least_the_floor_where_the_budget_allows() {
    let mut settings = loader(WeightDtype::F32).settings().clone();
    (settings.max_model_len, settings.kv_dtype) = (None, Some(KvDtype::F32));
    settings.kv_cache_memory = auto(1 << 30);
    let loader = DirectoryLoader::new(settings);
    let files = ModelFiles::open(&fixture("llama")).unwrap();
    let per_block = KvCache::bytes_per_block(files.config(), KvDtype::F32, 16);
    let loaded = loader.load(&fixture("llama")).unwrap();
    loaded.engine.shutdown();
    // The fixture's own 256 tokens four times over is 64 blocks of 16, less than the floor
    // (the old fixed 1 GiB, here all the room the budget leaves after the weights): the pool
    // takes the room.
    assert_eq!(loaded.max_model_len, 256);
    let weights = files.loaded_bytes(Some(WeightDtype::F32));
    let room_blocks = ((1 << 30) - weights) / per_block;
    assert!(loaded.memory_bytes <= 1 << 30);
    assert!(loaded.memory_bytes >= weights + (room_blocks - 1) * per_block);
    assert!(room_blocks > 64);
}

#[test]
fn an_auto_pool_on_a_budget_just_above_the_weights_lowers_the_context() {
    let mut settings = loader(WeightDtype::F32).settings().clone();
    (settings.max_model_len, settings.kv_dtype) = (None, Some(KvDtype::F32));
    let files = ModelFiles::open(&fixture("llama")).unwrap();
    let per_block = KvCache::bytes_per_block(files.config(), KvDtype::F32, 16);
    let weights = files.loaded_bytes(Some(WeightDtype::F32));
    settings.kv_cache_memory = auto(weights + 3 * per_block);
    let loader = DirectoryLoader::new(settings);
    assert_eq!(loader.context_length(&fixture("llama")).unwrap(), 48);
    let estimate = loader.estimate_bytes(&fixture("llama")).unwrap();
    let loaded = loader.load(&fixture("llama")).unwrap();
    loaded.engine.shutdown();
    assert_eq!(loaded.max_model_len, 48);
    assert_eq!(loaded.memory_bytes, estimate);
    assert_eq!(estimate, weights + 3 * per_block);
}

#[test]
fn auto_dtypes_follow_the_checkpoint_and_the_weights() {
    let auto = DirectoryLoader::new(LoadSettings {
        dtype: None,
        vision_dtype: None,
        ..loader(WeightDtype::F32).settings().clone()
    });
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gguf/llama-f16.gguf");
    // f32, f16 and bf16 checkpoints, and an f16 GGUF file.
    for (path, kv) in [
        (fixture("llama"), KvDtype::F32),
        (fixture("llama-odd-head-dim"), KvDtype::F16),
        (fixture("qwen3"), KvDtype::F32),
        (gguf, KvDtype::F16),
    ] {
        let files = ModelFiles::open(&path).unwrap();
        assert_eq!(auto.kv_dtype(&files), kv, "{}", path.display());
    }
    let files = ModelFiles::open(&fixture("llama")).unwrap();
    let forced = DirectoryLoader::new(LoadSettings {
        kv_dtype: Some(KvDtype::F16),
        ..loader(WeightDtype::F32).settings().clone()
    });
    assert_eq!(forced.kv_dtype(&files), KvDtype::F16);
    assert_eq!(loader(WeightDtype::F16).kv_dtype(&files), KvDtype::F16);
}

#[test]
fn a_truncated_checkpoint_fails_with_the_file_named() {
    let dir = std::env::temp_dir().join(format!("sluice-loader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixture("llama").join(file), dir.join(file)).unwrap();
    }
    let weights = std::fs::read(fixture("llama").join("model.safetensors")).unwrap();
    std::fs::write(dir.join("model.safetensors"), &weights[..weights.len() / 2]).unwrap();
    let err = loader(WeightDtype::F32).load(&dir).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

#[test]
fn the_context_is_clamped_to_what_the_kv_pool_holds() {
    let mut settings = loader(WeightDtype::F32).settings().clone();
    settings.max_model_len = None;
    let config = ModelConfig::from_dir(&fixture("llama")).unwrap();
    let per_block = KvCache::bytes_per_block(&config, KvDtype::F32, settings.block_size);
    settings.kv_dtype = Some(KvDtype::F32);
    settings.kv_cache_memory = KvCacheMemory::Fixed(3 * per_block);
    let loader = DirectoryLoader::new(settings.clone());
    let pool_tokens = 3 * settings.block_size;
    assert!(config.max_position_embeddings > pool_tokens);
    assert_eq!(
        loader.context_length(&fixture("llama")).unwrap(),
        pool_tokens
    );
    let loaded = loader.load(&fixture("llama")).unwrap();
    assert_eq!(loaded.max_model_len, pool_tokens);
    loaded.engine.shutdown();
}

#[test]
fn a_kv_budget_below_two_blocks_is_refused() {
    let mut settings = loader(WeightDtype::F32).settings().clone();
    settings.kv_cache_memory = KvCacheMemory::Fixed(1);
    let err = DirectoryLoader::new(settings)
        .load(&fixture("llama"))
        .unwrap_err();
    assert!(
        matches!(err, ModelLoadError::KvCacheTooSmall { .. }),
        "{err}"
    );
}

#[test]
fn a_model_that_takes_images_loads_its_encoder_and_counts_it() {
    for dtype in [WeightDtype::F32, WeightDtype::F16] {
        let loader = loader(dtype);
        let estimate = loader.estimate_bytes(&fixture("gemma3-vision")).unwrap();
        let loaded = loader.load(&fixture("gemma3-vision")).unwrap();
        loaded.engine.shutdown();
        let images = loaded.images.as_ref().expect("an image encoder");
        assert_eq!(images.tokens_per_image(), Some(16));
        // The estimate counts the vision tower's tensors by shape as it counts a text
        // model's; the tower's own layout differs a little in f16 (1 KiB of 1.3 MB here).
        let off = estimate.abs_diff(loaded.memory_bytes);
        assert!(
            off * 1000 < estimate,
            "{dtype:?}: {estimate} vs {}",
            loaded.memory_bytes
        );
        if dtype == WeightDtype::F32 {
            assert_eq!(estimate, loaded.memory_bytes);
        }
    }
    let text_only = loader(WeightDtype::F32).load(&fixture("llama")).unwrap();
    text_only.engine.shutdown();
    assert!(text_only.images.is_none());
}
