// A folder drawn inline: an emoji needs a font that Debian's chromium (and many servers'
// browsers) lacks, and renders as a missing-glyph box there.
export function FolderIcon() {
  return (
    <svg
      width="14"
      height="14"
      viewBox="0 0 16 16"
      role="img"
      aria-label="folder"
      style={{ flex: 'none', verticalAlign: '-2px', marginRight: 6 }}
    >
      <path
        d="M1.5 3.5A1 1 0 0 1 2.5 2.5h3.6l1.4 1.5h6a1 1 0 0 1 1 1v7.5a1 1 0 0 1-1 1h-11a1 1 0 0 1-1-1z"
        fill="#f0b429"
        stroke="#9c6d00"
      />
    </svg>
  );
}
