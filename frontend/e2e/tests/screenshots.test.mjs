// The chat page after a streamed answer with tool cards, in the light and the dark
// theme, at 1280x800. The suite always takes them (into the artifacts folder) so a
// broken theme toggle fails here; `npm run screenshots` writes them over the ones
// the README shows, in docs/screenshots/.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  artifactsDir,
  ask,
  assertCleanPage,
  byTestId,
  diagnosed,
  lastAssistant,
  launchBrowser,
  newPage,
  signIn,
} from '../lib/browser.mjs';
import { repoRoot, startStack } from '../lib/stack.mjs';

const outDir = process.env.E2E_UPDATE_SCREENSHOTS ? join(repoRoot, 'docs', 'screenshots') : artifactsDir;

describe('screenshots of the chat page', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack();
    browser = await launchBrowser();
    page = await newPage(browser, stack, { colorScheme: 'light' });
    await mkdir(outDir, { recursive: true });
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('light and dark, after an answer with tool cards', async () => {
    await signIn(page, stack, 'operator');
    // A count and a list: tool cards, a sentence and a table on one screen.
    for (const question of ['How many customers do we have?', 'Show the first 4 tables']) {
      await ask(page, question);
      const answer = lastAssistant(page);
      await page.locator(byTestId('message', '[data-role="user"]')).getByText(question).waitFor();
      await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
      await answer.toolCards.and(page.locator('[data-status="ok"]')).first().waitFor();
    }
    await lastAssistant(page).text.locator('table').waitFor();
    // Nothing in the picture should be mid-transition or focused by chance.
    await page.locator(byTestId('question-input')).blur();
    await page.mouse.move(0, 0);

    assert.equal(await page.locator('html').getAttribute('data-theme'), 'light');
    await page.screenshot({ path: join(outDir, 'chat-light.png'), animations: 'disabled' });

    await page.locator(byTestId('theme-toggle')).click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const [r, g, b] = background.match(/\d+/g).map(Number);
    assert.ok(r + g + b < 3 * 96, `the dark theme has a dark background (${background})`);
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'chat-dark.png'), animations: 'disabled' });

    // The choice is remembered across a reload.
    await page.reload();
    await page.locator(byTestId('user-menu')).waitFor();
    assert.equal(await page.locator('html').getAttribute('data-theme'), 'dark');
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
