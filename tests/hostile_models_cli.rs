//! The real binary on the hostile GGUF files of issue 30, under an address-space limit
//! (setrlimit `RLIMIT_AS` in the child, as `ulimit -v` does) and a time limit: `block_count`
//! 2^32 and 2^63, a mixture of experts with 10^6 blocks, a FIFO named as a split part, a
//! prefix-chain vocabulary and a 1,000,000-character token. `sluice generate` on each ends with
//! an error exit, never a signal or a hang, and `sluice serve --models-dir` on a folder of them
//! starts and answers for the healthy model beside them. The files are written at test time.

#[path = "support/binary.rs"]
mod binary;
#[path = "support/gguf_writer.rs"]
mod gguf_writer;
#[path = "support/limits.rs"]
mod limits;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gguf_writer::GgufWriter;
use serde_json::{json, Value};
use sluice_gguf::Value as Meta;

/// Address space each process may use: far below the terabytes the hostile sizes ask for.
const ADDRESS_SPACE: u64 = 4 << 30;
/// Time `generate` may take on one hostile file.
const GENERATE_LIMIT: Duration = Duration::from_secs(60);

const HEALTHY: &str = "fixtures/gguf/qwen3-f16.gguf";

/// The hostile files (name, and whether `generate` may succeed on it), written into `dir`.
fn hostile_files(dir: &Path) -> Vec<(PathBuf, bool)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let qwen3 = GgufWriter::read(&root.join(HEALTHY));
    let olmoe = GgufWriter::read(&root.join("fixtures/gguf/olmoe-f16.gguf"));
    let mut files = Vec::new();
    let mut write = |name: &str, writer: &GgufWriter, may_load: bool| {
        let path = dir.join(name);
        writer.write(&path);
        files.push((path, may_load));
    };
    for (name, count) in [
        ("blocks-2p32.gguf", 1u64 << 32),
        ("blocks-2p63.gguf", 1 << 63),
    ] {
        let mut w = qwen3.clone();
        w.set("qwen3.block_count", Meta::U64(count));
        write(name, &w, false);
    }
    let mut w = olmoe.clone();
    w.set("olmoe.block_count", Meta::U32(1_000_000));
    write("moe-1e6-blocks.gguf", &w, false);
    let mut w = qwen3.clone();
    vocabulary(&mut w, (1..=2600).map(|n| "a".repeat(n)).collect());
    write("prefix-chain.gguf", &w, false);
    let mut w = qwen3.clone();
    let mut pieces: Vec<String> = ["a", "b", "ab"].map(String::from).to_vec();
    pieces.push("ab".repeat(500_000));
    vocabulary(&mut w, pieces);
    // The vocabulary no longer matches the embedding's rows, which may refuse the model;
    // what matters is that building it is quick and small.
    write("long-token.gguf", &w, true);
    let mut w = qwen3.clone();
    w.set("split.count", Meta::U16(2));
    write("split-00001-of-00002.gguf", &w, false);
    let fifo = dir.join("split-00002-of-00002.gguf");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    files
}

/// A SentencePiece vocabulary of `<unk>`, `<s>`, `</s>` and `pieces`.
fn vocabulary(w: &mut GgufWriter, pieces: Vec<String>) {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    tokens.extend(pieces);
    let n = tokens.len();
    w.set("tokenizer.ggml.model", Meta::String("llama".into()));
    let texts = tokens.into_iter().map(Meta::String).collect();
    w.set("tokenizer.ggml.tokens", Meta::Array(texts));
    let scores = (0..n).map(|i| Meta::F32(-(i as f32))).collect();
    w.set("tokenizer.ggml.scores", Meta::Array(scores));
    w.set(
        "tokenizer.ggml.token_type",
        Meta::Array(vec![Meta::I32(1); n]),
    );
}

/// Limits `command`'s address space to [`ADDRESS_SPACE`].
fn limited(mut command: Command) -> Command {
    limits::limit_address_space(&mut command, ADDRESS_SPACE);
    command
}

/// A fresh folder of this process's for the test `name` (the tests run in parallel).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `sluice generate` on `model` under the limits: its exit status and stderr, or `None`
/// when it ran past [`GENERATE_LIMIT`] (and was killed).
fn generate(model: &Path) -> (Option<ExitStatus>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["generate", "--prompt", "hi", "--max-tokens", "2"])
        .args(["--kv-cache-memory", "0.01", "--model"])
        .arg(model)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = limited(command).spawn().unwrap();
    let status = limits::wait_at_most(&mut child, GENERATE_LIMIT);
    let output = child.wait_with_output().unwrap();
    (status, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn generate_on_each_hostile_file_exits_with_an_error_not_a_signal_or_a_hang() {
    let dir = scratch("generate");
    for (path, may_load) in hostile_files(&dir) {
        let started = Instant::now();
        let (status, stderr) = generate(&path);
        let name = path.file_name().unwrap().to_string_lossy();
        let tail: String = stderr.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        println!("{name}: {status:?} in {:?}: {tail}", started.elapsed());
        let status = status.unwrap_or_else(|| panic!("{name}: ran past {GENERATE_LIMIT:?}"));
        assert_eq!(
            status.signal(),
            None,
            "{name}: killed by a signal: {stderr}"
        );
        assert!(
            may_load || status.code() == Some(1),
            "{name}: {status}: {stderr}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_and_serves_the_healthy_model_beside_hostile_ones() {
    let dir = scratch("serve").join("models");
    std::fs::create_dir_all(&dir).unwrap();
    let hostile = hostile_files(&dir);
    let healthy = dir.join("healthy.gguf");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(HEALTHY),
        &healthy,
    )
    .unwrap();
    let command = binary::serve_command(&[
        "--models-dir",
        dir.to_str().unwrap(),
        "--kv-cache-memory",
        "0.01",
    ]);
    let (mut child, base, _logs) = binary::spawn_listening(limited(command));
    let client = reqwest::Client::new();
    let post = |model: String| {
        let request = client
            .post(format!("{base}/v1/completions"))
            .json(&json!({"model": model, "prompt": "The quick brown fox", "max_tokens": 4}))
            .timeout(Duration::from_secs(120))
            .send();
        async move {
            let res = request.await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    for (path, _) in &hostile {
        let model = sluice_model::ModelFiles::default_name(path);
        if model == "split" || model.starts_with("split-") {
            continue; // the set is one model, asked for below
        }
        let (status, body) = post(model.clone()).await;
        println!("{model}: {status} {body}");
        assert!(
            status >= 400 || path.ends_with("long-token.gguf"),
            "{model}: {status}"
        );
    }
    let (status, body) = post("split".into()).await;
    assert!(status >= 400, "split: {status} {body}");
    let (status, body) = post("healthy".into()).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["choices"][0]["text"].is_string(), "{body}");
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "the server is still running"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}
