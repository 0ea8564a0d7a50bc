//! Who may read a store's files (doc/architecture.md, "Private files"): its owner alone, or its
//! owner's group too once the store is shared. The store's directory holds the choice, so that
//! it survives restarts and every file made later follows it:
//! - a directory that grants its group search and other accounts nothing (0750,
//!   `Options::share_with_group` or `chmod 750`) gets files 0640: the group reads, only the
//!   owner writes;
//! - any other directory gets files 0600: 0700 (how `Db::open` makes it), and also a 0755
//!   directory made by `mkdir`, which says nothing deliberate about the group;
//! - nothing the engine makes is ever open to other accounts, whatever the umask.
//!
//! On targets without Unix modes (WASI) the host decides who reads; every function here is then
//! a no-op.

// Without Unix modes only the no-op forms are called.
#![cfg_attr(not(unix), allow(dead_code))]

use std::path::Path;

use crate::error::Result;

/// Mode of a new file in a private store.
pub(crate) const PRIVATE_FILE: u32 = 0o600;
/// Mode of a new file in a store shared with its group.
pub(crate) const SHARED_FILE: u32 = 0o640;
/// Mode `Db::open` gives a directory it makes.
pub(crate) const PRIVATE_DIR: u32 = 0o700;
/// Mode of a shared store's directory.
pub(crate) const SHARED_DIR: u32 = 0o750;

/// Group bits a shared directory has (search and read).
const GROUP_SEARCH: u32 = 0o050;
/// Every bit that lets another account (not the owner, not the group) in.
const OTHERS: u32 = 0o007;

/// Whether a directory of mode `dir` shares its store with its group.
fn is_shared(dir: u32) -> bool {
    dir & GROUP_SEARCH == GROUP_SEARCH && dir & OTHERS == 0
}

/// The mode of a new file at `path`: shared when its directory is.
pub(crate) fn new_file_mode(path: &Path) -> u32 {
    match path.parent().and_then(mode_of) {
        Some(dir) if is_shared(dir) => SHARED_FILE,
        _ => PRIVATE_FILE,
    }
}

/// Gives the file just opened at `path` the mode its directory asks for, past the umask (which
/// `open` applies: a 077 umask would make a shared store's files 0600).
#[cfg(unix)]
pub(crate) fn settle_new_file(file: &std::fs::File, path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if mode == PRIVATE_FILE {
        return Ok(());
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| super::io_err("change the mode of", path, e))
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_of(_path: &Path) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| super::io_err("change the mode of", path, e))
}

/// Shares the store in `dir` with its owner's group: the directory becomes 0750 (keeping a
/// setgid bit, which gives new files the directory's group) and each of the store's `files`
/// (names in `dir`) that is its owner's alone (0600) becomes 0640. Nothing else in the
/// directory is touched: a token file or a user's own file stays as it is. Symbolic links are
/// never followed.
#[cfg(unix)]
pub(crate) fn share_with_group(dir: &Path, files: &[String]) -> Result<()> {
    let setgid = mode_of(dir).unwrap_or(0) & 0o2000;
    set_mode(dir, SHARED_DIR | setgid)?;
    for name in files {
        let path = dir.join(name);
        let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if is_file && mode_of(&path) == Some(PRIVATE_FILE) {
            set_mode(&path, SHARED_FILE)?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn share_with_group(_dir: &Path, _files: &[String]) -> Result<()> {
    Ok(())
}

/// What in the store's directory `dir` is open to more accounts than the store means to be:
/// the directory, or a file, that other accounts may enter, read or write, and a file the
/// group may read or write while the directory is not shared. One line each, naming the path,
/// its mode and the fix.
pub(crate) fn loose_modes(dir: &Path) -> Vec<String> {
    let Some(dir_mode) = mode_of(dir) else {
        return Vec::new();
    };
    let shared = is_shared(dir_mode);
    let mut warnings = Vec::new();
    if dir_mode & OTHERS != 0 {
        warnings.push(format!(
            "{} is mode {dir_mode:04o}: other accounts may enter the store \
             (chmod o-rwx {0})",
            dir.display()
        ));
    } else if dir_mode & 0o020 != 0 {
        warnings.push(format!(
            "{} is mode {dir_mode:04o}: its group may add and remove the store's files \
             (chmod g-w {0})",
            dir.display()
        ));
    }
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    names.sort();
    for path in names {
        let Some(mode) = mode_of(&path) else { continue };
        if mode & OTHERS != 0 {
            warnings.push(format!(
                "{} is mode {mode:04o}: other accounts may read it (chmod o-rwx {0})",
                path.display()
            ));
        } else if !shared && mode & 0o070 != 0 {
            warnings.push(format!(
                "{} is mode {mode:04o} but the store is not shared with its group \
                 (chmod g-rwx {0}, or share the store: chmod 750 {1})",
                path.display(),
                dir.display()
            ));
        } else if mode & 0o020 != 0 {
            warnings.push(format!(
                "{} is mode {mode:04o}: its group may write it (chmod g-w {0})",
                path.display()
            ));
        }
    }
    warnings
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn set(path: &Path, mode: u32) {
        set_mode(path, mode).unwrap();
    }

    #[test]
    fn a_shared_directory_makes_group_readable_files_and_loose_modes_are_named() {
        let dir = crate::test_dir::tempdir();
        let store = dir.path();
        set(store, PRIVATE_DIR);
        let file = store.join("000001.sst");
        std::fs::write(&file, b"x").unwrap();
        set(&file, PRIVATE_FILE);
        assert_eq!(new_file_mode(&file), PRIVATE_FILE);
        assert!(loose_modes(store).is_empty(), "{:?}", loose_modes(store));

        // Group bits on a file of a private store are looser than meant.
        set(&file, 0o640);
        let w = loose_modes(store);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("not shared") && w[0].contains("000001.sst"),
            "{w:?}"
        );

        // Shared: the same file is as meant, new files are 0640, and 0600 files are opened up;
        // a file that is not the store's is left alone.
        set(&file, PRIVATE_FILE);
        let token = store.join("serve.token");
        std::fs::write(&token, b"secret").unwrap();
        set(&token, PRIVATE_FILE);
        share_with_group(store, &["000001.sst".to_string()]).unwrap();
        assert_eq!(mode_of(&token), Some(PRIVATE_FILE));
        assert_eq!(mode_of(store), Some(SHARED_DIR));
        assert_eq!(mode_of(&file), Some(SHARED_FILE));
        assert_eq!(new_file_mode(&file), SHARED_FILE);
        assert!(loose_modes(store).is_empty(), "{:?}", loose_modes(store));

        // Group write in a shared store is named.
        set(&file, 0o660);
        let w = loose_modes(store);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("may write"), "{w:?}");

        // Anything open to other accounts is named, the directory too; a 0755 directory (as
        // `mkdir` makes one) shares nothing by accident.
        set(&file, 0o644);
        set(store, 0o755);
        assert_eq!(new_file_mode(&file), PRIVATE_FILE);
        let w = loose_modes(store);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().all(|l| l.contains("other accounts")), "{w:?}");
        set(store, PRIVATE_DIR);
    }
}
