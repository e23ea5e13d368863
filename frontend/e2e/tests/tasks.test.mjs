// Tools that take minutes (MCP Tasks): the month report runs as a task of the
// conversation. The answer that started it ends at once; the task shows in the Tasks
// panel with its status message and a clock that ticks; the person asks something
// else meanwhile and gets the answer; when the report is done its result arrives as a
// new answer, opened by a note from the task, and is still there after a reload. Stop
// on a running task ends it as cancelled. The model is the scripted upstream, which
// calls `resos__getMonthReport` on the real MCP server; a pause between the report's
// days (MAITRED_MCP_REPORT_STEP_DELAY) makes a month take a good many seconds.
// Screenshots go to the artifacts folder, or with E2E_UPDATE_SCREENSHOTS=1 over
// docs/screenshots/tasks-panel.png and task-result.png.

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
  waitFor,
} from '../lib/browser.mjs';
import { repoRoot, startStack } from '../lib/stack.mjs';

const outDir = process.env.E2E_UPDATE_SCREENSHOTS ? join(repoRoot, 'docs', 'screenshots') : artifactsDir;

/** This month, YYYY-MM: the demo restaurant's bookings are around today. */
const MONTH = new Date().toISOString().slice(0, 7);

/** ~30 days at this pace: the report runs for some 20 s, long enough to watch and to stop. */
const STEP_DELAY = '700ms';

const STARTED = 'The month report runs in the background; its figures follow here when it is done.';
const OTHER_ANSWER = 'We open at noon, Tuesday to Sunday.';
const RESULT_ANSWER = 'The month report is in: here are the bookings and covers of the month.';

/** The scripted model: calls the report, says it runs, answers the question asked meanwhile, then the result. */
function script(extra = []) {
  return {
    turns: [
      {
        text: 'Starting the report.',
        tool_calls: [{ id: 'call_report', name: 'resos__getMonthReport', arguments: { month: MONTH } }],
      },
      { text: STARTED },
      ...extra,
      // Spares, so an unexpected extra model turn fails an assertion, not the model.
      { text: 'Nothing more to add.' },
      { text: 'Nothing more to add.' },
      { text: 'Nothing more to add.' },
    ],
  };
}

const env = { MAITRED_MCP_REPORT_STEP_DELAY: STEP_DELAY };

/** The panel's row of the month report, and its parts. */
function reportRow(page) {
  const row = page.locator(byTestId('task-row', '[data-tool="getMonthReport"]')).first();
  return {
    row,
    status: () => row.getAttribute('data-status'),
    message: row.locator(`${byTestId('tool-progress-message')}, ${byTestId('task-message')}`).first(),
    elapsed: row.locator(byTestId('task-elapsed')),
    stop: row.locator(byTestId('task-stop')),
  };
}

/** Asks for the month report and waits for the answer that started it to end. */
async function startReport(page) {
  await ask(page, `Make the month report for ${MONTH}`);
  const answer = lastAssistant(page);
  await answer.message.and(page.locator('[data-streaming="false"]')).waitFor({ timeout: 30_000 });
  await answer.text.getByText(STARTED).waitFor();
  const card = answer.toolCards.and(page.locator('[data-tool="getMonthReport"]'));
  await card.waitFor();
  return answer;
}

