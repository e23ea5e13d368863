import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { ToolView } from "../chat/answer";
import { offerableLink } from "./InputLink";
import { ToolCard } from "./ToolCard";

function asking(url: string): ToolView {
  return {
    id: "tc_2",
    server: "payments",
    tool: "takeDeposit",
    title: "Taking a deposit",
    arguments: {},
    status: "waiting",
    input: {
      id: "in_2",
      mode: "url",
      message: "Pay the deposit for the booking",
      url,
      expiresAt: new Date(Date.now() + 600_000).toISOString(),
      state: "open",
    },
  };
}

describe("offerableLink", () => {
  it("offers http and https links with their host", () => {
    expect(offerableLink("https://pay.example.com/d/42?x=1")).toEqual({ href: "https://pay.example.com/d/42?x=1", host: "pay.example.com" });
    expect(offerableLink("http://localhost:9000/ok")).toEqual({ href: "http://localhost:9000/ok", host: "localhost:9000" });
  });

  it("names the real host of a link dressed up as another", () => {
    expect(offerableLink("https://example.com@evil.example/")?.host).toBe("evil.example");
    // An internationalised look-alike shows as punycode.
    expect(offerableLink("https://exаmple.com/")?.host).toBe("xn--exmple-4nf.com");
  });

  it("refuses anything that is not a web page", () => {
    for (const url of ["javascript:alert(1)", "data:text/html,<b>x</b>", "file:///etc/passwd", "ftp://example.com", "example.com", "", undefined]) {
      expect(offerableLink(url)).toBeNull();
    }
  });
});

describe("a request to open a link", () => {
  it("asks first, opens only when confirmed, in a tab cut off from this one, then takes 'I'm done' as accept", () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    const onAnswer = vi.fn();
    render(<ToolCard tool={asking("https://pay.example.com/d/42")} onAnswerInput={onAnswer} />);

    expect(screen.getByTestId("input-message").textContent).toBe("Pay the deposit for the booking");
    expect(screen.getByTestId("input-link").dataset.step).toBe("confirm");
    expect(screen.getByTestId("input-link-host").textContent).toBe("pay.example.com");
    expect(screen.getByTestId("input-link").textContent).toContain("Open pay.example.com?");
    expect(screen.getByTestId("input-link-url").textContent).toBe("https://pay.example.com/d/42");
    // Nothing on the card is a link the browser could follow by itself.
    expect(screen.getByTestId("input-card").querySelector("a, [href], [src]")).toBeNull();
    expect(open).not.toHaveBeenCalled();
    expect(document.activeElement).toBe(screen.getByTestId("input-open"));

    fireEvent.click(screen.getByTestId("input-open"));
    expect(open).toHaveBeenCalledWith("https://pay.example.com/d/42", "_blank", "noopener,noreferrer");
    expect(onAnswer).not.toHaveBeenCalled();
    expect(screen.getByTestId("input-link").dataset.step).toBe("opened");
    expect(document.activeElement).toBe(screen.getByTestId("input-done"));

    fireEvent.click(screen.getByTestId("input-done"));
    expect(onAnswer).toHaveBeenCalledWith("in_2", "accept", undefined);
  });

  it("can be declined or cancelled without opening anything", () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    const onAnswer = vi.fn();
    render(<ToolCard tool={asking("https://pay.example.com/d/42")} onAnswerInput={onAnswer} />);
    fireEvent.click(screen.getByTestId("input-decline"));
    expect(onAnswer).toHaveBeenLastCalledWith("in_2", "decline", undefined);
    fireEvent.keyDown(screen.getByTestId("input-open"), { key: "Escape" });
    expect(onAnswer).toHaveBeenLastCalledWith("in_2", "cancel", undefined);
    expect(open).not.toHaveBeenCalled();
  });

  it("does not offer a link that is not http(s): only Decline and Cancel", () => {
    const open = vi.spyOn(window, "open").mockReturnValue(null);
    render(<ToolCard tool={asking("javascript:alert(document.cookie)")} onAnswerInput={() => {}} />);
    expect(screen.getByTestId("input-link").dataset.step).toBe("refused");
    expect(screen.queryByTestId("input-open")).toBeNull();
    expect(screen.getByTestId("input-card").textContent).not.toContain("javascript:");
    expect(screen.getByTestId("input-decline")).toBeTruthy();
    expect(open).not.toHaveBeenCalled();
  });

  it("says what was done once answered", () => {
    const tool = asking("https://pay.example.com/d/42");
    render(<ToolCard tool={{ ...tool, status: "running", input: { ...tool.input!, state: "closed", outcome: "accept" } }} />);
    expect(screen.getByTestId("input-outcome").textContent).toBe("You opened the link and said you were done.");
  });
});
