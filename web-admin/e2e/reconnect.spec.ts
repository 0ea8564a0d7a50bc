// The server goes away and comes back: the console says so at once, then carries on.
import { expect, test } from '@playwright/test';
import { removeStore, serve, tempStore } from './serve';

test('a lost connection shows clearly and the console reconnects', async ({ page }) => {
  const dir = tempStore();
  let served = await serve(dir, ['--seed-demo']);
  try {
    await page.goto(`${served.url}/#token=${served.token}`);
    await expect(page.getByTestId('connection')).toHaveText('live');
    await served.stop();
    await expect(page.getByText('Connection to the server lost')).toBeVisible();
    await expect(page.getByTestId('connection')).toHaveText('connection lost: reconnecting');
    // Same address, same token file: the session cookie still holds.
    served = await serve(dir, [], served.url.replace('http://', ''));
    await expect(page.getByTestId('connection')).toHaveText('live', { timeout: 30_000 });
    await expect(page.getByText('Connection to the server lost')).toBeHidden();
  } finally {
    await served.stop();
    removeStore(dir);
  }
});
