// Answers you can check (docs/grounding.md): the scripted model calls getCustomers on
// the real MCP server and answers with the backend's real total, read at run time,
// and a second figure that no result states. The person sees the invented figure
// marked, and the true one linked to the tool card it came from: its tooltip names
// the tool, and a click brings the card into view. A reload shows the same marks,
// from the stored answer. Screenshot: the artifacts folder, or with
// E2E_UPDATE_SCREENSHOTS=1 docs/screenshots/grounding.png.

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
  launchBrowser,
  newPage,
  signIn,
} from '../lib/browser.mjs';
import { repoRoot, startStack } from '../lib/stack.mjs';

const outDir = process.env.E2E_UPDATE_SCREENSHOTS ? join(repoRoot, 'docs', 'screenshots') : artifactsDir;

const QUESTION = 'How many customers do we have, and how many of them booked this week?';
const LATER_QUESTION = 'What else is there to know?';
/** The page of customers the model asks for. */
const LIMIT = 5;
/** A long answer with no figures, after which the first answer's card is scrolled out of view. */
const LONG_ANSWER = Array.from({ length: 30 }, () => 'The tool card above has the details of each customer.').join('\n\n');

/**
 * A figure that nothing in the tool's result states: no run of digits in the page of
 * customers the tool returns (numbers, dates, ids, phone numbers), nor its total or
 * length. What a model that invents "7 of them" writes.
 */
function invented(customers, total) {
  const held = new Set(JSON.stringify(customers).match(/\d+/g)?.map(Number) ?? []);
  [total, LIMIT, customers.length, 0].forEach((n) => held.add(n));
  let figure = 7;
  while (held.has(figure)) figure += 1;
  return figure;
}

/** Whether `el` is wholly inside the window and every scrolled box around it; `'above'` when wholly hidden above. */
function placement(el) {
  const rect = el.getBoundingClientRect();
  let top = 0;
  let bottom = window.innerHeight;
  for (let box = el.parentElement; box; box = box.parentElement) {
    const style = getComputedStyle(box);
    if (/(auto|scroll)/.test(style.overflowY) && box.scrollHeight > box.clientHeight) {
      const outer = box.getBoundingClientRect();
      top = Math.max(top, outer.top);
      bottom = Math.min(bottom, outer.bottom);
    }
  }
  if (rect.bottom <= top) return 'above';
  return rect.top >= top && rect.bottom <= bottom ? 'inside' : 'partly';
}

