import { useEffect, useId, useRef, useState, type ReactElement } from "react";
import type { User } from "../api/types";

function initials(name: string): string {
  const parts = name.trim().split(/\s+/).filter(Boolean);
  return ((parts[0]?.[0] ?? "?") + (parts.length > 1 ? (parts[parts.length - 1]?.[0] ?? "") : "")).toUpperCase();
}

export function UserMenu({ user, onSignOut }: { user: User; onSignOut: () => void }): ReactElement {
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const panel = useRef<HTMLDivElement>(null);
  const panelId = useId();
  const name = user.name || user.subject;

  useEffect(() => {
    if (!open) return;
    panel.current?.querySelector<HTMLElement>("button")?.focus();
    const onKey = (e: KeyboardEvent): void => {
      if (e.key === "Escape") {
        setOpen(false);
        button.current?.focus();
      }
    };
    const onPointer = (e: PointerEvent): void => {
      const target = e.target as Node;
      if (!panel.current?.contains(target) && !button.current?.contains(target)) setOpen(false);
    };
    document.addEventListener("keydown", onKey);
    document.addEventListener("pointerdown", onPointer);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("pointerdown", onPointer);
    };
  }, [open]);

  return (
    <div className="user-menu">
      <button
        ref={button}
        type="button"
        className="user-button"
        data-testid="user-menu"
        aria-expanded={open}
        aria-controls={panelId}
        onClick={() => setOpen((o) => !o)}
      >
        <span className="avatar" aria-hidden="true">
          {initials(name)}
        </span>
        <span className="user-button-name">{name}</span>
      </button>
      <div
        ref={panel}
        id={panelId}
        className="user-panel"
        hidden={!open}
        onBlur={(e) => {
          // Tabbing out of the menu closes it, as clicking outside does.
          const next = e.relatedTarget as Node | null;
          if (next && !panel.current?.contains(next) && !button.current?.contains(next)) setOpen(false);
        }}
      >
        <p className="user-name" data-testid="user-name">
          {name}
        </p>
        {user.email && <p className="user-email">{user.email}</p>}
        <p className="user-roles" data-testid="user-roles" aria-label="Roles">
          {user.roles.length > 0 ? user.roles.map((role) => <span key={role} className="role">{role}</span>) : "No roles"}
        </p>
        <button type="button" className="button sign-out" data-testid="sign-out" onClick={onSignOut}>
          Sign out
        </button>
      </div>
    </div>
  );
}
