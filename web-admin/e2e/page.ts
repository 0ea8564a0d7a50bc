// What every console spec does with its page: sign in, and fail on any console error.
import { expect, test, type Page } from '@playwright/test';
import type { Served } from './serve';

export async function signIn(page: Page, served: Served) {
  await page.goto(served.url + '/');
  await page.getByLabel('Token').fill(served.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
}

/** Fails each test of the file on a console error or an uncaught exception in the page. A 401
 * before signing in is how the console learns it must ask for the token; `ignore` drops what a
 * test caused on purpose. */
export function failOnConsoleErrors() {
  let errors: string[] = [];
  test.beforeEach(({ page }) => {
    errors = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && !/401/.test(m.text())) errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
  });
  test.afterEach(() => {
    expect(errors, 'no console errors').toEqual([]);
  });
  return {
    ignore(pattern: RegExp) {
      errors = errors.filter((e) => !pattern.test(e));
    },
  };
}