describe('figures checked against the tool results', () => {
  let stack, browser, page;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));
  /** What the backend holds, read once it runs: the model's answer is written from it. */
  let total, unsupported;

  before(diagnosed(() => ({ page, stack }), async () => {
    stack = await startStack({
      script: async (running) => {
        const { headers, body } = await running.backendGet(`/customers?limit=${LIMIT}`);
        total = Number(headers.get('x-total-count'));
        assert.ok(total > LIMIT, `the demo restaurant has more than ${LIMIT} customers (${total})`);
        unsupported = invented(body, total);
        return {
          turns: [
            {
              text: 'Let me look.',
              tool_calls: [{ id: 'call_customers', name: 'resos__getCustomers', arguments: { limit: LIMIT } }],
            },
            { text: `We have ${total} customers, and ${unsupported} of them booked this week.` },
            { text: LONG_ANSWER },
            // Spares, so an unexpected extra model turn fails an assertion, not the model.
            { text: 'Nothing more to add.' },
            { text: 'Nothing more to add.' },
          ],
        };
      },
    });
    browser = await launchBrowser();
    page = await newPage(browser, stack, { colorScheme: 'light' });
    await mkdir(outDir, { recursive: true });
    await signIn(page, stack, 'admin');
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /** The grounded answer (the first one of the conversation) and its parts. */
  function grounded() {
    const message = page.locator(byTestId('message', '[data-role="assistant"]')).first();
    const claims = message.locator(byTestId('claim'));
    return {
      message,
      claims,
      supported: claims.and(page.locator('[data-status="supported"]')),
      unsupported: claims.and(page.locator('[data-status="unsupported"]')),
      card: message.locator(byTestId('tool-card', '[data-tool="getCustomers"]')),
    };
  }

  /** What a person can check of the two marks, the same before and after a reload. */
  async function assertMarks() {
    const answer = grounded();
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await answer.card.and(page.locator('[data-status="ok"]')).waitFor();
    await answer.unsupported.waitFor();
    assert.equal(await answer.claims.count(), 2, `two checked figures in "${await answer.message.innerText()}"`);
    assert.equal(await answer.supported.count(), 1);
    assert.equal(await answer.unsupported.count(), 1);

    // The invented figure: marked, and said so to a screen reader and on hover.
    const bad = answer.unsupported;
    assert.equal((await bad.innerText()).trim(), String(unsupported));
    assert.match(await bad.getAttribute('aria-label'), new RegExp(`^${unsupported} \\(no tool result states this\\)$`));
    assert.equal(await bad.getAttribute('title'), 'No tool result states this');
    // Visibly so: it does not look like the text around it.
    const looks = await bad.evaluate((el) => {
      const own = getComputedStyle(el);
      const around = getComputedStyle(el.parentElement);
      return {
        background: own.backgroundColor,
        aroundBackground: around.backgroundColor,
        decoration: `${own.textDecorationLine} ${own.textDecorationStyle}`,
        aroundDecoration: `${around.textDecorationLine} ${around.textDecorationStyle}`,
      };
    });
    assert.notEqual(looks.background, looks.aroundBackground, `a highlight behind the figure (${JSON.stringify(looks)})`);
    assert.match(looks.decoration, /underline/, `an underline (${looks.decoration})`);
    assert.notEqual(looks.decoration, looks.aroundDecoration);

    // The true figure: the backend's total, linked to the call that returned it.
    const good = answer.supported;
    assert.equal((await good.innerText()).trim(), String(total));
    const callId = await good.getAttribute('data-tool-call');
    assert.ok(callId, 'the supported figure names its tool call');
    assert.equal(await good.getAttribute('href'), `#tool-${callId}`);
    assert.equal(await answer.card.getAttribute('id'), `tool-${callId}`, 'it points at the getCustomers card');
    const cardTitle = (await answer.card.locator(byTestId('tool-card-title')).innerText()).trim();
    assert.notEqual(cardTitle, '');
    await good.hover();
    assert.equal(await good.getAttribute('title'), `From ${cardTitle}`, 'its tooltip names the tool');
    return answer;
  }

  it('marks the invented figure and links the true one to its tool card', async () => {
    await ask(page, QUESTION);
    await page.waitForURL(/\/c\/[^/]+$/);
    await assertMarks();

    await page.locator(byTestId('question-input')).blur();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'grounding.png'), animations: 'disabled' });
  });

  it('a click on the true figure brings its tool card into view and highlights it', async () => {
    // A later answer long enough that, scrolled back to the figure, its card is out of view.
    await ask(page, LATER_QUESTION);
    const later = page.locator(byTestId('message', '[data-role="assistant"]')).nth(1);
    await later.and(page.locator('[data-streaming="false"]')).waitFor();

    const answer = grounded();
    await answer.supported.evaluate((el) => el.scrollIntoView({ block: 'start' }));
    assert.equal(await answer.card.evaluate(placement), 'above', 'the card is scrolled out of view above the figure');
    const urlBefore = page.url();

    await answer.supported.click();
    await page.waitForFunction(
      (el) => el.classList.contains('tool-card-source'),
      await answer.card.elementHandle(),
    );
    assert.equal(await answer.card.evaluate(placement), 'inside', 'the card is in view');
    assert.notEqual(await answer.card.evaluate((el) => getComputedStyle(el).outlineStyle), 'none', 'the card is outlined');
    assert.equal(page.url(), urlBefore, 'the page stays where it is (no navigation)');
    // The highlight is a moment's, not for good.
    await page.waitForFunction((el) => !el.classList.contains('tool-card-source'), await answer.card.elementHandle());
  });

  it('a reload shows the same marks, from the stored answer', async () => {
    const conversation = page.url();
    await page.reload();
    assert.equal(page.url(), conversation);
    await page.locator(byTestId('message', '[data-role="assistant"]')).nth(1).waitFor();
    await assertMarks();
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
