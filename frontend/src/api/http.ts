import type { Task, TaskList } from "./tasks";
import type {
  Account,
  AccountList,
  AdminAccount,
  AdminAccountList,
  AuthStatus,
  ConnectStart,
  Conversation,
  ConversationSummary,
  Disconnected,
  ErrorBody,
  InputAction,
} from "./types";

/** An answer from the gateway that was not a success, with what the UI needs to react. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Seconds, from `Retry-After` (429, 503). */
    readonly retryAfter?: number,
    /** The error envelope's `details`, when it had any (e.g. a 400's `problems`). */
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** A request that never got an answer: the network, not the server. */
export class NetworkError extends Error {
  constructor(cause: unknown) {
    super("The gateway could not be reached. Check your connection.");
    this.name = "NetworkError";
    this.cause = cause;
  }
}

const FALLBACK_MESSAGES: Record<number, string> = {
  401: "Your session has ended. Sign in again to continue.",
  403: "The request was refused. Reload the page and try again.",
  404: "That was not found. It may have been deleted.",
  429: "Too many requests right now.",
  503: "The service is restarting. Try again in a moment.",
};

export async function errorFromResponse(response: Response): Promise<HttpError> {
  let body: Partial<ErrorBody> = {};
  try {
    body = (await response.json()) as Partial<ErrorBody>;
  } catch {
    // A proxy's HTML error page, say: the status is all there is.
  }
  const header = response.headers.get("Retry-After");
  const retryAfter = header !== null && /^\d+$/.test(header.trim()) ? Number(header) : undefined;
  const message =
    body.message ?? FALLBACK_MESSAGES[response.status] ?? `The request failed (HTTP ${response.status}).`;
  return new HttpError(response.status, body.code ?? "HTTP_ERROR", message, retryAfter, body.details);
}

/** Calls the gateway with the session cookie; writes carry the CSRF token. */
export class Api {
  constructor(private readonly csrfToken: string | null = null) {}

  writeHeaders(): Record<string, string> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (this.csrfToken) headers["X-CSRF-Token"] = this.csrfToken;
    return headers;
  }

  async request(path: string, init: RequestInit = {}): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(path, { credentials: "same-origin", ...init });
    } catch (cause) {
      if (init.signal?.aborted) throw cause;
      throw new NetworkError(cause);
    }
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  }

  private async json<T>(path: string, init?: RequestInit): Promise<T> {
    const response = await this.request(path, { ...init, headers: { Accept: "application/json", ...init?.headers } });
    return (await response.json()) as T;
  }

  private write(method: "POST" | "DELETE", path: string, body?: unknown): Promise<Response> {
    return this.request(path, {
      method,
      headers: this.writeHeaders(),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  status(): Promise<AuthStatus> {
    return this.json<AuthStatus>("/api/auth/status");
  }

  conversations(): Promise<ConversationSummary[]> {
    return this.json<ConversationSummary[]>("/api/v1/resos/conversations");
  }

  conversation(id: string, signal?: AbortSignal): Promise<Conversation> {
    return this.json<Conversation>(`/api/v1/resos/conversations/${encodeURIComponent(id)}`, { signal });
  }

  async deleteConversation(id: string): Promise<void> {
    await this.write("DELETE", `/api/v1/resos/conversations/${encodeURIComponent(id)}`);
  }

  async cancel(messageId: string): Promise<void> {
    await this.write("POST", `/api/v1/resos/chat/${encodeURIComponent(messageId)}/cancel`);
  }

  async decide(approvalId: string, approve: boolean, rememberMinutes = 0): Promise<void> {
    const body: { approve: boolean; remember_minutes?: number } = { approve };
    if (approve && rememberMinutes > 0) body.remember_minutes = rememberMinutes;
    await this.write("POST", `/api/v1/resos/chat/approvals/${encodeURIComponent(approvalId)}`, body);
  }

  /** Answers a tool's request for input; a 400's `details.problems` say what to fix. */
  async answerInput(inputId: string, action: InputAction, content?: Record<string, unknown>): Promise<void> {
    const body: { action: InputAction; content?: Record<string, unknown> } = { action };
    if (action === "accept" && content !== undefined) body.content = content;
    await this.write("POST", `/api/v1/resos/chat/inputs/${encodeURIComponent(inputId)}`, body);
  }

  /** The conversation's long-running tool calls (MCP tasks), running and ended. */
  async tasks(conversationId: string, signal?: AbortSignal): Promise<Task[]> {
    const list = await this.json<TaskList>(`/api/v1/resos/conversations/${encodeURIComponent(conversationId)}/tasks`, {
      signal,
    });
    return Array.isArray(list.tasks) ? list.tasks : [];
  }

  /** Stops a running task: 202 with the task; 409 when it had already ended. */
  async cancelTask(taskId: string): Promise<Task> {
    const response = await this.write("POST", `/api/v1/resos/chat/tasks/${encodeURIComponent(taskId)}/cancel`, {});
    return (await response.json()) as Task;
  }

  /** Answers a task's request for input, as a tool call's input is answered. */
  async answerTaskInput(taskId: string, action: InputAction, content?: Record<string, unknown>): Promise<Task> {
    const body: { action: InputAction; content?: Record<string, unknown> } = { action };
    if (action === "accept" && content !== undefined) body.content = content;
    const response = await this.write("POST", `/api/v1/resos/chat/tasks/${encodeURIComponent(taskId)}/input`, body);
    return (await response.json()) as Task;
  }

  /** Every MCP server that needs the person's own sign-in, connected or not. */
  async accounts(signal?: AbortSignal): Promise<Account[]> {
    const list = await this.json<AccountList>("/api/v1/resos/accounts", { signal });
    return Array.isArray(list.accounts) ? list.accounts : [];
  }

  /** Starts a sign-in at the server: its page is for the person to open. */
  async connectAccount(server: string): Promise<ConnectStart> {
    const response = await this.write("POST", `/api/v1/resos/accounts/${encodeURIComponent(server)}/connect`, {});
    return (await response.json()) as ConnectStart;
  }

  async disconnectAccount(server: string): Promise<Disconnected> {
    const response = await this.write("DELETE", `/api/v1/resos/accounts/${encodeURIComponent(server)}`);
    return (await response.json()) as Disconnected;
  }

  /** Everyone's connections; a 403 for anyone but an admin. */
  async adminAccounts(signal?: AbortSignal): Promise<AdminAccount[]> {
    const list = await this.json<AdminAccountList>("/api/v1/resos/admin/accounts", { signal });
    return Array.isArray(list.accounts) ? list.accounts : [];
  }

  async logout(): Promise<void> {
    await this.write("POST", "/logout");
  }

  /** The request that asks a question; its answer is the event stream. */
  ask(question: string, conversationId: string | null, signal: AbortSignal): Promise<Response> {
    const body: { question: string; conversation_id?: string } = { question };
    if (conversationId) body.conversation_id = conversationId;
    return this.request("/api/v1/resos/stream/chat", {
      method: "POST",
      headers: { ...this.writeHeaders(), Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    });
  }

  /** Watches an answer again from after `lastEventId`. */
  resume(messageId: string, lastEventId: number, signal: AbortSignal): Promise<Response> {
    return this.request(`/api/v1/resos/stream/chat/${encodeURIComponent(messageId)}`, {
      headers: { Accept: "text/event-stream", "Last-Event-ID": String(lastEventId) },
      signal,
    });
  }
}

export function loginUrl(returnTo: string): string {
  return `/login?return_to=${encodeURIComponent(returnTo)}`;
}
