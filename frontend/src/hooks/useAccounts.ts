// The person's connected accounts, while the panel is open: fetched when it opens, again
// whenever the window comes back into view (the sign-in ends in another tab), and every
// ~2 s while a sign-in is under way, so it shows "Connected" without a reload.

import { useCallback, useEffect, useState } from "react";
import { HttpError, type Api } from "../api/http";
import type { Account, AdminAccount } from "../api/types";
import { CONNECT_POLL_MS, disconnectedWords } from "../chat/accounts";
import { offerableLink } from "../components/InputLink";

/** What the person has done with one server's account here. */
export interface AccountAction {
  sending: boolean;
  /** Why the last connect or disconnect did not go through. */
  problem?: string;
  /** What the last disconnect did. */
  note?: string;
}

/** A sign-in opened in another tab, until the account shows connected (or it expires). */
export interface SignIn {
  href: string;
  host: string;
  expiresAt: number;
}

export interface Accounts {
  /** Null until the first list arrives. */
  accounts: Account[] | null;
  error: string | null;
  /** Everyone's connections; null when this person may not see them (or not yet). */
  admin: AdminAccount[] | null;
  adminError: string | null;
  actions: Record<string, AccountAction>;
  /** The sign-ins still to wait for, by server. */
  waiting: Record<string, SignIn>;
  /** The servers whose sign-in expired before it was finished. */
  expired: ReadonlySet<string>;
  refresh: () => void;
  connect: (server: string) => void;
  disconnect: (server: string) => void;
}

interface Fetched {
  accounts: Account[] | null;
  /** This computer's clock at the answer: a sign-in is judged expired against it. */
  fetchedAt: number;
  error: string | null;
  /** Counts every fetch, failed ones too, so the next poll is always scheduled anew. */
  round: number;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The sign-ins not yet seen through: the account is not connected yet. */
function unfinished(signIns: Record<string, SignIn>, accounts: Account[] | null): [string, SignIn][] {
  const connected = new Set(accounts?.filter((a) => a.status === "connected").map((a) => a.server));
  return Object.entries(signIns).filter(([server]) => !connected.has(server));
}

export function useAccounts(api: Api, poll = CONNECT_POLL_MS): Accounts {
  const [fetched, setFetched] = useState<Fetched>({ accounts: null, fetchedAt: 0, error: null, round: 0 });
  const [requests, setRequests] = useState(0);
  const [admin, setAdmin] = useState<{ accounts: AdminAccount[] | null; error: string | null }>({ accounts: null, error: null });
  const [actions, setActions] = useState<Record<string, AccountAction>>({});
  const [signIns, setSignIns] = useState<Record<string, SignIn>>({});

  const refresh = useCallback(() => setRequests((n) => n + 1), []);

  useEffect(() => {
    const controller = new AbortController();
    api.accounts(controller.signal).then(
      (accounts) => {
        if (controller.signal.aborted) return;
        setFetched((f) => ({ accounts, fetchedAt: Date.now(), error: null, round: f.round + 1 }));
        // Seen through: a later disconnect (in another tab, say) must not read as an expired sign-in.
        setSignIns((s) => Object.fromEntries(unfinished(s, accounts)));
      },
      (e: unknown) => {
        if (controller.signal.aborted) return;
        setFetched((f) => ({ ...f, fetchedAt: Date.now(), error: message(e), round: f.round + 1 }));
      },
    );
    return () => controller.abort();
  }, [api, requests]);

  // Asked again whenever this person's connections change: they are in everyone's too.
  const connectedKey =
    fetched.accounts === null
      ? null
      : fetched.accounts
          .filter((a) => a.status === "connected")
          .map((a) => a.server)
          .join(" ");
  useEffect(() => {
    if (connectedKey === null) return;
    const controller = new AbortController();
    api.adminAccounts(controller.signal).then(
      (accounts) => {
        if (!controller.signal.aborted) setAdmin({ accounts, error: null });
      },
      (e: unknown) => {
        if (controller.signal.aborted) return;
        // 403: not an admin; 404: a gateway without the list. Neither is a fault to show.
        const hidden = e instanceof HttpError && (e.status === 403 || e.status === 404);
        setAdmin({ accounts: null, error: hidden ? null : message(e) });
      },
    );
    return () => controller.abort();
  }, [api, connectedKey]);

  // The sign-in finishes in another tab: coming back here is the moment to look.
  useEffect(() => {
    const onVisible = (): void => {
      if (document.visibilityState === "visible") refresh();
    };
    window.addEventListener("focus", refresh);
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      window.removeEventListener("focus", refresh);
      document.removeEventListener("visibilitychange", onVisible);
    };
  }, [refresh]);

  const open = unfinished(signIns, fetched.accounts);
  const waiting = Object.fromEntries(open.filter(([, s]) => s.expiresAt > fetched.fetchedAt));
  const expired = new Set(open.filter(([, s]) => s.expiresAt <= fetched.fetchedAt).map(([server]) => server));

  const anyWaiting = Object.keys(waiting).length > 0;
  useEffect(() => {
    if (!anyWaiting) return;
    const timer = setTimeout(() => setRequests((n) => n + 1), poll);
    return () => clearTimeout(timer);
  }, [anyWaiting, fetched.round, poll]);

  const setAction = useCallback((server: string, action: AccountAction) => {
    setActions((a) => ({ ...a, [server]: action }));
  }, []);

  const connect = useCallback(
    (server: string) => {
      setAction(server, { sending: true });
      api.connectAccount(server).then(
        (start) => {
          const link = offerableLink(start.authorization_url);
          if (!link) {
            setAction(server, { sending: false, problem: "The sign-in page is not a web page, so it is not opened." });
            return;
          }
          // Opened after a request, so a strict pop-up blocker may stop it: the row offers it again.
          window.open(link.href, "_blank", "noopener,noreferrer");
          const expiresAt = Date.parse(start.expires_at);
          setSignIns((s) => ({
            ...s,
            [server]: { ...link, expiresAt: Number.isNaN(expiresAt) ? Date.now() + 10 * 60_000 : expiresAt },
          }));
          setAction(server, { sending: false });
        },
        (e: unknown) => setAction(server, { sending: false, problem: message(e) }),
      );
    },
    [api, setAction],
  );

  const disconnect = useCallback(
    (server: string) => {
      setAction(server, { sending: true });
      api.disconnectAccount(server).then(
        (result) => {
          setAction(server, { sending: false, note: disconnectedWords(result) });
          setSignIns(({ [server]: _gone, ...rest }) => rest);
          refresh();
        },
        (e: unknown) => {
          setAction(server, { sending: false, problem: message(e) });
          refresh();
        },
      );
    },
    [api, refresh, setAction],
  );

  return {
    accounts: fetched.accounts,
    error: fetched.error,
    admin: admin.accounts,
    adminError: admin.error,
    actions,
    waiting,
    expired,
    refresh,
    connect,
    disconnect,
  };
}
