// The tests' SeaweedFS (`cargo`'s `seaweed` example of strata-bucket), on free loopback ports
// with telemetry off, for as long as a spec needs it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { strataBin } from './serve';

export type Seaweed = {
  endpoint: string;
  bucket: string;
  env: Record<string, string>;
  stop: () => Promise<void>;
};

/** Starts it, or returns why it cannot (`weed` or the example not built): a spec skips then,
 * and fails instead where `CI` is set. */
export async function startSeaweed(): Promise<Seaweed | string> {
  const bin = join(dirname(strataBin()), 'examples', 'seaweed');
  if (!existsSync(bin)) return `${bin} is not built (cargo test --workspace --no-run builds it)`;
  const child = spawn(bin, [], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const line = await new Promise<string>((ok) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) ok(out.split('\n')[0] ?? '');
    });
    child.on('exit', () => ok(''));
  });
  const m = /^endpoint (\S+) bucket (\S+) access (\S+) secret (\S+)$/.exec(line);
  if (!m) return `SeaweedFS did not start: ${err.trim()}`;
  const [, endpoint, bucket, access, secret] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
  ];
  const stop = () =>
    new Promise<void>((done) => {
      if (child.exitCode !== null) return done();
      child.once('exit', () => done());
      child.stdin?.end();
      setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
    });
  return {
    endpoint,
    bucket,
    env: { AWS_ACCESS_KEY_ID: access, AWS_SECRET_ACCESS_KEY: secret },
    stop,
  };
}
