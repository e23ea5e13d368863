// Headless Chromium from the system (Debian's package), driven by playwright-core:
// no browser download, so the suite runs where only the distribution's packages
// can be installed.

import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const VIEWPORT = { width: 1280, height: 800 };
export const artifactsDir = process.env.E2E_ARTIFACTS ?? join(tmpdir(), 'maitred-e2e-artifacts');

export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/**
 * A fresh context (its own cookies) on the gateway's origin. Uncaught page errors
 * and Content-Security-Policy violations are collected so a test can fail on them:
 * a UI that throws, or that tries to load something its policy refuses, is broken
 * even when the screen looks right.
 */
export async function newPage(browser, stack, { colorScheme = 'light' } = {}) {
  const context = await browser.newContext({
    baseURL: stack.gatewayUrl,
    viewport: VIEWPORT,
    colorScheme,
    locale: 'en-GB',
    timezoneId: 'Europe/London',
  });
  context.setDefaultTimeout(Number(process.env.E2E_TIMEOUT_MS ?? 15_000));
  await context.addInitScript({ content: RECORDER });
  const page = await context.newPage();
  page.pageErrors = [];
  page.on('pageerror', (error) => page.pageErrors.push(error));
  // Chromium reports every refusal on the console ("Refused to load the image ...
  // because it violates the following Content Security Policy directive ..."); the
  // page's own securitypolicyviolation event would be lost on each navigation.
  page.cspViolations = [];
  page.on('console', (message) => {
    if (isCspViolation(message.text())) page.cspViolations.push(message.text());
  });
  return page;
}

export const isCspViolation = (text) => /Content Security Policy/i.test(text);

/** What every test file checks last: the page never threw, and its policy never had to refuse anything. */
export function assertCleanPage(assert, page) {
  assert.deepEqual(page.pageErrors.map(String), [], 'uncaught errors in the page');
  assert.deepEqual(page.cspViolations, [], 'Content-Security-Policy violations');
}

export const byTestId = (id, attrs = '') => `[data-testid="${id}"]${attrs}`;

/** The newest assistant message, and its parts. */
export function lastAssistant(page) {
  const message = page.locator(byTestId('message', '[data-role="assistant"]')).last();
  return {
    message,
    text: message.locator(byTestId('assistant-text')),
    toolCards: message.locator(byTestId('tool-card')),
  };
}

/** Signs in through the gateway's login, on the identity provider's own page. */
export async function signIn(page, stack, user = 'admin') {
  const password = await stack.password(user);
  await page.goto('/');
  await page.locator(byTestId('login-button')).click();
  // The identity provider lives on another origin (the backend role).
  await page.waitForURL((url) => url.origin === stack.backendUrl);
  await page.locator('#username').fill(user);
  await page.locator('#password').fill(password);
  await Promise.all([
    page.waitForURL((url) => url.origin === stack.gatewayUrl),
    page.locator('button[type="submit"]').click(),
  ]);
  await page.locator(byTestId('user-menu')).waitFor();
}

/** Types a question and sends it with Enter, as a person would. */
export async function ask(page, question) {
  const input = page.locator(byTestId('question-input'));
  await input.fill(question);
  await input.press('Enter');
}

/** Polls `probe` until it returns a truthy value, which is returned. */
export async function waitFor(probe, { timeout = 15_000, interval = 100, message = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last;
    await new Promise((r) => setTimeout(r, interval));
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${message} (last: ${JSON.stringify(last)})`);
}

/** What the recorder saw of the answer while it streamed (see RECORDER). */
export function recorded(page) {
  return page.evaluate(() => ({
    texts: window.__e2e.texts.slice(),
    streaming: window.__e2e.streaming.slice(),
    statuses: { ...window.__e2e.statuses },
    progress: window.__e2e.progress.slice(),
  }));
}

export function resetRecorder(page) {
  return page.evaluate(() => window.__e2e.reset());
}

/**
 * Wraps a test body: on failure it keeps a screenshot and adds the server's log to
 * the error, which is usually all that is needed to see why.
 */
export function diagnosed(get, body) {
  return async (t) => {
    try {
      await body(t);
    } catch (error) {
      const { page, stack } = get();
      // A suite's before hook has no test name; its failure still needs the log.
      const name = (t?.name ?? 'setup').replace(/[^a-z0-9]+/gi, '-').toLowerCase();
      try {
        await mkdir(artifactsDir, { recursive: true });
        if (page) await page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
      } catch {
        // the page may be gone; the log still helps
      }
      const log = stack ? await stack.log() : '';
      error.message += `\n(screenshot in ${artifactsDir}/${name}.png)\n--- maitred log (tail)\n${log}`;
      throw error;
    }
  };
}

// Runs in the page before the app. Streaming is fast with the offline model, so a
// test that samples the DOM could miss it; a MutationObserver sees every render.
const RECORDER = `
(() => {
  const state = {
    texts: [], streaming: [], statuses: {}, progress: [],
    reset() { this.texts.length = 0; this.streaming.length = 0; this.statuses = {}; this.progress.length = 0; },
  };
  window.__e2e = state;
  const seen = (list, value) => { if (list[list.length - 1] !== value) list.push(value); };
  const observe = () => {
    new MutationObserver((records) => {
      for (const r of records) {
        if (r.type === 'attributes' && r.attributeName === 'data-streaming'
            && r.target.getAttribute('data-role') === 'assistant') {
          if (r.oldValue !== null) seen(state.streaming, r.oldValue);
          seen(state.streaming, r.target.getAttribute('data-streaming'));
        }
        if (r.type === 'attributes' && r.attributeName === 'data-status'
            && r.target.getAttribute('data-testid') === 'tool-card') {
          const key = r.target.getAttribute('data-tool') || '?';
          const list = (state.statuses[key] ||= []);
          if (r.oldValue !== null) seen(list, r.oldValue);
          seen(list, r.target.getAttribute('data-status'));
        }
      }
      const messages = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const last = messages[messages.length - 1];
      if (last) {
        if (last.getAttribute('data-streaming') !== null) seen(state.streaming, last.getAttribute('data-streaming'));
        for (const card of last.querySelectorAll('[data-testid="tool-card"]')) {
          const list = (state.statuses[card.getAttribute('data-tool') || '?'] ||= []);
          seen(list, card.getAttribute('data-status'));
        }
        // A tool's progress bar: every value it showed, as "now/max" (or "?" without a total).
        for (const bar of last.querySelectorAll('[role="progressbar"]')) {
          const now = bar.getAttribute('aria-valuenow');
          seen(state.progress, now === null ? '?' : now + '/' + bar.getAttribute('aria-valuemax'));
        }
        const text = last.querySelector('[data-testid="assistant-text"]');
        if (text && text.textContent) seen(state.texts, text.textContent);
      }
    }).observe(document.documentElement, {
      subtree: true, childList: true, characterData: true,
      attributes: true, attributeOldValue: true,
      attributeFilter: ['data-streaming', 'data-status', 'aria-valuenow'],
    });
  };
  if (document.documentElement) observe(); else document.addEventListener('DOMContentLoaded', observe);
})();
`;
