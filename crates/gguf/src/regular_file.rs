//! Opening model files: only regular files. A FIFO named like a model file (or like one part of
//! a split set) would block `open` until some writer appears, and a device such as `/dev/zero`
//! never ends; either would hang the loader, so both are refused before anything is read.

use std::fs::File;
use std::io;
use std::path::Path;

/// Opens `path` for reading when it is a regular file (a symbolic link to one is fine), else
/// fails with [`io::ErrorKind::InvalidInput`] naming what it is.
///
/// On Unix the file is opened non-blocking, so opening a FIFO returns at once instead of
/// waiting for a writer; the type is then read from the open descriptor, so a file swapped for
/// another between a check and the open cannot slip through.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file (it is {})", describe(kind)),
    ))
}

/// Reads the whole of `path` when it is a regular file (see [`open_regular_file`]).
pub fn read_regular_file(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = open_regular_file(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a plain file"
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = std::env::temp_dir().join(format!("sluice-gguf-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("part-00002-of-00002.gguf");
        let _ = std::fs::remove_file(&fifo);
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = open_regular_file(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err = read_regular_file(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("a device"), "{err}");
        let err = open_regular_file(&dir).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
