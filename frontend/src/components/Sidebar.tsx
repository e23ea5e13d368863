import type { MouseEvent, ReactElement } from "react";
import type { ConversationSummary } from "../api/types";
import { conversationPath } from "../hooks/useRoute";
import { formatWhen } from "./format";
import { PlusIcon, TrashIcon } from "./icons";

function plainClick(e: MouseEvent): boolean {
  return e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey;
}

export function Sidebar({
  conversations,
  error,
  currentId,
  onNavigate,
  onNewChat,
  onDelete,
}: {
  conversations: ConversationSummary[] | null;
  error: string | null;
  currentId: string | null;
  onNavigate: (path: string) => void;
  onNewChat: () => void;
  onDelete: (conversation: ConversationSummary) => void;
}): ReactElement {
  return (
    <nav className="sidebar-inner" aria-label="Conversations">
      <button type="button" className="button new-chat" data-testid="new-chat" onClick={onNewChat}>
        <PlusIcon />
        New chat
      </button>
      <h2 className="sidebar-heading">Conversations</h2>
      {error && <p className="sidebar-empty">The list could not be loaded: {error}</p>}
      {conversations === null && !error && <p className="sidebar-empty">Loading…</p>}
      {conversations?.length === 0 && <p className="sidebar-empty">No conversations yet. Ask a question to start one.</p>}
      <ul className="conversation-list" data-testid="conversation-list">
        {conversations?.map((c) => {
          const path = conversationPath(c.id);
          const current = c.id === currentId;
          return (
            <li
              key={c.id}
              className={`conversation-item${current ? " current" : ""}`}
              data-testid="conversation-item"
              data-conversation-id={c.id}
            >
              <a
                href={path}
                aria-current={current ? "page" : undefined}
                onClick={(e) => {
                  if (!plainClick(e)) return;
                  e.preventDefault();
                  onNavigate(path);
                }}
              >
                <span className="conversation-title">{c.title || "Untitled"}</span>
                <time className="conversation-when" dateTime={c.updated_at}>
                  {formatWhen(c.updated_at)}
                </time>
              </a>
              <button
                type="button"
                className="icon-button conversation-delete"
                data-testid="conversation-delete"
                aria-label={`Delete “${c.title || "Untitled"}”`}
                title="Delete"
                onClick={() => onDelete(c)}
              >
                <TrashIcon />
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}
