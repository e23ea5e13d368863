// Attacks on the browser login, performed in a real browser, since browsers parse
// URLs their own way: a callback URL sent by an attacker signs nobody in, and no
// return_to leads off the gateway's origin after sign-in, not even one whose dot
// segments resolve to `//another.host`.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { byTestId, diagnosed, launchBrowser, newPage } from '../lib/browser.mjs';
import { startStack } from '../lib/stack.mjs';

/** Fills the identity provider's form on `page` and submits it. */
async function fillLogin(page, stack, user) {
  await page.waitForURL((url) => url.origin === stack.backendUrl);
  await page.locator('#username').fill(user);
  await page.locator('#password').fill(await stack.password(user));
  await page.locator('button[type="submit"]').click();
}

async function signedIn(page) {
  return page.evaluate(async () => (await (await fetch('/api/auth/status')).json()).authenticated);
}

describe('the browser login under attack', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack();
    browser = await launchBrowser();
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('a callback URL from another browser signs the victim in as nobody', async () => {
    // The attacker signs in as themselves and stops before the callback.
    const attacker = await newPage(browser, stack);
    let callback;
    // The identity provider answers the sign-in with a redirect to the callback; the
    // attacker takes its Location instead of following it.
    await attacker.route(`${stack.backendUrl}/oauth2/authorize`, async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      // Replayed outside the page, so the headers a browser's form post carries are
      // given explicitly (the identity provider refuses cross-site posts).
      const headers = { ...route.request().headers(), origin: stack.backendUrl, 'sec-fetch-site': 'same-origin' };
      const response = await route.fetch({ maxRedirects: 0, headers });
      callback = response.headers().location;
      return route.fulfill({ status: 200, contentType: 'text/plain', body: 'stopped before the callback' });
    });
    await attacker.goto('/login');
    await fillLogin(attacker, stack, 'user');
    for (let i = 0; i < 100 && !callback; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(callback, 'the attacker got a callback URL');
    await attacker.context().close();

    // The victim opens it.
    page = await newPage(browser, stack);
    const response = await page.goto(callback);
    assert.equal(response.status(), 400);
    await page.getByRole('link', { name: 'Start the sign-in again' }).waitFor();
    assert.match(await page.getByRole('alert').innerText(), /not started in this browser/);
    assert.equal(await signedIn(page), false);
    await page.goto('/');
    await page.locator(byTestId('login-button')).waitFor();
    await page.context().close();
  });

  for (const hostile of [
    '/\t/evil.example',
    '//evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    'https:evil.example',
    'javascript:alert(document.domain)',
    '%2F%2Fevil.example',
    `/${'a'.repeat(4096)}`,
    // Dot segments that resolve to a leading // (issue 22, finding 1), plain and encoded.
    '/..//evil.example/phish',
    '/.//evil.example/phish',
    '/a/..//evil.example/phish',
    '/%2e%2e//evil.example/phish',
  ]) {
    it(`return_to ${JSON.stringify(hostile.slice(0, 24))} stays on the gateway`, async () => {
      page = await newPage(browser, stack);
      const offsite = [];
      await page.context().route(
        (url) => url.hostname === 'evil.example',
        (route) => {
          offsite.push(route.request().url());
          return route.abort();
        },
      );
      await page.goto(`/login?return_to=${encodeURIComponent(hostile)}`);
      await fillLogin(page, stack, 'user');
      await page.waitForURL((url) => url.origin === stack.gatewayUrl && !url.pathname.startsWith('/login'));
      await page.locator(byTestId('user-menu')).waitFor();
      assert.equal(new URL(page.url()).origin, stack.gatewayUrl);
      assert.deepEqual(offsite, []);
      assert.deepEqual(page.pageErrors.map(String), []);
      await page.context().close();
    });
  }
});
