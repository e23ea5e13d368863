import { useId, type ReactElement } from "react";
import type { AdminAccount } from "../api/types";
import { clientKindWords } from "../chat/accounts";
import { formatWhen } from "./format";

/** Everyone's connections, for an admin: who signed in where, with what access (the tokens are never sent). */
export function AdminAccounts({ accounts, error }: { accounts: AdminAccount[] | null; error: string | null }): ReactElement {
  const headingId = useId();
  return (
    <section className="admin-accounts" data-testid="admin-accounts" aria-labelledby={headingId}>
      <h3 id={headingId}>Everyone’s connections</h3>
      {error && (
        <p className="form-problem" role="alert">
          Everyone’s connections could not be loaded: {error}
        </p>
      )}
      {accounts?.length === 0 && <p className="accounts-empty">Nobody has connected an account yet.</p>}
      {accounts && accounts.length > 0 && (
        <div className="table-scroll">
          <table className="accounts-table">
            <thead>
              <tr>
                <th scope="col">Owner</th>
                <th scope="col">Server</th>
                <th scope="col">Access given</th>
                <th scope="col">Connected</th>
              </tr>
            </thead>
            <tbody>
              {accounts.map((a) => (
                <tr key={`${a.owner} ${a.server}`} data-testid="admin-account">
                  <td>{a.owner}</td>
                  <td title={a.client ? `Registered by ${clientKindWords(a.client)}` : undefined}>{a.server}</td>
                  <td>{a.scopes.length > 0 ? a.scopes.join(" ") : "—"}</td>
                  <td>
                    <time dateTime={a.connected_at} title={new Date(a.connected_at).toLocaleString()}>
                      {formatWhen(a.connected_at)}
                    </time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
