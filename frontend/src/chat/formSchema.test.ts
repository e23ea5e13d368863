import { describe, expect, it } from "vitest";
import { formFromSchema } from "./formSchema";

describe("formFromSchema", () => {
  it("maps each kind of property of the restricted schema to a field", () => {
    const spec = formFromSchema({
      type: "object",
      properties: {
        name: { type: "string", title: "Your name", description: "As on the booking", minLength: 2, maxLength: 40 },
        email: { type: "string", format: "email", title: "Email" },
        site: { type: "string", format: "uri" },
        day: { type: "string", format: "date", default: "2026-12-01" },
        at: { type: "string", format: "date-time" },
        people: { type: "integer", minimum: 1, maximum: 12, default: 2 },
        budget: { type: "number", minimum: 0.5 },
        newsletter: { type: "boolean", title: "Send me news", default: true },
      },
      required: ["name", "email", "people"],
    });
    expect(spec.unsupported).toEqual([]);
    expect(spec.blocked).toBe(false);
    expect(spec.fields).toEqual([
      {
        name: "name",
        label: "Your name",
        description: "As on the booking",
        required: true,
        kind: "text",
        minLength: 2,
        maxLength: 40,
      },
      { name: "email", label: "Email", required: true, kind: "email" },
      { name: "people", label: "people", required: true, kind: "integer", minimum: 1, maximum: 12, default: 2 },
      { name: "site", label: "site", required: false, kind: "url" },
      { name: "day", label: "day", required: false, kind: "date", default: "2026-12-01" },
      { name: "at", label: "at", required: false, kind: "datetime" },
      { name: "budget", label: "budget", required: false, kind: "number", minimum: 0.5 },
      { name: "newsletter", label: "Send me news", required: false, kind: "boolean", default: true },
    ]);
  });

  it("titles enum options with enumNames, or oneOf's titles", () => {
    const spec = formFromSchema({
      type: "object",
      properties: {
        area: { type: "string", enum: ["in", "out"], enumNames: ["Inside", "Terrace"], default: "out" },
        seating: {
          type: "string",
          oneOf: [
            { const: "bar", title: "At the bar" },
            { const: "table", title: "At a table" },
          ],
        },
        untitled: { type: "string", enum: ["a", "b"] },
      },
      required: ["seating"],
    });
    expect(spec.fields).toEqual([
      {
        name: "seating",
        label: "seating",
        required: true,
        kind: "choice",
        options: [
          { value: "bar", label: "At the bar" },
          { value: "table", label: "At a table" },
        ],
      },
      {
        name: "area",
        label: "area",
        required: false,
        kind: "choice",
        options: [
          { value: "in", label: "Inside" },
          { value: "out", label: "Terrace" },
        ],
        default: "out",
      },
      {
        name: "untitled",
        label: "untitled",
        required: false,
        kind: "choice",
        options: [
          { value: "a", label: "a" },
          { value: "b", label: "b" },
        ],
      },
    ]);
  });

  it("reads a multiple choice: an array of enum items, titled or not", () => {
    const spec = formFromSchema({
      type: "object",
      properties: {
        diets: {
          type: "array",
          title: "Dietary needs",
          minItems: 1,
          maxItems: 2,
          items: { anyOf: [{ const: "vegan", title: "Vegan" }, { const: "nuts", title: "No nuts" }, { const: "gf", title: "Gluten-free" }] },
          default: ["nuts", "unknown"],
        },
        extras: { type: "array", items: { type: "string", enum: ["cake", "flowers"] } },
        loose: { type: "array", items: { type: "string" } },
      },
    });
    expect(spec.fields).toEqual([
      {
        name: "diets",
        label: "Dietary needs",
        required: false,
        kind: "choices",
        options: [
          { value: "vegan", label: "Vegan" },
          { value: "nuts", label: "No nuts" },
          { value: "gf", label: "Gluten-free" },
        ],
        minItems: 1,
        maxItems: 2,
        default: ["nuts"],
      },
      {
        name: "extras",
        label: "extras",
        required: false,
        kind: "choices",
        options: [
          { value: "cake", label: "cake" },
          { value: "flowers", label: "flowers" },
        ],
      },
    ]);
    // An array of free text is not a choice: the form cannot show it.
    expect(spec.unsupported).toEqual(["loose"]);
  });

  it("puts the fields that must be filled in first, the rest in the schema's order", () => {
    const spec = formFromSchema({
      type: "object",
      properties: { guestEmail: { type: "string" }, guestName: { type: "string" }, guestPhone: { type: "string" } },
      required: ["guestName"],
    });
    expect(spec.fields.map((f) => f.name)).toEqual(["guestName", "guestEmail", "guestPhone"]);
  });

  it("keeps a string with a format it does not know as plain text", () => {
    expect(formFromSchema({ properties: { code: { type: "string", format: "postcode" } } }).fields[0]?.kind).toBe("text");
  });

  it("ignores limits and defaults of the wrong type rather than trusting them", () => {
    const [field] = formFromSchema({
      properties: { n: { type: "integer", minimum: "1", maximum: Infinity, default: "3" } },
    }).fields;
    expect(field).toEqual({ name: "n", label: "n", required: false, kind: "integer" });
    const [text] = formFromSchema({ properties: { s: { type: "string", minLength: -1, maxLength: 2.5, default: 4 } } }).fields;
    expect(text).toEqual({ name: "s", label: "s", required: false, kind: "text" });
    const [choice] = formFromSchema({ properties: { c: { type: "string", enum: ["x"], default: "y" } } }).fields;
    expect(choice).not.toHaveProperty("default");
  });

  it("reports what it cannot show, and blocks sending when one of those is required", () => {
    const optional = formFromSchema({
      properties: { name: { type: "string" }, tags: { type: "array", items: { type: "string" } } },
    });
    expect(optional.fields.map((f) => f.name)).toEqual(["name"]);
    expect(optional).toMatchObject({ unsupported: ["tags"], blocked: false });

    const required = formFromSchema({
      properties: { where: { type: "object", properties: {} }, odd: { enum: [{ nested: true }] } },
      required: ["where"],
    });
    expect(required).toMatchObject({ fields: [], unsupported: ["where", "odd"], blocked: true });
  });

  it("makes an empty form of a schema that is not an object of properties", () => {
    for (const schema of [undefined, null, "form", [], { type: "object" }, { properties: [] }]) {
      expect(formFromSchema(schema)).toEqual({ fields: [], unsupported: [], blocked: false });
    }
  });
});
