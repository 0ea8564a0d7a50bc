// One keyspace across the faces, seen in the console: what the mount writes is on the Keys page,
// and a REST load from `strata api-bench` runs while the console is open, then the store
// verifies. Needs FUSE (make deps installs fuse3); under CI a missing FUSE fails the run.
import { expect, test } from '@playwright/test';
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { failOnConsoleErrors, signIn } from './page';
import { removeStore, serve, strataBin, tempStore, type Served } from './serve';

function fuseUsable(): boolean {
  try {
    accessSync('/dev/fuse', constants.R_OK | constants.W_OK);
    return spawnSync('fusermount3', ['--version']).status === 0;
  } catch {
    return false;
  }
}

const SHOTS = process.env.SCREENSHOTS ?? fileURLToPath(new URL('../screenshots', import.meta.url));
mkdirSync(SHOTS, { recursive: true });

const fuse = fuseUsable();
if (!fuse && process.env.CI) throw new Error('CI is set but FUSE is not usable');

let served: Served;
let root: string;
let mnt: string;

test.skip(!fuse, 'FUSE is not usable here (make deps installs fuse3)');

test.beforeAll(async () => {
  root = tempStore();
  mnt = join(root, 'mnt');
  mkdirSync(mnt);
  served = await serve(join(root, 'db'), ['--mount', mnt]);
});

test.afterAll(async () => {
  await served?.stop();
  if (root) removeStore(root);
});

const consoleErrors = failOnConsoleErrors();

test('the Keys page shows what the mount wrote', async ({ page }) => {
  mkdirSync(join(mnt, 'photos', '2026'), { recursive: true });
  writeFileSync(join(mnt, 'photos', '2026', 'dog.txt'), 'written through the mount');
  writeFileSync(join(mnt, 'readme.md'), '# hello');
  await signIn(page, served);
  await page.getByRole('navigation', { name: 'Pages' }).getByText('Keys', { exact: true }).click();
  const keys = page.getByRole('table', { name: 'Keys' });
  await expect(keys.getByText('readme.md')).toBeVisible();
  await keys.getByText('photos/', { exact: true }).click();
  await keys.getByText('2026/', { exact: true }).click();
  await keys.getByText('dog.txt').click();
  await expect(page.getByTestId('selected-key')).toHaveText('photos/2026/dog.txt');
  await expect(page.getByTestId('value')).toHaveText('written through the mount');
});

test('a REST load runs while the console is open, and the store verifies', async ({ page }) => {
  test.setTimeout(90_000);
  await signIn(page, served);
  await expect(page.getByTestId('connection')).toHaveText('live');
  const bench = spawn(
    strataBin(),
    ['--db', served.dir, 'api-bench', '--url', served.url, '--secs', '5', '--connections', '8'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  bench.stdout.on('data', (d: Buffer) => (out += d.toString()));
  bench.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((done) => bench.on('exit', (code) => done(code)));
  // The live charts see the load while it runs.
  await expect(page.getByTestId('stat-Writes')).not.toHaveText(/^(0|–)\/s$/, { timeout: 15_000 });
  await page.waitForTimeout(2_000); // a few seconds of the load on the charts
  await page.screenshot({ path: join(SHOTS, 'overview-under-load.png') });
  expect(await exited, out).toBe(0);
  expect(out).toMatch(/every acknowledged write read back \(\d+ keys\)/);
  await expect(page.getByTestId('connection')).toHaveText('live');

  await served.stop();
  const verify = spawnSync(strataBin(), ['--db', served.dir, 'verify'], { encoding: 'utf8' });
  expect(verify.status, verify.stdout + verify.stderr).toBe(0);
  // The console notices the server went away; that is not an error of the page.
  consoleErrors.ignore(/Failed to load resource|ERR_CONNECTION_REFUSED|EventSource/);
});
