// A read-only store: the console shows what is there and no control that would change it.
import { expect, test } from '@playwright/test';
import { removeStore, serve, tempStore, type Served } from './serve';

let served: Served;

test.beforeAll(async () => {
  const dir = tempStore();
  const seeding = await serve(dir, ['--seed-demo']);
  await seeding.stop();
  served = await serve(dir, ['--read-only']);
});

test.afterAll(async () => {
  await served?.stop();
  if (served) removeStore(served.dir);
});

test('a read-only store shows no write controls', async ({ page }) => {
  await page.goto(`${served.url}/#token=${served.token}`);
  await expect(page.getByTestId('read-only')).toBeVisible();
  const nav = page.getByRole('navigation', { name: 'Pages' });

  await nav.getByText('Keys', { exact: true }).click();
  await page.getByRole('table', { name: 'Keys' }).getByText('README.md').click();
  await expect(page.getByTestId('value')).toContainText('Strata demo');
  for (const name of ['Put', 'Delete key', /Dry run/]) {
    await expect(page.getByRole('button', { name })).toHaveCount(0);
  }

  await nav.getByText('Column families', { exact: true }).click();
  await expect(page.getByRole('table', { name: 'Column families' })).toContainText('metrics');
  await expect(page.getByRole('button', { name: 'Create' })).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Drop' })).toHaveCount(0);

  await nav.getByText('Actions', { exact: true }).click();
  await expect(page.getByRole('button', { name: 'Verify the store' })).toBeVisible();
  await expect(page.getByRole('button', { name: /Flush/ })).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Compact' })).toHaveCount(0);
});
