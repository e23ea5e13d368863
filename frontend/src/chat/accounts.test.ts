import { describe, expect, it } from "vitest";
import type { Account } from "../api/types";
import { accountStatusWords, clientKindWords, connectOutcome, connectTitle, disconnectedWords, formatAgo } from "./accounts";

const NOW = Date.parse("2026-11-26T12:00:00Z");
const ago = (seconds: number): string => new Date(NOW - seconds * 1000).toISOString();

describe("the words for connected accounts", () => {
  it("says how long ago, roughly", () => {
    expect(formatAgo(ago(10), NOW)).toBe("just now");
    expect(formatAgo(ago(-30), NOW)).toBe("just now");
    expect(formatAgo(ago(50), NOW)).toBe("1 minute ago");
    expect(formatAgo(ago(5 * 60), NOW)).toBe("5 minutes ago");
    expect(formatAgo(ago(3 * 3600), NOW)).toBe("3 hours ago");
    expect(formatAgo(ago(86_400), NOW)).toBe("yesterday");
    expect(formatAgo(ago(40 * 86_400), NOW)).toBe("last month");
    expect(formatAgo("not a time", NOW)).toBe("");
  });

  it("words an account's status and how maitred is registered", () => {
    const account: Account = {
      server: "github",
      description: null,
      host: "mcp.github.example",
      status: "connected",
      scopes: ["repo"],
      connected_at: ago(120),
      refreshed_at: null,
      client: "dynamic",
    };
    expect(accountStatusWords(account, NOW)).toBe("Connected 2 minutes ago");
    expect(accountStatusWords({ ...account, connected_at: null }, NOW)).toBe("Connected");
    expect(accountStatusWords({ ...account, status: "not_connected" }, NOW)).toBe("Not connected");
    expect(clientKindWords("metadata_document")).toBe("client metadata document");
    expect(clientKindWords("dynamic")).toBe("dynamic registration");
    expect(clientKindWords("preregistered")).toBe("pre-registered client");
  });

  it("says whether the server was told to revoke the access", () => {
    expect(disconnectedWords({ server: "github", revoked_at_server: true })).toBe(
      "Disconnected. github was told to revoke maitred's access.",
    );
    expect(disconnectedWords({ server: "github", revoked_at_server: false })).toMatch(/could not be told to revoke/);
  });

  it("titles the chat's card by why it asks, and words how it ended", () => {
    const card = { server: "github", host: "github.example", reason: "connect" } as const;
    expect(connectTitle(card)).toBe("Connect github");
    expect(connectTitle({ ...card, reason: "reconnect" })).toBe("Reconnect github");
    expect(connectTitle({ ...card, reason: "more_access" })).toBe("Give github more access");
    expect(connectOutcome(card, "accept")).toBe("You signed in at github.");
    expect(connectOutcome(card, "decline")).toBe("You chose not to connect github now.");
  });
});
