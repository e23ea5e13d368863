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
}

export function useChat(api: Api, callbacks: ChatCallbacks, streamOptions: Partial<AnswerStreamOptions> = {}): Chat {
  const [state, dispatch] = useReducer(reducer, initial);
  const conversationRef = useRef<string | null>(null);
  const streamRef = useRef<{ stream: AnswerStream; key: string } | null>(null);
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

  const closeStream = useCallback(() => {
    streamRef.current?.stream.close();
    streamRef.current = null;
  }, []);

  useEffect(
    () => () => {
      closeStream();
      loadRef.current?.abort();
      // Mounted again (React's strict mode does so at once), the page must load anew.
      conversationRef.current = null;
    },
    [closeStream],
  );

  const follow = useCallback(
    (
      key: string,
      source: Pick<AnswerStreamOptions, "open" | "messageId">,
      asked: { question: string; userKey: string } | null,
      reload: (id: string) => void,
    ) => {
      closeStream();
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
            if (streamRef.current?.stream === stream) streamRef.current = null;
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
      streamRef.current = { stream, key };
      stream.start();
    },
    [api, closeStream],
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
              follow(last.key, { messageId }, null, (again) => run(again, false));
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
      closeStream();
      loadRef.current?.abort();
      conversationRef.current = conversationId;
      dispatch({ type: "open", conversationId, loading: conversationId !== null });
      if (conversationId !== null) load(conversationId, true);
    },
    [closeStream, load],
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
    const current = streamRef.current;
    if (!current) return;
    const messageId = current.stream.messageId;
    if (messageId) {
      // The stream stays open to hear the `done` that says it stopped.
      api.cancel(messageId).catch((error: unknown) => {
        dispatch({ type: "failure", failure: failureFromError(error, null) });
      });
    } else {
      current.stream.close();
      streamRef.current = null;
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

  const streaming = state.turns.some((t) => t.kind === "assistant" && t.answer.streaming);

  return useMemo(
    () => ({ state, streaming, open, ask, stop, retry, dismiss, decide, answerInput }),
    [state, streaming, open, ask, stop, retry, dismiss, decide, answerInput],
  );
}
