// Connected accounts against a real authorization server: the lab of
// tests/connected-accounts/ (nanoidp from PyPI in front of a notes MCP server that
// hides its tools until sign-in), started by scripts/check-connected-accounts-ui,
// which names its state dirs in MAITRED_ACCOUNTS_LAB_DCR (dynamic client
// registration, no client ID metadata documents) and MAITRED_ACCOUNTS_LAB_CIMD (with
// them); without those the suites are skipped.
//
// - Two people, each in their own browser, ask about their notes: the scripted model
//   calls notes__connect, each sees the "Connect notes" card, signs in on nanoidp's
//   page in the tab it opens (operator as alice, user as bob), and the answer goes
//   on; the notes server saw each one's calls as their own nanoidp user, and the
//   gateway registered itself dynamically.
// - A person connects from the Connected accounts panel at a server that takes a
//   client ID metadata document: nanoidp fetched maitred's document and knows
//   maitred by its URL, with no registration; a question's call reaches the notes
//   server as their nanoidp user; then they disconnect and nanoidp is told to revoke.
//   The gateway's public URL is then the lab's https front, and so is the browser's
//   origin (see startHttpsFront in lib/accounts-lab.mjs).
// Screenshots of the card and the panel go to the artifacts folder, or with
// E2E_UPDATE_SCREENSHOTS=1 over docs/screenshots/connect-card.png and
// connected-accounts.png.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  launchBrowserMapping,
  newLabPage,
  openLab,
  openSignIn,
  signInAtLab,
  startHttpsFront,
  writeNotesConfig,
} from '../lib/accounts-lab.mjs';
import { artifactsDir, ask, assertCleanPage, byTestId, diagnosed, lastAssistant, signIn } from '../lib/browser.mjs';
import { startProxy } from '../lib/proxy.mjs';
import { repoRoot, startStack } from '../lib/stack.mjs';

const outDir = process.env.E2E_UPDATE_SCREENSHOTS ? join(repoRoot, 'docs', 'screenshots') : artifactsDir;

const dcrLab = openLab(process.env.MAITRED_ACCOUNTS_LAB_DCR);
const cimdLab = openLab(process.env.MAITRED_ACCOUNTS_LAB_CIMD);
const METADATA_PATH = '/oauth/client-metadata.json';

/** What `diagnosed` needs, with the lab's logs after maitred's. */
function diagnosis(page, stack, lab) {
  return {
    page,
    stack: stack && {
      log: async () => `${await stack.log()}\n${lab ? await lab.logs() : ''}`,
    },
  };
}

/** The chat card of the newest answer, and its parts. */
function connectCard(page) {
  const answer = lastAssistant(page);
  const card = answer.message.getByRole('region', { name: 'Connect notes' });
  return {
    answer,
    card,
    open: card.getByRole('button', { name: 'Connect', exact: true }),
    waiting: card.locator(byTestId('connect-waiting')),
    outcome: answer.message.locator(byTestId('input-outcome')),
  };
}

