// An accessibility audit (axe-core, WCAG 2.1 A and AA) of the sign-in form and every page of the
// console on a real `strata serve` with the demo keyspace, in Debian's chromium: no violation.
import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { failOnConsoleErrors, signIn } from './page';
import { removeStore, serve, tempStore, type Served } from './serve';

let served: Served;

test.beforeAll(async () => {
  const dir = tempStore();
  // A directory of its own beside the store: the Backups page shows its controls.
  served = await serve(dir, ['--seed-demo', '--backup-to', `${dir}-backups`]);
});

test.afterAll(async () => {
  await served?.stop();
  if (served) {
    removeStore(served.dir);
    removeStore(`${served.dir}-backups`);
  }
});

failOnConsoleErrors();

/** The violations on the page now, one line each: the rule, how many elements, the first few. */
async function violations(page: Page): Promise<string[]> {
  const found = await new AxeBuilder({ page })
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
    .analyze();
  return found.violations.map(
    (v) =>
      `${v.id} (${v.nodes.length}): ${v.help}; ${v.nodes
        .slice(0, 3)
        .map((n) => `${n.target.join(' ')} (${n.failureSummary ?? ''})`)
        .join(', ')}`,
  );
}

const PAGES: [string, RegExp][] = [
  ['Overview', /^Overview/],
  ['LSM', /^LSM/],
  ['Cache', /^Block cache/],
  ['Tombstones', /^Tombstones/],
  ['Blobs', /^Blob files/],
  ['Bucket', /^Bucket/],
  ['Events', /^Events/],
  ['Keys', /^Keys/],
  ['Column families', /^Column families/],
  ['Actions', /^Actions/],
  ['Backups', /^Backups/],
];

test('the sign-in form and every page pass the audit', async ({ page }) => {
  await page.goto(served.url + '/');
  await expect(page.getByLabel('Token')).toBeVisible();
  const all: string[] = (await violations(page)).map((v) => `sign-in: ${v}`);
  await signIn(page, served);
  for (const [label, heading] of PAGES) {
    await page.getByRole('navigation', { name: 'Pages' }).getByText(label, { exact: true }).click();
    await expect(page.getByRole('heading', { name: heading, level: 1 })).toBeVisible();
    // The live samples and the page's queries arrive before the audit.
    await page.waitForTimeout(1500);
    all.push(...(await violations(page)).map((v) => `${label}: ${v}`));
  }
  expect(all, 'accessibility violations').toEqual([]);
});
