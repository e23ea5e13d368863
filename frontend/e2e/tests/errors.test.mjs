// A model that fails: the error reaches the person as a banner with a way to try
// again, and trying again answers. The scripted upstream refuses with a 400 twice:
// the question, and the gateway's one retry in the shape strict local servers need
// (a 400 may be the request's shape); then it answers the person's Retry.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ask, assertCleanPage, byTestId, diagnosed, lastAssistant, launchBrowser, newPage, signIn } from '../lib/browser.mjs';
import { startStack } from '../lib/stack.mjs';

describe('a failing model', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack({
      script: {
        turns: [
          { status: 400, message: 'the scripted model refuses this' },
          { status: 400, message: 'the scripted model refuses this again' },
          { text: 'Second time lucky: here is the answer.' },
        ],
      },
    });
    browser = await launchBrowser();
    page = await newPage(browser, stack);
    await signIn(page, stack, 'user');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('shows an error banner, and Retry gets the answer', async () => {
    await ask(page, 'What is on the menu?');
    const banner = page.locator(byTestId('error-banner'));
    await banner.waitFor();
    assert.notEqual((await banner.innerText()).trim(), '');
    assert.equal(await page.locator(byTestId('stop-button')).isVisible(), false);

    await banner.locator(byTestId('retry-button')).click();
    const answer = lastAssistant(page);
    await answer.text.getByText('Second time lucky').waitFor();
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await banner.waitFor({ state: 'detached' });
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
