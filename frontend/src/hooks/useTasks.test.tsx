import { act, renderHook } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Api } from "../api/http";
import type { Task } from "../api/tasks";
import { jsonResponse, until } from "../test/fakeStream";
import { ended, task } from "../test/tasks";
import { useTasks } from "./useTasks";

/** The tasks endpoint, answering with whatever `list` holds when asked. */
function serve(list: { tasks: Task[] }): string[] {
  const urls: string[] = [];
  vi.stubGlobal("fetch", (url: string) => {
    urls.push(url);
    return Promise.resolve(jsonResponse(200, { tasks: list.tasks }));
  });
  return urls;
}

const wait = (ms: number): Promise<void> => act(() => new Promise<void>((r) => setTimeout(r, ms)));

describe("useTasks", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("polls while a task runs, and stops once it ended and its result is shown", async () => {
    const list = { tasks: [task()] };
    const urls = serve(list);
    const api = new Api("csrf");
    let shown = new Set<string>();
    const { result, rerender } = renderHook(({ s }) => useTasks(api, "conv_1", s, 10), { initialProps: { s: shown } });
    await until(() => urls.length >= 3, "three polls");
    expect(urls[0]).toBe("/api/v1/resos/conversations/conv_1/tasks");
    expect(result.current.tasks[0]?.status).toBe("working");

    // Ended, its result posted: polled until the transcript shows it.
    list.tasks = [ended("completed", new Date().toISOString(), "msg_f")];
    await until(() => result.current.tasks[0]?.status === "completed", "the end seen");
    const before = urls.length;
    await wait(50);
    expect(urls.length).toBeGreaterThan(before);
    shown = new Set(["msg_f"]);
    rerender({ s: shown });
    await wait(30);
    const settled = urls.length;
    await wait(80);
    expect(urls.length).toBe(settled);

    // An answer ended: asked once more.
    act(() => result.current.refresh());
    await until(() => urls.length === settled + 1, "the refresh");
    await wait(50);
    expect(urls.length).toBe(settled + 1);
  });

  it("asks for nothing without a conversation, and forgets the last one's tasks", async () => {
    const urls = serve({ tasks: [ended("cancelled", "2026-11-01T00:00:00Z")] });
    const api = new Api("csrf");
    const shown = new Set<string>();
    const first: { id: string | null } = { id: "conv_1" };
    const { result, rerender } = renderHook(({ id }: { id: string | null }) => useTasks(api, id, shown, 10), {
      initialProps: first,
    });
    await until(() => result.current.tasks.length === 1, "the list");
    rerender({ id: null });
    expect(result.current.tasks).toEqual([]);
    const count = urls.length;
    await wait(40);
    expect(urls.length).toBe(count);
  });
});
