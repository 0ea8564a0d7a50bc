import { describe, expect, it } from 'vitest';
import { crumbs, fold } from './keyTree';

describe('the key tree', () => {
  it('folds keys under a prefix into folders and keys, as the mount shows them', () => {
    const entries = fold('', ['README.md', 'logs/a/1.log', 'logs/a/2.log', 'logs/b.log', 'users/']);
    expect(entries).toEqual([
      { kind: 'key', name: 'README.md', key: 'README.md' },
      { kind: 'folder', name: 'logs/', prefix: 'logs/' },
      { kind: 'key', name: 'users/', key: 'users/' },
    ]);
    const deeper = fold('logs/', ['logs/a/1.log', 'logs/b.log']);
    expect(deeper.map((e) => e.name)).toEqual(['a/', 'b.log']);
  });
  it('merges a later page without repeating a folder', () => {
    const first = fold('', ['a/1', 'a/2']);
    const both = fold('', ['a/3', 'b'], first);
    expect(both.map((e) => e.name)).toEqual(['a/', 'b']);
  });
  it('cuts a prefix into crumbs', () => {
    expect(crumbs('a/b/c')).toEqual([
      { label: '(all keys)', prefix: '' },
      { label: 'a/', prefix: 'a/' },
      { label: 'b/', prefix: 'a/b/' },
      { label: 'c', prefix: 'a/b/c' },
    ]);
  });
});
