import { useCallback, useEffect, useMemo, useRef, useState, type ReactElement } from "react";
import { Api, HttpError } from "../api/http";
import { OFFLINE_MODEL, type ConversationSummary, type User } from "../api/types";
import { connectTitle } from "../chat/accounts";
import type { ToolView } from "../chat/answer";
import { describeBudget, latestBudget } from "../chat/budget";
import { followUpsToShow, shownMessageIds } from "../chat/tasks";
import { useChat } from "../chat/useChat";
import { useConversations } from "../hooks/useConversations";
import { conversationPath, useRoute } from "../hooks/useRoute";
import { useTasks } from "../hooks/useTasks";
import type { Theme } from "../hooks/useTheme";
import { Composer } from "./Composer";
import { ConnectedAccounts } from "./ConnectedAccounts";
import { ErrorBanner } from "./ErrorBanner";
import { MenuIcon } from "./icons";
import { LiveAnnouncer } from "./LiveAnnouncer";
import { OfflineNote } from "./OfflineNote";
import { Sidebar } from "./Sidebar";
import { TasksPanel } from "./TasksPanel";
import { ThemeToggle } from "./ThemeToggle";
import { Transcript } from "./Transcript";
import { UserMenu } from "./UserMenu";

/** What the announcer reads when a tool starts waiting for the person. */
function askingNotice(tool: ToolView | undefined): string {
  const input = tool?.input;
  if (!tool || !input) return "";
  return input.connect ? `${connectTitle(input.connect)}: ${input.message}` : `${tool.title} needs your input: ${input.message}`;
}

