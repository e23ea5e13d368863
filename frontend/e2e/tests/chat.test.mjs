// A person's session with the offline model: sign in, ask, watch the answer and its
// tool call stream in, approve a booking, find the conversation again after a
// reload, sign out. The tests run in order on one browser session, as a person's
// visit would; each checks its own outcome, also against the API where the screen
// could lie.

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
  recorded,
  resetRecorder,
  signIn,
} from '../lib/browser.mjs';
import { startStack } from '../lib/stack.mjs';

describe('chat with the offline model', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));
  const conversationIds = [];

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack();
    browser = await launchBrowser();
    page = await newPage(browser, stack);
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('a signed-out visitor sees the sign-in screen and nothing else', async () => {
    await page.goto('/');
    await page.locator(byTestId('login-button')).waitFor();
    assert.equal(await page.locator(byTestId('question-input')).count(), 0);
    assert.equal(await page.locator(byTestId('user-menu')).count(), 0);
  });

  it('signs in on the identity provider’s login page and comes back signed in', async () => {
    await signIn(page, stack, 'admin');
    const status = await (await page.request.get('/api/auth/status')).json();
    assert.equal(status.authenticated, true);
    assert.equal(status.user.name, 'Ada Admin');
    if (!(await page.locator(byTestId('user-name')).isVisible())) {
      await page.locator(byTestId('user-menu')).click();
    }
    assert.match(await page.locator(byTestId('user-name')).innerText(), /Ada Admin/);
    assert.match(await page.locator(byTestId('user-roles')).innerText(), /ADMIN/i);
    await page.keyboard.press('Escape');
    await page.locator(byTestId('offline-note')).waitFor();
  });

  it('Shift+Enter starts a new line instead of sending', async () => {
    const input = page.locator(byTestId('question-input'));
    await input.fill('first line');
    await input.press('Shift+Enter');
    await input.pressSequentially('second line');
    assert.equal(await input.inputValue(), 'first line\nsecond line');
    assert.equal(await page.locator(byTestId('message')).count(), 0);
    await input.fill('');
  });

  it('streams an answer with a tool call that ends ok', async () => {
    const { headers } = await stack.backendGet('/customers?limit=1');
    const customers = headers.get('x-total-count');
    assert.ok(Number(customers) > 0, 'the demo restaurant has customers');

    await resetRecorder(page);
    const question = 'How many customers do we have?';
    await ask(page, question);

    await page.locator(byTestId('message', '[data-role="user"]')).last().getByText(question).waitFor();
    // The conversation gets its own address as soon as the stream names it.
    await page.waitForURL(/\/c\/[^/]+$/);
    conversationIds.push(new URL(page.url()).pathname.split('/').pop());

    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    const card = answer.toolCards.first();
    await card.and(page.locator('[data-status="ok"]')).waitFor();
    assert.notEqual(await card.getAttribute('data-tool'), null);
    assert.notEqual((await card.locator(byTestId('tool-card-title')).innerText()).trim(), '');
    assert.match(await card.locator(byTestId('tool-card-duration')).innerText(), /\d/);

    const text = await answer.text.innerText();
    assert.ok(text.includes(customers), `the answer "${text}" states the ${customers} customers`);
    // A screen reader hears the answer too, from a polite live region.
    await page.locator('[aria-live="polite"]').filter({ hasText: customers }).first().waitFor({ state: 'attached' });
    assert.equal(await page.locator(byTestId('stop-button')).isVisible(), false);

    // Marked as streaming while it came, and done after.
    const seen = await recorded(page);
    assert.deepEqual(seen.streaming.slice(-2), ['true', 'false'], `streaming states ${seen.streaming}`);

    // The details show what the tool was asked and what it answered.
    await card.locator(byTestId('tool-card-toggle')).click();
    const details = card.locator(byTestId('tool-card-details'));
    await details.waitFor();
    assert.notEqual((await details.innerText()).trim(), '');
  });

  it('a longer answer arrives in pieces, not all at once', async () => {
    // Four words are too few to see growing (two fragments can land in one render);
    // a table of ten rows is some twenty fragments.
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    await resetRecorder(page);
    await ask(page, 'Show the first 10 tables');
    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await answer.text.locator('table tbody tr').nth(9).waitFor();
    const { texts } = await recorded(page);
    const lengths = texts.map((t) => t.length);
    assert.ok(
      texts.length >= 3 && lengths[0] < lengths.at(-1),
      `the text grew over ${texts.length} renders: ${lengths.join(', ')}`,
    );
  });

  it('a booking waits for approval, and once approved is made', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    await resetRecorder(page);
    const slot = await stack.freeSlot(2);
    // With a way to reach the guest: without one, the booking would stop to ask for it
    // (elicitation.test.mjs is about that).
    await ask(page, `Book a table for 2 on ${slot.date} at ${slot.time} for Ada Lovelace, ada.lovelace@example.com`);

    const approval = page.locator(byTestId('approval-card'));
    await approval.waitFor();
    const answer = lastAssistant(page);
    await answer.toolCards.and(page.locator('[data-status="waiting"]')).first().waitFor();
    assert.equal(await answer.message.getAttribute('data-streaming'), 'true');

    const bookings = async () => Number((await stack.backendGet('/bookings?limit=1')).headers.get('x-total-count'));
    const bookingsBefore = await bookings();
    await approval.locator(byTestId('remember-minutes')).selectOption('0');
    await approval.locator(byTestId('approve-button')).click();

    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await approval.waitFor({ state: 'detached' });
    const write = answer.toolCards.and(page.locator('[data-status="ok"]'));
    await write.first().waitFor();
    assert.match(await write.first().getAttribute('data-tool'), /createBooking/);
    // The offline model words its answer from the created booking record.
    assert.ok((await answer.text.innerText()).includes(slot.time), 'the answer names the booked time');
    assert.ok((await write.first().innerText()).includes(slot.date), 'the card names the booked date');

    conversationIds.push(new URL(page.url()).pathname.split('/').pop());
    assert.equal(await bookings(), bookingsBefore + 1, 'the approved booking is in the backend');
    const statuses = Object.values((await recorded(page)).statuses).flat();
    assert.ok(statuses.includes('waiting'), `the card waited: ${JSON.stringify(statuses)}`);
  });

  it('a denied booking is not made, and the card says so', async () => {
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');
    const slot = await stack.freeSlot(2);
    await ask(page, `Book a table for 2 on ${slot.date} at ${slot.time} for Alan Turing, alan.turing@example.com`);
    const approval = page.locator(byTestId('approval-card'));
    await approval.waitFor();
    const bookings = async () => Number((await stack.backendGet('/bookings?limit=1')).headers.get('x-total-count'));
    const before = await bookings();

    await approval.locator(byTestId('deny-button')).click();
    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await answer.toolCards.and(page.locator('[data-status="denied"]')).first().waitFor();
    assert.equal(await approval.count(), 0);
    assert.equal(await bookings(), before, 'no booking was made');
  });

  it('after a reload the conversations are in the sidebar and open with their messages', async () => {
    await page.reload();
    const list = page.locator(byTestId('conversation-list'));
    for (const id of conversationIds) {
      await list.locator(byTestId('conversation-item', `[data-conversation-id="${id}"]`)).waitFor();
    }
    await page.locator(byTestId('new-chat')).click();
    await page.waitForURL((url) => url.pathname === '/');

    const first = conversationIds[0];
    await list.locator(byTestId('conversation-item', `[data-conversation-id="${first}"]`)).locator('a').first().click();
    await page.waitForURL((url) => url.pathname === `/c/${first}`);
    await page.locator(byTestId('message', '[data-role="user"]')).getByText('How many customers do we have?').waitFor();
    const answer = lastAssistant(page);
    await answer.toolCards.and(page.locator('[data-status="ok"]')).first().waitFor();
    assert.notEqual((await answer.text.innerText()).trim(), '');
    assert.equal(await page.locator(byTestId('message', '[data-role="user"]')).count(), 1);

    // A deep link works too: the gateway answers the app for client routes.
    await page.goto(`/c/${conversationIds[1]}`);
    await page.locator(byTestId('message', '[data-role="user"]')).getByText('Ada Lovelace').waitFor();
  });

  it('signs out back to the signed-out screen', async () => {
    const session = (await page.context().cookies()).filter((c) => c.httpOnly);
    const withSession = () =>
      fetch(`${stack.gatewayUrl}/api/v1/resos/conversations`, {
        headers: { cookie: session.map((c) => `${c.name}=${c.value}`).join('; ') },
      });
    assert.equal((await withSession()).status, 200, 'the session cookie works while signed in');
    if (!(await page.locator(byTestId('sign-out')).isVisible())) {
      await page.locator(byTestId('user-menu')).click();
    }
    await page.locator(byTestId('sign-out')).click();
    await page.locator(byTestId('login-button')).waitFor();
    const status = await (await page.request.get('/api/auth/status')).json();
    assert.equal(status.authenticated, false);
    // The session ended on the server too: its old cookie no longer works.
    assert.equal((await withSession()).status, 401);
    await page.reload();
    await page.locator(byTestId('login-button')).waitFor();
    assert.equal(await page.locator(byTestId('conversation-item')).count(), 0);
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
