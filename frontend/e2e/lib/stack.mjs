// The real system under test: `maitred all` from the debug binary, in a fresh
// temporary directory (its own SQLite database and demo credentials), on free ports,
// serving the built UI. Optionally with the scripted OpenAI-compatible upstream in
// place of the offline model, for answers whose length and pace a test controls.

import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { startProxy } from './proxy.mjs';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The maitred binary: MAITRED_BIN, else the debug build in the cargo target dir. */
export function maitredBinary() {
  if (process.env.MAITRED_BIN) return process.env.MAITRED_BIN;
  const target = process.env.CARGO_TARGET_DIR ?? join(repoRoot, 'target');
  return join(resolve(repoRoot, target), 'debug', 'maitred');
}

/** The scripted upstream's binary: SCRIPTED_LLM_BIN, else the debug build beside maitred's. */
export function scriptedLlmBinary() {
  if (process.env.SCRIPTED_LLM_BIN) return process.env.SCRIPTED_LLM_BIN;
  const target = process.env.CARGO_TARGET_DIR ?? join(repoRoot, 'target');
  return join(resolve(repoRoot, target), 'debug', 'scripted-llm');
}

/** The built UI that the gateway serves. */
export function uiDir() {
  return process.env.MAITRED_UI_DIR ?? join(repoRoot, 'frontend', 'dist');
}

