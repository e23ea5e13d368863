// A tool that asks for input, through the whole page: the stream's events, the form on
// the tool card, the answer posted to the gateway and what the gateway says back.

import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { fakeBody, isTaskPoll, jsonBody, jsonResponse, sse, until, type FakeBody, type FetchCall } from "./test/fakeStream";

const SIGNED_IN = {
  authenticated: true,
  csrf_token: "csrf-5",
  user: { subject: "u1", name: "Oscar Operator", roles: ["OPERATOR"] },
  model: "maitred-offline",
};
const META = { conversation_id: "conv_3", message_id: "msg_3", model: "maitred-offline" };
const CALL = { id: "tc_1", server: "resos", tool: "createBooking", title: "Booking a table", arguments: { people: 2 } };
const REQUEST = {
  id: "in_7f",
  tool_call_id: "tc_1",
  server: "resos",
  tool: "createBooking",
  message: "Who is the booking for?",
  mode: "form",
  schema: {
    type: "object",
    properties: {
      guestName: { type: "string", title: "Name", minLength: 1 },
      email: { type: "string", format: "email", title: "Email" },
    },
    required: ["guestName", "email"],
  },
  expires_at: new Date(Date.now() + 300_000).toISOString(),
};

/** The gateway, by path: each input answer gets the next queued response. */
function gateway(): { calls: FetchCall[]; body: FakeBody; inputAnswers: Response[] } {
  const calls: FetchCall[] = [];
  const body = fakeBody();
  const inputAnswers: Response[] = [];
  const answer = (url: string, init: RequestInit): Response => {
    calls.push({ url, init });
    if (url === "/api/auth/status") return jsonResponse(200, SIGNED_IN);
    if (url === "/api/v1/resos/conversations") return jsonResponse(200, []);
    if (url === "/api/v1/resos/stream/chat") return body.response;
    if (isTaskPoll(url, init)) return jsonResponse(200, { tasks: [] });
    if (url.startsWith("/api/v1/resos/chat/inputs/")) {
      const next = inputAnswers.shift();
      if (!next) throw new Error(`unexpected answer ${url}`);
      return next;
    }
    throw new Error(`unexpected fetch ${url}`);
  };
  vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) => Promise.resolve().then(() => answer(url, init)));
  return { calls, body, inputAnswers };
}

async function askAndGetRequest(body: FakeBody): Promise<HTMLElement> {
  const input = await screen.findByTestId("question-input");
  fireEvent.change(input, { target: { value: "Book a table for 2 tomorrow at 19:00" } });
  fireEvent.keyDown(input, { key: "Enter" });
  act(() => {
    body.send(sse(1, "meta", META));
    body.send(sse(2, "tool_call", CALL));
    body.send(sse(3, "input_required", REQUEST));
  });
  return screen.findByTestId("input-card");
}

const answers = (calls: FetchCall[]): FetchCall[] => calls.filter((c) => c.url.includes("/chat/inputs/"));

