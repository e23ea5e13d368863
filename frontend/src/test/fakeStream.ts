// A response body the test writes to by hand, and a fetch that hands them out in order.

export interface FakeBody {
  response: Response;
  send: (text: string) => void;
  /** The connection drops, as a network blip does. */
  drop: () => void;
  end: () => void;
}

export function fakeBody(status = 200, headers: Record<string, string> = {}): FakeBody {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  const encoder = new TextEncoder();
  return {
    response: new Response(body, { status, headers: { "Content-Type": "text/event-stream", ...headers } }),
    send: (text) => controller.enqueue(encoder.encode(text)),
    drop: () => controller.error(new TypeError("network error")),
    end: () => controller.close(),
  };
}

export function sse(id: number, event: string, data: unknown): string {
  return `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

export interface FetchCall {
  url: string;
  init: RequestInit;
}

/** A conversation's tasks being polled (`GET …/conversations/{id}/tasks`). */
export const isTaskPoll = (url: string, init: RequestInit = {}): boolean =>
  (init.method ?? "GET") === "GET" && /^\/api\/v1\/resos\/conversations\/[^/]+\/tasks$/.test(url);

/**
 * A fetch answering each call with the next queued response (or a thrown network error).
 * The page's polls of a conversation's tasks are answered with none, apart from the
 * queue and the calls (they come whenever an answer ends), and counted in `taskPolls`.
 */
export function fakeFetch(): {
  fetch: typeof fetch;
  calls: FetchCall[];
  taskPolls: FetchCall[];
  queue: (answer: Response | Error | (() => Response | Promise<Response>)) => void;
} {
  const calls: FetchCall[] = [];
  const taskPolls: FetchCall[] = [];
  const answers: (Response | Error | (() => Response | Promise<Response>))[] = [];
  const fetchFn = (async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (isTaskPoll(url, init)) {
      taskPolls.push({ url, init });
      return jsonResponse(200, { tasks: [] });
    }
    calls.push({ url, init });
    const next = answers.shift();
    if (!next) throw new Error(`unexpected fetch ${url}`);
    if (next instanceof Error) throw next;
    return typeof next === "function" ? next() : next;
  }) as typeof fetch;
  return { fetch: fetchFn, calls, taskPolls, queue: (a) => answers.push(a) };
}

/** A call's JSON body, parsed; a body that is not text fails the test instead of parsing "[object ...]". */
export function jsonBody(init: RequestInit): unknown {
  if (typeof init.body !== "string") throw new Error(`the body is not JSON text: ${typeof init.body}`);
  return JSON.parse(init.body);
}

export const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function until(check: () => boolean, what = "condition", ms = 2000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await tick(2);
  }
}
