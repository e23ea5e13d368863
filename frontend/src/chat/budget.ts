// What is left of the person's budget, from the latest answer's `budget` event, as
// the line above the composer says it.

import type { BudgetEvent } from "../api/types";
import type { Turn } from "./answer";

/** The newest answer's budget, if any answer of the conversation reported one. */
export function latestBudget(turns: Turn[]): BudgetEvent | null {
  for (const turn of [...turns].reverse()) {
    if (turn.kind === "assistant" && turn.answer.budget) return turn.answer.budget;
  }
  return null;
}

const WHOSE: Record<string, string> = { person: "Your budget", role: "Your team's budget", conversation: "This conversation's budget" };
const WHEN: Record<string, string> = { daily: " today", monthly: " this month", total: "" };

/** "Your team's budget today: 12,345 tokens · $0.4200 left". */
export function describeBudget(budget: BudgetEvent): string {
  const parts: string[] = [];
  if (budget.remaining_tokens !== null) parts.push(`${budget.remaining_tokens.toLocaleString("en-US")} tokens`);
  if (budget.remaining_cost !== null) parts.push(`$${budget.remaining_cost.toFixed(4)}`);
  const whose = WHOSE[budget.scope] ?? "Budget";
  return `${whose}${WHEN[budget.window] ?? ""}: ${parts.join(" · ")} left`;
}
