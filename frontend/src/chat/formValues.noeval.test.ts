import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { formFromSchema } from "./formSchema";
import { fieldProblem, formContent, formProblems, initialValues } from "./formValues";

// The gateway's Content-Security-Policy (`script-src 'self'`, no 'unsafe-eval') makes
// the browser refuse `eval` and `new Function`. Schemas arrive at run time, so a
// validator that compiles them to code (Ajv) would throw an EvalError on the first
// form in the browser, though it passes every other test here. So the whole check of a
// form runs with both made to throw, as the browser would.
// A function, not an arrow: `new` on an arrow would throw a TypeError of its own.
function refused(): never {
  throw new EvalError("refused by the Content-Security-Policy: no 'unsafe-eval'");
}

describe("the form's checks under the page's Content-Security-Policy", () => {
  beforeEach(() => {
    vi.stubGlobal("eval", refused);
    vi.stubGlobal("Function", refused);
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("refuse code made from text here, as the browser does", () => {
    // Otherwise the test below would prove nothing.
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- what the policy refuses, tried on purpose
    expect(() => new Function("return 1")).toThrow(EvalError);
    expect(() => {
      eval("1");
    }).toThrow(EvalError);
  });

  it("never make code from the schema: every kind of field is checked, and sent", () => {
    // Fields made here, under the policy, so that their validators are too.
    const { fields } = formFromSchema({
      type: "object",
      properties: {
        name: { type: "string", minLength: 2, maxLength: 40 },
        email: { type: "string", format: "email" },
        site: { type: "string", format: "uri" },
        day: { type: "string", format: "date" },
        at: { type: "string", format: "date-time" },
        people: { type: "integer", minimum: 1, maximum: 12 },
        budget: { type: "number" },
        news: { type: "boolean" },
        seat: { type: "string", enum: ["bar", "table"] },
        diets: { type: "array", maxItems: 2, items: { enum: ["vegan", "nuts", "gf"] } },
      },
      required: ["name", "email", "people", "seat", "diets"],
    });
    expect(formProblems(fields, initialValues(fields))).toEqual({
      name: "This is required.",
      email: "This is required.",
      people: "This is required.",
      seat: "Choose one.",
      diets: "Choose at least one.",
    });

    const values = {
      ...initialValues(fields),
      name: "Ada",
      email: "ada@example",
      site: "example.com",
      day: "2026-02-30",
      at: "2026-12-01",
      people: "2.5",
      budget: "abc",
      seat: "2",
      diets: ["0", "1", "2"],
    };
    expect(formProblems(fields, values)).toEqual({
      email: "Enter an email address, like name@example.com.",
      site: "Enter a full address, like https://example.com.",
      day: "Enter a date.",
      at: "Enter a date and time.",
      people: "Enter a whole number.",
      budget: "Enter a number.",
      seat: "Choose one of the options.",
      diets: "Choose at most 2.",
    });

    const good = {
      ...values,
      email: "ada@example.com",
      site: "https://example.com",
      day: "2026-12-01",
      at: "2026-12-01T19:00",
      people: "4",
      budget: "12.5",
      seat: "1",
      diets: ["2"],
    };
    expect(formProblems(fields, good)).toEqual({});
    expect(fieldProblem(fields.find((f) => f.name === "name")!, "A")).toBe("Enter at least 2 characters.");
    expect(formContent(fields, good)).toMatchObject({ name: "Ada", people: 4, seat: "table", diets: ["gf"], news: false });
  });
});
