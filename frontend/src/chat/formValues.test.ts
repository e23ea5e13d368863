import { describe, expect, it } from "vitest";
import { formFromSchema, type FormField } from "./formSchema";
import { fieldProblem, formContent, formProblems, fromLocalInput, initialValues, toLocalInput } from "./formValues";

const fields = (properties: Record<string, unknown>, required: string[] = []): FormField[] =>
  formFromSchema({ type: "object", properties, required }).fields;

const one = (property: Record<string, unknown>, required = false): FormField => {
  const [field] = fields({ f: property }, required ? ["f"] : []);
  if (!field) throw new Error("no field");
  return field;
};

describe("initialValues", () => {
  it("starts from the schema's defaults, and empty without one", () => {
    const form = fields({
      name: { type: "string", default: "Ada" },
      note: { type: "string" },
      people: { type: "integer", default: 2 },
      kids: { type: "integer" },
      news: { type: "boolean", default: true },
      quiet: { type: "boolean" },
      area: { type: "string", enum: ["in", "out"], default: "out" },
      seat: { type: "string", enum: ["bar", "table"] },
    });
    expect(initialValues(form)).toEqual({
      name: "Ada",
      note: "",
      people: "2",
      kids: "",
      news: true,
      quiet: false,
      area: "1",
      seat: "",
    });
  });

  it("shows a date-time default on the person's own clock", () => {
    const iso = "2026-12-01T18:30:00Z";
    const [field] = fields({ at: { type: "string", format: "date-time", default: iso } });
    const shown = initialValues([field!]).at as string;
    expect(shown).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$/);
    // And back again: the same instant.
    expect(fromLocalInput(shown)).toBe(new Date(iso).toISOString());
    expect(toLocalInput("not a time")).toBe("");
  });
});

describe("fieldProblem", () => {
  it("requires a value only where the schema does", () => {
    expect(fieldProblem(one({ type: "string" }, true), "")).toBe("This is required.");
    expect(fieldProblem(one({ type: "string" }, true), "   ")).toBe("This is required.");
    expect(fieldProblem(one({ type: "string" }), "")).toBeNull();
    expect(fieldProblem(one({ type: "integer" }, true), "")).toBe("This is required.");
    expect(fieldProblem(one({ type: "string", enum: ["a"] }, true), "")).toBe("Choose one.");
    // A box left unticked is a value: false.
    expect(fieldProblem(one({ type: "boolean" }, true), false)).toBeNull();
  });

  it("checks lengths in characters as JSON Schema counts them", () => {
    const name = one({ type: "string", minLength: 2, maxLength: 3 });
    expect(fieldProblem(name, "A")).toBe("Enter at least 2 characters.");
    expect(fieldProblem(name, "Adam")).toBe("Enter at most 3 characters.");
    expect(fieldProblem(name, "Ada")).toBeNull();
    // Two emoji are two characters, though four UTF-16 units.
    expect(fieldProblem(name, "😀😀")).toBeNull();
    expect(fieldProblem(one({ type: "string", maxLength: 1 }), "ab")).toBe("Enter at most 1 character.");
  });

  it("checks the formats: email, uri, date, date-time", () => {
    const email = one({ type: "string", format: "email" });
    expect(fieldProblem(email, "ada@example.com")).toBeNull();
    expect(fieldProblem(email, "ada@example")).toMatch(/email address/);
    expect(fieldProblem(email, "ada example@x.com")).toMatch(/email address/);

    const uri = one({ type: "string", format: "uri" });
    expect(fieldProblem(uri, "https://example.com/menu")).toBeNull();
    expect(fieldProblem(uri, "mailto:ada@example.com")).toBeNull();
    expect(fieldProblem(uri, "example.com")).toMatch(/full address/);

    const date = one({ type: "string", format: "date" });
    expect(fieldProblem(date, "2026-12-01")).toBeNull();
    expect(fieldProblem(date, "2026-02-30")).toBe("Enter a date.");
    expect(fieldProblem(date, "1/12/2026")).toBe("Enter a date.");

    const at = one({ type: "string", format: "date-time" });
    expect(fieldProblem(at, "2026-12-01T19:00")).toBeNull();
    expect(fieldProblem(at, "2026-12-01")).toBe("Enter a date and time.");
    expect(fieldProblem(at, "2026-13-01T19:00")).toBe("Enter a date and time.");
  });

  it("checks numbers against the type and the bounds", () => {
    const people = one({ type: "integer", minimum: 1, maximum: 12 });
    expect(fieldProblem(people, "4")).toBeNull();
    expect(fieldProblem(people, "2.5")).toBe("Enter a whole number.");
    expect(fieldProblem(people, "many")).toBe("Enter a whole number.");
    expect(fieldProblem(people, "0")).toBe("Enter 1 or more.");
    expect(fieldProblem(people, "13")).toBe("Enter 12 or less.");
    expect(fieldProblem(people, "1")).toBeNull();
    expect(fieldProblem(people, "12")).toBeNull();

    const budget = one({ type: "number", minimum: 0.5 });
    expect(fieldProblem(budget, "2.5")).toBeNull();
    expect(fieldProblem(budget, "0.25")).toBe("Enter 0.5 or more.");
    expect(fieldProblem(budget, "abc")).toBe("Enter a number.");
  });

  it("accepts only one of a choice's options", () => {
    const area = one({ type: "string", enum: ["in", "out"] });
    expect(fieldProblem(area, "1")).toBeNull();
    expect(fieldProblem(area, "2")).toBe("Choose one of the options.");
  });
});

