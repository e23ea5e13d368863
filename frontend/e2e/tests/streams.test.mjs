// Long answers, from the scripted upstream at a pace the test sets: stopping one
// half way, and losing the network in the middle of one. Each sentence of the
// answer is numbered, so a lost or repeated fragment shows in the text.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  ask,
  assertCleanPage,
  byTestId,
  diagnosed,
  lastAssistant,
  launchBrowser,
  newPage,
  signIn,
  waitFor,
} from '../lib/browser.mjs';
import { startStack } from '../lib/stack.mjs';

const SENTENCES = 40;
const ANSWER = Array.from({ length: SENTENCES }, (_, i) => `Sentence ${i + 1} of the long answer.`).join(' ');
// 240 words at 40 a second: long enough to act in the middle, short enough to wait for.
const PACE_MS = 25;

const normalized = (text) => text.replace(/\s+/g, ' ').trim();

describe('long answers from a slow model', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack({ script: { repeat: { text: ANSWER, paced_ms: PACE_MS } }, proxy: true });
    browser = await launchBrowser();
    page = await newPage(browser, stack);
    await signIn(page, stack, 'user');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('Stop ends the answer where it is, and it stays ended', async () => {
    await ask(page, 'Tell me everything about the restaurant');
    const answer = lastAssistant(page);
    const stop = page.locator(byTestId('stop-button'));
    await stop.waitFor();
    await waitFor(async () => (await answer.text.innerText()).includes('Sentence 3 '), {
      message: 'the third sentence',
    });
    await stop.click();

    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await stop.waitFor({ state: 'hidden' });
    const text = normalized(await answer.text.innerText());
    assert.ok(text.length < ANSWER.length, 'the answer was cut short');
    assert.ok(ANSWER.startsWith(text.slice(0, 40)), `the text is the answer's beginning: ${text}`);

    // A stopped answer does not keep growing: give it several fragments' time.
    await page.waitForTimeout(PACE_MS * 20);
    assert.equal(normalized(await answer.text.innerText()), text);

    // The server agrees that it was cancelled.
    const id = new URL(page.url()).pathname.split('/').pop();
    const conversation = await (await page.request.get(`/api/v1/resos/conversations/${id}`)).json();
    const assistant = conversation.messages.filter((m) => m.role === 'assistant').pop();
    assert.equal(assistant.status, 'cancelled');
    assert.ok(!assistant.content || ANSWER.startsWith(assistant.content.trim().slice(0, 40)));
  });

  it('an answer cut off by the network resumes, with nothing lost or repeated', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    await ask(page, 'Tell me everything again');
    const answer = lastAssistant(page);
    await waitFor(async () => (await answer.text.count()) > 0 && (await answer.text.innerText()).includes('Sentence 5 '), {
      message: 'the fifth sentence',
    });

    // Offline first, so the app's first attempts to resume fail too and it has to
    // show that it is reconnecting.
    await page.context().setOffline(true);
    assert.equal(stack.proxy.cutStreams(), 1, 'one answer stream was open');
    await page.locator(byTestId('connection-status')).waitFor();
    const before = normalized(await answer.text.innerText());
    await page.context().setOffline(false);

    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor({ timeout: 60_000 });
    await page.locator(byTestId('connection-status')).waitFor({ state: 'hidden' });
    assert.ok(before.length < ANSWER.length, 'the network went away before the end');
    assert.equal(normalized(await answer.text.innerText()), ANSWER);
    assert.equal(await page.locator(byTestId('error-banner')).count(), 0);
  });

  it('a reload in the middle of an answer reopens it and watches it to the end', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    await ask(page, 'Tell me everything once more');
    await page.waitForURL(/\/c\/[^/]+$/);
    const answer = lastAssistant(page);
    await waitFor(async () => (await answer.text.count()) > 0 && (await answer.text.innerText()).includes('Sentence 5 '), {
      message: 'the fifth sentence',
    });

    await page.reload();
    const reopened = lastAssistant(page);
    await reopened.message.and(page.locator('[data-streaming="true"]')).waitFor();
    await reopened.message.and(page.locator('[data-streaming="false"]')).waitFor({ timeout: 60_000 });
    assert.equal(normalized(await reopened.text.innerText()), ANSWER);
    assert.equal(await page.locator(byTestId('message', '[data-role="assistant"]')).count(), 1);
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