describe("a tool asking for input", () => {
  let net: ReturnType<typeof gateway>;

  beforeEach(() => {
    window.history.replaceState(null, "", "/");
    net = gateway();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("is shown on its tool card, announced, focused, and answered with the form's content", async () => {
    render(<App />);
    const card = await askAndGetRequest(net.body);
    const tool = screen.getByTestId("tool-card");
    expect(tool.dataset.status).toBe("waiting");
    expect(within(tool).getByTestId("input-message").textContent).toBe("Who is the booking for?");
    // The card takes the focus in its mount effect, which may run after it is found.
    await until(() => document.activeElement === within(card).getByLabelText(/^Name/), "the focus on the form");
    await until(
      () => screen.getByTestId("live-region").textContent === "Booking a table needs your input: Who is the booking for?",
      "the announcement",
    );

    // The gateway finds a problem the form could not: shown by its field, the form stays.
    net.inputAnswers.push(
      jsonResponse(400, {
        code: "INVALID_REQUEST",
        message: "the answer does not fit the request",
        details: { problems: ["email: this address bounced before"] },
      }),
    );
    fireEvent.change(within(card).getByLabelText(/^Name/), { target: { value: "Ada Lovelace" } });
    fireEvent.change(within(card).getByLabelText(/^Email/), { target: { value: "ada@example.com" } });
    fireEvent.click(within(card).getByTestId("input-send"));
    await until(() => screen.queryAllByTestId("input-field-problem").length === 1, "the server's problem");

    const [first] = answers(net.calls);
    expect(first?.url).toBe("/api/v1/resos/chat/inputs/in_7f");
    expect(first?.init.method).toBe("POST");
    expect(first?.init.credentials).toBe("same-origin");
    expect(new Headers(first?.init.headers).get("X-CSRF-Token")).toBe("csrf-5");
    expect(jsonBody(first!.init)).toEqual({ action: "accept", content: { guestName: "Ada Lovelace", email: "ada@example.com" } });
    const email = within(card).getByLabelText(/^Email/);
    expect(email.closest("[data-testid=input-field]")?.textContent).toContain("this address bounced before");
    expect(email.getAttribute("aria-invalid")).toBe("true");
    expect(within(card).getByLabelText<HTMLInputElement>(/^Name/).value).toBe("Ada Lovelace");

    // Fixed and sent again: accepted, the card says so and the form goes.
    net.inputAnswers.push(jsonResponse(200, { id: "in_7f", status: "accepted" }));
    fireEvent.change(email, { target: { value: "ada@lovelace.example" } });
    fireEvent.submit(within(card).getByTestId("input-form"));
    await until(() => screen.queryByTestId("input-card") === null, "the form to close");
    expect(jsonBody(answers(net.calls)[1]!.init)).toEqual({
      action: "accept",
      content: { guestName: "Ada Lovelace", email: "ada@lovelace.example" },
    });
    expect(screen.getByTestId("input-outcome").textContent).toBe("You sent the details asked for.");
    expect(screen.getByTestId("tool-card").dataset.status).toBe("running");

    // The gateway's own word on it, and a replay of the request: neither reopens it.
    act(() => {
      net.body.send(sse(4, "input_resolved", { id: "in_7f", action: "accept" }));
      net.body.send(sse(5, "input_required", REQUEST));
    });
    await until(() => screen.getByTestId("tool-card").dataset.status === "running", "the call to run on");
    expect(screen.queryByTestId("input-card")).toBeNull();
    expect(screen.getAllByTestId("input-outcome")).toHaveLength(1);

    act(() => {
      net.body.send(sse(6, "tool_result", { id: "tc_1", status: "ok", duration_ms: 5000, summary: "booked" }));
      net.body.send(sse(7, "done", { finish_reason: "stop" }));
    });
    await until(() => screen.getByTestId("tool-card").dataset.status === "ok", "the result");
    expect(answers(net.calls)).toHaveLength(2);
  });

  it("declines, and says so when the request had closed already", async () => {
    render(<App />);
    const card = await askAndGetRequest(net.body);
    net.inputAnswers.push(jsonResponse(404, { code: "RESOURCE_NOT_FOUND", message: "not found" }));
    fireEvent.click(within(card).getByTestId("input-decline"));
    await until(() => screen.queryByTestId("input-card") === null, "the form to close");
    expect(jsonBody(answers(net.calls)[0]!.init)).toEqual({ action: "decline" });
    expect(screen.getByTestId("input-outcome").textContent).toMatch(/no longer open: it was already answered, it expired, or it is not yours/);
  });

  it("keeps the form when the answer could not be sent, with the reason", async () => {
    render(<App />);
    const card = await askAndGetRequest(net.body);
    net.inputAnswers.push(jsonResponse(503, { code: "UNAVAILABLE", message: "The gateway is restarting." }));
    net.inputAnswers.push(jsonResponse(200, { id: "in_7f", status: "declined" }));
    fireEvent.click(within(card).getByTestId("input-decline"));
    await until(() => screen.queryByTestId("input-problem") !== null, "the reason");
    expect(screen.getByTestId("input-problem").textContent).toBe("The gateway is restarting.");
    expect(screen.getByTestId<HTMLButtonElement>("input-decline").disabled).toBe(false);
    fireEvent.click(screen.getByTestId("input-decline"));
    await until(() => screen.queryByTestId("input-card") === null, "the form to close");
    expect(screen.getByTestId("input-outcome").textContent).toBe("You declined the request for input.");
  });

  it("closes when answered in another tab, with the outcome", async () => {
    render(<App />);
    await askAndGetRequest(net.body);
    act(() => net.body.send(sse(4, "input_resolved", { id: "in_7f", action: "cancel" })));
    await until(() => screen.queryByTestId("input-card") === null, "the form to close");
    expect(screen.getByTestId("input-outcome").textContent).toBe("The request for input was cancelled.");
    expect(answers(net.calls)).toHaveLength(0);
  });

  it("shows a tool's progress while it runs, and not after", async () => {
    render(<App />);
    const input = await screen.findByTestId("question-input");
    fireEvent.change(input, { target: { value: "When are we free next week?" } });
    fireEvent.keyDown(input, { key: "Enter" });
    act(() => {
      net.body.send(sse(1, "meta", META));
      net.body.send(sse(2, "tool_call", { ...CALL, tool: "findAvailability", title: "Finding free tables" }));
      net.body.send(sse(3, "tool_progress", { id: "tc_1", progress: 2, total: 7, message: "Checked 2 of 7 days" }));
    });
    const bar = await screen.findByRole("progressbar");
    expect(bar.getAttribute("aria-valuenow")).toBe("2");
    act(() => net.body.send(sse(4, "tool_progress", { id: "tc_1", progress: 5, total: 7, message: "Checked 5 of 7 days" })));
    await until(() => screen.getByRole("progressbar").getAttribute("aria-valuenow") === "5", "the bar to move");
    expect(screen.getByTestId("tool-progress-message").textContent).toBe("Checked 5 of 7 days");
    act(() => net.body.send(sse(5, "tool_result", { id: "tc_1", status: "ok", duration_ms: 700, summary: "3 dates" })));
    await until(() => screen.queryByRole("progressbar") === null, "the bar to go");
  });
});