describe('two people connect their notes from the chat (dynamic registration)', { skip: !dcrLab && 'MAITRED_ACCOUNTS_LAB_DCR is not set' }, () => {
  const lab = dcrLab;
  const ANSWERS = {
    operator: 'Your notes account is connected; whoami answered.',
    user: 'You are connected to notes now; whoami answered.',
  };
  // The model's turns in the order the test asks for them: both people ask and
  // each answer stops at its card (operator's connect, user's); then operator
  // signs in and gets the answer (whoami, text), then user.
  const script = {
    turns: [
      { tool_calls: [{ id: 'call_connect', name: 'notes__connect', arguments: {} }] },
      { tool_calls: [{ id: 'call_connect', name: 'notes__connect', arguments: {} }] },
      { tool_calls: [{ id: 'call_whoami', name: 'notes__whoami', arguments: {} }] },
      { text: ANSWERS.operator },
      { tool_calls: [{ id: 'call_whoami', name: 'notes__whoami', arguments: {} }] },
      { text: ANSWERS.user },
      // Spares, so an unexpected extra model turn fails an assertion, not the model.
      { text: 'Nothing more to add.' },
      { text: 'Nothing more to add.' },
    ],
  };
  const NANOIDP_USER = { operator: 'alice', user: 'bob' };
  let stack, browser;
  const pages = {};
  let current;
  const it = (name, body) => test(name, diagnosed(() => diagnosis(current, stack, lab), body));

  before(diagnosed(() => diagnosis(current, stack, lab), async () => {
    const config = await writeNotesConfig(lab);
    stack = await startStack({
      script,
      env: { MAITRED_GATEWAY_CONFIG: config, SSL_CERT_FILE: lab.info.ca_cert },
    });
    browser = await launchBrowserMapping();
    await mkdir(outDir, { recursive: true });
    for (const person of ['operator', 'user']) {
      current = pages[person] = await newLabPage(browser, stack.gatewayUrl);
      await signIn(current, stack, person);
    }
  }));

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('each sees the Connect notes card, signs in at nanoidp as their own user, and gets the answer', async () => {
    // Both ask; each answer stops at its card.
    for (const person of ['operator', 'user']) {
      current = pages[person];
      await ask(current, 'Who am I at notes?');
      const { card, open } = connectCard(current);
      await card.waitFor({ timeout: 30_000 });
      assert.equal(await card.getAttribute('data-state'), 'open');
      assert.equal(await card.locator(byTestId('connect-host')).innerText(), new URL(lab.info.issuer).host);
      await open.waitFor();
    }
    current = pages.operator;
    await current.locator(byTestId('question-input')).blur();
    await current.mouse.move(0, 0);
    await current.screenshot({ path: join(outDir, 'connect-card.png'), animations: 'disabled' });

    for (const person of ['operator', 'user']) {
      current = pages[person];
      const seen = (await lab.calls()).length;
      const { answer, card, open, waiting, outcome } = connectCard(current);
      const { tab, request } = await openSignIn(current, open, lab);
      assert.equal(request.redirect_uri, `${stack.gatewayUrl}/oauth/callback`);
      assert.equal(request.code_challenge_method, 'S256');
      // While the sign-in tab is open the card waits for it.
      await card.and(current.locator('[data-state="waiting"]')).waitFor();
      await waiting.waitFor();
      await signInAtLab(tab, lab, NANOIDP_USER[person]);
      await tab.getByRole('heading', { name: 'Connected notes' }).waitFor();
      await tab.close();

      // Back in the chat: the card settles and the answer goes on.
      await outcome.waitFor({ timeout: 30_000 });
      assert.equal(await outcome.innerText(), 'You signed in at notes.');
      assert.equal(await outcome.getAttribute('data-outcome'), 'accept');
      await card.waitFor({ state: 'detached' });
      await answer.message.and(current.locator('[data-streaming="false"]')).waitFor({ timeout: 30_000 });
      await answer.text.getByText(ANSWERS[person]).waitFor();
      const whoami = answer.toolCards.and(current.locator('[data-tool="whoami"]'));
      assert.equal(await whoami.getAttribute('data-status'), 'ok');

      // The notes server saw this person's calls as their own nanoidp user.
      const calls = (await lab.calls()).slice(seen);
      assert.deepEqual(
        calls.map((c) => [c.tool, c.subject, c.status]),
        [['whoami', NANOIDP_USER[person], 'accepted']],
        `${person}'s calls at the notes server: ${JSON.stringify(calls)}`,
      );
    }

    const calls = await lab.calls();
    assert.deepEqual(
      calls.map((c) => c.subject),
      ['alice', 'bob'],
      `every call at the notes server: ${JSON.stringify(calls)}`,
    );
    // Both tokens were issued to the client the gateway registered there.
    assert.equal(calls[0].client_id, calls[1].client_id);
  });

  it('registered the gateway at nanoidp dynamically, with no metadata document', async () => {
    const registered = await lab.count('--event', 'client_registered');
    assert.ok(registered >= 1, `dynamic registrations: ${registered}`);
    assert.equal(await lab.count('--cimd-fetches'), 0, 'metadata-document fetches');
    const [{ client_id: client }] = await lab.calls();
    assert.equal(await lab.count('--event', 'client_registered', '--client', client), 1, `the registration of ${client}`);
    assert.doesNotMatch(client, /^https?:/, 'a registered client id, not a URL');
    // Each person signed in once, as that client.
    assert.equal(await lab.count('--event', 'authorization_request', '--client', client), 2);
  });

  it('threw no uncaught errors in the pages, and broke no Content-Security-Policy', () => {
    for (const page of Object.values(pages)) assertCleanPage(assert, page);
  });
});

