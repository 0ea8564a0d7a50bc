//! Keys are paths: the pure mapping between a directory tree and the sorted keyspace.
//!
//! - A file's key is its path from the mount's root, components joined by `/`, with no leading
//!   or trailing `/` (`users/alice.json`).
//! - A directory's children are found under the prefix `dir/` (the root's prefix is empty).
//! - In key order a file child `n` sits at `n`, a directory child at `n/…`, so children come in
//!   the order of their *position*: `n` for a file, `n/` for a directory. Stepping from one
//!   child to the next is one seek ([`seek_past`]), however large a child's subtree.
//! - A name the kernel could never show (empty, `.`, `..`, holding NUL, over 255 bytes) is hidden
//!   ([`name_is_visible`]); a key that names both a file and a directory (`a` and `a/b`) shows
//!   the file, and the keys below it are hidden.

/// Longest file name the mount shows or accepts (Linux's `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Why a name given by the kernel cannot become a key component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// Longer than [`NAME_MAX`] bytes (`ENAMETOOLONG`).
    TooLong,
    /// Empty, `.`, `..`, or holding `/` or NUL (`EINVAL`).
    Invalid,
}

/// Whether `name` can be shown as one entry of a directory.
pub fn name_is_visible(name: &[u8]) -> bool {
    check_name(name).is_ok()
}

/// Checks one path component.
pub fn check_name(name: &[u8]) -> Result<(), NameError> {
    if name.len() > NAME_MAX {
        return Err(NameError::TooLong);
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(NameError::Invalid);
    }
    Ok(())
}

/// The key of entry `name` in the directory whose key is `dir` (the root's key is empty).
pub fn child_key(dir: &[u8], name: &[u8]) -> Result<Vec<u8>, NameError> {
    check_name(name)?;
    let mut key = dir_prefix(dir);
    key.extend_from_slice(name);
    Ok(key)
}

/// Where the children of directory `dir` start in the keyspace: `dir/`, or nothing at the root.
pub fn dir_prefix(dir: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1);
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p
}

/// The first key after every key below directory `dir` (`dir0`: `0` follows `/`); `None` for the
/// root, whose subtree is the whole keyspace.
pub fn subtree_end(dir: &[u8]) -> Option<Vec<u8>> {
    if dir.is_empty() {
        return None;
    }
    let mut end = dir.to_vec();
    end.push(b'/' + 1);
    Some(end)
}

/// The last component of a non-root key and the key of its directory.
pub fn split_parent(key: &[u8]) -> (&[u8], &[u8]) {
    match key.iter().rposition(|&b| b == b'/') {
        Some(i) => (&key[..i], &key[i + 1..]),
        None => (&[], key),
    }
}

/// Whether `key` is `dir` itself or lies below it.
pub fn is_within(key: &[u8], dir: &[u8]) -> bool {
    dir.is_empty() || key == dir || (key.starts_with(dir) && key.get(dir.len()) == Some(&b'/'))
}

/// `key` moved from below `from` to below `to` (both directories or both files).
pub fn rebase(key: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = to.to_vec();
    out.extend_from_slice(&key[from.len()..]);
    out
}

/// A child of a directory, by where it sits in key order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Position {
    /// A non-directory named so, at its own key.
    Leaf(Vec<u8>),
    /// A directory named so: the keys below `name/`.
    Dir(Vec<u8>),
}

impl Position {
    pub fn name(&self) -> &[u8] {
        match self {
            Position::Leaf(n) | Position::Dir(n) => n,
        }
    }

    /// The bytes that order positions as their keys are ordered: `n` or `n/`.
    pub fn sort_key(&self) -> Vec<u8> {
        match self {
            Position::Leaf(n) => n.clone(),
            Position::Dir(n) => {
                let mut k = n.clone();
                k.push(b'/');
                k
            }
        }
    }
}

