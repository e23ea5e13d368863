import { useRef, useState, type ReactElement } from "react";
import type { Api } from "../api/http";
import { AccountsDialog } from "./AccountsDialog";
import { PlugIcon } from "./icons";

/** The top bar's way into the person's connected accounts; the list is fetched only while it is open. */
export function ConnectedAccounts({ api }: { api: Api }): ReactElement {
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  return (
    <>
      <button
        ref={button}
        type="button"
        className="button accounts-open"
        data-testid="accounts-open"
        aria-haspopup="dialog"
        onClick={() => setOpen(true)}
      >
        <PlugIcon />
        <span className="accounts-open-label">Connected accounts</span>
      </button>
      {open && (
        <AccountsDialog
          api={api}
          onClose={() => {
            setOpen(false);
            button.current?.focus();
          }}
        />
      )}
    </>
  );
}
