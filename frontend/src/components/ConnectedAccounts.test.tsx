// The connected-accounts panel against a gateway faked by path: the list, a connect that
// opens the sign-in page and sees it finish, a disconnect with its confirm step, and
// everyone's connections for an admin only.

import { act, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { Api } from "../api/http";
import type { Account, AdminAccount } from "../api/types";
import { standInForDialog } from "../test/dialog";
import { jsonBody, jsonResponse, until, type FetchCall } from "../test/fakeStream";
import { ConnectedAccounts } from "./ConnectedAccounts";

const minutesAgo = (m: number): string => new Date(Date.now() - m * 60_000).toISOString();

const GITHUB: Account = {
  server: "github",
  description: "Issues and pull requests",
  host: "mcp.github.example",
  status: "connected",
  scopes: ["repo", "read:org"],
  connected_at: minutesAgo(5),
  refreshed_at: minutesAgo(1),
  client: "metadata_document",
};
const CALENDAR: Account = {
  server: "calendar",
  description: null,
  host: "calendar.example",
  status: "not_connected",
  scopes: [],
  connected_at: null,
  refreshed_at: null,
  client: null,
};
const EVERYONE: AdminAccount[] = [
  { owner: "u1", server: "github", scopes: ["repo"], client: "dynamic", connected_at: "2026-11-20T09:00:00Z", refreshed_at: null },
  { owner: "u2", server: "calendar", scopes: ["calendar.read"], client: "preregistered", connected_at: "2026-11-21T10:30:00Z", refreshed_at: null },
];

interface Gateway {
  calls: FetchCall[];
  accounts: Account[];
  /** What the admin list answers; a status alone is an error envelope with it. */
  admin: AdminAccount[] | number;
  /** The next answers to a connect or a disconnect, by path. */
  writes: Map<string, Response>;
}

function gateway(): Gateway {
  const net: Gateway = { calls: [], accounts: [GITHUB, CALENDAR], admin: 403, writes: new Map() };
  const answer = (url: string, init: RequestInit): Response => {
    net.calls.push({ url, init });
    const method = init.method ?? "GET";
    if (method === "GET" && url === "/api/v1/resos/accounts") return jsonResponse(200, { accounts: net.accounts });
    if (method === "GET" && url === "/api/v1/resos/admin/accounts") {
      return typeof net.admin === "number"
        ? jsonResponse(net.admin, { code: "FORBIDDEN", message: "Admins only." })
        : jsonResponse(200, { accounts: net.admin });
    }
    const write = net.writes.get(`${method} ${url}`);
    if (write) {
      net.writes.delete(`${method} ${url}`);
      return write;
    }
    throw new Error(`unexpected fetch ${method} ${url}`);
  };
  vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) => Promise.resolve().then(() => answer(url, init)));
  return net;
}

const listed = (net: Gateway): number => net.calls.filter((c) => c.url === "/api/v1/resos/accounts").length;

function row(server: string): HTMLElement {
  const found = screen.getAllByTestId("account-row").find((r) => r.dataset.server === server);
  if (!found) throw new Error(`no row for ${server}`);
  return found;
}

async function openPanel(): Promise<HTMLElement> {
  fireEvent.click(screen.getByRole("button", { name: "Connected accounts" }));
  const dialog = await screen.findByRole("dialog", { name: "Connected accounts" });
  await until(() => screen.queryAllByTestId("account-row").length > 0, "the accounts");
  return dialog;
}

