import { describe, expect, it } from "vitest";
import { applyEvent, emptyAnswer, type Turn } from "./answer";
import { describeBudget, latestBudget } from "./budget";
import { failureFromEvent } from "./failure";

describe("budget", () => {
  it("keeps the latest budget event of an answer", () => {
    let answer = emptyAnswer("m1");
    answer = applyEvent(answer, {
      type: "budget",
      data: { scope: "role", window: "daily", remaining_tokens: 900, remaining_cost: null },
    });
    answer = applyEvent(answer, {
      type: "budget",
      data: { scope: "role", window: "daily", remaining_tokens: 780, remaining_cost: 0.25 },
    });
    const turns: Turn[] = [
      { kind: "user", key: "u", text: "hi" },
      { kind: "assistant", key: "a", answer },
      { kind: "assistant", key: "b", answer: emptyAnswer("m2") },
    ];
    const budget = latestBudget(turns);
    expect(budget?.remaining_tokens).toBe(780);
    expect(describeBudget(budget!)).toBe("Your team's budget today: 780 tokens · $0.2500 left");
  });

  it("says the budget is spent and offers no retry", () => {
    const failure = failureFromEvent(
      { code: "budget", message: "Your budget for today is spent." },
      { question: "again?" },
    );
    expect(failure.title).toBe("The budget is spent");
    expect(failure.retry).toBeNull();
  });
});
