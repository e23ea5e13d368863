import { act, renderHook } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Api } from "../api/http";
import type { Account } from "../api/types";
import { jsonResponse, tick, until, type FetchCall } from "../test/fakeStream";
import { useAccounts } from "./useAccounts";

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

interface Gateway {
  calls: FetchCall[];
  accounts: Account[];
  expiresAt: string;
}

function gateway(): Gateway {
  const net: Gateway = { calls: [], accounts: [CALENDAR], expiresAt: new Date(Date.now() + 600_000).toISOString() };
  vi.stubGlobal("fetch", (url: string, init: RequestInit = {}) =>
    Promise.resolve().then(() => {
      net.calls.push({ url, init });
      if (url === "/api/v1/resos/accounts") return jsonResponse(200, { accounts: net.accounts });
      if (url === "/api/v1/resos/admin/accounts") return jsonResponse(200, { accounts: [] });
      if (url === "/api/v1/resos/accounts/calendar/connect") {
        return jsonResponse(200, {
          server: "calendar",
          authorization_url: "https://auth.calendar.example/authorize",
          host: "auth.calendar.example",
          expires_at: net.expiresAt,
        });
      }
      throw new Error(`unexpected fetch ${url}`);
    }),
  );
  return net;
}

const count = (net: Gateway, url: string): number => net.calls.filter((c) => c.url === url).length;
const LIST = "/api/v1/resos/accounts";
const ADMIN = "/api/v1/resos/admin/accounts";

describe("useAccounts", () => {
  let net: Gateway;
  // One for the whole hook: a new one each render would be a new source to fetch from.
  const api = new Api("csrf");
  beforeEach(() => {
    net = gateway();
    vi.spyOn(window, "open").mockReturnValue(null);
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("polls only while a sign-in is under way, and stops once the account is connected", async () => {
    const { result } = renderHook(() => useAccounts(api, 20));
    await until(() => result.current.accounts !== null, "the list");
    await tick(80);
    expect(count(net, LIST)).toBe(1);

    act(() => result.current.connect("calendar"));
    await until(() => "calendar" in result.current.waiting, "the sign-in under way");
    expect(result.current.waiting.calendar?.host).toBe("auth.calendar.example");
    await until(() => count(net, LIST) >= 3, "polls");

    net.accounts = [{ ...CALENDAR, status: "connected", connected_at: new Date().toISOString() }];
    await until(() => result.current.accounts?.[0]?.status === "connected", "the account connected");
    expect(result.current.waiting).toEqual({});
    expect(result.current.expired.size).toBe(0);
    // Everyone's list is asked for again: it holds this connection now.
    await until(() => count(net, ADMIN) === 2, "everyone's list again");
    const polls = count(net, LIST);
    await tick(80);
    expect(count(net, LIST)).toBe(polls);
  });

  it("gives up on a sign-in that expires, and says so", async () => {
    net.expiresAt = new Date(Date.now() + 60).toISOString();
    const { result } = renderHook(() => useAccounts(api, 20));
    await until(() => result.current.accounts !== null, "the list");
    act(() => result.current.connect("calendar"));
    await until(() => result.current.expired.has("calendar"), "the sign-in expired");
    expect(result.current.waiting).toEqual({});
    const polls = count(net, LIST);
    await tick(80);
    expect(count(net, LIST)).toBe(polls);
  });

  it("looks again when the page becomes visible", async () => {
    const { result } = renderHook(() => useAccounts(api, 20));
    await until(() => result.current.accounts !== null, "the list");
    act(() => {
      document.dispatchEvent(new Event("visibilitychange"));
    });
    await until(() => count(net, LIST) === 2, "the list asked for again");
  });
});