export async function freePort() {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

/** Polls `url` until it answers 2xx, failing early if `child` exits. */
async function waitReady(url, child, logPath, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.spawnError) {
      throw new Error(`cannot run ${child.spawnfile} (build it, or set MAITRED_BIN / SCRIPTED_LLM_BIN): ${child.spawnError.message}`);
    }
    if (child.exitCode !== null) {
      throw new Error(`${url}: the process exited (${child.exitCode})\n${await tail(logPath)}`);
    }
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not become ready in ${timeoutMs} ms\n${await tail(logPath)}`);
}

async function tail(path, lines = 25) {
  try {
    return (await readFile(path, 'utf8')).split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

// A test process that ends without its after hooks (an uncaught error, a timeout)
// must not leave servers holding ports behind it.
const running = new Set();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

function launch(args, { cwd, env, logPath, binary = maitredBinary() }) {
  const log = createWriteStream(logPath);
  const child = spawn(binary, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  // Without a listener a missing binary is an uncaught exception, far from its cause.
  child.on('error', (error) => {
    child.spawnError = error;
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Starts maitred with the offline model, or, given a `script` (the JSON format
 * documented in crates/scripted-llm/src/lib.rs), with the scripted upstream as its model.
 * `script` may also be a function of the started system, `async (stack) => script`:
 * it is called once the backend answers and before the model is first asked, for a
 * model whose answer states what the backend holds (read at run time, not written
 * into the test). The gateway does not call its model before a question, so the
 * upstream can start after it.
 * With `proxy`, the browser reaches the gateway through a proxy that can cut its
 * event streams (see proxy.mjs), and the gateway knows the proxy as its public URL.
 *
 * @param {{ script?: object | ((stack: object) => object | Promise<object>), proxy?: boolean, env?: Record<string,string> }} [options]
 */
export async function startStack({ script, proxy = false, env = {} } = {}) {
  const work = await mkdtemp(join(tmpdir(), 'maitred-e2e-'));
  const children = [];
  let proxied;
  const extraEnv = { ...env };
  let scriptedLog;

  let llmPort;
  const startLlm = async (json) => {
    const scriptPath = join(work, 'script.json');
    await writeFile(scriptPath, JSON.stringify(json));
    scriptedLog = join(work, 'scripted-llm.log');
    const llm = launch(['--script', scriptPath, '--port', String(llmPort)], {
      binary: scriptedLlmBinary(),
      cwd: work,
      env: {},
      logPath: scriptedLog,
    });
    children.push(llm);
    await waitReady(`http://127.0.0.1:${llmPort}/v1/models`, llm, scriptedLog);
  };

  try {
    if (script) {
      llmPort = await freePort();
      if (typeof script !== 'function') await startLlm(script);
      Object.assign(extraEnv, {
        MAITRED_LLM_BASE_URL: `http://127.0.0.1:${llmPort}/v1`,
        MAITRED_LLM_MODEL: 'scripted',
      });
    }

    const [backend, gateway, mcp] = [await freePort(), await freePort(), await freePort()];
    let publicPort = gateway;
    if (proxy) {
      publicPort = await freePort();
      proxied = await startProxy(publicPort, gateway);
      extraEnv.MAITRED_GATEWAY_URL = `http://localhost:${publicPort}`;
    }
    const logPath = join(work, 'maitred.log');
    const dataDir = join(work, 'data');
    const roleEnv = {
      MAITRED_DATA_DIR: dataDir,
      MAITRED_BACKEND_PORT: String(backend),
      MAITRED_GATEWAY_PORT: String(gateway),
      MAITRED_MCP_PORT: String(mcp),
    };
    const maitred = launch(['all'], {
      cwd: work,
      env: {
        ...roleEnv,
        MAITRED_UI_DIR: uiDir(),
        RUST_LOG: process.env.RUST_LOG ?? 'info',
        ...extraEnv,
      },
      logPath,
    });
    children.push(maitred);
    for (const port of [backend, mcp, gateway]) {
      await waitReady(`http://localhost:${port}/readyz`, maitred, logPath);
    }

    const stack = {
      work,
      dataDir,
      // The gateway's public URL: the login's callback comes back here, so the
      // browser must use this very origin for the session cookie to count.
      gatewayUrl: `http://localhost:${publicPort}`,
      proxy: proxied,
      backendUrl: `http://localhost:${backend}`,
      async credentials() {
        return JSON.parse(await readFile(join(dataDir, 'dev-credentials.json'), 'utf8'));
      },
      async password(user) {
        const creds = await this.credentials();
        const entry = creds.users[user];
        if (!entry) throw new Error(`no demo user ${user} in dev-credentials.json`);
        return entry.password;
      },
      /** A client-credentials token, as `maitred token` gets it for a curl user. */
      async token(client) {
        const { stdout } = await promisify(execFile)(maitredBinary(), ['token', '--client', client], {
          cwd: work,
          env: { ...process.env, ...roleEnv },
        });
        return stdout.trim();
      },
      /** GET on the backend's resOS API, to check what the UI claims independently of it. */
      async backendGet(path) {
        const token = await this.token('maitred-mcp');
        const res = await fetch(`http://localhost:${backend}/api/v1/resos${path}`, {
          headers: { authorization: `Bearer ${token}` },
        });
        if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
        return { headers: res.headers, body: await res.json() };
      },
      /**
       * A date and time the demo restaurant can seat `people`, so a booking test does
       * not depend on today's weekday (it is closed on Mondays) or earlier bookings.
       */
      async freeSlot(people) {
        const dates = (await this.backendGet(`/bookings/available-dates?people=${people}`)).body;
        // Not the first: it may be today, whose free times can pass while a test runs.
        const date = dates[1] ?? dates[0];
        const times = (await this.backendGet(`/bookings/available-times?date=${date}&people=${people}`)).body;
        if (!date || times.length === 0) throw new Error(`no free table for ${people}`);
        return { date, time: times.includes('19:00') ? '19:00' : times.at(-1) };
      },
      log: () => tail(logPath),
      scriptedLog: () => (scriptedLog ? tail(scriptedLog) : Promise.resolve('')),
      async stop() {
        await proxied?.stop();
        for (const child of children.reverse()) await stop(child);
        if (!process.env.E2E_KEEP_WORK) await rm(work, { recursive: true, force: true });
      },
    };
    if (typeof script === 'function') await startLlm(await script(stack));
    return stack;
  } catch (error) {
    await proxied?.stop();
    for (const child of children.reverse()) await stop(child);
    if (!process.env.E2E_KEEP_WORK) await rm(work, { recursive: true, force: true });
    throw error;
  }
}
