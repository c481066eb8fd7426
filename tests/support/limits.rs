//! Running a child process under limits, as the hostile-input tests do: an address-space cap
//! (setrlimit `RLIMIT_AS`, what `ulimit -v` sets) and a wall-clock limit.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Caps the address space of the process `command` starts at `bytes`.
pub fn limit_address_space(command: &mut Command, bytes: u64) {
    // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            match libc::setrlimit(libc::RLIMIT_AS, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
}

/// Waits for `child` at most `limit`: its exit status, or `None` after killing it there.
pub fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
