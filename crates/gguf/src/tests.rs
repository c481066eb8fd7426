//! Reader tests over GGUF bytes written by a small test-only writer.

use super::*;

/// Writes a GGUF v3 file: `pairs` (key, type tag, encoded value) and f32 tensors.
fn gguf_bytes(
    pairs: &[(&str, u32, Vec<u8>)],
    tensors: &[(&str, Vec<u64>, u32, Vec<u8>)],
) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((pairs.len() as u64).to_le_bytes());
    for (key, tag, value) in pairs {
        out.extend(string(key));
        out.extend(tag.to_le_bytes());
        out.extend(value);
    }
    let mut offset = 0u64;
    for (name, dims, tag, data) in tensors {
        out.extend(string(name));
        out.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(tag.to_le_bytes());
        out.extend(offset.to_le_bytes());
        offset += (data.len() as u64).next_multiple_of(32);
    }
    out.resize(out.len().next_multiple_of(32), 0);
    for (_, _, _, data) in tensors {
        out.extend(data);
        out.resize(out.len().next_multiple_of(32), 0);
    }
    out
}

fn string(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend(s.as_bytes());
    v
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-gguf-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sample() -> Vec<u8> {
    let mut tokens = 8u32.to_le_bytes().to_vec();
    tokens.extend(2u64.to_le_bytes());
    tokens.extend(string("<s>"));
    tokens.extend(string("héllo"));
    gguf_bytes(
        &[
            ("general.architecture", 8, string("llama")),
            ("llama.block_count", 4, 2u32.to_le_bytes().to_vec()),
            ("llama.rope.freq_base", 6, 10000f32.to_le_bytes().to_vec()),
            ("tokenizer.ggml.add_bos_token", 7, vec![1]),
            ("tokenizer.ggml.tokens", 9, tokens),
        ],
        &[
            (
                "a.weight",
                vec![3, 2],
                0,
                f32_bytes(&[1., 2., 3., 4., 5., 6.]),
            ),
            ("b.weight", vec![4], 0, f32_bytes(&[7., 8., 9., 10.])),
        ],
    )
}

#[test]
fn metadata_and_tensors_read_back_as_written() {
    let dir = temp_dir("sample");
    let model = GgufModel::open(&write(&dir, "m.gguf", &sample())).unwrap();
    let meta = model.metadata();
    assert_eq!(meta.require_str("general.architecture").unwrap(), "llama");
    assert_eq!(meta.require_u64("llama.block_count").unwrap(), 2);
    assert_eq!(meta.f64("llama.rope.freq_base").unwrap(), Some(10000.0));
    assert_eq!(
        meta.bool("tokenizer.ggml.add_bos_token").unwrap(),
        Some(true)
    );
    assert_eq!(
        meta.str_array("tokenizer.ggml.tokens").unwrap().unwrap(),
        vec!["<s>", "héllo"]
    );
    assert!(matches!(
        meta.require_u64("general.architecture"),
        Err(MetadataError::WrongType { .. })
    ));
    let (info, bytes) = model.tensor("a.weight").unwrap();
    assert_eq!(info.shape(), vec![2, 3]);
    assert_eq!(info.ggml_type, GgmlType::F32);
    assert_eq!(bytes, f32_bytes(&[1., 2., 3., 4., 5., 6.]));
    assert_eq!(
        model.tensor("b.weight").unwrap().1,
        f32_bytes(&[7., 8., 9., 10.])
    );
    assert!(model.tensor("c.weight").is_none());
}

#[test]
fn every_prefix_of_a_file_is_an_error_not_a_panic() {
    let dir = temp_dir("prefix");
    let bytes = sample();
    let whole = GgufModel::open(&write(&dir, "whole.gguf", &bytes)).unwrap();
    // Past the last tensor's data there is only alignment padding.
    let data_end = whole.tensors().map(|t| t.end).max().unwrap();
    for len in 0..data_end {
        let path = write(&dir, "cut.gguf", &bytes[..len]);
        let err = GgufModel::open(&path).expect_err("a cut file must not parse");
        assert!(matches!(err, GgufError::Invalid { .. }), "{len}: {err}");
    }
}

#[test]
fn wrong_magic_version_and_counts_are_named() {
    let dir = temp_dir("bad");
    let mut bytes = sample();
    bytes[0] = b'X';
    let err = GgufModel::open(&write(&dir, "magic.gguf", &bytes)).unwrap_err();
    assert!(err.to_string().contains("not a GGUF file"), "{err}");

    let mut bytes = sample();
    bytes[4] = 9;
    let err = GgufModel::open(&write(&dir, "version.gguf", &bytes)).unwrap_err();
    assert!(err.to_string().contains("version 9"), "{err}");

    let mut bytes = sample();
    bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = GgufModel::open(&write(&dir, "count.gguf", &bytes)).unwrap_err();
    assert!(err.to_string().contains("metadata count"), "{err}");
}

#[test]
fn unknown_tensor_types_are_kept_by_tag() {
    let dir = temp_dir("unknown");
    let bytes = gguf_bytes(&[], &[("x", vec![32], 39, vec![0; 32])]);
    let model = GgufModel::open(&write(&dir, "u.gguf", &bytes)).unwrap();
    let (info, _) = model.tensor("x").unwrap();
    assert_eq!(info.ggml_type, GgmlType::Other(39));
    assert_eq!(info.ggml_type.name(), "type 39");
}

#[test]
fn quantized_rows_must_be_whole_blocks() {
    let dir = temp_dir("blocks");
    let bytes = gguf_bytes(&[], &[("x", vec![40, 2], 8, vec![0; 80])]);
    let err = GgufModel::open(&write(&dir, "b.gguf", &bytes)).unwrap_err();
    assert!(err.to_string().contains("whole blocks of 32"), "{err}");
}

#[test]
fn split_sets_open_as_one_model() {
    let dir = temp_dir("split");
    let part = |tensor: &str, no: u16| {
        gguf_bytes(
            &[
                ("split.no", 2, no.to_le_bytes().to_vec()),
                ("split.count", 2, 2u16.to_le_bytes().to_vec()),
                ("split.tensors.count", 5, 2i32.to_le_bytes().to_vec()),
            ],
            &[(tensor, vec![1], 0, f32_bytes(&[no as f32]))],
        )
    };
    write(&dir, "m-00001-of-00002.gguf", &part("a", 0));
    let second = write(&dir, "m-00002-of-00002.gguf", &part("b", 1));
    let model = GgufModel::open(&second).unwrap();
    assert_eq!(model.files().len(), 2);
    assert_eq!(model.tensor("b").unwrap().1, f32_bytes(&[1.0]));
    assert_eq!(model_name(&second), "m");
    assert_eq!(model_name(Path::new("/x/qwen-q4_k_m.gguf")), "qwen-q4_k_m");
    assert!(split_parts(Path::new("m-1-of-2.gguf")).is_none());
}

#[test]
fn a_tensor_claiming_more_elements_than_the_file_holds_is_refused() {
    let dir = temp_dir("elements");
    // An unknown type has no size of its own, so only the element bound stands in its way.
    for (dims, tag) in [(vec![1 << 32, 1 << 32], 39), (vec![1 << 40], 0)] {
        let bytes = gguf_bytes(&[], &[("x", dims, tag, vec![0; 32])]);
        let path = write(&dir, "e.gguf", &bytes);
        let err = GgufModel::open_header(&path).unwrap_err();
        assert!(err.to_string().contains("more elements than"), "{err}");
    }
}

#[test]
fn metadata_arrays_are_bounded_in_items_not_only_in_bytes() {
    let dir = temp_dir("items");
    let array = |count: u64| {
        let mut v = 0u32.to_le_bytes().to_vec(); // u8 items: one byte each in the file
        v.extend(count.to_le_bytes());
        v.resize(v.len() + count as usize, 7);
        v
    };
    let half = MAX_METADATA_ITEMS / 2;
    let within = gguf_bytes(&[("a", 9, array(half)), ("b", 9, array(half))], &[]);
    let model = GgufModel::open(&write(&dir, "within.gguf", &within)).unwrap();
    assert_eq!(
        model.metadata().array("b").unwrap().unwrap().len() as u64,
        half
    );
    let over = gguf_bytes(&[("a", 9, array(half)), ("b", 9, array(half + 1))], &[]);
    let err = GgufModel::open(&write(&dir, "over.gguf", &over)).unwrap_err();
    assert!(err.to_string().contains("items in all"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_fifo_named_as_a_split_part_is_an_error_not_a_hang() {
    let dir = temp_dir("fifo-part");
    let part = gguf_bytes(
        &[("split.count", 2, 2u16.to_le_bytes().to_vec())],
        &[("a", vec![1], 0, f32_bytes(&[1.0]))],
    );
    let first = write(&dir, "m-00001-of-00002.gguf", &part);
    let fifo = dir.join("m-00002-of-00002.gguf");
    let _ = std::fs::remove_file(&fifo);
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let err = GgufModel::open(&first).unwrap_err();
    assert!(
        matches!(&err, GgufError::Io { path, .. } if path == &fifo),
        "{err}"
    );
    assert!(err.to_string().contains("not a regular file"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
