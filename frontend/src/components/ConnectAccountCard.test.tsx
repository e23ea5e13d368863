import { fireEvent, render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { ConnectReason } from "../api/types";
import type { InputRequest, ToolView } from "../chat/answer";
import { ToolCard } from "./ToolCard";

function asking(reason: ConnectReason = "connect", input: Partial<InputRequest> = {}): ToolView {
  return {
    id: "tc_3",
    server: "github",
    tool: "listIssues",
    title: "Listing issues",
    arguments: {},
    status: "waiting",
    input: {
      id: "in_3",
      mode: "url",
      message: "Sign in to GitHub so maitred can read your issues.",
      url: "https://github.example/login/oauth/authorize?client_id=x&state=s",
      connect: { server: "github", host: "github.example", reason },
      expiresAt: new Date(Date.now() + 600_000).toISOString(),
      state: "open",
      ...input,
    },
  };
}

const card = (): HTMLElement => screen.getByTestId("connect-card");

describe("the Connect card", () => {
  it("is titled by why it asks, and says where the person will sign in", () => {
    const { rerender } = render(<ToolCard tool={asking("connect")} onAnswerInput={() => {}} />);
    expect(screen.getByRole("region", { name: "Connect github" })).toBe(card());
    expect(within(card()).getByRole("heading").textContent).toBe("Connect github");
    expect(card().textContent).toContain("You will sign in at github.example");
    expect(within(card()).getByTestId("connect-host").textContent).toBe("github.example");
    expect(card().textContent).not.toContain("has ended");

    rerender(<ToolCard tool={asking("reconnect")} onAnswerInput={() => {}} />);
    expect(screen.getByRole("region", { name: "Reconnect github" })).toBe(card());
    expect(card().textContent).toContain("Your sign-in at github has ended.");

    rerender(<ToolCard tool={asking("more_access")} onAnswerInput={() => {}} />);
    expect(screen.getByRole("region", { name: "Give github more access" })).toBe(card());
  });

  it("names the host the page is really at, whatever the gateway's word", () => {
    render(<ToolCard tool={asking("connect", { url: "https://evil.example/authorize" })} onAnswerInput={() => {}} />);
    expect(within(card()).getByTestId("connect-host").textContent).toBe("evil.example");
  });

  it("opens the sign-in page in a new tab on Connect, then waits: there is no 'done' to press", () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    const onAnswer = vi.fn();
    render(<ToolCard tool={asking()} onAnswerInput={onAnswer} />);
    expect(document.activeElement).toBe(within(card()).getByRole("button", { name: "Connect" }));
    expect(screen.queryByTestId("input-link")).toBeNull();
    expect(card().querySelector("a, [href], [src]")).toBeNull();

    fireEvent.click(within(card()).getByRole("button", { name: "Connect" }));
    expect(open).toHaveBeenCalledWith(
      "https://github.example/login/oauth/authorize?client_id=x&state=s",
      "_blank",
      "noopener,noreferrer",
    );
    expect(onAnswer).not.toHaveBeenCalled();
    expect(card().dataset.state).toBe("waiting");
    expect(within(card()).getByRole("status").textContent).toBe("Waiting for you to sign in at github.example…");
    const names = within(card()).getAllByRole("button").map((b) => b.textContent);
    expect(names).toEqual(["Open the sign-in page again", "Not now"]);
    expect(screen.queryByTestId("input-done")).toBeNull();
    expect(within(card()).queryByRole("button", { name: /done|accept/i })).toBeNull();
  });

  it("answers Not now with decline", () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    const onAnswer = vi.fn();
    render(<ToolCard tool={asking()} onAnswerInput={onAnswer} />);
    fireEvent.click(within(card()).getByRole("button", { name: "Not now" }));
    expect(onAnswer).toHaveBeenCalledWith("in_3", "decline", undefined);
    expect(open).not.toHaveBeenCalled();
  });

  it("shows the server's message as text, loading nothing", () => {
    const hostile = '<img src="http://attacker.invalid/x.png"> [click](javascript:alert(1)) **now**';
    render(<ToolCard tool={asking("connect", { message: hostile })} onAnswerInput={() => {}} />);
    expect(within(card()).getByTestId("input-message").textContent).toBe(hostile);
    expect(card().querySelector("img, a, strong:not([data-testid])")).toBeNull();
  });

  it("offers only Not now when the sign-in page is not a web page", () => {
    render(<ToolCard tool={asking("connect", { url: "javascript:alert(1)" })} onAnswerInput={() => {}} />);
    expect(within(card()).getByTestId("connect-refused")).toBeTruthy();
    expect(within(card()).getAllByRole("button").map((b) => b.textContent)).toEqual(["Not now"]);
  });

  it("says how it ended once the gateway settles it", () => {
    const tool = asking();
    const { rerender } = render(
      <ToolCard tool={{ ...tool, status: "running", input: { ...tool.input!, state: "closed", outcome: "accept" } }} />,
    );
    expect(screen.queryByTestId("connect-card")).toBeNull();
    expect(screen.getByTestId("input-outcome").textContent).toBe("You signed in at github.");
    rerender(<ToolCard tool={{ ...tool, status: "running", input: { ...tool.input!, state: "closed", outcome: "decline" } }} />);
    expect(screen.getByTestId("input-outcome").textContent).toBe("You chose not to connect github now.");
  });

  it("leaves a plain link request as it was", () => {
    const tool = asking();
    const { connect: _none, ...plain } = tool.input!;
    render(<ToolCard tool={{ ...tool, input: plain }} onAnswerInput={() => {}} />);
    expect(screen.queryByTestId("connect-card")).toBeNull();
    expect(screen.getByTestId("input-link").dataset.step).toBe("confirm");
    expect(screen.getByTestId("input-open").textContent).toBe("Open github.example");
  });
});
