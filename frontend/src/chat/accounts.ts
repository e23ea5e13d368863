// The words for connected accounts (a person's own sign-in at an MCP server), in the
// panel and on the chat's "Connect <server>" card. Pure, so they are tested alone.

import type { Account, ClientKind, ConnectCard, Disconnected } from "../api/types";

/** While a sign-in is under way the panel asks again this often, to show it done without a reload. */
export const CONNECT_POLL_MS = 2000;

const CLIENT_KIND_WORDS: Record<ClientKind, string> = {
  metadata_document: "client metadata document",
  dynamic: "dynamic registration",
  preregistered: "pre-registered client",
};

export function clientKindWords(kind: ClientKind): string {
  return CLIENT_KIND_WORDS[kind];
}

const RELATIVE_UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 86_400],
  ["month", 30 * 86_400],
  ["week", 7 * 86_400],
  ["day", 86_400],
  ["hour", 3_600],
  ["minute", 60],
];

/** "just now", "5 minutes ago", "yesterday"; a time ahead of this computer's clock is "just now". */
export function formatAgo(iso: string, now = Date.now()): string {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const seconds = (now - at) / 1000;
  if (seconds < 45) return "just now";
  const words = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
  for (const [unit, size] of RELATIVE_UNITS) {
    if (seconds >= size) return words.format(-Math.round(seconds / size), unit);
  }
  return words.format(-1, "minute");
}

/** The account's status as the panel words it: "Connected 5 minutes ago", "Not connected". */
export function accountStatusWords(account: Account, now = Date.now()): string {
  if (account.status !== "connected") return "Not connected";
  const ago = account.connected_at ? formatAgo(account.connected_at, now) : "";
  return ago ? `Connected ${ago}` : "Connected";
}

export function waitingWords(host: string): string {
  return `Waiting for you to sign in at ${host}…`;
}

/** What a disconnect did: the tokens are gone here either way; the server may still honour them. */
export function disconnectedWords(result: Disconnected): string {
  return result.revoked_at_server
    ? `Disconnected. ${result.server} was told to revoke maitred's access.`
    : `Disconnected. maitred forgot its access, but ${result.server} could not be told to revoke it: it lapses when it expires.`;
}

/** The chat card's title, by why the gateway asks. */
export function connectTitle(card: ConnectCard): string {
  switch (card.reason) {
    case "reconnect":
      return `Reconnect ${card.server}`;
    case "more_access":
      return `Give ${card.server} more access`;
    case "connect":
      return `Connect ${card.server}`;
  }
}

/** What became of a connect card, once settled. */
export function connectOutcome(card: ConnectCard, outcome: "accept" | "decline" | "cancel"): string {
  switch (outcome) {
    case "accept":
      return `You signed in at ${card.server}.`;
    case "decline":
      return `You chose not to connect ${card.server} now.`;
    case "cancel":
      return `The sign-in at ${card.server} was cancelled.`;
  }
}
