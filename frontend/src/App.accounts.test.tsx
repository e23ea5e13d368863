// Connected accounts through the whole page: the gateway's "Connect <server>" card in
// the stream, answered Not now or settled by the gateway once the sign-in comes back,
// and the panel reached from the top bar.

import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { standInForDialog } from "./test/dialog";
import { fakeBody, isTaskPoll, jsonBody, jsonResponse, sse, until, type FakeBody, type FetchCall } from "./test/fakeStream";

const SIGNED_IN = {
  authenticated: true,
  csrf_token: "csrf-a",
  user: { subject: "u1", name: "Oscar Operator", roles: ["OPERATOR"] },
  model: "maitred-offline",
};
const META = { conversation_id: "conv_9", message_id: "msg_9", model: "maitred-offline" };
const CALL = { id: "tc_9", server: "github", tool: "listIssues", title: "Listing issues", arguments: {} };
const CONNECT = {
  id: "in_9",
  tool_call_id: "tc_9",
  server: "github",
  tool: "listIssues",
  message: "Sign in to GitHub so maitred can read your issues.",
  mode: "url",
  url: "https://github.example/login/oauth/authorize?state=s9",
  connect: { server: "github", host: "github.example", reason: "reconnect" },
  expires_at: new Date(Date.now() + 600_000).toISOString(),
};

function gateway(): { calls: FetchCall[]; body: FakeBody } {
  const calls: FetchCall[] = [];
  const body = fakeBody();
  const answer = (url: string, init: RequestInit): Response => {
    calls.push({ url, init });
    if (url === "/api/auth/status") return jsonResponse(200, SIGNED_IN);
    if (url === "/api/v1/resos/conversations") return jsonResponse(200, []);
    if (url === "/api/v1/resos/stream/chat") return body.response;
    if (isTaskPoll(url, init)) return jsonResponse(200, { tasks: [] });
    if (url === "/api/v1/resos/chat/inputs/in_9") return jsonResponse(200, { id: "in_9", status: "declined" });
    if (url === "/api/v1/resos/accounts") return jsonResponse(200, { accounts: [] });
    if (url === "/api/v1/resos/admin/accounts") return jsonResponse(403, { code: "FORBIDDEN", message: "Admins only." });
    throw new Error(`unexpected fetch ${url}`);
  };
  vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) => Promise.resolve().then(() => answer(url, init)));
  return { calls, body };
}

async function askAndGetCard(body: FakeBody): Promise<HTMLElement> {
  const input = await screen.findByTestId("question-input");
  fireEvent.change(input, { target: { value: "Which issues are open?" } });
  fireEvent.keyDown(input, { key: "Enter" });
  act(() => {
    body.send(sse(1, "meta", META));
    body.send(sse(2, "tool_call", CALL));
    body.send(sse(3, "input_required", CONNECT));
  });
  return screen.findByRole("region", { name: "Reconnect github" });
}

describe("connected accounts in the chat", () => {
  let net: ReturnType<typeof gateway>;

  beforeAll(standInForDialog);
  beforeEach(() => {
    window.history.replaceState(null, "", "/");
    net = gateway();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("shows the Connect card, announced, and settles it when the gateway says the sign-in came back", async () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    render(<App />);
    const card = await askAndGetCard(net.body);
    expect(card.textContent).toContain("Your sign-in at github has ended.");
    expect(card.textContent).toContain("You will sign in at github.example");
    await until(
      () => screen.getByTestId("live-region").textContent === `Reconnect github: ${CONNECT.message}`,
      "the announcement",
    );

    fireEvent.click(within(card).getByRole("button", { name: "Connect" }));
    expect(open).toHaveBeenCalledWith(CONNECT.url, "_blank", "noopener,noreferrer");
    expect(within(card).getByRole("status").textContent).toBe("Waiting for you to sign in at github.example…");

    act(() => net.body.send(sse(4, "input_resolved", { id: "in_9", action: "accept" })));
    await until(() => screen.queryByTestId("connect-card") === null, "the card to settle");
    expect(screen.getByTestId("input-outcome").textContent).toBe("You signed in at github.");
    expect(screen.getByTestId("tool-card").dataset.status).toBe("running");
    // Nothing was posted: the gateway settled it itself.
    expect(net.calls.filter((c) => c.url.includes("/chat/inputs/"))).toHaveLength(0);
  });

  it("answers Not now with decline, as any request for input is answered", async () => {
    render(<App />);
    const card = await askAndGetCard(net.body);
    fireEvent.click(within(card).getByRole("button", { name: "Not now" }));
    await until(() => screen.queryByTestId("connect-card") === null, "the card to close");
    const posted = net.calls.filter((c) => c.url === "/api/v1/resos/chat/inputs/in_9");
    expect(posted).toHaveLength(1);
    expect(posted[0]!.init.method).toBe("POST");
    expect(new Headers(posted[0]!.init.headers).get("X-CSRF-Token")).toBe("csrf-a");
    expect(jsonBody(posted[0]!.init)).toEqual({ action: "decline" });
    expect(screen.getByTestId("input-outcome").textContent).toBe("You chose not to connect github now.");
  });

  it("opens the panel from the top bar", async () => {
    render(<App />);
    fireEvent.click(await screen.findByRole("button", { name: "Connected accounts" }));
    const dialog = await screen.findByRole("dialog", { name: "Connected accounts" });
    await until(() => within(dialog).queryByTestId("accounts-empty") !== null, "the empty list");
    expect(within(dialog).getByTestId("accounts-empty").textContent).toBe("No tool here needs an account of yours.");
  });
});