export function ChatShell({
  theme: { theme, toggle },
  user,
  csrfToken,
  model,
  onSignedOut,
}: {
  theme: { theme: Theme; toggle: () => void };
  user: User;
  csrfToken: string;
  model: string;
  onSignedOut: () => void;
}): ReactElement {
  const api = useMemo(() => new Api(csrfToken), [csrfToken]);
  const { route, navigate } = useRoute();
  const list = useConversations(api);
  const [drawerOpen, setDrawerOpen] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  // An answer that ends may have started a task: the tasks are asked for again.
  const refreshTasks = useRef<() => void>(() => {});

  const chat = useChat(api, {
    onConversationStarted: (id) => {
      navigate(conversationPath(id));
      list.refresh();
    },
    onAnswerEnded: () => {
      list.refresh();
      refreshTasks.current();
    },
  });
  const { open, appendFollowUp } = chat;

  const shown = useMemo(() => shownMessageIds(chat.state.turns), [chat.state.turns]);
  const budget = useMemo(() => latestBudget(chat.state.turns), [chat.state.turns]);
  const tasks = useTasks(api, chat.state.loading ? null : chat.state.conversationId, shown);
  useEffect(() => {
    refreshTasks.current = tasks.refresh;
  }, [tasks.refresh]);

  // A task's result, posted as a new answer: it streams in at the end of the transcript.
  useEffect(() => {
    for (const task of followUpsToShow(tasks.tasks, shown)) {
      if (task.follow_up_message_id !== null) appendFollowUp(task.follow_up_message_id, task.id);
    }
  }, [tasks.tasks, shown, appendFollowUp]);

  useEffect(() => {
    open(route.conversationId);
  }, [open, route.conversationId]);

  const go = useCallback(
    (path: string) => {
      navigate(path);
      setDrawerOpen(false);
      input.current?.focus();
    },
    [navigate],
  );

  useEffect(() => {
    if (!drawerOpen) return;
    document.querySelector<HTMLElement>("#sidebar [data-testid=new-chat]")?.focus();
    const onKey = (e: KeyboardEvent): void => {
      if (e.key === "Escape") setDrawerOpen(false);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [drawerOpen]);

  const current = list.conversations?.find((c) => c.id === chat.state.conversationId);
  useEffect(() => {
    document.title = current ? `${current.title} · maitred` : "maitred";
  }, [current]);

  const onDelete = async (conversation: ConversationSummary): Promise<void> => {
    if (!window.confirm(`Delete “${conversation.title}”? This cannot be undone.`)) return;
    try {
      await list.remove(conversation.id);
      if (conversation.id === chat.state.conversationId) go("/");
    } catch (error) {
      window.alert(`The conversation could not be deleted: ${error instanceof Error ? error.message : String(error)}`);
    }
  };

  const signOut = (): void => {
    api.logout().then(onSignedOut, (error: unknown) => {
      // A session the server no longer knows is signed out already. Any other failure
      // leaves it valid there: the screen must not claim otherwise (a shared computer).
      if (error instanceof HttpError && error.status === 401) {
        onSignedOut();
      } else {
        window.alert(`Signing out failed: ${error instanceof Error ? error.message : String(error)}. You are still signed in.`);
      }
    });
  };

  const lastAnswer = [...chat.state.turns].reverse().find((t) => t.kind === "assistant");
  const answerModel = lastAnswer?.kind === "assistant" ? lastAnswer.answer.model : null;
  const offline = (answerModel ?? model) === OFFLINE_MODEL;
  const live = lastAnswer?.kind === "assistant" ? lastAnswer : null;
  const asking = live?.answer.tools.find((t) => t.input?.state === "open");

  return (
    <div className="app" data-drawer={drawerOpen ? "open" : "closed"}>
      <a className="skip-link" href="#question">
        Skip to the question box
      </a>
      <header className="topbar">
        <button
          type="button"
          className="icon-button drawer-toggle"
          data-testid="sidebar-toggle"
          aria-label="Conversations"
          aria-expanded={drawerOpen}
          aria-controls="sidebar"
          onClick={() => setDrawerOpen((o) => !o)}
        >
          <MenuIcon />
        </button>
        <a
          className="brand"
          href="/"
          onClick={(e) => {
            e.preventDefault();
            go("/");
          }}
        >
          <span className="brand-mark" aria-hidden="true">
            m
          </span>
          maitred
        </a>
        <span className="topbar-model" title="The language model answering">
          {answerModel ?? model}
        </span>
        <span className="topbar-spacer" />
        <ConnectedAccounts api={api} />
        <ThemeToggle theme={theme} onToggle={toggle} />
        <UserMenu user={user} onSignOut={signOut} />
      </header>
      <aside id="sidebar" className="sidebar">
        <Sidebar
          conversations={list.conversations}
          error={list.error}
          currentId={chat.state.conversationId}
          onNavigate={go}
          onNewChat={() => go("/")}
          onDelete={(c) => void onDelete(c)}
        />
      </aside>
      <div className="scrim" aria-hidden="true" onClick={() => setDrawerOpen(false)} />
      <main className="chat">
        <Transcript
          turns={chat.state.turns}
          loading={chat.state.loading}
          onDecide={chat.decide}
          onAnswerInput={chat.answerInput}
          onSuggest={chat.ask}
          tasks={tasks.tasks}
        />
        <div className="composer-area">
          <TasksPanel tasks={tasks} />
          {offline && <OfflineNote />}
          {chat.state.reconnecting && (
            <p className="connection-status" data-testid="connection-status" role="status">
              <span className="spinner" aria-hidden="true" /> Connection lost. Reconnecting…
            </p>
          )}
          {chat.state.failure && (
            <ErrorBanner failure={chat.state.failure} onRetry={chat.retry} onDismiss={chat.dismiss} />
          )}
          {budget && (
            <p className="budget-left" data-testid="budget-left" role="status">
              {describeBudget(budget)}
            </p>
          )}
          <Composer ref={input} streaming={chat.streaming} onAsk={chat.ask} onStop={chat.stop} />
        </div>
      </main>
      <LiveAnnouncer
        answerKey={live?.key ?? null}
        text={live?.kind === "assistant" ? live.answer.text : ""}
        streaming={live?.kind === "assistant" ? live.answer.streaming : false}
        noticeKey={asking?.input?.id ?? null}
        notice={askingNotice(asking)}
      />
    </div>
  );
}
