//! The bearer token: the rules every token meets, and the file it is kept in.
//!
//! Invariants:
//! - a token the server accepts, from any source, is at least [`MIN_TOKEN_LEN`] characters of
//!   RFC 6750's `b64token` set (letters, digits, `-._~+/`, then `=` padding only at the end), so
//!   it travels unquoted in an Authorization header and in a cookie; an empty token is never
//!   accepted, so a truncated file cannot switch authentication off;
//! - a token file is refused when it is empty, too short, holds other characters, is readable or
//!   writable by group or others, or is owned by another user; each refusal names the file and
//!   says how to fix it;
//! - the default file, `DIR/serve.token`, is made atomically: written (0600) to a temporary file
//!   in the same directory, synced, renamed into place and the directory synced, so a crash or a
//!   full disk leaves no token file or a whole one, never an empty one.

use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The fewest characters a token has.
pub const MIN_TOKEN_LEN: usize = 16;

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Checks `token` (read from `source`) against the rules above.
pub fn check_token(token: &str, source: &Path) -> io::Result<()> {
    let at = source.display();
    if token.is_empty() {
        return Err(invalid(format!(
            "the token in {at} is empty: write one of at least {MIN_TOKEN_LEN} characters there \
             (or, for DIR/serve.token, delete the file and a new token is made at the next start)"
        )));
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(invalid(format!(
            "the token in {at} is {} characters, fewer than {MIN_TOKEN_LEN}: write a longer one",
            token.len()
        )));
    }
    let body = token.trim_end_matches('=');
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/".contains(c);
    if body.is_empty() || !body.chars().all(allowed) {
        return Err(invalid(format!(
            "the token in {at} has characters other than letters, digits and -._~+/ \
             (then = at the end): write one without them"
        )));
    }
    Ok(())
}

/// The token in `path`, once the file's owner and mode and the token itself pass.
pub fn read_token_file(path: &Path) -> io::Result<String> {
    let at = path.display();
    let meta = std::fs::metadata(path)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(invalid(format!(
            "{at} is owned by user {}, not by this user ({me}): a token another account can \
             rewrite guards nothing; make your own with `install -m 600 /dev/null {at}`",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(invalid(format!(
            "{at} can be read or written by other users (mode {:o}): run `chmod 600 {at}`",
            mode & 0o777
        )));
    }
    let token = std::fs::read_to_string(path)?.trim().to_string();
    check_token(&token, path)?;
    Ok(token)
}

/// Makes a new random token in `path` atomically (see the module comment); fails if `path`
/// exists by then.
pub fn create_token_file(path: &Path) -> io::Result<String> {
    let token: String = (0..32)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("token");
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        // A file left by an older umask or a crash keeps its mode: set it again.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(token.as_bytes())?;
        f.sync_all()?;
        // Not over a token another start made meanwhile: that one is kept.
        std::fs::hard_link(&temporary, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    let _ = std::fs::remove_file(&temporary);
    written?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tokens_are_long_enough_and_of_header_safe_characters() {
        let src = Path::new("t");
        assert!(check_token("abcdefghijklmnop", src).is_ok());
        assert!(check_token("AZaz09-._~+/abcd==", src).is_ok());
        for (bad, says) in [
            ("", "empty"),
            ("short", "fewer than 16"),
            ("abcdefghijklmno p", "other than"),
            ("abcdefghijklmnop;x", "other than"),
            ("abcdefgh=ijklmnop", "other than"),
            ("================", "other than"),
            ("abcdefghijklmnopé", "other than"),
        ] {
            let e = check_token(bad, src).unwrap_err();
            assert!(e.to_string().contains(says), "{bad:?}: {e}");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn a_made_token_file_is_whole_private_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.token");
        let token = create_token_file(&path).unwrap();
        assert_eq!(read_token_file(&path).unwrap(), token);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            create_token_file(&path).is_err(),
            "an existing token was replaced"
        );
        assert_eq!(read_token_file(&path).unwrap(), token);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "a temporary file was left behind");
    }

    #[test]
    fn token_files_that_are_empty_short_or_shared_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.token");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("", 0o600);
        assert!(
            read_token_file(&path)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        write("\n", 0o600);
        assert!(
            read_token_file(&path)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        write("0123456789", 0o600);
        assert!(read_token_file(&path).is_err());
        write("0123456789abcdef\n", 0o644);
        let e = read_token_file(&path).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
        write("0123456789abcdef\n", 0o620);
        assert!(read_token_file(&path).is_err());
        write("0123456789abcdef\n", 0o600);
        assert_eq!(read_token_file(&path).unwrap(), "0123456789abcdef");
        // SAFETY: as in read_token_file.
        if unsafe { libc::geteuid() } == 0 {
            // Root can hand the file to another account (nobody), which could then rewrite it.
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let e = read_token_file(&path).unwrap_err();
            assert!(e.to_string().contains("owned by user 65534"), "{e}");
        }
    }
}
