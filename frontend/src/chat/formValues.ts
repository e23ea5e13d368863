// What the person typed into a request's form: its starting values, the checks that
// mirror the schema (so most mistakes are caught before the round trip; the server
// checks again), and the content sent back with the schema's own types.

import type { FormField } from "./formSchema";

/**
 * Text and numbers as typed, booleans as ticked, a choice as its option's index ("" for
 * none), several choices as the indices ticked.
 */
export type FormValue = string | boolean | string[];
export type FormValues = Record<string, FormValue>;

const pad = (n: number): string => String(n).padStart(2, "0");

/** An RFC 3339 time as a `datetime-local` input shows it: the person's own clock. */
export function toLocalInput(iso: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
}

/** A `datetime-local` value (no zone: the person's clock) as an RFC 3339 time in UTC. */
export function fromLocalInput(value: string): string {
  return new Date(value).toISOString();
}

export function initialValues(fields: FormField[]): FormValues {
  const values: FormValues = {};
  for (const f of fields) {
    switch (f.kind) {
      case "boolean":
        values[f.name] = f.default ?? false;
        break;
      case "choice":
        values[f.name] = f.default === undefined ? "" : String(f.options.findIndex((o) => o.value === f.default));
        break;
      case "choices":
        values[f.name] = f.options.flatMap((o, i) => (f.default?.includes(o.value) ? [String(i)] : []));
        break;
      case "number":
      case "integer":
        values[f.name] = f.default === undefined ? "" : String(f.default);
        break;
      case "datetime":
        values[f.name] = f.default === undefined ? "" : toLocalInput(f.default);
        break;
      default:
        values[f.name] = f.default ?? "";
    }
  }
  return values;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const LOCAL_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;

function isDate(value: string): boolean {
  const m = DATE.exec(value);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const at = new Date(Date.UTC(y, mo - 1, d));
  // 2026-02-30 parses as 2 March: only a date that comes back as written is real.
  return at.getUTCFullYear() === y && at.getUTCMonth() === mo - 1 && at.getUTCDate() === d;
}

function isAbsoluteUri(value: string): boolean {
  try {
    return new URL(value).protocol !== "";
  } catch {
    return false;
  }
}

const characters = (n: number): string => `${n} character${n === 1 ? "" : "s"}`;

function textProblem(field: Extract<FormField, { kind: "text" | "email" | "url" | "date" | "datetime" }>, value: string): string | null {
  // Lengths as JSON Schema counts them: in code points, not UTF-16 units.
  const length = [...value].length;
  if (field.minLength !== undefined && length < field.minLength) return `Enter at least ${characters(field.minLength)}.`;
  if (field.maxLength !== undefined && length > field.maxLength) return `Enter at most ${characters(field.maxLength)}.`;
  switch (field.kind) {
    case "email":
      return EMAIL.test(value) ? null : "Enter an email address, like name@example.com.";
    case "url":
      return isAbsoluteUri(value) ? null : "Enter a full address, like https://example.com.";
    case "date":
      return isDate(value) ? null : "Enter a date.";
    case "datetime":
      return LOCAL_DATE_TIME.test(value) && !Number.isNaN(new Date(value).getTime()) ? null : "Enter a date and time.";
    default:
      return null;
  }
}

function numberProblem(field: Extract<FormField, { kind: "number" | "integer" }>, value: string): string | null {
  const n = Number(value);
  if (!Number.isFinite(n)) return field.kind === "integer" ? "Enter a whole number." : "Enter a number.";
  if (field.kind === "integer" && !Number.isInteger(n)) return "Enter a whole number.";
  if (field.minimum !== undefined && n < field.minimum) return `Enter ${field.minimum} or more.`;
  if (field.maximum !== undefined && n > field.maximum) return `Enter ${field.maximum} or less.`;
  return null;
}

function choicesProblem(field: Extract<FormField, { kind: "choices" }>, ticked: string[]): string | null {
  const n = ticked.filter((i) => field.options[Number(i)] !== undefined).length;
  // Left empty, an optional field is left out of the content: no count applies.
  if (n === 0 && !field.required) return null;
  const min = Math.max(field.minItems ?? 0, field.required ? 1 : 0);
  if (n < min) return min === 1 ? "Choose at least one." : `Choose at least ${min}.`;
  if (field.maxItems !== undefined && n > field.maxItems) return `Choose at most ${field.maxItems}.`;
  return null;
}

/** What is wrong with one field's value, in words for the person; null when nothing. */
export function fieldProblem(field: FormField, value: FormValue | undefined): string | null {
  if (field.kind === "boolean") return null;
  if (field.kind === "choices") return choicesProblem(field, Array.isArray(value) ? value : []);
  const raw = typeof value === "string" ? value : "";
  const typed = field.kind === "choice" ? raw : raw.trim();
  if (typed === "") {
    if (!field.required) return null;
    return field.kind === "choice" ? "Choose one." : "This is required.";
  }
  switch (field.kind) {
    case "choice":
      return field.options[Number(typed)] ? null : "Choose one of the options.";
    case "number":
    case "integer":
      return numberProblem(field, typed);
    default:
      return textProblem(field, raw);
  }
}

/** Every field's problem, by field name; empty when the form can be sent. */
export function formProblems(fields: FormField[], values: FormValues): Record<string, string> {
  const problems: Record<string, string> = {};
  for (const f of fields) {
    const problem = fieldProblem(f, values[f.name]);
    if (problem) problems[f.name] = problem;
  }
  return problems;
}

/** The content sent back, typed as the schema says; optional fields left empty are left out. */
export function formContent(fields: FormField[], values: FormValues): Record<string, unknown> {
  const content: Record<string, unknown> = {};
  for (const f of fields) {
    const value = values[f.name];
    if (f.kind === "boolean") {
      content[f.name] = value === true;
      continue;
    }
    if (f.kind === "choices") {
      const ticked = Array.isArray(value) ? value : [];
      const chosen = f.options.filter((_, i) => ticked.includes(String(i))).map((o) => o.value);
      if (chosen.length > 0 || f.required) content[f.name] = chosen;
      continue;
    }
    if (typeof value !== "string" || value.trim() === "") continue;
    switch (f.kind) {
      case "choice": {
        const option = f.options[Number(value)];
        if (option) content[f.name] = option.value;
        break;
      }
      case "number":
      case "integer":
        content[f.name] = Number(value.trim());
        break;
      case "datetime":
        content[f.name] = fromLocalInput(value);
        break;
      default:
        content[f.name] = value;
    }
  }
  return content;
}
