//! The real `sluice` binary, started by the end-to-end tests that need a process of its own
//! (file descriptors, signals, several models): `sluice serve --port 0 ARGS...` from the source
//! tree, returned once it listens.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts `sluice serve --port 0 ARGS...`; returns the child and its base URL
/// (`http://127.0.0.1:PORT`) once it logs that it listens. Its stderr keeps being drained so
/// the child never blocks on a full pipe.
pub fn spawn_serve(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--port", "0"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        if let Some((_, url)) = line.split_once("listening on ") {
            break url.trim().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, base)
}
