// What the person typed into a request's form: its starting values, the schema's checks
// (so most mistakes are caught before the round trip; the server checks again), and the
// content sent back with the schema's own types.

import { format, Validator, type Schema } from "@cfworker/json-schema";
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

// The checks are the schema's own, run by a JSON Schema validator on the content that
// would be sent. @cfworker/json-schema interprets the schema as data: no code is made
// from it with `eval` or `new Function`, which the gateway's Content-Security-Policy
// (`script-src 'self'`) refuses in the browser. Ajv, for one, does exactly that.

// Two formats are checked as before rather than as the library does. Its email check
// takes "ada@example" (a host with no dot), which the gateway refuses; its uri check is
// RFC 3986 to the letter and refuses "https://bücher.de/", which the gateway (a WHATWG
// URL parser, as `new URL` is) takes. The table is the library's, shared by every
// validator in the page.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

format.email = (value: string): boolean => EMAIL.test(value);
format.uri = (value: string): boolean => {
  try {
    return new URL(value).protocol !== "";
  } catch {
    return false;
  }
};

/** What a `datetime-local` input gives: the person's clock, to the minute or finer. */
const LOCAL_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;

/** A `datetime-local` value as the RFC 3339 time sent; anything else as typed, for the validator to refuse. */
function localToSent(value: string): string {
  if (!LOCAL_DATE_TIME.test(value)) return value;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? value : at.toISOString();
}

/** Stands for a choice no option has: no option's value is null. */
const NO_OPTION = null;

/**
 * One field's value as it would be sent, typed as the schema says; undefined when it is
 * left out (an optional field left empty, or a required one not filled in). What cannot
 * be typed so (a number that is not one) stays as typed, so that the validator says so.
 */
function sentValue(field: FormField, value: FormValue | undefined): unknown {
  switch (field.kind) {
    case "boolean":
      return value === true;
    case "choices": {
      const ticked = Array.isArray(value) ? value : [];
      const chosen = field.options.filter((_, i) => ticked.includes(String(i))).map((o) => o.value);
      return chosen.length > 0 || field.required ? chosen : undefined;
    }
    default:
  }
  if (typeof value !== "string" || value.trim() === "") return undefined;
  switch (field.kind) {
    case "choice":
      return field.options[Number(value)]?.value ?? NO_OPTION;
    case "number":
    case "integer": {
      const typed = value.trim();
      const n = Number(typed);
      return Number.isFinite(n) ? n : typed;
    }
    case "datetime":
      return localToSent(value);
    default:
      return value;
  }
}

const TEXT_FORMATS: Partial<Record<FormField["kind"], string>> = {
  email: "email",
  url: "uri",
  date: "date",
  datetime: "date-time",
};

/** The field's schema again, from what the form kept of it. */
function propertySchema(field: FormField): Schema {
  switch (field.kind) {
    case "boolean":
      return { type: "boolean" };
    case "choice":
      return { enum: field.options.map((o) => o.value) };
    case "choices": {
      // A required list is one with something chosen: sent empty, it would say nothing.
      const minItems = Math.max(field.minItems ?? 0, field.required ? 1 : 0);
      return {
        type: "array",
        items: { enum: field.options.map((o) => o.value) },
        ...(minItems > 0 && { minItems }),
        ...(field.maxItems !== undefined && { maxItems: field.maxItems }),
      };
    }
    case "number":
    case "integer":
      return {
        type: field.kind,
        ...(field.minimum !== undefined && { minimum: field.minimum }),
        ...(field.maximum !== undefined && { maximum: field.maximum }),
      };
    default:
      return {
        type: "string",
        ...(field.minLength !== undefined && { minLength: field.minLength }),
        ...(field.maxLength !== undefined && { maxLength: field.maxLength }),
        ...(TEXT_FORMATS[field.kind] !== undefined && { format: TEXT_FORMATS[field.kind] }),
      };
  }
}

// One validator per field (an object of that one property), made when first needed.
const validators = new WeakMap<FormField, Validator>();

function validatorOf(field: FormField): Validator {
  let validator = validators.get(field);
  if (!validator) {
    const schema: Schema = {
      type: "object",
      properties: { [field.name]: propertySchema(field) },
      required: field.required ? [field.name] : [],
    };
    // Every error, not the first: which one is shown is chosen below.
    validator = new Validator(schema, "2020-12", false);
    validators.set(field, validator);
  }
  return validator;
}

const characters = (n: number): string => `${n} character${n === 1 ? "" : "s"}`;

const FORMAT_PROBLEMS: Partial<Record<FormField["kind"], string>> = {
  email: "Enter an email address, like name@example.com.",
  url: "Enter a full address, like https://example.com.",
  date: "Enter a date.",
  datetime: "Enter a date and time.",
};

/** The validator's keywords whose errors are shown, the first found of them in this order. */
const SHOWN = ["required", "type", "enum", "minLength", "maxLength", "format", "minimum", "maximum", "minItems", "maxItems"] as const;
type Shown = (typeof SHOWN)[number];

/** A validator's error, in words for the person. */
function problemText(field: FormField, keyword: Shown): string {
  const limits = propertySchema(field);
  switch (keyword) {
    case "required":
      return field.kind === "choice" ? "Choose one." : "This is required.";
    case "type":
      if (field.kind === "integer") return "Enter a whole number.";
      if (field.kind === "number") return "Enter a number.";
      return field.kind === "choice" ? "Choose one of the options." : "This is not accepted.";
    case "enum":
      return "Choose one of the options.";
    case "minLength":
      return `Enter at least ${characters(Number(limits.minLength))}.`;
    case "maxLength":
      return `Enter at most ${characters(Number(limits.maxLength))}.`;
    case "format":
      return FORMAT_PROBLEMS[field.kind] ?? "This is not accepted.";
    case "minimum":
      return `Enter ${String(limits.minimum)} or more.`;
    case "maximum":
      return `Enter ${String(limits.maximum)} or less.`;
    case "minItems":
      return limits.minItems === 1 ? "Choose at least one." : `Choose at least ${String(limits.minItems)}.`;
    case "maxItems":
      return `Choose at most ${String(limits.maxItems)}.`;
  }
}

/** What is wrong with one field's value, in words for the person; null when nothing. */
export function fieldProblem(field: FormField, value: FormValue | undefined): string | null {
  const sent = sentValue(field, value);
  const { valid, errors } = validatorOf(field).validate(sent === undefined ? {} : { [field.name]: sent });
  if (valid) return null;
  const keywords = new Set(errors.map((e) => e.keyword));
  const shown = SHOWN.find((k) => keywords.has(k));
  return shown ? problemText(field, shown) : "This is not accepted.";
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
    const value = sentValue(f, values[f.name]);
    if (value !== undefined) content[f.name] = value;
  }
  return content;
}
