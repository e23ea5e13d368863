import { fireEvent, render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { ToolView } from "../chat/answer";
import { ToolCard } from "./ToolCard";

const base: ToolView = {
  id: "call_1",
  server: "resos",
  tool: "getTables",
  title: "Looking up tables",
  arguments: { seats: 6 },
  status: "running",
};

describe("ToolCard", () => {
  it("shows a running call with its title and a live duration", () => {
    render(<ToolCard tool={base} />);
    const card = screen.getByTestId("tool-card");
    expect(card.dataset.status).toBe("running");
    expect(card.dataset.tool).toBe("getTables");
    expect(screen.getByTestId("tool-card-title").textContent).toBe("Looking up tables");
    expect(card.textContent).toContain("Running");
    expect(screen.getByTestId("tool-card-duration").textContent).toMatch(/^\d+ ms$/);
  });

  it.each([
    ["ok", "Done"],
    ["error", "Failed"],
    ["denied", "Denied"],
    ["unavailable", "Unavailable"],
  ] as const)("shows a finished call (%s) with the server's duration", (status, label) => {
    render(<ToolCard tool={{ ...base, status, durationMs: 1530, summary: "3 tables" }} />);
    const card = screen.getByTestId("tool-card");
    expect(card.dataset.status).toBe(status);
    expect(card.textContent).toContain(label);
    expect(screen.getByTestId("tool-card-duration").textContent).toBe("1.5 s");
  });

  it("expands to show the arguments and the result summary", () => {
    render(<ToolCard tool={{ ...base, status: "ok", durationMs: 12, summary: "3 tables seat six" }} />);
    expect(screen.queryByTestId("tool-card-details")).toBeNull();
    const toggle = screen.getByTestId("tool-card-toggle");
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    fireEvent.click(toggle);
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    const details = screen.getByTestId("tool-card-details");
    expect(details.textContent).toContain('"seats": 6');
    expect(details.textContent).toContain("3 tables seat six");
    fireEvent.click(toggle);
    expect(screen.queryByTestId("tool-card-details")).toBeNull();
  });

  it("asks for approval while waiting, and only then", () => {
    const waiting: ToolView = {
      ...base,
      tool: "createBooking",
      status: "waiting",
      approval: { expiresAt: new Date(Date.now() + 300_000).toISOString(), decision: "pending" },
    };
    const { rerender } = render(<ToolCard tool={waiting} onDecide={() => {}} />);
    expect(screen.getByTestId("tool-card").dataset.status).toBe("waiting");
    expect(screen.getByTestId("approval-card")).toBeTruthy();
    rerender(
      <ToolCard
        tool={{ ...waiting, status: "ok", durationMs: 40, approval: { ...waiting.approval!, decision: "approved" } }}
        onDecide={() => {}}
      />,
    );
    expect(screen.queryByTestId("approval-card")).toBeNull();
    expect(screen.getByTestId("tool-card").textContent).toContain("You approved this call.");
  });

  it("says a write was made as the person, when the server acts for them", () => {
    const write: ToolView = {
      ...base,
      tool: "createBooking",
      status: "ok",
      actingAs: "Ada Lovelace",
      approval: { expiresAt: new Date(Date.now() + 300_000).toISOString(), decision: "approved" },
    };
    const { rerender } = render(<ToolCard tool={write} onDecide={() => {}} />);
    expect(screen.getByTestId("tool-card-as").textContent).toBe("Made as Ada Lovelace, not as the assistant.");
    // A read, or a server that is called as the gateway, says nothing of the kind.
    rerender(<ToolCard tool={{ ...write, approval: undefined }} onDecide={() => {}} />);
    expect(screen.queryByTestId("tool-card-as")).toBeNull();
    rerender(<ToolCard tool={{ ...write, actingAs: undefined }} onDecide={() => {}} />);
    expect(screen.queryByTestId("tool-card-as")).toBeNull();
  });
});

describe("ApprovalCard actions", () => {
  const waiting: ToolView = {
    ...base,
    tool: "createBooking",
    title: "Booking a table",
    status: "waiting",
    approval: { expiresAt: new Date(Date.now() + 90_000).toISOString(), decision: "pending" },
  };

  it("approves with the minutes chosen to remember", () => {
    const onDecide = vi.fn();
    render(<ToolCard tool={waiting} onDecide={onDecide} />);
    const card = screen.getByTestId("approval-card");
    const select = within(card).getByTestId<HTMLSelectElement>("remember-minutes");
    expect(Array.from(select.options).map((o) => o.value)).toEqual(["0", "5", "10", "30"]);
    fireEvent.change(select, { target: { value: "10" } });
    fireEvent.click(within(card).getByTestId("approve-button"));
    expect(onDecide).toHaveBeenCalledWith(true, 10);
  });

  it("denies without remembering anything", () => {
    const onDecide = vi.fn();
    render(<ToolCard tool={waiting} onDecide={onDecide} />);
    fireEvent.change(screen.getByTestId("remember-minutes"), { target: { value: "30" } });
    fireEvent.click(screen.getByTestId("deny-button"));
    expect(onDecide).toHaveBeenCalledWith(false, 0);
  });

  it("shows the time left and disables the buttons while the answer is sent", () => {
    // The clock stands still: a slow machine must not make 1:30 read 1:28.
    const now = Date.parse("2026-11-24T12:00:00Z");
    vi.useFakeTimers({ now, toFake: ["Date"] });
    try {
      const expiresAt = new Date(now + 90_000).toISOString();
      render(<ToolCard tool={{ ...waiting, approval: { expiresAt, decision: "sending" } }} onDecide={() => {}} />);
    } finally {
      vi.useRealTimers();
    }
    expect(screen.getByTestId("approval-card").textContent).toMatch(/Denied automatically in 1:30/);
    expect(screen.getByTestId<HTMLButtonElement>("approve-button").disabled).toBe(true);
    expect(screen.getByTestId<HTMLButtonElement>("deny-button").disabled).toBe(true);
  });
});

describe("ToolCard after a stop", () => {
  it("says the call was stopped, not that it failed", () => {
    render(<ToolCard tool={{ ...base, status: "error", stopped: true, summary: "Stopped before it finished." }} />);
    const card = screen.getByTestId("tool-card");
    expect(card.dataset.status).toBe("error");
    expect(card.textContent).toContain("Stopped");
    expect(card.textContent).not.toContain("Failed");
  });
});

describe("ApprovalCard contents", () => {
  it("shows every argument of the call being approved", () => {
    const tool: ToolView = {
      ...base,
      tool: "createBooking",
      status: "waiting",
      arguments: { guestName: "Di Park", people: 2, time: "19:30" },
      approval: { expiresAt: new Date(Date.now() + 60_000).toISOString(), decision: "pending" },
    };
    render(<ToolCard tool={tool} onDecide={() => {}} />);
    const card = screen.getByTestId("approval-card");
    const pairs = Array.from(card.querySelectorAll("dl > div")).map((d) => [
      d.querySelector("dt")?.textContent,
      d.querySelector("dd")?.textContent,
    ]);
    expect(pairs).toEqual([
      ["guestName", "Di Park"],
      ["people", "2"],
      ["time", "19:30"],
    ]);
  });
});

describe("untrusted tool text", () => {
  // Tool arguments and results come from the model and from guests' records: they
  // are shown as the characters they are, never parsed as markdown or HTML.
  const hostile = '![x](http://attacker.invalid/leak.png) <img src="http://attacker.invalid/raw.png"> **bold**';

  it("shows a result summary and arguments literally, loading nothing", () => {
    render(<ToolCard tool={{ ...base, status: "ok", durationMs: 3, arguments: { guestName: hostile }, summary: hostile }} />);
    fireEvent.click(screen.getByTestId("tool-card-toggle"));
    const card = screen.getByTestId("tool-card");
    expect(card.querySelector("img, [src], strong")).toBeNull();
    const details = screen.getByTestId("tool-card-details");
    expect(details.textContent).toContain(hostile);
    expect(details.textContent).toContain(JSON.stringify(hostile));
  });

  it("shows an approval's arguments literally too", () => {
    const tool: ToolView = {
      ...base,
      tool: "createBooking",
      status: "waiting",
      arguments: { guestName: hostile },
      approval: { expiresAt: new Date(Date.now() + 60_000).toISOString(), decision: "pending" },
    };
    render(<ToolCard tool={tool} onDecide={() => {}} />);
    const card = screen.getByTestId("approval-card");
    expect(card.querySelector("img, [src]")).toBeNull();
    // The card's own wording has a <strong>; the guest's "**bold**" must not add one.
    expect(card.querySelector("dl strong")).toBeNull();
    expect(card.querySelector("dd")?.textContent).toBe(hostile);
  });
});