/// The child of the directory with children under `prefix` that key `key` belongs to; `None`
/// when `key` is outside the directory or is the directory's own marker (`prefix` itself).
pub fn position_of(prefix: &[u8], key: &[u8]) -> Option<Position> {
    let rest = key.strip_prefix(prefix)?;
    if rest.is_empty() {
        return None;
    }
    Some(match rest.iter().position(|&b| b == b'/') {
        Some(i) => Position::Dir(rest[..i].to_vec()),
        None => Position::Leaf(rest.to_vec()),
    })
}

/// The first key after child `pos` and everything below it.
pub fn seek_past(prefix: &[u8], pos: &Position) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(pos.name());
    match pos {
        Position::Leaf(_) => k.push(0),
        Position::Dir(_) => k.push(b'/' + 1),
    }
    k
}

/// Orders two positions as their keys are ordered.
pub fn cmp_positions(a: &Position, b: &Position) -> std::cmp::Ordering {
    a.sort_key().cmp(&b.sort_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_kernel_cannot_show_are_refused() {
        assert_eq!(check_name(b"alice.json"), Ok(()));
        for bad in [&b""[..], b".", b"..", b"a/b", b"a\0b"] {
            assert_eq!(check_name(bad), Err(NameError::Invalid), "{bad:?}");
        }
        assert_eq!(check_name(&[b'x'; 255]), Ok(()));
        assert_eq!(check_name(&[b'x'; 256]), Err(NameError::TooLong));
        assert_eq!(check_name("é…".as_bytes()), Ok(()));
    }

    #[test]
    fn child_keys_join_with_slashes_and_the_root_has_no_prefix() {
        assert_eq!(child_key(b"", b"users").unwrap(), b"users");
        assert_eq!(
            child_key(b"users", b"alice.json").unwrap(),
            b"users/alice.json"
        );
        assert_eq!(child_key(b"users", b".."), Err(NameError::Invalid));
        assert_eq!(
            split_parent(b"users/alice.json"),
            (&b"users"[..], &b"alice.json"[..])
        );
        assert_eq!(split_parent(b"top"), (&b""[..], &b"top"[..]));
        assert_eq!(subtree_end(b"users").unwrap(), b"users0");
        assert_eq!(subtree_end(b""), None);
    }

    #[test]
    fn a_key_belongs_to_one_child_position() {
        let p = b"d/";
        assert_eq!(position_of(p, b"d/a"), Some(Position::Leaf(b"a".to_vec())));
        assert_eq!(
            position_of(p, b"d/a/b/c"),
            Some(Position::Dir(b"a".to_vec()))
        );
        // An empty component, and the directory's own marker.
        assert_eq!(position_of(p, b"d//x"), Some(Position::Dir(Vec::new())));
        assert_eq!(position_of(p, b"d/"), None);
        assert_eq!(position_of(p, b"e/a"), None);
        assert_eq!(
            position_of(b"", b"top"),
            Some(Position::Leaf(b"top".to_vec()))
        );
    }

    #[test]
    fn positions_follow_key_order_and_one_seek_passes_a_subtree() {
        // `a.txt` sorts between the file `a` and the directory `a/`: '.' < '/'.
        let keys: [&[u8]; 6] = [b"a", b"a.txt", b"a/x", b"a/y/z", b"a0", b"b"];
        let positions: Vec<Position> = keys.iter().filter_map(|k| position_of(b"", k)).collect();
        for w in positions.windows(2) {
            assert!(cmp_positions(&w[0], &w[1]).is_le(), "{w:?}");
        }
        let dir_a = Position::Dir(b"a".to_vec());
        let after = seek_past(b"", &dir_a);
        let rest: Vec<&[u8]> = keys.iter().copied().filter(|k| *k >= &after[..]).collect();
        assert_eq!(rest, [&b"a0"[..], b"b"]);
        let leaf_a = Position::Leaf(b"a".to_vec());
        assert_eq!(seek_past(b"", &leaf_a), b"a\0");
    }

    #[test]
    fn subtrees_move_by_prefix() {
        assert!(is_within(b"a/b", b"a"));
        assert!(is_within(b"a", b"a"));
        assert!(!is_within(b"ab", b"a"));
        assert!(is_within(b"anything", b""));
        assert_eq!(rebase(b"a/b/c", b"a/b", b"x"), b"x/c");
    }
}