describe("several choices", () => {
  const diets = one({ type: "array", maxItems: 2, items: { enum: ["vegan", "nuts", "gf"] }, default: ["gf"] }, true);

  it("start from the default, ticked by index", () => {
    expect(initialValues([diets])).toEqual({ f: ["2"] });
  });

  it("are checked against required, minItems and maxItems", () => {
    expect(fieldProblem(diets, [])).toBe("Choose at least one.");
    expect(fieldProblem(diets, ["0", "2"])).toBeNull();
    expect(fieldProblem(diets, ["0", "1", "2"])).toBe("Choose at most 2.");
    const two = one({ type: "array", minItems: 2, items: { enum: ["a", "b", "c"] } });
    expect(fieldProblem(two, [])).toBeNull();
    expect(fieldProblem(two, ["1"])).toBe("Choose at least 2.");
  });

  it("are sent as the options' values, in the options' order", () => {
    expect(formContent([diets], { f: ["2", "0"] })).toEqual({ f: ["vegan", "gf"] });
    const optional = one({ type: "array", items: { enum: ["a"] } });
    expect(formContent([optional], { f: [] })).toEqual({});
  });
});

describe("formProblems and formContent", () => {
  const form = fields(
    {
      name: { type: "string", minLength: 1 },
      email: { type: "string", format: "email" },
      phone: { type: "string" },
      people: { type: "integer", minimum: 1 },
      budget: { type: "number" },
      news: { type: "boolean" },
      seat: { type: "string", oneOf: [{ const: "bar", title: "Bar" }, { const: "table", title: "Table" }] },
      level: { type: "integer", enum: [1, 2, 3] },
      at: { type: "string", format: "date-time" },
    },
    ["name", "email", "people", "seat"],
  );

  it("lists every field's problem by name", () => {
    expect(formProblems(form, initialValues(form))).toEqual({
      name: "This is required.",
      email: "This is required.",
      people: "This is required.",
      seat: "Choose one.",
    });
  });

  it("sends values typed as the schema says, leaving out optional fields left empty", () => {
    const values = {
      ...initialValues(form),
      name: "Ada Lovelace",
      email: "ada@example.com",
      people: " 4 ",
      budget: "12.5",
      seat: "1",
      level: "2",
      at: "2026-12-01T19:00",
    };
    expect(formProblems(form, values)).toEqual({});
    expect(formContent(form, values)).toEqual({
      name: "Ada Lovelace",
      email: "ada@example.com",
      people: 4,
      budget: 12.5,
      news: false,
      seat: "table",
      level: 3,
      at: new Date("2026-12-01T19:00").toISOString(),
    });
  });
});
