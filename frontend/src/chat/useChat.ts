// The chat page's state: the transcript of the open conversation, the answer being
// followed, and what went wrong. Streams, approvals and loads all go through here.

import { useCallback, useEffect, useLayoutEffect, useMemo, useReducer, useRef } from "react";
import { HttpError, type Api } from "../api/http";
import type { ChatEvent, ErrorEvent, InputAction } from "../api/types";
import {
  applyEvent,
  emptyAnswer,
  setApproval,
  setInput,
  turnsFromConversation,
  type Approval,
  type InputRequest,
  type Turn,
} from "./answer";
import { AnswerStream, type AnswerStreamOptions } from "./answerStream";
import { failureFromError, failureFromEvent, type Failure } from "./failure";
import { problemsOf } from "./inputProblems";
import { shownMessageIds } from "./tasks";

export interface ChatState {
  conversationId: string | null;
  turns: Turn[];
  loading: boolean;
  reconnecting: boolean;
  failure: Failure | null;
}

type Action =
  | { type: "open"; conversationId: string | null; loading: boolean }
  | { type: "loaded"; turns: Turn[] }
  | { type: "conversation"; conversationId: string }
  | { type: "push"; turns: Turn[] }
  | { type: "followUp"; turns: Turn[]; messageId: string }
  | { type: "remove"; keys: string[] }
  | { type: "event"; key: string; event: ChatEvent }
  | { type: "restart"; key: string; messageId: string }
  | { type: "ended"; key: string }
  | { type: "unsent"; userKey: string; answerKey: string }
  | { type: "approval"; key: string; toolId: string; change: Partial<Approval> }
  | { type: "input"; key: string; inputId: string; change: Partial<InputRequest> }
  | { type: "reconnecting"; value: boolean }
  | { type: "failure"; failure: Failure | null };

const initial: ChatState = { conversationId: null, turns: [], loading: false, reconnecting: false, failure: null };

function mapAnswer(turns: Turn[], key: string, change: (turn: Extract<Turn, { kind: "assistant" }>) => Turn): Turn[] {
  return turns.map((t) => (t.kind === "assistant" && t.key === key ? change(t) : t));
}

function reducer(state: ChatState, action: Action): ChatState {
  switch (action.type) {
    case "open":
      return { ...initial, conversationId: action.conversationId, loading: action.loading };
    case "loaded":
      return { ...state, turns: action.turns, loading: false };
    case "conversation":
      return { ...state, conversationId: action.conversationId };
    case "push":
      return { ...state, turns: [...state.turns, ...action.turns], failure: null };
    case "followUp":
      // Once, however often the tasks' list names it before the transcript has it.
      if (state.loading || shownMessageIds(state.turns).has(action.messageId)) return state;
      return { ...state, turns: [...state.turns, ...action.turns] };
    case "remove":
      return { ...state, turns: state.turns.filter((t) => !action.keys.includes(t.key)) };
    case "event":
      return {
        ...state,
        turns: mapAnswer(state.turns, action.key, (t) => ({ ...t, answer: applyEvent(t.answer, action.event) })),
      };
    case "restart":
      return {
        ...state,
        turns: mapAnswer(state.turns, action.key, (t) => ({ ...t, answer: emptyAnswer(action.messageId) })),
      };
    case "ended":
      return {
        ...state,
        reconnecting: false,
        turns: mapAnswer(state.turns, action.key, (t) => ({ ...t, answer: { ...t.answer, streaming: false } })),
      };
    case "unsent":
      return {
        ...state,
        reconnecting: false,
        turns: state.turns
          .filter((t) => t.key !== action.answerKey)
          .map((t) => (t.key === action.userKey && t.kind === "user" ? { ...t, unsent: true } : t)),
      };
    case "approval":
      return {
        ...state,
        turns: mapAnswer(state.turns, action.key, (t) => ({
          ...t,
          answer: setApproval(t.answer, action.toolId, action.change),
        })),
      };
    case "input":
      return {
        ...state,
        turns: mapAnswer(state.turns, action.key, (t) => ({
          ...t,
          answer: setInput(t.answer, action.inputId, action.change),
        })),
      };
    case "reconnecting":
      return { ...state, reconnecting: action.value };
    case "failure":
      return { ...state, failure: action.failure };
  }
}

