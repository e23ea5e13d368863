// Tools that talk back, with the offline model: a booking asked for without the
// guest's details stops for a form on its tool card, and is made with what the person
// typed there; a search over a date range shows its progress as it goes. Both against
// the real MCP server and gateway; the backend is asked what was really booked.
// Screenshots of both go to the artifacts folder, or with E2E_UPDATE_SCREENSHOTS=1 over
// docs/screenshots/elicitation-form.png and tool-progress.png.

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
  recorded,
  resetRecorder,
  signIn,
} from '../lib/browser.mjs';
import { repoRoot, startStack } from '../lib/stack.mjs';

const outDir = process.env.E2E_UPDATE_SCREENSHOTS ? join(repoRoot, 'docs', 'screenshots') : artifactsDir;

/** `date` (YYYY-MM-DD) plus `days`. */
function addDays(date, days) {
  const at = new Date(`${date}T12:00:00Z`);
  at.setUTCDate(at.getUTCDate() + days);
  return at.toISOString().slice(0, 10);
}

/**
 * Approves the answer's write calls as they come (the operator's policy puts bookings
 * behind approval) until `until` is visible; fails at once if the answer ends first.
 */
async function approveUntil(page, answer, until) {
  const approval = answer.message.locator(byTestId('approval-card'));
  const ended = answer.message.and(page.locator('[data-streaming="false"]'));
  for (;;) {
    await until.or(approval).or(ended).first().waitFor();
    if (await until.isVisible()) return;
    if (await approval.first().isVisible()) {
      await approval.first().locator(byTestId('approve-button')).click();
      await approval.first().waitFor({ state: 'detached' });
      continue;
    }
    throw new Error(`the answer ended before it was time: "${await answer.text.innerText()}"`);
  }
}