describe('a person connects notes from the Connected accounts panel (client ID metadata document)', { skip: !cimdLab && 'MAITRED_ACCOUNTS_LAB_CIMD is not set' }, () => {
  const lab = cimdLab;
  const front = cimdLab && new URL(cimdLab.info.cimd_front);
  // The gateway's public URL is the lab's https front, so its client id is
  // <front>/oauth/client-metadata.json, an https URL nanoidp takes as one.
  const clientId = cimdLab && `${cimdLab.info.cimd_front}${METADATA_PATH}`;
  const ANSWER = 'Your notes account answered whoami.';
  const script = {
    turns: [
      { tool_calls: [{ id: 'call_whoami', name: 'notes__whoami', arguments: {} }] },
      { text: ANSWER },
      { text: 'Nothing more to add.' },
      { text: 'Nothing more to add.' },
    ],
  };
  let stack, browser, page, forwarder, httpsFront;
  const it = (name, body) => test(name, diagnosed(() => diagnosis(page, stack, lab), body));

  before(diagnosed(() => diagnosis(page, stack, lab), async () => {
    const config = await writeNotesConfig(lab);
    stack = await startStack({
      script,
      env: { MAITRED_GATEWAY_CONFIG: config, SSL_CERT_FILE: lab.info.ca_cert, MAITRED_GATEWAY_URL: front.origin },
    });
    const gatewayPort = Number(new URL(stack.gatewayUrl).port);
    // nanoidp fetches the document through the lab's front, which forwards to the
    // port the script chose for it (ready.json cimd_upstream): from there to the gateway.
    forwarder = await startProxy(Number(new URL(lab.info.cimd_upstream).port), gatewayPort);
    // The browser's own connections to the front's origin reach the gateway in full.
    httpsFront = await startHttpsFront(gatewayPort, join(lab.dir, 'tls'));
    browser = await launchBrowserMapping({ from: front.host, to: `127.0.0.1:${httpsFront.port}` });
    stack.gatewayUrl = front.origin;
    page = await newLabPage(browser, front.origin);
    await mkdir(outDir, { recursive: true });
    await signIn(page, stack, 'operator');
  }));

  after(async () => {
    await browser?.close();
    await httpsFront?.stop();
    await forwarder?.stop();
    await stack?.stop();
  });

  const dialog = () => page.getByRole('dialog', { name: 'Connected accounts' });
  const row = () => dialog().locator(byTestId('account-row', '[data-server="notes"]'));
  const rowIn = (status) => dialog().locator(byTestId('account-row', `[data-server="notes"][data-status="${status}"]`));

  it('signs in from the panel, and the row shows notes connected', async () => {
    // The whole UI runs on the https origin: its login cookies are the Secure, host-only kind.
    const cookies = await page.context().cookies(front.origin);
    assert.ok(
      cookies.some((c) => c.name === '__Host-maitred_session' && c.secure),
      `cookies: ${cookies.map((c) => c.name)}`,
    );

    await page.getByRole('button', { name: 'Connected accounts' }).click();
    await rowIn('not_connected').waitFor();

    const { tab, request } = await openSignIn(page, dialog().getByRole('button', { name: 'Connect notes' }), lab);
    assert.equal(request.client_id, clientId, 'the sign-in names maitred by its metadata document');
    assert.equal(request.redirect_uri, `${front.origin}/oauth/callback`);
    await rowIn('waiting').waitFor();
    await signInAtLab(tab, lab, 'alice');
    await tab.getByRole('heading', { name: 'Connected notes' }).waitFor();
    await tab.close();
    await page.bringToFront();

    // The row looks again every 2 s while it waits.
    await rowIn('connected').waitFor({ timeout: 20_000 });
    assert.match(await row().locator(byTestId('account-scopes')).innerText(), /notes:read/);
    assert.equal(await row().locator(byTestId('account-client')).innerText(), 'client metadata document');
    await page.mouse.move(0, 0);
    await page.screenshot({ path: join(outDir, 'connected-accounts.png'), animations: 'disabled' });
  });

  it('was known to nanoidp by its metadata document, with no registration', async () => {
    const fetches = await lab.count('--cimd-fetches', '--path', METADATA_PATH);
    assert.ok(fetches >= 1, `nanoidp fetched the metadata document (${fetches} fetches)`);
    const requests = await lab.count('--event', 'authorization_request', '--client', clientId);
    assert.equal(requests, 1, `authorization requests by ${clientId}`);
    // Every authorization request at this lab was by that client.
    const all = await lab.audit('authorization_request');
    assert.deepEqual([...new Set(all.map((e) => e.client_id))], [clientId]);
    assert.equal(await lab.count('--event', 'client_registered', '--status', 'any'), 0, 'dynamic registrations');
  });

  it("calls the notes server as the person's nanoidp user, with a token issued to the document's client", async () => {
    await dialog().getByRole('button', { name: 'Close' }).click();
    await dialog().waitFor({ state: 'detached' });
    await ask(page, 'Who am I at notes?');
    const answer = lastAssistant(page);
    await answer.message.and(page.locator('[data-streaming="false"]')).waitFor({ timeout: 30_000 });
    await answer.text.getByText(ANSWER).waitFor();
    assert.equal(await answer.message.getByRole('region', { name: 'Connect notes' }).count(), 0, 'no Connect card: connected');
    const whoami = answer.toolCards.and(page.locator('[data-tool="whoami"]'));
    assert.equal(await whoami.getAttribute('data-status'), 'ok');
    const calls = await lab.calls();
    assert.deepEqual(
      calls.map((c) => [c.tool, c.subject, c.client_id, c.status]),
      [['whoami', 'alice', clientId, 'accepted']],
      JSON.stringify(calls),
    );
  });

  it('disconnects from the panel, after asking, and nanoidp was told to revoke', async () => {
    await page.getByRole('button', { name: 'Connected accounts' }).click();
    await rowIn('connected').waitFor();
    await dialog().getByRole('button', { name: 'Disconnect notes' }).click();
    await dialog().getByRole('button', { name: 'Yes, disconnect notes' }).click();
    const note = row().locator(byTestId('account-note'));
    await note.waitFor();
    assert.equal(await note.innerText(), "Disconnected. notes was told to revoke maitred's access.");
    assert.equal(await row().getAttribute('data-status'), 'not_connected');
    await dialog().getByRole('button', { name: 'Connect notes' }).waitFor();
    const revocations = await lab.count('--event', 'revocation_request', '--client', clientId, '--status', 'any');
    assert.ok(revocations >= 1, `revocation requests at nanoidp: ${revocations}`);
  });

  it('threw no uncaught errors in the page, and broke no Content-Security-Policy', () => {
    assertCleanPage(assert, page);
  });
});
