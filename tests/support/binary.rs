//! The real `sluice` binary, started by the end-to-end tests that need a process of its own
//! (file descriptors, signals, several models): `sluice serve --port 0 ARGS...` from the source
//! tree, returned once it listens and (for [`spawn_serve`]) has loaded its `--preload` models.

#![allow(dead_code)] // each test file uses its own part of this

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What the server logs once every `--preload` model is loaded.
pub const STARTED: &str = "started: every --preload model is loaded";

/// The server's stderr, line by line, as it comes.
pub struct Logs(Receiver<String>);

impl Logs {
    /// Waits (at most `timeout`) for a line containing `needle` and returns it; panics when the
    /// process exits or the time runs out first.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no log line with `{needle}` in time"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server exited before logging `{needle}`")
                }
            }
        }
    }

    /// Every line logged from now until the process closes its stderr.
    pub fn rest(self) -> Vec<String> {
        self.0.into_iter().collect()
    }
}

/// Starts `sluice serve --port 0 ARGS...`; returns the child, its base URL
/// (`http://127.0.0.1:PORT`) and its further log lines once it logs that it listens (its
/// preload may still run). Its stderr keeps being drained so the child never blocks on a full
/// pipe.
pub fn spawn_serve_listening(args: &[&str]) -> (Child, String, Logs) {
    spawn_listening(serve_command(args))
}

/// `sluice serve --port 0 ARGS...` from the source tree, not started: for a test that sets
/// more on it (limits) before [`spawn_listening`].
pub fn serve_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["serve", "--port", "0"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// Starts `command` (a `serve`); returns as [`spawn_serve_listening`] does.
pub fn spawn_listening(mut command: Command) -> (Child, String, Logs) {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            // Nobody listening any more is fine: the pipe must still be drained.
            let _ = tx.send(line);
        }
    });
    let logs = Logs(rx);
    let line = logs.wait_for("listening on ", Duration::from_secs(300));
    let (_, url) = line.split_once("listening on ").unwrap();
    (child, url.trim().to_string(), logs)
}

/// Starts `sluice serve --port 0 ARGS...`; returns the child and its base URL once it has
/// loaded its `--preload` models.
pub fn spawn_serve(args: &[&str]) -> (Child, String) {
    let (child, base, logs) = spawn_serve_listening(args);
    logs.wait_for(STARTED, Duration::from_secs(300));
    (child, base)
}