describe('tools that ask for input and report progress', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));
  const answersPosted = [];

  before(diagnosed(() => ({ page, stack }), async () => {
    // Through the test's proxy, which can slow the event stream to a pace a person
    // (and a screenshot) can follow.
    stack = await startStack({ proxy: true });
    browser = await launchBrowser();
    page = await newPage(browser, stack, { colorScheme: 'light' });
    page.on('request', (request) => {
      if (request.url().includes('/api/v1/resos/chat/inputs/')) answersPosted.push(request);
    });
    await mkdir(outDir, { recursive: true });
    await signIn(page, stack, 'admin');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('a booking without the guest’s details asks for them in a form, and is made with them', async () => {
    const slot = await stack.freeSlot(2);
    const email = `grace.${Date.now()}@example.com`;
    await ask(page, `Book a table for 2 on ${slot.date} at ${slot.time}`);

    const answer = lastAssistant(page);
    const form = answer.message.locator(byTestId('input-card'));
    await approveUntil(page, answer, form);
    // The form is on the booking's own tool card.
    const card = answer.toolCards.and(page.locator('[data-tool="createBooking"]'));
    assert.equal(await card.locator(byTestId('input-card')).count(), 1);
    assert.equal(await card.getAttribute('data-status'), 'waiting');
    assert.notEqual((await form.locator(byTestId('input-message')).innerText()).trim(), '');
    assert.match(await form.locator(byTestId('input-expiry')).innerText(), /Closes in \d+:\d\d/);

    // The person's attention is taken to the form, and a screen reader hears why.
    const focusInForm = () => page.evaluate(() => document.activeElement?.closest('[data-testid="input-card"]') !== null);
    assert.ok(await focusInForm(), 'the focus moved into the form');
    await page.locator('[aria-live="polite"]').filter({ hasText: 'needs your input' }).waitFor({ state: 'attached' });

    // The guest's name, and an email the form first catches as wrong.
    const field = (pattern) => form.locator(byTestId('input-field')).filter({ has: page.getByLabel(pattern) });
    const name = form.getByLabel(/^Name/);
    const emailBox = form.getByLabel(/^Email/);
    assert.equal(await emailBox.getAttribute('type'), 'email', 'the schema\'s email format is an email box');
    await name.fill('Grace Hopper');
    await emailBox.fill('grace at example');
    await emailBox.press('Enter');
    const problem = form.locator(byTestId('input-field-problem'));
    await problem.first().waitFor();
    assert.match(await problem.first().innerText(), /email address/);
    assert.equal(await emailBox.getAttribute('aria-invalid'), 'true');
    assert.equal(answersPosted.length, 0, 'nothing was sent while the form had a problem');
    assert.equal(await field(/^Name/).locator(byTestId('input-field-problem')).count(), 0);

    await emailBox.fill(email);
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'elicitation-form.png'), animations: 'disabled' });

    // Sent from the keyboard: Enter in a field.
    const bookingsBefore = Number((await stack.backendGet('/bookings?limit=1')).headers.get('x-total-count'));
    await emailBox.press('Enter');
    await form.waitFor({ state: 'detached' });
    assert.equal(answersPosted.length, 1);
    const posted = answersPosted[0];
    assert.equal(posted.method(), 'POST');
    assert.ok(posted.headers()['x-csrf-token'], 'the answer carries the CSRF token');
    const body = posted.postDataJSON();
    assert.equal(body.action, 'accept');
    assert.equal(body.content.guestName, 'Grace Hopper');
    assert.equal(body.content.guestEmail, email);
    assert.match(await card.locator(byTestId('input-outcome')).innerText(), /You sent the details/);

    await approveUntil(page, answer, answer.message.and(page.locator('[data-streaming="false"]')));
    const booked = answer.toolCards.and(page.locator('[data-tool="createBooking"][data-status="ok"]'));
    await booked.first().waitFor();
    assert.ok((await answer.text.innerText()).includes(slot.time), 'the answer names the booked time');

    // The backend has the booking, for the guest the form named.
    const query = encodeURIComponent(`guest.email = '${email}'`);
    const { body: bookings } = await stack.backendGet(`/bookings?customQuery=${query}`);
    assert.equal(bookings.length, 1, `one booking for ${email}: ${JSON.stringify(bookings)}`);
    assert.equal(bookings[0].guest.name, 'Grace Hopper');
    assert.equal(bookings[0].date, slot.date);
    assert.equal(bookings[0].people, 2);
    const bookingsAfter = Number((await stack.backendGet('/bookings?limit=1')).headers.get('x-total-count'));
    assert.equal(bookingsAfter, bookingsBefore + 1);
  });

  it('a form still open when the page is reloaded comes back once, and a decline books nothing', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    const slot = await stack.freeSlot(2);
    await ask(page, `Book a table for 2 on ${slot.date} at ${slot.time}`);
    let answer = lastAssistant(page);
    await approveUntil(page, answer, answer.message.locator(byTestId('input-card')));
    await page.waitForURL(/\/c\/[^/]+$/);
    const bookings = async () => Number((await stack.backendGet('/bookings?limit=1')).headers.get('x-total-count'));
    const before = await bookings();

    // The page watches the answer again from its first event: the request is among them.
    await page.reload();
    answer = lastAssistant(page);
    const form = answer.message.locator(byTestId('input-card'));
    await form.waitFor();
    await answer.message.and(page.locator('[data-streaming="true"]')).waitFor();
    assert.equal(await page.locator(byTestId('input-card')).count(), 1, 'one form, however often the request was sent');
    // The call asks for input, so it runs: the approval given before the reload is not asked again.
    assert.equal(await answer.message.locator(byTestId('approval-card')).count(), 0);

    await form.locator(byTestId('input-decline')).click();
    await form.waitFor({ state: 'detached' });
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    const card = answer.toolCards.and(page.locator('[data-tool="createBooking"]'));
    assert.match(await card.locator(byTestId('input-outcome')).innerText(), /You declined/);
    assert.equal(await bookings(), before, 'no booking was made');
  });

  it('a search over a date range shows a progress bar that moves, and goes when it is done', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    await resetRecorder(page);
    const from = (await stack.freeSlot(2)).date;
    const to = addDays(from, 27);

    // One event every 1.5 s: each report is its own render, and the bar stays long
    // enough to be photographed.
    stack.proxy.paceStreams(1500);
    try {
      await ask(page, `Find availability for 2 people from ${from} to ${to}`);
      const answer = lastAssistant(page);
      const bar = answer.message.locator('[role="progressbar"]');
      await bar.first().waitFor();
      await page.mouse.move(0, 0);
      await page.screenshot({ path: join(outDir, 'tool-progress.png'), animations: 'disabled' });
      const search = answer.toolCards.and(page.locator('[data-tool="findAvailability"]'));
      await search.and(page.locator('[data-status="ok"]')).first().waitFor({ timeout: 60_000 });
    } finally {
      stack.proxy.paceStreams(0);
    }

    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    assert.equal(await answer.message.locator('[role="progressbar"]').count(), 0, 'the bar went with the result');

    const { progress } = await recorded(page);
    const values = progress.filter((p) => p !== '?').map((p) => p.split('/').map(Number));
    assert.ok(values.length >= 2, `the bar showed more than one value: ${progress.join(', ')}`);
    for (const [now, max] of values) assert.ok(now > 0 && now <= max, `a value within the bar: ${now}/${max}`);
    assert.ok(
      values.every(([now], i) => i === 0 || now > values[i - 1][0]),
      `the bar only moved forward: ${progress.join(', ')}`,
    );
    assert.equal(values.at(-1)[1], 28, 'the total is the 28 days asked about');
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
