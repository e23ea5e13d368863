// The gateway refuses an answer that does not fit the request's schema with a 400 whose
// `details.problems` are lines like "email: not an email address". The form shows each
// next to its field; lines naming no field of the form are shown above the buttons.

import { HttpError } from "../api/http";

/** The `problems` of a 400 answer, or none when the error is anything else. */
export function problemsOf(error: unknown): string[] {
  if (!(error instanceof HttpError) || error.status !== 400) return [];
  const details = error.details;
  if (typeof details !== "object" || details === null || !("problems" in details)) return [];
  const { problems } = details;
  return Array.isArray(problems) ? problems.filter((p): p is string => typeof p === "string") : [];
}

export interface SplitProblems {
  byField: Record<string, string[]>;
  general: string[];
}

export function splitProblems(problems: string[], fieldNames: string[]): SplitProblems {
  // Longest names first, so "email" never claims a line about "email_2".
  const names = [...fieldNames].sort((a, b) => b.length - a.length);
  const split: SplitProblems = { byField: {}, general: [] };
  for (const line of problems) {
    // A field may also be named as a JSON pointer ("/email") or inside the content.
    const bare = line.replace(/^(\/|content[./])/, "");
    const name = names.find((n) => bare.startsWith(`${n}:`));
    if (name === undefined) {
      split.general.push(line);
      continue;
    }
    const what = bare.slice(name.length + 1).trim();
    (split.byField[name] ??= []).push(what === "" ? "This is not accepted." : what);
  }
  return split;
}
