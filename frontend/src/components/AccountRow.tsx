import { useEffect, useId, useRef, useState, type FocusEvent, type ReactElement, type RefObject } from "react";
import type { Account } from "../api/types";
import { accountStatusWords, clientKindWords, formatAgo, waitingWords } from "../chat/accounts";
import type { AccountAction, SignIn } from "../hooks/useAccounts";

function AccountFacts({ account }: { account: Account }): ReactElement {
  return (
    <dl className="account-facts">
      <div>
        <dt>Access given</dt>
        <dd data-testid="account-scopes">
          {account.scopes.length > 0
            ? account.scopes.map((scope) => (
                <code key={scope} className="scope">
                  {scope}
                </code>
              ))
            : "No scopes listed"}
        </dd>
      </div>
      {account.refreshed_at && (
        <div>
          <dt>Renewed</dt>
          <dd>
            <time dateTime={account.refreshed_at} title={new Date(account.refreshed_at).toLocaleString()}>
              {formatAgo(account.refreshed_at)}
            </time>
          </dd>
        </div>
      )}
      {account.client && (
        <div>
          <dt>How maitred is registered</dt>
          <dd data-testid="account-client">{clientKindWords(account.client)}</dd>
        </div>
      )}
    </dl>
  );
}

/** Disconnect asks first: tools at the server stop working for this person until they connect again. */
function DisconnectButtons({
  server,
  busy,
  onDisconnect,
}: {
  server: string;
  busy: boolean;
  onDisconnect: () => void;
}): ReactElement {
  const [confirming, setConfirming] = useState(false);
  const keep = useRef<HTMLButtonElement>(null);
  const start = useRef<HTMLButtonElement>(null);
  // Not on the first render: only once the person has been asked does the focus move.
  const [asked, setAsked] = useState(false);

  // The button pressed goes away: the focus goes to the safe choice, and back after it.
  useEffect(() => {
    if (confirming) keep.current?.focus();
    else if (asked) start.current?.focus();
  }, [confirming, asked]);

  if (!confirming) {
    return (
      <button
        ref={start}
        type="button"
        className="button"
        data-testid="account-disconnect"
        aria-label={`Disconnect ${server}`}
        disabled={busy}
        onClick={() => {
          setAsked(true);
          setConfirming(true);
        }}
      >
        Disconnect
      </button>
    );
  }
  return (
    <div className="account-confirm" role="group" aria-label={`Disconnect ${server}?`} data-testid="account-confirm">
      <p>Disconnect {server}? Its tools will ask you to sign in again.</p>
      <div className="input-buttons">
        <button
          type="button"
          className="button danger"
          data-testid="account-disconnect-confirm"
          aria-label={`Yes, disconnect ${server}`}
          onClick={() => {
            setConfirming(false);
            onDisconnect();
          }}
        >
          Yes, disconnect
        </button>
        <button
          ref={keep}
          type="button"
          className="button"
          data-testid="account-disconnect-keep"
          onClick={() => setConfirming(false)}
        >
          Keep connected
        </button>
      </div>
    </div>
  );
}

/**
 * The row's buttons change under the person (Connect becomes "Open again", then
 * Disconnect): when the one that had the focus goes, its successor takes it.
 */
function useFocusStaysIn(row: RefObject<HTMLElement | null>): {
  onFocus: () => void;
  onBlur: (e: FocusEvent) => void;
} {
  const inside = useRef(false);
  useEffect(() => {
    const active = document.activeElement;
    if (!inside.current || (active && active !== document.body && active.isConnected)) return;
    row.current?.querySelector<HTMLElement>("button:not([disabled])")?.focus();
  });
  return {
    onFocus: () => {
      inside.current = true;
    },
    onBlur: (e) => {
      const next = e.relatedTarget as Node | null;
      if (next && !row.current?.contains(next)) inside.current = false;
    },
  };
}

/** One MCP server that needs the person's own sign-in: what it is, whether it is connected, and the way to change that. */
export function AccountRow({
  account,
  action,
  signIn,
  expired,
  onConnect,
  onDisconnect,
}: {
  account: Account;
  action: AccountAction | undefined;
  /** A sign-in under way in another tab. */
  signIn: SignIn | undefined;
  expired: boolean;
  onConnect: () => void;
  onDisconnect: () => void;
}): ReactElement {
  const nameId = useId();
  const row = useRef<HTMLLIElement>(null);
  const focus = useFocusStaysIn(row);
  const connected = account.status === "connected";
  const busy = action?.sending === true;
  const status = signIn ? waitingWords(signIn.host) : accountStatusWords(account);
  return (
    <li
      ref={row}
      {...focus}
      className={`account-row status-${account.status}`}
      data-testid="account-row"
      data-server={account.server}
      data-status={signIn ? "waiting" : account.status}
      aria-labelledby={nameId}
    >
      <div className="account-head">
        <h3 className="account-name" id={nameId}>
          {account.server}
        </h3>
        <span className="account-status" data-testid="account-status" role="status">
          {signIn && <span className="spinner" aria-hidden="true" />}
          {status}
        </span>
      </div>
      {account.description && <p className="account-description">{account.description}</p>}
      <p className="account-host">
        at <span data-testid="account-host">{account.host}</span>
      </p>
      {connected && <AccountFacts account={account} />}
      {expired && !busy && (
        <p className="form-problem" role="alert" data-testid="account-problem">
          The sign-in was not finished in time. Connect again to start over.
        </p>
      )}
      {action?.problem && (
        <p className="form-problem" role="alert" data-testid="account-problem">
          {action.problem}
        </p>
      )}
      {action?.note && !connected && (
        <p className="account-note" role="status" data-testid="account-note">
          {action.note}
        </p>
      )}
      <div className="input-buttons">
        {connected ? (
          <DisconnectButtons server={account.server} busy={busy} onDisconnect={onDisconnect} />
        ) : signIn ? (
          <button
            type="button"
            className="button"
            data-testid="account-reopen"
            onClick={() => window.open(signIn.href, "_blank", "noopener,noreferrer")}
          >
            Open the sign-in page again
          </button>
        ) : (
          <button
            type="button"
            className="button primary"
            data-testid="account-connect"
            aria-label={`Connect ${account.server}`}
            disabled={busy}
            onClick={onConnect}
          >
            {busy ? "Connecting…" : "Connect"}
          </button>
        )}
      </div>
    </li>
  );
}
