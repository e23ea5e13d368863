import { useEffect, useId, useRef, type ReactElement } from "react";
import type { Api } from "../api/http";
import { useAccounts } from "../hooks/useAccounts";
import { AccountRow } from "./AccountRow";
import { AdminAccounts } from "./AdminAccounts";
import { CrossIcon } from "./icons";

function AccountList({ api }: { api: Api }): ReactElement {
  const accounts = useAccounts(api);
  return (
    <>
      {accounts.error && (
        <div className="form-problem accounts-error" role="alert" data-testid="accounts-error">
          <p>The accounts could not be loaded: {accounts.error}</p>
          <button type="button" className="button" onClick={accounts.refresh}>
            Try again
          </button>
        </div>
      )}
      {accounts.accounts === null && !accounts.error && (
        <p className="accounts-empty" aria-busy="true">
          Loading…
        </p>
      )}
      {accounts.accounts?.length === 0 && (
        <p className="accounts-empty" data-testid="accounts-empty">
          No tool here needs an account of yours.
        </p>
      )}
      {accounts.accounts && accounts.accounts.length > 0 && (
        <ul className="account-list" data-testid="account-list">
          {accounts.accounts.map((account) => (
            <AccountRow
              key={account.server}
              account={account}
              action={accounts.actions[account.server]}
              signIn={accounts.waiting[account.server]}
              expired={accounts.expired.has(account.server)}
              onConnect={() => accounts.connect(account.server)}
              onDisconnect={() => accounts.disconnect(account.server)}
            />
          ))}
        </ul>
      )}
      {(accounts.admin !== null || accounts.adminError !== null) && (
        <AdminAccounts accounts={accounts.admin} error={accounts.adminError} />
      )}
    </>
  );
}

/**
 * The person's accounts at MCP servers that act as them, in a modal dialog: the page
 * behind is inert while it is open, Escape closes it, and the focus goes back to
 * whatever opened it (the caller's job, in `onClose`).
 */
export function AccountsDialog({ api, onClose }: { api: Api; onClose: () => void }): ReactElement {
  const dialog = useRef<HTMLDialogElement>(null);
  const close = useRef<HTMLButtonElement>(null);
  const headingId = useId();

  useEffect(() => {
    const el = dialog.current;
    if (!el) return;
    if (!el.open) el.showModal();
    close.current?.focus();
    return () => {
      if (el.open) el.close();
    };
  }, []);

  return (
    <dialog
      ref={dialog}
      className="accounts-dialog"
      data-testid="accounts-dialog"
      aria-labelledby={headingId}
      onClose={onClose}
      onClick={(e) => {
        // A click on the backdrop lands on the dialog itself, never on its content.
        if (e.target === e.currentTarget) e.currentTarget.close();
      }}
    >
      <div className="accounts-inner">
        <header className="accounts-header">
          <h2 id={headingId}>Connected accounts</h2>
          <button
            ref={close}
            type="button"
            className="icon-button"
            data-testid="accounts-close"
            aria-label="Close"
            onClick={() => dialog.current?.close()}
          >
            <CrossIcon />
          </button>
        </header>
        <p className="accounts-intro">
          Some tools act as you at another service. Connect your account there once, and they use your own sign-in;
          disconnect to take that back.
        </p>
        <AccountList api={api} />
      </div>
    </dialog>
  );
}
