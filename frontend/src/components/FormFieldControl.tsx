import type { FocusEvent, ReactElement } from "react";
import type { FormField, TextKind } from "../chat/formSchema";
import type { FormValue } from "../chat/formValues";

const INPUT_TYPES: Record<TextKind, string> = {
  text: "text",
  email: "email",
  url: "url",
  date: "date",
  datetime: "datetime-local",
};

const AUTOCOMPLETE: Partial<Record<TextKind, string>> = { email: "email", url: "url" };

/** Up to this many options are radio buttons, all in view; more are a select. */
const MAX_RADIOS = 4;

export interface FieldControlProps {
  field: FormField;
  value: FormValue | undefined;
  /** What is wrong with the value: the form's own checks and the server's. */
  problems: string[];
  /** Ids are made from this, unique in the page. */
  idPrefix: string;
  disabled: boolean;
  onChange: (value: FormValue) => void;
  onBlur: (e: FocusEvent<HTMLElement>) => void;
}

function RequiredMark(): ReactElement {
  return (
    <span className="form-required" aria-hidden="true">
      {" "}
      *
    </span>
  );
}

/** One field of a request's form: its label, description, control and problems. */
export function FormFieldControl({ field, value, problems, idPrefix, disabled, onChange, onBlur }: FieldControlProps): ReactElement {
  const controlId = `${idPrefix}-${field.name}`;
  const descriptionId = field.description ? `${controlId}-description` : undefined;
  const problemId = problems.length > 0 ? `${controlId}-problem` : undefined;
  const describedBy = [descriptionId, problemId].filter(Boolean).join(" ") || undefined;
  const invalid = problems.length > 0;
  const text = typeof value === "string" ? value : "";

  const description = field.description && (
    <p className="form-description" id={descriptionId}>
      {field.description}
    </p>
  );
  const problemText = problemId && (
    <p className="form-problem" id={problemId} data-testid="input-field-problem">
      {problems.join(" ")}
    </p>
  );
  const common = {
    "data-testid": "input-control",
    disabled,
    "aria-invalid": invalid || undefined,
    "aria-describedby": describedBy,
    onBlur,
  };

  let control: ReactElement;
  if (field.kind === "boolean") {
    return (
      <div className="form-field form-check" data-testid="input-field" data-field={field.name}>
        <label htmlFor={controlId}>
          <input {...common} id={controlId} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />
          {field.label}
        </label>
        {description}
        {problemText}
      </div>
    );
  }
  if (field.kind === "choices") {
    const ticked = Array.isArray(value) ? value : [];
    return (
      <fieldset
        className="form-field form-choices"
        data-testid="input-field"
        data-field={field.name}
        aria-describedby={describedBy}
        aria-invalid={invalid || undefined}
      >
        <legend>
          {field.label}
          {field.required && <RequiredMark />}
        </legend>
        {description}
        {field.options.map((option, i) => (
          <label key={String(option.value)} className="form-choice">
            <input
              type="checkbox"
              value={String(i)}
              checked={ticked.includes(String(i))}
              disabled={disabled}
              data-testid="input-control"
              onChange={(e) =>
                onChange(e.target.checked ? [...ticked, String(i)] : ticked.filter((t) => t !== String(i)))
              }
              onBlur={onBlur}
            />
            {option.label}
          </label>
        ))}
        {problemText}
      </fieldset>
    );
  }
  if (field.kind === "choice" && field.options.length <= MAX_RADIOS) {
    return (
      <fieldset
        className="form-field form-choices"
        data-testid="input-field"
        data-field={field.name}
        aria-describedby={describedBy}
        aria-invalid={invalid || undefined}
        // A radio group can be required; a plain group cannot say so.
        role="radiogroup"
        aria-labelledby={`${controlId}-legend`}
        aria-required={field.required}
      >
        <legend id={`${controlId}-legend`}>
          {field.label}
          {field.required && <RequiredMark />}
        </legend>
        {description}
        {field.options.map((option, i) => (
          <label key={String(option.value)} className="form-choice">
            <input
              type="radio"
              name={controlId}
              value={String(i)}
              checked={text === String(i)}
              disabled={disabled}
              data-testid="input-control"
              onChange={() => onChange(String(i))}
              onBlur={onBlur}
            />
            {option.label}
          </label>
        ))}
        {problemText}
      </fieldset>
    );
  }
  if (field.kind === "choice") {
    control = (
      <select {...common} id={controlId} required={field.required} value={text} onChange={(e) => onChange(e.target.value)}>
        <option value="">{field.required ? "Choose…" : "(none)"}</option>
        {field.options.map((option, i) => (
          <option key={String(option.value)} value={String(i)}>
            {option.label}
          </option>
        ))}
      </select>
    );
  } else if (field.kind === "number" || field.kind === "integer") {
    control = (
      <input
        {...common}
        id={controlId}
        type="number"
        inputMode={field.kind === "integer" ? "numeric" : "decimal"}
        step={field.kind === "integer" ? 1 : "any"}
        min={field.minimum}
        max={field.maximum}
        required={field.required}
        value={text}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  } else {
    control = (
      <input
        {...common}
        id={controlId}
        type={INPUT_TYPES[field.kind]}
        autoComplete={AUTOCOMPLETE[field.kind]}
        required={field.required}
        value={text}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  }
  return (
    <div className="form-field" data-testid="input-field" data-field={field.name}>
      <label htmlFor={controlId}>
        {field.label}
        {field.required && <RequiredMark />}
      </label>
      {description}
      {control}
      {problemText}
    </div>
  );
}
