import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { emptyAnswer, type Answer } from "../chat/answer";
import { AssistantMessage } from "./Message";

function answer(change: Partial<Answer>): Answer {
  return { ...emptyAnswer("msg_1"), streaming: false, finish: "stop", ...change };
}

describe("AssistantMessage", () => {
  it("renders a GFM table from the answer's markdown", () => {
    const text = "Tables seating six:\n\n| Table | Seats | Area |\n|---|---:|---|\n| T4 | 6 | Terrace |\n| T9 | 8 | Hall |\n";
    render(<AssistantMessage answer={answer({ text })} />);
    const body = screen.getByTestId("assistant-text");
    const table = body.querySelector("table");
    expect(table).not.toBeNull();
    expect(Array.from(table!.querySelectorAll("th")).map((th) => th.textContent)).toEqual(["Table", "Seats", "Area"]);
    const rows = Array.from(table!.querySelectorAll("tbody tr")).map((tr) =>
      Array.from(tr.querySelectorAll("td")).map((td) => td.textContent),
    );
    expect(rows).toEqual([
      ["T4", "6", "Terrace"],
      ["T9", "8", "Hall"],
    ]);
  });

  it("renders lists, emphasis and code", () => {
    render(<AssistantMessage answer={answer({ text: "- **one**\n- `two`\n\n```\nthree\n```" })} />);
    const body = screen.getByTestId("assistant-text");
    expect(body.querySelectorAll("li")).toHaveLength(2);
    expect(body.querySelector("strong")?.textContent).toBe("one");
    expect(body.querySelector("li code")?.textContent).toBe("two");
    expect(body.querySelector("pre code")?.textContent).toBe("three\n");
  });

  it("never renders raw HTML from the model", () => {
    render(<AssistantMessage answer={answer({ text: 'Hi <img src="x" onerror="alert(1)"> <b>bold</b>' })} />);
    const body = screen.getByTestId("assistant-text");
    expect(body.querySelector("img")).toBeNull();
    expect(body.querySelector("b")).toBeNull();
  });

  it("marks a streaming answer, and a finished one", () => {
    const { rerender } = render(<AssistantMessage answer={answer({ streaming: true, finish: null, text: "Hel" })} />);
    const message = screen.getByTestId("message");
    expect(message.dataset.role).toBe("assistant");
    expect(message.dataset.streaming).toBe("true");
    rerender(<AssistantMessage answer={answer({ text: "Hello" })} />);
    expect(screen.getByTestId("message").dataset.streaming).toBe("false");
    expect(screen.getByTestId("assistant-text").textContent).toBe("Hello");
  });

  it("says when the answer was stopped", () => {
    render(<AssistantMessage answer={answer({ text: "Partial", finish: "cancelled" })} />);
    expect(screen.getByTestId("message").textContent).toContain("Stopped.");
  });
});
