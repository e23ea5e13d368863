import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { fakeBody, fakeFetch, jsonBody, jsonResponse, sse, until } from "./test/fakeStream";

const SIGNED_IN = {
  authenticated: true,
  csrf_token: "csrf-9",
  user: { subject: "u1", name: "Oscar Operator", email: "o@example.test", roles: ["OPERATOR"] },
  model: "maitred-offline",
};
const META = { conversation_id: "conv_7", message_id: "msg_7", model: "maitred-offline" };

describe("App", () => {
  let net: ReturnType<typeof fakeFetch>;

  beforeEach(() => {
    net = fakeFetch();
    vi.stubGlobal("fetch", net.fetch);
    window.history.replaceState(null, "", "/");
    localStorage.clear();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("sends the browser to the login with the page to come back to", async () => {
    window.history.replaceState(null, "", "/c/conv_1");
    net.queue(jsonResponse(200, { authenticated: false, login_url: "/login", model: "gpt" }));
    render(<App />);
    const button = await screen.findByTestId("login-button");
    expect(button.getAttribute("href")).toBe("/login?return_to=%2Fc%2Fconv_1");
  });

  it("asks, streams the answer with its tool call, and lands on the new conversation", async () => {
    net.queue(jsonResponse(200, SIGNED_IN));
    net.queue(jsonResponse(200, []));
    const body = fakeBody();
    net.queue(body.response);
    net.queue(jsonResponse(200, [{ id: "conv_7", title: "Tables?", created_at: "", updated_at: "" }]));
    net.queue(jsonResponse(200, [{ id: "conv_7", title: "Tables?", created_at: "", updated_at: "" }]));
    render(<App />);

    expect((await screen.findByTestId("user-name")).textContent).toBe("Oscar Operator");
    expect(screen.getByTestId("user-roles").textContent).toContain("OPERATOR");
    expect(screen.getByTestId("offline-note")).toBeTruthy();

    const input = screen.getByTestId("question-input");
    fireEvent.change(input, { target: { value: "Which tables seat six?" } });
    fireEvent.keyDown(input, { key: "Enter" });
    await until(() => net.calls.length === 3, "the question");
    const ask = net.calls[2]!;
    expect(new Headers(ask.init.headers).get("X-CSRF-Token")).toBe("csrf-9");

    act(() => {
      body.send(sse(1, "meta", META));
      body.send(sse(2, "tool_call", { id: "tc_1", server: "resos", tool: "getTables", title: "Looking up tables", arguments: {} }));
      body.send(sse(3, "token", { text: "| Table | Seats |\n|---|---|\n| T4 | 6 |\n" }));
    });
    await until(() => screen.queryAllByTestId("tool-card").length === 1, "the tool card");
    const answer = screen.getAllByTestId("message").find((m) => m.dataset.role === "assistant")!;
    expect(answer.dataset.streaming).toBe("true");
    expect(screen.getByTestId("stop-button")).toBeTruthy();
    expect(window.location.pathname).toBe("/c/conv_7");

    act(() => {
      body.send(sse(4, "tool_result", { id: "tc_1", status: "ok", duration_ms: 42, summary: "20 records" }));
      body.send(sse(5, "done", { finish_reason: "stop" }));
    });
    await until(() => answer.dataset.streaming === "false", "the end of the answer");
    expect(screen.getByTestId("tool-card").dataset.status).toBe("ok");
    expect(screen.getByTestId("tool-card-duration").textContent).toBe("42 ms");
    expect(within(screen.getByTestId("assistant-text")).getByRole("table")).toBeTruthy();
    expect(screen.queryByTestId("stop-button")).toBeNull();
    await until(() => screen.queryAllByTestId("conversation-item").length === 1, "the conversation in the list");
  });

  it("shows what is left of the budget above the composer, and a spent budget as such", async () => {
    net.queue(jsonResponse(200, SIGNED_IN));
    net.queue(jsonResponse(200, []));
    const body = fakeBody();
    net.queue(body.response);
    net.queue(jsonResponse(200, [{ id: "conv_7", title: "Tables?", created_at: "", updated_at: "" }]));
    net.queue(jsonResponse(200, [{ id: "conv_7", title: "Tables?", created_at: "", updated_at: "" }]));
    render(<App />);
    const input = await screen.findByTestId("question-input");
    fireEvent.change(input, { target: { value: "Which tables seat six?" } });
    fireEvent.keyDown(input, { key: "Enter" });
    await until(() => net.calls.length === 3, "the question");

    act(() => {
      body.send(sse(1, "meta", META));
      body.send(sse(2, "token", { text: "Looking." }));
      body.send(sse(3, "budget", { scope: "role", window: "daily", remaining_tokens: 1200, remaining_cost: 0.5 }));
    });
    await until(() => screen.queryByTestId("budget-left") !== null, "the budget line");
    expect(screen.getByTestId("budget-left").textContent).toBe("Your team's budget today: 1,200 tokens · $0.5000 left");

    act(() => {
      body.send(sse(4, "budget", { scope: "role", window: "daily", remaining_tokens: 300, remaining_cost: 0.1 }));
      body.send(sse(5, "error", { code: "budget", message: "Your team's budget for today is spent." }));
      body.send(sse(6, "done", { finish_reason: "error" }));
    });
    const banner = await screen.findByTestId("error-banner");
    expect(banner.textContent).toContain("The budget is spent");
    expect(banner.textContent).toContain("Your team's budget for today is spent.");
    // Asking again would spend from the same budget: no retry is offered.
    expect(within(banner).queryByTestId("retry-button")).toBeNull();
    expect(screen.getByTestId("budget-left").textContent).toContain("300 tokens");
  });

  it("shows a refused question with a retry that asks again", async () => {
    net.queue(jsonResponse(200, SIGNED_IN));
    net.queue(jsonResponse(200, []));
    net.queue(jsonResponse(429, { code: "RATE_LIMIT_EXCEEDED", message: "too many requests: 3 at once; retry in 5 s" }, { "Retry-After": "5" }));
    net.queue(jsonResponse(200, []));
    render(<App />);
    const input = await screen.findByTestId("question-input");
    fireEvent.change(input, { target: { value: "Hello?" } });
    fireEvent.click(screen.getByTestId("send-button"));
    const banner = await screen.findByTestId("error-banner");
    expect(banner.textContent).toContain("Too many questions");
    expect(banner.textContent).toContain("5 s");
    expect(screen.getAllByTestId("message")).toHaveLength(1);

    const body = fakeBody();
    net.queue(body.response);
    fireEvent.click(screen.getByTestId("retry-button"));
    await until(() => net.calls.length === 5, "the question asked again");
    expect(jsonBody(net.calls[4]!.init)).toEqual({ question: "Hello?" });
    expect(screen.queryByTestId("error-banner")).toBeNull();
    // The unsent copy is replaced by the one being asked.
    expect(screen.getAllByTestId("message").filter((m) => m.dataset.role === "user")).toHaveLength(1);
  });

  it("signs out only when the server ended the session", async () => {
    const alert = vi.spyOn(window, "alert").mockImplementation(() => {});
    net.queue(jsonResponse(200, SIGNED_IN));
    net.queue(jsonResponse(200, []));
    render(<App />);
    const signOut = async (): Promise<void> => {
      if (!screen.queryByTestId("sign-out")) fireEvent.click(await screen.findByTestId("user-menu"));
      fireEvent.click(await screen.findByTestId("sign-out"));
    };

    // The server could not end it: still signed in, and told so.
    net.queue(jsonResponse(500, { code: "INTERNAL_ERROR", message: "internal error" }));
    await signOut();
    await until(() => alert.mock.calls.length === 1, "the alert");
    expect(String(alert.mock.calls[0]![0])).toContain("still signed in");
    expect(screen.queryByTestId("login-button")).toBeNull();

    // Already ended there (401): signed out here too.
    net.queue(jsonResponse(401, { code: "UNAUTHORIZED", message: "no session" }));
    await signOut();
    await screen.findByTestId("login-button");
    expect(alert).toHaveBeenCalledTimes(1);
    expect(net.calls.filter((c) => c.url === "/logout")).toHaveLength(2);
  });

  it("keeps the theme chosen, on <html data-theme>", async () => {
    net.queue(jsonResponse(200, SIGNED_IN));
    net.queue(jsonResponse(200, []));
    render(<App />);
    const toggle = await screen.findByTestId("theme-toggle");
    const before = document.documentElement.dataset.theme;
    fireEvent.click(toggle);
    const after = document.documentElement.dataset.theme;
    expect(after).not.toBe(before);
    expect(localStorage.getItem("maitred.theme")).toBe(after);
  });
});