let counter = 0;
const localKey = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}`;

export interface ChatCallbacks {
  /** A new conversation got its id from the first `meta`. */
  onConversationStarted: (id: string) => void;
  /** An answer ended (the conversation list's order changed). */
  onAnswerEnded: () => void;
}

export interface Chat {
  state: ChatState;
  streaming: boolean;
  open: (conversationId: string | null) => void;
  ask: (question: string) => void;
  stop: () => void;
  retry: () => void;
  dismiss: () => void;
  decide: (toolId: string, approve: boolean, rememberMinutes: number) => void;
  /** Answers a tool's request for input (`content` with `accept` of a form). */
  answerInput: (inputId: string, action: InputAction, content?: Record<string, unknown>) => void;
  /**
   * Appends the answer a task posted with its result, and watches it stream in from
   * its first event, beside whatever the person is asking meanwhile.
   */
  appendFollowUp: (messageId: string, taskId: string) => void;
}

/** A stream being followed: the person's own answer, or a task's follow-up beside it. */
interface Followed {
  stream: AnswerStream;
  key: string;
  followUp: boolean;
}

export function useChat(api: Api, callbacks: ChatCallbacks, streamOptions: Partial<AnswerStreamOptions> = {}): Chat {
  const [state, dispatch] = useReducer(reducer, initial);
  const conversationRef = useRef<string | null>(null);
  // Every answer being watched, by turn key: at most one of the person's, and the
  // follow-ups of tasks, which stream beside it.
  const streamsRef = useRef<Map<string, Followed>>(new Map());
  const loadRef = useRef<AbortController | null>(null);
  // The stream's handlers outlive the render that made them: they read the newest
  // callbacks and options through these refs, updated after every commit (before any
  // event the stream could deliver), never during a render.
  const callbacksRef = useRef(callbacks);
  const optionsRef = useRef(streamOptions);
  useLayoutEffect(() => {
    callbacksRef.current = callbacks;
    optionsRef.current = streamOptions;
  });

  const closeStreams = useCallback((which: (f: Followed) => boolean = () => true) => {
    for (const [key, followed] of streamsRef.current) {
      if (!which(followed)) continue;
      followed.stream.close();
      streamsRef.current.delete(key);
    }
  }, []);

  useEffect(
    () => () => {
      closeStreams();
      loadRef.current?.abort();
      // Mounted again (React's strict mode does so at once), the page must load anew.
      conversationRef.current = null;
    },
    [closeStreams],
  );

  const follow = useCallback(
    (
      key: string,
      source: Pick<AnswerStreamOptions, "open" | "messageId">,
      asked: { question: string; userKey: string } | null,
      reload: (id: string) => void,
      followUp = false,
    ) => {
      // A new answer of the person's replaces any they were watching; a task's follow-up
      // replaces nothing but an earlier watch of itself.
      closeStreams((f) => f.key === key || (!followUp && !f.followUp));
      let errorEvent: ErrorEvent | null = null;
      let started = source.messageId !== undefined;
      const stream = new AnswerStream(
        {
          ...optionsRef.current,
          ...source,
          resume: (messageId, lastEventId, signal) => api.resume(messageId, lastEventId, signal),
        },
        {
          onEvent: (event) => {
            if (event.type === "meta" && !started) {
              started = true;
              if (conversationRef.current !== event.data.conversation_id) {
                conversationRef.current = event.data.conversation_id;
                dispatch({ type: "conversation", conversationId: event.data.conversation_id });
                callbacksRef.current.onConversationStarted(event.data.conversation_id);
              }
            }
            if (event.type === "error") errorEvent = event.data;
            dispatch({ type: "event", key, event });
          },
          onConnection: (connection) => dispatch({ type: "reconnecting", value: connection === "reconnecting" }),
          onEnd: (end) => {
            if (streamsRef.current.get(key)?.stream === stream) streamsRef.current.delete(key);
            const retry = asked ? { question: asked.question } : null;
            if (end.kind === "done") {
              dispatch({ type: "reconnecting", value: false });
              if (errorEvent) dispatch({ type: "failure", failure: failureFromEvent(errorEvent, retry) });
            } else if (end.kind === "gone") {
              const id = conversationRef.current;
              dispatch({ type: "ended", key });
              if (id) reload(id);
            } else if (!started && asked) {
              dispatch({ type: "unsent", userKey: asked.userKey, answerKey: key });
              dispatch({
                type: "failure",
                failure: failureFromError(end.error, { question: asked.question, unsentKey: asked.userKey }),
              });
            } else {
              dispatch({ type: "ended", key });
              dispatch({ type: "failure", failure: failureFromError(end.error, retry) });
            }
            callbacksRef.current.onAnswerEnded();
          },
        },
      );
      streamsRef.current.set(key, { stream, key, followUp });
      stream.start();
    },
    [api, closeStreams],
  );

  const load = useCallback(
    (conversationId: string, resumeRunning: boolean) => {
      // A named function, so an answer found gone while being followed can load its
      // conversation again without the callback naming itself before it exists.
      function run(id: string, resume: boolean): void {
        loadRef.current?.abort();
        const controller = new AbortController();
        loadRef.current = controller;
        api.conversation(id, controller.signal).then(
          (conversation) => {
            if (controller.signal.aborted) return;
            const turns = turnsFromConversation(conversation, resume);
            dispatch({ type: "loaded", turns });
            const last = turns[turns.length - 1];
            // Reopened while its answer still runs (a reload mid-answer): watch it from the start.
            if (resume && last?.kind === "assistant" && last.answer.streaming && last.answer.messageId) {
              const messageId = last.answer.messageId;
              dispatch({ type: "restart", key: last.key, messageId });
              follow(last.key, { messageId }, null, (again) => run(again, false), last.taskId !== undefined);
            }
          },
          (error: unknown) => {
            if (controller.signal.aborted) return;
            dispatch({ type: "loaded", turns: [] });
            const notFound = error instanceof HttpError && error.status === 404;
            dispatch({
              type: "failure",
              failure: notFound
                ? { title: "Conversation not found", message: "It may have been deleted.", retry: null }
                : failureFromError(error, null),
            });
          },
        );
      }
      run(conversationId, resumeRunning);
    },
    [api, follow],
  );

  const open = useCallback(
    (conversationId: string | null) => {
      // The conversation an answer just created: the transcript is already here.
      if (conversationId !== null && conversationId === conversationRef.current) return;
      closeStreams();
      loadRef.current?.abort();
      conversationRef.current = conversationId;
      dispatch({ type: "open", conversationId, loading: conversationId !== null });
      if (conversationId !== null) load(conversationId, true);
    },
    [closeStreams, load],
  );

  const ask = useCallback(
    (question: string) => {
      const conversationId = conversationRef.current;
      const userKey = localKey("user");
      const key = localKey("answer");
      dispatch({
        type: "push",
        turns: [
          { kind: "user", key: userKey, text: question },
          { kind: "assistant", key, answer: emptyAnswer() },
        ],
      });
      follow(
        key,
        { open: (signal) => api.ask(question, conversationId, signal) },
        { question, userKey },
        (id) => load(id, false),
      );
    },
    [api, follow, load],
  );

  const stop = useCallback(() => {
    const current = [...streamsRef.current.values()].filter((f) => !f.followUp).pop();
    if (!current) return;
    const messageId = current.stream.messageId;
    if (messageId) {
      // The stream stays open to hear the `done` that says it stopped.
      api.cancel(messageId).catch((error: unknown) => {
        dispatch({ type: "failure", failure: failureFromError(error, null) });
      });
    } else {
      current.stream.close();
      streamsRef.current.delete(current.key);
      dispatch({ type: "ended", key: current.key });
    }
  }, [api]);

  const retry = useCallback(() => {
    const again = state.failure?.retry;
    if (!again) return;
    dispatch({ type: "failure", failure: null });
    if (again.unsentKey) dispatch({ type: "remove", keys: [again.unsentKey] });
    ask(again.question);
  }, [ask, state.failure]);

  const dismiss = useCallback(() => dispatch({ type: "failure", failure: null }), []);

  const decide = useCallback(
    (toolId: string, approve: boolean, rememberMinutes: number) => {
      const key = state.turns.find(
        (t) => t.kind === "assistant" && t.answer.tools.some((tool) => tool.id === toolId),
      )?.key;
      if (!key) return;
      dispatch({ type: "approval", key, toolId, change: { decision: "sending", problem: undefined } });
      api.decide(toolId, approve, rememberMinutes).then(
        () => dispatch({ type: "approval", key, toolId, change: { decision: approve ? "approved" : "denied" } }),
        (error: unknown) => {
          const problem =
            error instanceof HttpError && error.status === 404
              ? "This approval is no longer open: it expired or was already answered."
              : error instanceof Error
                ? error.message
                : String(error);
          dispatch({ type: "approval", key, toolId, change: { decision: "pending", problem } });
        },
      );
    },
    [api, state.turns],
  );

  const answerInput = useCallback(
    (inputId: string, action: InputAction, content?: Record<string, unknown>) => {
      const key = state.turns.find(
        (t) => t.kind === "assistant" && t.answer.tools.some((tool) => tool.input?.id === inputId),
      )?.key;
      if (!key) return;
      const change = (c: Partial<InputRequest>): void => dispatch({ type: "input", key, inputId, change: c });
      change({ state: "sending", problems: undefined, problem: undefined });
      api.answerInput(inputId, action, content).then(
        () => change({ state: "closed", outcome: action }),
        (error: unknown) => {
          if (error instanceof HttpError && error.status === 404) {
            change({
              state: "closed",
              problem: "This request is no longer open: it was already answered, it expired, or it is not yours.",
            });
            return;
          }
          const problems = problemsOf(error);
          const problem = error instanceof Error ? error.message : String(error);
          // Still open at the server: the form stays, with what to fix.
          change({ state: "open", problems, problem: problems.length > 0 ? undefined : problem });
        },
      );
    },
    [api, state.turns],
  );

  const appendFollowUp = useCallback(
    (messageId: string, taskId: string) => {
      const id = conversationRef.current;
      if (id === null || state.loading || shownMessageIds(state.turns).has(messageId)) return;
      if ([...streamsRef.current.values()].some((f) => f.stream.messageId === messageId)) return;
      const key = `task-${messageId}`;
      dispatch({
        type: "followUp",
        messageId,
        turns: [
          { kind: "user", key: `${key}-note`, text: "", messageId, taskId },
          { kind: "assistant", key, answer: emptyAnswer(messageId), taskId },
        ],
      });
      follow(key, { messageId }, null, (again) => load(again, false), true);
    },
    [follow, load, state.loading, state.turns],
  );

  // The person's own answer: a task's follow-up streaming meanwhile does not stop them asking.
  const streaming = state.turns.some((t) => t.kind === "assistant" && t.answer.streaming && t.taskId === undefined);

  return useMemo(
    () => ({ state, streaming, open, ask, stop, retry, dismiss, decide, answerInput, appendFollowUp }),
    [state, streaming, open, ask, stop, retry, dismiss, decide, answerInput, appendFollowUp],
  );
}
