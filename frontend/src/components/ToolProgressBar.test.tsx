import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { ToolView } from "../chat/answer";
import { ToolCard } from "./ToolCard";

const running: ToolView = {
  id: "tc_3",
  server: "resos",
  tool: "findAvailability",
  title: "Finding free tables",
  arguments: { from: "2026-12-01", to: "2026-12-07" },
  status: "running",
};

describe("a tool's progress bar", () => {
  it("shows how far a tool with a total has got", () => {
    render(<ToolCard tool={{ ...running, progress: { progress: 3, total: 7, message: "Checked Wednesday" } }} />);
    const bar = screen.getByRole("progressbar");
    expect(bar.getAttribute("aria-valuenow")).toBe("3");
    expect(bar.getAttribute("aria-valuemin")).toBe("0");
    expect(bar.getAttribute("aria-valuemax")).toBe("7");
    expect(bar.getAttribute("aria-valuetext")).toBe("3 of 7, Checked Wednesday");
    expect(bar.getAttribute("aria-label")).toBe("Finding free tables: progress");
    expect(bar.querySelector<HTMLElement>(".progress-fill")?.style.width).toMatch(/^42\.85\d*%$/);
    expect(screen.getByTestId("tool-progress-message").textContent).toBe("Checked Wednesday");
  });

  it("is indeterminate without a total: no value to announce, only the message", () => {
    render(<ToolCard tool={{ ...running, progress: { progress: 12, message: "Still looking" } }} />);
    const bar = screen.getByRole("progressbar");
    expect(bar.hasAttribute("aria-valuenow")).toBe(false);
    expect(bar.hasAttribute("aria-valuemax")).toBe(false);
    expect(bar.getAttribute("aria-valuetext")).toBe("Still looking");
    expect(bar.className).toContain("indeterminate");
  });

  it("never draws past its ends, whatever the tool reports", () => {
    render(<ToolCard tool={{ ...running, progress: { progress: 9, total: 7 } }} />);
    expect(screen.getByRole("progressbar").querySelector<HTMLElement>(".progress-fill")?.style.width).toBe("100%");
  });

  it("goes when the call has its result", () => {
    const { rerender } = render(<ToolCard tool={{ ...running, progress: { progress: 1, total: 2 } }} />);
    expect(screen.getByRole("progressbar")).toBeTruthy();
    // A stale report left on a finished call is not shown either.
    rerender(<ToolCard tool={{ ...running, status: "ok", durationMs: 800, progress: { progress: 1, total: 2 } }} />);
    expect(screen.queryByRole("progressbar")).toBeNull();
    expect(screen.queryByTestId("tool-progress")).toBeNull();
  });
});
