// A real `strata serve` on a temp store, on a free loopback port, for one test file.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Served = { url: string; token: string; dir: string; stop: () => Promise<void> };

/** The `strata` binary: $STRATA_BIN, else the debug build in $CARGO_TARGET_DIR or target/. */
export function strataBin(): string {
  if (process.env.STRATA_BIN) return process.env.STRATA_BIN;
  const target =
    process.env.CARGO_TARGET_DIR ?? fileURLToPath(new URL('../../target', import.meta.url));
  return join(target, 'debug', 'strata');
}

export function tempStore(): string {
  return mkdtempSync(join(tmpdir(), 'strata-console-'));
}

export function removeStore(dir: string) {
  rmSync(dir, { recursive: true, force: true });
}

/** Where a store is beyond its directory: a bucket URL (`--db`), with the variables its
 * credentials are in. */
export type Remote = { db: string; env: Record<string, string>; replica?: boolean };

/** Starts `strata --db DIR serve` (or, given `remote`, `--db URL --cache-dir DIR`, or a replica:
 * `serve --replica-of URL --cache-dir DIR`) and waits (at most 30 s) for the address it prints. */
export async function serve(
  dir: string,
  extra: string[] = [],
  listen = '127.0.0.1:0',
  remote?: Remote,
): Promise<Served> {
  // A replica names its store after `serve`: `--replica-of` is serve's own flag.
  const store = remote ? [remote.replica ? '--replica-of' : '--db', remote.db] : ['--db', dir];
  const cache = remote ? ['--cache-dir', dir] : [];
  const args = remote?.replica
    ? ['serve', ...store, ...cache, '--listen', listen, ...extra]
    : [...store, ...cache, 'serve', '--listen', listen, ...extra];
  const child: ChildProcess = spawn(strataBin(), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...remote?.env, RUST_LOG: 'warn' },
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((ok, fail) => {
    let out = '';
    const timer = setTimeout(
      () => fail(new Error(`serve printed no address: ${out}${err}`)),
      30_000,
    );
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /console: (http:\/\/[^/\s]+)\//.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        ok(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`serve exited with ${code}: ${err}`));
    });
  });
  const token = readFileSync(join(dir, 'serve.token'), 'utf8').trim();
  const stop = () =>
    new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done();
      child.once('exit', () => done());
      child.kill('SIGINT');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    });
  return { url, token, dir, stop };
}
