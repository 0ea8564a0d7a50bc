// Keys shown as the mount shows them: under a prefix ending in `/`, the next path segment of each
// key is a folder when more `/` follow, else the key itself.

export type TreeEntry =
  { kind: 'folder'; name: string; prefix: string } | { kind: 'key'; name: string; key: string };

/** Folds a page of keys (already under `prefix`) into folders and keys, merging into `seen`. */
export function fold(prefix: string, keys: string[], seen: TreeEntry[] = []): TreeEntry[] {
  const out = [...seen];
  const folders = new Set(out.filter((e) => e.kind === 'folder').map((e) => e.prefix));
  for (const key of keys) {
    if (!key.startsWith(prefix)) continue;
    const rest = key.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash >= 0 && slash < rest.length - 1) {
      const folder = prefix + rest.slice(0, slash + 1);
      if (!folders.has(folder)) {
        folders.add(folder);
        out.push({ kind: 'folder', name: rest.slice(0, slash + 1), prefix: folder });
      }
    } else {
      out.push({ kind: 'key', name: rest, key });
    }
  }
  return out;
}

/** The crumbs of a prefix: `a/b/` gives ['', 'a/', 'a/b/']. */
export function crumbs(prefix: string): { label: string; prefix: string }[] {
  const out = [{ label: '(all keys)', prefix: '' }];
  let at = 0;
  while (at < prefix.length) {
    const slash = prefix.indexOf('/', at);
    const end = slash < 0 ? prefix.length : slash + 1;
    out.push({ label: prefix.slice(at, end), prefix: prefix.slice(0, end) });
    at = end;
  }
  return out;
}
