// The open conversation's tasks, polled: once when it opens, once after every answer
// ends (an answer may have started one), and every ~2 s while any still runs or its
// result has yet to be shown. The gateway sends no event for tasks.

import { useCallback, useEffect, useRef, useState } from "react";
import { HttpError, type Api } from "../api/http";
import type { Task } from "../api/tasks";
import type { InputAction } from "../api/types";
import { problemsOf } from "../chat/inputProblems";
import { keepPolling, noteEnded, replaceTask, TASK_POLL_MS } from "../chat/tasks";

/** What the person has done with a task here: a stop or an answer on its way, or why it failed. */
export interface TaskAction {
  sending: boolean;
  /** The gateway's problems with the form's answer (the form stays open). */
  problems?: string[];
  problem?: string;
}

export interface Tasks {
  tasks: Task[];
  /** When the list was fetched (this computer's clock): running tasks' elapsed time counts on from it. */
  fetchedAt: number;
  actions: Record<string, TaskAction>;
  /** Asks for the list again now (an answer ended). */
  refresh: () => void;
  cancel: (taskId: string) => void;
  answerInput: (taskId: string, action: InputAction, content?: Record<string, unknown>) => void;
}

interface Fetched {
  conversationId: string | null;
  tasks: Task[];
  fetchedAt: number;
  /** Counts every fetch, failed ones too, so the next poll is always scheduled anew. */
  round: number;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export function useTasks(
  api: Api,
  conversationId: string | null,
  /** The answers the transcript shows (a result not among them is still to be shown). */
  shown: ReadonlySet<string>,
  poll = TASK_POLL_MS,
): Tasks {
  const [fetched, setFetched] = useState<Fetched>({ conversationId: null, tasks: [], fetchedAt: 0, round: 0 });
  const [requests, setRequests] = useState(0);
  const [actions, setActions] = useState<Record<string, TaskAction>>({});
  const endedSeen = useRef<Map<string, number>>(new Map());

  // A new conversation starts with nothing of the last one's.
  const [forConversation, setForConversation] = useState(conversationId);
  if (forConversation !== conversationId) {
    setForConversation(conversationId);
    setFetched({ conversationId, tasks: [], fetchedAt: 0, round: 0 });
    setActions({});
  }

  useEffect(() => {
    if (conversationId === null) return;
    const controller = new AbortController();
    api.tasks(conversationId, controller.signal).then(
      (tasks) => {
        if (controller.signal.aborted) return;
        const now = Date.now();
        endedSeen.current = noteEnded(endedSeen.current, tasks, now);
        setFetched((f) => ({ conversationId, tasks, fetchedAt: now, round: f.round + 1 }));
      },
      () => {
        // A gateway without tasks (404), or a blip: the list stays as it was, and a
        // list that still needs watching is asked for again on the next round.
        if (controller.signal.aborted) return;
        setFetched((f) => ({ ...f, round: f.round + 1 }));
      },
    );
    return () => controller.abort();
  }, [api, conversationId, requests]);

  // A set's identity changes with every render of a streaming answer: its content is what counts.
  const shownKey = [...shown].sort().join(" ");
  useEffect(() => {
    if (conversationId === null || fetched.conversationId !== conversationId) return;
    const shownNow = new Set(shownKey.split(" ").filter((id) => id !== ""));
    if (!keepPolling(fetched.tasks, shownNow, endedSeen.current, Date.now())) return;
    const timer = setTimeout(() => setRequests((n) => n + 1), poll);
    return () => clearTimeout(timer);
  }, [conversationId, fetched, shownKey, poll]);

  const refresh = useCallback(() => setRequests((n) => n + 1), []);

  const act = useCallback(
    (taskId: string, send: () => Promise<Task>, formProblems: boolean) => {
      setActions((a) => ({ ...a, [taskId]: { sending: true } }));
      send().then(
        (task) => {
          setActions((a) => ({ ...a, [taskId]: { sending: false } }));
          setFetched((f) => (f.conversationId === task.conversation_id ? { ...f, tasks: replaceTask(f.tasks, task) } : f));
          setRequests((n) => n + 1);
        },
        (error: unknown) => {
          const problems = formProblems ? problemsOf(error) : [];
          const problem =
            error instanceof HttpError && error.status === 409
              ? "This task has already ended."
              : error instanceof HttpError && error.status === 404
                ? "This task is no longer there."
                : message(error);
          setActions((a) => ({
            ...a,
            [taskId]: problems.length > 0 ? { sending: false, problems } : { sending: false, problem },
          }));
          setRequests((n) => n + 1);
        },
      );
    },
    [],
  );

  const cancel = useCallback((taskId: string) => act(taskId, () => api.cancelTask(taskId), false), [act, api]);

  const answerInput = useCallback(
    (taskId: string, action: InputAction, content?: Record<string, unknown>) =>
      act(taskId, () => api.answerTaskInput(taskId, action, content), true),
    [act, api],
  );

  const current = fetched.conversationId === conversationId;
  return {
    tasks: current ? fetched.tasks : [],
    fetchedAt: fetched.fetchedAt,
    actions,
    refresh,
    cancel,
    answerInput,
  };
}
