// A tool's request for input carries the MCP spec's restricted elicitation schema: a
// flat object of strings, numbers, booleans, and enums to choose one or several of. It comes from an
// MCP server, so it is read defensively into fields the form can show; anything else
// is reported as unsupported rather than guessed at.

export type TextKind = "text" | "email" | "url" | "date" | "datetime";

interface FieldBase {
  /** The property's name: the key in the content sent back. */
  name: string;
  label: string;
  description?: string;
  required: boolean;
}

export interface TextField extends FieldBase {
  kind: TextKind;
  minLength?: number;
  maxLength?: number;
  default?: string;
}

export interface NumberField extends FieldBase {
  kind: "number" | "integer";
  minimum?: number;
  maximum?: number;
  default?: number;
}

export interface BooleanField extends FieldBase {
  kind: "boolean";
  default?: boolean;
}

export interface ChoiceOption {
  /** What is sent back: the enum value (or `const`) as the schema has it. */
  value: string | number;
  label: string;
}

export interface ChoiceField extends FieldBase {
  kind: "choice";
  options: ChoiceOption[];
  default?: string | number;
}

/** Several of a list (an array of enum items). */
export interface ChoicesField extends FieldBase {
  kind: "choices";
  options: ChoiceOption[];
  minItems?: number;
  maxItems?: number;
  default?: (string | number)[];
}

export type FormField = TextField | NumberField | BooleanField | ChoiceField | ChoicesField;

export interface FormSpec {
  fields: FormField[];
  /** Properties the form cannot show (a type outside the restricted schema). */
  unsupported: string[];
  /** Whether one of those is required: then the form cannot be sent, only declined. */
  blocked: boolean;
}

const TEXT_FORMATS: Record<string, TextKind> = {
  email: "email",
  uri: "url",
  date: "date",
  "date-time": "datetime",
};

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const text = (value: unknown): string | undefined =>
  typeof value === "string" && value.trim() !== "" ? value : undefined;

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;

const finite = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

const isEnumValue = (value: unknown): value is string | number =>
  typeof value === "string" || (typeof value === "number" && Number.isFinite(value));

/** `enum` (titled by `enumNames` when given), or `oneOf` / `anyOf` of `{const, title}`. */
function choiceOptions(property: Json): ChoiceOption[] | null {
  if (Array.isArray(property.enum)) {
    const names: unknown[] = Array.isArray(property.enumNames) ? property.enumNames : [];
    const values = property.enum.filter(isEnumValue);
    if (values.length === 0 || values.length !== property.enum.length) return null;
    return values.map((value, i) => ({ value, label: text(names[i]) ?? String(value) }));
  }
  const titled: unknown = property.oneOf ?? property.anyOf;
  if (Array.isArray(titled)) {
    const options: ChoiceOption[] = [];
    for (const entry of titled) {
      if (!isObject(entry) || !isEnumValue(entry.const)) return null;
      options.push({ value: entry.const, label: text(entry.title) ?? String(entry.const) });
    }
    return options.length > 0 ? options : null;
  }
  return null;
}

function choicesField(base: FieldBase, property: Json, items: Json): ChoicesField | null {
  const options = choiceOptions(items);
  if (!options) return null;
  const result: ChoicesField = { ...base, kind: "choices", options };
  const min = count(property.minItems);
  const max = count(property.maxItems);
  if (min !== undefined) result.minItems = min;
  if (max !== undefined) result.maxItems = max;
  if (Array.isArray(property.default)) {
    const known = property.default.filter((d): d is string | number => options.some((o) => o.value === d));
    if (known.length > 0) result.default = known;
  }
  return result;
}

function field(name: string, property: Json, required: boolean): FormField | null {
  const base: FieldBase = { name, label: text(property.title) ?? name, required };
  const description = text(property.description);
  if (description) base.description = description;

  if (property.type === "array") return isObject(property.items) ? choicesField(base, property, property.items) : null;
  const options = choiceOptions(property);
  if (options) {
    const choice: ChoiceField = { ...base, kind: "choice", options };
    if (options.some((o) => o.value === property.default)) choice.default = property.default as string | number;
    return choice;
  }
  switch (property.type) {
    case "string": {
      const format = typeof property.format === "string" ? TEXT_FORMATS[property.format] : undefined;
      // A format we do not know is still a string the person can type.
      const result: TextField = { ...base, kind: format ?? "text" };
      const min = count(property.minLength);
      const max = count(property.maxLength);
      if (min !== undefined) result.minLength = min;
      if (max !== undefined) result.maxLength = max;
      if (typeof property.default === "string") result.default = property.default;
      return result;
    }
    case "number":
    case "integer": {
      const result: NumberField = { ...base, kind: property.type };
      const min = finite(property.minimum);
      const max = finite(property.maximum);
      if (min !== undefined) result.minimum = min;
      if (max !== undefined) result.maximum = max;
      const fallback = finite(property.default);
      if (fallback !== undefined) result.default = fallback;
      return result;
    }
    case "boolean": {
      const result: BooleanField = { ...base, kind: "boolean" };
      if (typeof property.default === "boolean") result.default = property.default;
      return result;
    }
    default:
      return null;
  }
}

export function formFromSchema(schema: unknown): FormSpec {
  const spec: FormSpec = { fields: [], unsupported: [], blocked: false };
  if (!isObject(schema) || !isObject(schema.properties)) return spec;
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : []);
  for (const [name, property] of Object.entries(schema.properties)) {
    const parsed = isObject(property) ? field(name, property, required.has(name)) : null;
    if (parsed) {
      spec.fields.push(parsed);
    } else {
      spec.unsupported.push(name);
      if (required.has(name)) spec.blocked = true;
    }
  }
  // What must be filled in comes first. A JSON object's keys have no order to keep:
  // the MCP SDKs may well send them sorted by name, which is no order for a person.
  spec.fields = [...spec.fields.filter((f) => f.required), ...spec.fields.filter((f) => !f.required)];
  return spec;
}
