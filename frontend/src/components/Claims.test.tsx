import { render } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Claim } from "../api/types";
import { applyEvent, emptyAnswer } from "../chat/answer";
import { claimRanges } from "./claimMarks";
import { Markdown } from "./Markdown";

const supported: Claim = {
  text: "60",
  start: 8,
  end: 10,
  kind: "count",
  value: "60",
  status: "supported",
  tool_call_id: "tc_1",
};
const unsupported: Claim = {
  text: "7",
  start: 27,
  end: 28,
  kind: "number",
  value: "7",
  status: "unsupported",
  tool_call_id: null,
};

describe("checked claims", () => {
  it("count code points from the final turn's start", () => {
    const text = "Let me look.\n\nWe have 60 🍕 and 7";
    const base = "Let me look.\n\n".length;
    const claims: Claim[] = [
      { ...supported, start: 8, end: 10 },
      { ...unsupported, start: 17, end: 18 },
    ];
    const ranges = claimRanges(text, base, claims);
    expect(ranges.map((r) => text.slice(r.start, r.end))).toEqual(["60", "7"]);
  });

  it("mark an unsupported figure and link a supported one to its tool card", () => {
    const text = "**Total:** We have 60 customers, and 7 of them booked.";
    const base = "**Total:** ".length;
    const root = render(
      <Markdown
        text={text}
        marked={{
          claims: [
            { ...supported, start: 8, end: 10 },
            { ...unsupported, start: 26, end: 27 },
          ],
          base,
          titles: { tc_1: "Look up customers" },
        }}
      />,
    ).container;
    const marks = root.querySelectorAll<HTMLElement>('[data-testid="claim"]');
    expect(marks).toHaveLength(2);
    expect(marks[0]?.textContent).toBe("60");
    expect(marks[0]?.getAttribute("href")).toBe("#tool-tc_1");
    expect(marks[0]?.title).toBe("From Look up customers");
    expect(marks[1]?.textContent).toBe("7");
    expect(marks[1]?.dataset.status).toBe("unsupported");
    expect(root.textContent).toBe("Total: We have 60 customers, and 7 of them booked.");
  });

  it("are kept from the stream, counted from the turn after the tools", () => {
    let answer = emptyAnswer();
    answer = applyEvent(answer, { type: "token", data: { text: "Let me look." } });
    answer = applyEvent(answer, {
      type: "tool_call",
      data: { id: "tc_1", server: "resos", tool: "getCustomers", title: "Look up customers", arguments: {} },
    });
    answer = applyEvent(answer, { type: "token", data: { text: "We have 60." } });
    answer = applyEvent(answer, { type: "grounding", data: { claims: [supported] } });
    expect(answer.grounding?.base).toBe("Let me look.\n\n".length);
    expect(answer.text.slice(answer.grounding?.base)).toBe("We have 60.");
  });
});
