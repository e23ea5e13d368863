// The connected-accounts lab (tests/connected-accounts/: nanoidp, a real OAuth
// server, in front of a notes MCP server that needs a sign-in to it) as the browser
// tests use it: its ready.json, its counts (`lab.py count`) and its calls log; the
// gateway config that names its notes server; signing in on nanoidp's page; and, for
// a lab with client ID metadata documents, the https origin the browser uses for
// the gateway (see `startHttpsFront`).
// scripts/check-connected-accounts-ui starts the labs and names their state dirs in
// MAITRED_ACCOUNTS_LAB_DCR and MAITRED_ACCOUNTS_LAB_CIMD.

import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

import { CHROMIUM, VIEWPORT, isCspViolation } from './browser.mjs';
import { freePort, repoRoot } from './stack.mjs';

const labScript = join(repoRoot, 'tests', 'connected-accounts', 'lab.py');

/** The lab's Python (its virtualenv's), for `lab.py count`. */
function labPython() {
  if (process.env.MAITRED_ACCOUNTS_LAB_PYTHON) return process.env.MAITRED_ACCOUNTS_LAB_PYTHON;
  const venv = join(process.env.MAITRED_VENV_DIR ?? join(repoRoot, '.venv'), 'connected-accounts', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

async function tail(path, lines = 15) {
  try {
    return (await readFile(path, 'utf8')).trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(none)';
  }
}

/** A running lab, from its state dir; `null` when `dir` is unset (the tests are skipped). */
export function openLab(dir) {
  if (!dir) return null;
  const info = JSON.parse(readFileSync(join(dir, 'ready.json'), 'utf8'));
  return {
    dir,
    info,
    /** `lab.py count --state-dir DIR ARGS…`, as a number. */
    async count(...args) {
      const { stdout } = await promisify(execFile)(labPython(), [labScript, 'count', '--state-dir', dir, ...args]);
      return Number(stdout.trim());
    },
    /** Every tools/call the notes server served, in order: `{subject, tool, client_id, scopes, status, time}`. */
    async calls() {
      let text = '';
      try {
        text = await readFile(info.calls_log, 'utf8');
      } catch {
        // no call yet
      }
      return text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
    },
    /** The audit events nanoidp wrote, of `type`. */
    async audit(type) {
      let text = '';
      try {
        text = await readFile(info.audit_log, 'utf8');
      } catch {
        // nothing yet
      }
      return text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
        .filter((e) => e.event_type === type);
    },
    /** The end of the lab's logs, for a failure's message. */
    async logs() {
      const parts = [];
      for (const [name, path] of Object.entries(info.logs ?? {})) {
        parts.push(`--- lab ${name} log (tail)\n${await tail(path)}`);
      }
      return parts.join('\n');
    },
  };
}

/**
 * The gateway config file naming the lab's notes server as a `user_oauth` server
 * (registration "auto": a metadata document where nanoidp takes one, else dynamic
 * registration), in the lab's state dir; returns its path.
 */
export async function writeNotesConfig(lab) {
  const path = join(lab.dir, 'maitred-gateway.toml');
  const s = JSON.stringify; // a TOML basic string, for these plain ASCII values
  await writeFile(
    path,
    [
      '[[mcp_servers]]',
      `name = ${s(lab.info.server_name)}`,
      `url = ${s(lab.info.mcp_url)}`,
      'description = "The person\'s notes"',
      'read_only_tools = ["whoami", "list_notes"]',
      'timeout_secs = 10',
      '[mcp_servers.auth]',
      'type = "user_oauth"',
      'scopes = ["notes:read"]',
      '',
    ].join('\n'),
  );
  return path;
}

/**
 * An https origin in front of the gateway for the browser: every method, every
 * header (cookies, Location, Set-Cookie) both ways, event streams as they come,
 * with the lab's certificate.
 *
 * A gateway known by a client ID metadata document has the lab's https front
 * (`ready.json` `cimd_front`, where nanoidp fetches the document) as its public URL:
 * its client id, its callback and the login's callback are under it, so the browser
 * must use that origin. The lab's front only forwards GETs, without the browser's
 * cookies and without the gateway's Location or Set-Cookie (it is made for nanoidp's
 * fetch), so the browser's connections to that host:port are sent here instead
 * (`launchBrowserMapping`): the page's origin stays the front's.
 */
export async function startHttpsFront(targetPort, tlsDir) {
  const server = https.createServer(
    { cert: readFileSync(join(tlsDir, 'server.pem')), key: readFileSync(join(tlsDir, 'server-key.pem')) },
    (req, res) => {
      const upstream = http.request(
        { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      res.on('close', () => upstream.destroy());
      req.pipe(upstream);
    },
  );
  const port = await freePort();
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return {
    port,
    async stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}

/**
 * Headless Chromium as launchBrowser starts it; `mapping` (`{ from: 'host:port',
 * to: 'host:port' }`) sends the browser's connections for one origin elsewhere
 * (Chromium's --host-rules): the URL, the Host header and the cookies stay the
 * origin's own.
 */
export function launchBrowserMapping(mapping) {
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
  if (mapping) args.push(`--host-rules=MAP ${mapping.from} ${mapping.to}`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}

/**
 * A fresh context (a person's own browser) on `baseURL`, trusting the lab's
 * certificates (nanoidp's page is https under the lab's own CA), with nanoidp's
 * CDN links (unreachable here) refused at once. Like newPage, it collects the page's
 * uncaught errors and Content-Security-Policy violations for assertCleanPage.
 */
export async function newLabPage(browser, baseURL, { colorScheme = 'light' } = {}) {
  const context = await browser.newContext({
    baseURL,
    viewport: VIEWPORT,
    colorScheme,
    locale: 'en-GB',
    timezoneId: 'Europe/London',
    ignoreHTTPSErrors: true,
  });
  context.setDefaultTimeout(Number(process.env.E2E_TIMEOUT_MS ?? 15_000));
  await context.route('**/cdn.jsdelivr.net/**', (route) => route.abort());
  const page = await context.newPage();
  page.pageErrors = [];
  page.on('pageerror', (error) => page.pageErrors.push(error));
  page.cspViolations = [];
  page.on('console', (message) => {
    if (isCspViolation(message.text())) page.cspViolations.push(message.text());
  });
  return page;
}

/**
 * Clicks `button`, which opens nanoidp's sign-in page in a new tab; returns that tab
 * and the authorization request's parameters (`client_id`, `redirect_uri`, …).
 */
export async function openSignIn(page, button, lab) {
  const opened = page.context().waitForEvent('page');
  await button.click();
  const tab = await opened;
  await tab.waitForURL((url) => url.href.startsWith(lab.info.authorization_endpoint));
  return { tab, request: Object.fromEntries(new URL(tab.url()).searchParams) };
}

/**
 * Signs in on nanoidp's page in `tab` as `user`, with the lab's password, and waits
 * for the tab to land on the gateway's callback page.
 */
export async function signInAtLab(tab, lab, user) {
  const form = lab.info.login_form;
  await tab.locator(form.username).fill(user);
  await tab.locator(form.password).fill(lab.info.users[user]);
  await tab.locator(form.submit).click();
  await tab.waitForURL((url) => url.pathname === '/oauth/callback');
}