describe("the connected accounts panel", () => {
  let net: Gateway;

  beforeAll(standInForDialog);
  beforeEach(() => {
    net = gateway();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("asks for nothing until it is opened, then lists each server with what is known of it", async () => {
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    expect(net.calls).toHaveLength(0);
    const dialog = await openPanel();
    expect((dialog as HTMLDialogElement).open).toBe(true);
    expect(document.activeElement).toBe(within(dialog).getByRole("button", { name: "Close" }));

    const github = row("github");
    expect(within(github).getByRole("heading", { name: "github" })).toBeTruthy();
    expect(github.textContent).toContain("Issues and pull requests");
    expect(within(github).getByTestId("account-host").textContent).toBe("mcp.github.example");
    expect(within(github).getByTestId("account-status").textContent).toBe("Connected 5 minutes ago");
    expect(within(github).getAllByText(/^(repo|read:org)$/).map((e) => e.textContent)).toEqual(["repo", "read:org"]);
    expect(within(github).getByTestId("account-client").textContent).toBe("client metadata document");
    expect(within(github).getByRole("button", { name: "Disconnect github" })).toBeTruthy();
    expect(within(github).queryByRole("button", { name: /^Connect/ })).toBeNull();

    const calendar = row("calendar");
    expect(within(calendar).getByTestId("account-status").textContent).toBe("Not connected");
    expect(within(calendar).getByRole("button", { name: "Connect calendar" })).toBeTruthy();
    expect(within(calendar).queryByTestId("account-client")).toBeNull();

    // Not an admin (403): no section about everyone, and no error either.
    await until(() => net.calls.some((c) => c.url.endsWith("/admin/accounts")), "the admin list asked for");
    await act(() => Promise.resolve());
    expect(screen.queryByTestId("admin-accounts")).toBeNull();
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("opens the sign-in page in a new tab and shows the account connected when the person comes back", async () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    net.writes.set(
      "POST /api/v1/resos/accounts/calendar/connect",
      jsonResponse(200, {
        server: "calendar",
        authorization_url: "https://auth.calendar.example/authorize?state=s1",
        host: "auth.calendar.example",
        expires_at: new Date(Date.now() + 600_000).toISOString(),
      }),
    );
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    await openPanel();
    fireEvent.click(screen.getByRole("button", { name: "Connect calendar" }));

    await until(() => row("calendar").dataset.status === "waiting", "the sign-in under way");
    const post = net.calls.find((c) => c.init.method === "POST")!;
    expect(post.url).toBe("/api/v1/resos/accounts/calendar/connect");
    expect((post.init.headers as Record<string, string>)["X-CSRF-Token"]).toBe("csrf-1");
    expect(jsonBody(post.init)).toEqual({});
    expect(open).toHaveBeenCalledWith("https://auth.calendar.example/authorize?state=s1", "_blank", "noopener,noreferrer");
    expect(within(row("calendar")).getByTestId("account-status").textContent).toBe(
      "Waiting for you to sign in at auth.calendar.example…",
    );
    // A pop-up blocker may have stopped the tab: it can be opened again from a click.
    fireEvent.click(within(row("calendar")).getByRole("button", { name: "Open the sign-in page again" }));
    expect(open).toHaveBeenCalledTimes(2);

    net.accounts = [GITHUB, { ...CALENDAR, status: "connected", scopes: ["calendar.read"], connected_at: new Date().toISOString(), client: "dynamic" }];
    const before = listed(net);
    act(() => {
      window.dispatchEvent(new Event("focus"));
    });
    await until(() => row("calendar").dataset.status === "connected", "the account connected");
    expect(listed(net)).toBe(before + 1);
    expect(within(row("calendar")).getByTestId("account-status").textContent).toBe("Connected just now");
    expect(within(row("calendar")).getByTestId("account-client").textContent).toBe("dynamic registration");
    expect(within(row("calendar")).getByRole("button", { name: "Disconnect calendar" })).toBeTruthy();
  });

  it("disconnects only once confirmed, and says whether the server was told to revoke", async () => {
    net.writes.set("DELETE /api/v1/resos/accounts/github", jsonResponse(200, { server: "github", revoked_at_server: true }));
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    await openPanel();

    fireEvent.click(screen.getByRole("button", { name: "Disconnect github" }));
    const confirm = within(row("github")).getByRole("group", { name: "Disconnect github?" });
    expect(document.activeElement).toBe(within(confirm).getByRole("button", { name: "Keep connected" }));
    fireEvent.click(within(confirm).getByRole("button", { name: "Keep connected" }));
    expect(net.calls.some((c) => c.init.method === "DELETE")).toBe(false);
    expect(document.activeElement).toBe(screen.getByRole("button", { name: "Disconnect github" }));

    fireEvent.click(screen.getByRole("button", { name: "Disconnect github" }));
    net.accounts = [{ ...GITHUB, status: "not_connected", scopes: [], connected_at: null, refreshed_at: null, client: null }, CALENDAR];
    fireEvent.click(screen.getByRole("button", { name: "Yes, disconnect github" }));
    await until(() => row("github").dataset.status === "not_connected", "the account disconnected");
    const del = net.calls.find((c) => c.init.method === "DELETE")!;
    expect(del.url).toBe("/api/v1/resos/accounts/github");
    expect((del.init.headers as Record<string, string>)["X-CSRF-Token"]).toBe("csrf-1");
    expect(within(row("github")).getByTestId("account-note").textContent).toBe(
      "Disconnected. github was told to revoke maitred's access.",
    );
    // The focus was on a button that went: it lands on the row's new one.
    const connect = within(row("github")).getByRole("button", { name: "Connect github" });
    await until(() => document.activeElement === connect, "the focus on Connect");
  });

  it("shows the gateway's reason when a connect is refused, and when the list cannot be had", async () => {
    net.writes.set(
      "POST /api/v1/resos/accounts/calendar/connect",
      jsonResponse(502, { code: "UPSTREAM", message: "calendar.example does not say where to sign in." }),
    );
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    await openPanel();
    fireEvent.click(screen.getByRole("button", { name: "Connect calendar" }));
    await until(() => within(row("calendar")).queryByTestId("account-problem") !== null, "the problem");
    expect(within(row("calendar")).getByRole("alert").textContent).toBe("calendar.example does not say where to sign in.");
    expect(within(row("calendar")).getByRole<HTMLButtonElement>("button", { name: "Connect calendar" }).disabled).toBe(false);
  });

  it("says so when the list cannot be loaded, and tries again on request", async () => {
    vi.stubGlobal("fetch", (url: string) =>
      Promise.resolve(
        url.endsWith("/admin/accounts")
          ? jsonResponse(403, { code: "FORBIDDEN", message: "Admins only." })
          : jsonResponse(503, { code: "UNAVAILABLE", message: "The accounts store is not reachable." }),
      ),
    );
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    fireEvent.click(screen.getByRole("button", { name: "Connected accounts" }));
    const error = await screen.findByTestId("accounts-error");
    expect(error.getAttribute("role")).toBe("alert");
    expect(error.textContent).toContain("The accounts store is not reachable.");

    net = gateway();
    fireEvent.click(within(error).getByRole("button", { name: "Try again" }));
    await until(() => screen.queryAllByTestId("account-row").length === 2, "the accounts");
    expect(screen.queryByTestId("accounts-error")).toBeNull();
  });

  it("shows everyone's connections to an admin", async () => {
    net.admin = EVERYONE;
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    await openPanel();
    const section = await screen.findByRole("region", { name: "Everyone’s connections" });
    const table = within(section).getByRole("table");
    expect(within(table).getAllByRole("columnheader").map((h) => h.textContent)).toEqual([
      "Owner",
      "Server",
      "Access given",
      "Connected",
    ]);
    const rows = within(section).getAllByTestId<HTMLTableRowElement>("admin-account");
    expect(rows.map((r) => Array.from(r.cells, (c) => c.textContent).slice(0, 3))).toEqual([
      ["u1", "github", "repo"],
      ["u2", "calendar", "calendar.read"],
    ]);
    expect(rows[0]!.querySelector("time")?.getAttribute("datetime")).toBe("2026-11-20T09:00:00Z");
  });

  it("closes with its Close button and gives the focus back to the button that opened it", async () => {
    render(<ConnectedAccounts api={new Api("csrf-1")} />);
    const dialog = await openPanel();
    fireEvent.click(within(dialog).getByRole("button", { name: "Close" }));
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(document.activeElement).toBe(screen.getByRole("button", { name: "Connected accounts" }));
  });
});
