// Provisional: the stream's events for tools that ask the person for input and report
// progress, declared by hand until the gateway's generated types (api/generated.ts)
// carry them. Then this file goes and api/types.ts re-exports those instead.

export type InputMode = "form" | "url";

export type InputAction = "accept" | "decline" | "cancel";

export type InputRequiredEvent = {
  id: string;
  /** The tool call that asks: its card shows the request. */
  tool_call_id: string;
  server: string;
  tool: string;
  /** Untrusted text from the MCP server: shown as plain text only. */
  message: string;
  mode: InputMode;
  /** Form mode: the MCP spec's restricted elicitation schema (a flat object). */
  schema?: unknown;
  /** URL mode: where the person is asked to go. */
  url?: string;
  expires_at: string;
};

export type InputResolvedEvent = { id: string; action: InputAction };

export type ToolProgressEvent = {
  /** The tool call's id. */
  id: string;
  progress: number;
  total?: number;
  message?: string;
};