describe('a tool that runs as a task', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack({ script: script([{ text: OTHER_ANSWER }, { text: RESULT_ANSWER }]), env });
    browser = await launchBrowser();
    page = await newPage(browser, stack, { colorScheme: 'light' });
    await mkdir(outDir, { recursive: true });
    await signIn(page, stack, 'admin');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('shows the report running, answers another question meanwhile, and posts the result as a new answer', async () => {
    await startReport(page);
    // The answer ended: the person can ask again at once.
    await page.locator(byTestId('send-button')).waitFor();

    const report = reportRow(page);
    await report.row.waitFor();
    assert.equal(await report.status(), 'working');
    assert.match(await report.row.locator(byTestId('task-title')).innerText(), /\S/);
    assert.equal(await report.stop.count(), 1, 'a running task can be stopped');
    await report.row.locator('[role="progressbar"]').waitFor();

    // Its status message moves on, day by day, and its clock ticks.
    const firstMessage = (await report.message.innerText()).trim();
    const firstElapsed = await report.elapsed.innerText();
    await waitFor(
      async () => (await report.message.innerText()).trim() !== firstMessage && (await report.elapsed.innerText()) !== firstElapsed,
      { timeout: 10_000, message: `a new status message after "${firstMessage}" and a later time than ${firstElapsed}` },
    );
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'tasks-panel.png'), animations: 'disabled' });

    // Another question, answered while the report still runs.
    await ask(page, 'What are the opening hours?');
    const other = lastAssistant(page);
    await other.text.getByText(OTHER_ANSWER).waitFor();
    await other.message.and(page.locator('[data-streaming="false"]')).waitFor();
    assert.equal(await report.status(), 'working', 'the report still runs');
    assert.equal(await page.locator(byTestId('task-note')).count(), 0);

    // Done: the result comes as a new answer at the end, opened by a note from the task.
    const note = page.locator(byTestId('task-note'));
    await note.waitFor({ timeout: 90_000 });
    await report.row.and(page.locator('[data-status="completed"]')).waitFor({ timeout: 15_000 });
    assert.equal(await report.stop.count(), 0);
    assert.match(await note.locator(byTestId('task-note-title')).innerText(), /finished/);
    const result = lastAssistant(page);
    await result.text.getByText(RESULT_ANSWER).waitFor({ timeout: 30_000 });
    await result.message.and(page.locator('[data-streaming="false"]')).waitFor();
    // The note is not a bubble the person typed; it stands right before the result.
    const order = await page.evaluate(() =>
      Array.from(document.querySelectorAll('[data-testid="message"], [data-testid="task-note"]')).map(
        (el) => el.getAttribute('data-role'),
      ),
    );
    assert.deepEqual(order, ['user', 'assistant', 'user', 'assistant', 'task', 'assistant']);
    assert.match(await assistantText(page, 0).innerText(), /runs in the background/);
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'task-result.png'), animations: 'disabled' });

    // After a reload, from the stored conversation: once, still a note.
    await page.reload();
    await page.locator(byTestId('task-note')).waitFor();
    await lastAssistant(page).text.getByText(RESULT_ANSWER).waitFor();
    assert.equal(await page.locator(byTestId('task-note')).count(), 1);
    assert.equal(await page.locator(byTestId('message', '[data-role="user"]')).count(), 2);
    await reportRow(page).row.and(page.locator('[data-status="completed"]')).waitFor();
    // Nothing keeps being asked for: the task ended and its result is shown.
    const polls = [];
    const onRequest = (request) => {
      if (request.url().endsWith('/tasks')) polls.push(request.url());
    };
    page.on('request', onRequest);
    await page.waitForTimeout(5000);
    page.off('request', onRequest);
    assert.equal(polls.length, 0, `no polling once all is shown: ${polls.length} requests`);
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});

describe('stopping a task', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack({ script: script(), env });
    browser = await launchBrowser();
    page = await newPage(browser, stack, { colorScheme: 'light' });
    await signIn(page, stack, 'admin');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('Stop on a running task ends it as cancelled', async () => {
    await startReport(page);
    const report = reportRow(page);
    await report.row.and(page.locator('[data-status="working"]')).waitFor();
    const cancels = [];
    page.on('request', (request) => {
      if (/\/api\/v1\/resos\/chat\/tasks\/[^/]+\/cancel$/.test(request.url())) cancels.push(request);
    });
    await report.stop.click();
    await report.row.and(page.locator('[data-status="cancelled"]')).waitFor();
    assert.equal(cancels.length, 1);
    assert.equal(cancels[0].method(), 'POST');
    assert.ok(cancels[0].headers()['x-csrf-token'], 'the cancel carries the CSRF token');
    assert.equal(await report.stop.count(), 0, 'an ended task has no Stop');
    assert.equal((await report.row.locator(byTestId('task-status')).innerText()).trim(), 'Stopped');

    // It stays stopped: no result is posted as finished, and a reload says the same.
    await page.waitForTimeout(3000);
    assert.equal(await page.locator(byTestId('task-note', '[data-status="completed"]')).count(), 0);
    await page.reload();
    await reportRow(page).row.and(page.locator('[data-status="cancelled"]')).waitFor();
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});

/** The text of the n-th assistant message. */
function assistantText(page, n) {
  return page.locator(byTestId('message', '[data-role="assistant"]')).nth(n).locator(byTestId('assistant-text'));
}
