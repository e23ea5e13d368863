import { useEffect, useId, useMemo, useRef, useState, type FocusEvent, type KeyboardEvent, type ReactElement } from "react";
import type { InputAction } from "../api/types";
import type { InputRequest } from "../chat/answer";
import { formFromSchema } from "../chat/formSchema";
import { formContent, formProblems, initialValues, type FormValues } from "../chat/formValues";
import { splitProblems } from "../chat/inputProblems";
import { FormFieldControl } from "./FormFieldControl";

/** Moves focus to a field's control (its first, for radios); names come from the server, so no selector is built of them. */
function focusField(form: HTMLFormElement | null, name: string): void {
  const field = Array.from(form?.querySelectorAll<HTMLElement>("[data-field]") ?? []).find((f) => f.dataset.field === name);
  field?.querySelector<HTMLElement>('[data-testid="input-control"]')?.focus();
}

/** A request's form, drawn from its schema: Send with the content, or Decline, or Cancel. */
export function InputForm({
  input,
  expired,
  onAnswer,
}: {
  input: InputRequest;
  expired: boolean;
  onAnswer: (action: InputAction, content?: Record<string, unknown>) => void;
}): ReactElement {
  const spec = useMemo(() => formFromSchema(input.schema), [input.schema]);
  const [initial] = useState<FormValues>(() => initialValues(spec.fields));
  const [values, setValues] = useState<FormValues>(initial);
  // Fields whose own problems show: once changed and left, or all of them once Send
  // was pressed, so that nobody is told off for a field they have not reached yet.
  const [checked, setChecked] = useState<ReadonlySet<string>>(() => new Set());
  const form = useRef<HTMLFormElement>(null);
  const buttons = useRef<HTMLDivElement>(null);
  const idPrefix = useId();
  const busy = input.state === "sending";

  const own = formProblems(spec.fields, values);
  const server = useMemo(
    () => splitProblems(input.problems ?? [], spec.fields.map((f) => f.name)),
    [input.problems, spec.fields],
  );

  // The gateway refused the answer: go to the first field it named, or else back to
  // Send, since the button pressed was disabled meanwhile and may have lost the focus.
  const answered = input.problems !== undefined;
  useEffect(() => {
    const el = form.current;
    if (!el || busy || !answered) return;
    const first = spec.fields.find((f) => server.byField[f.name]);
    if (first) {
      focusField(el, first.name);
    } else if (!el.contains(document.activeElement)) {
      el.querySelector<HTMLElement>('[data-testid="input-send"]')?.focus();
    }
  }, [server, spec.fields, busy, answered]);

  const left = (name: string, e: FocusEvent<HTMLElement>): void => {
    // Leaving for a button: a problem shown now would move the button from under the
    // pointer between press and release, and the click would be lost.
    if (e.relatedTarget instanceof Node && buttons.current?.contains(e.relatedTarget)) return;
    if (JSON.stringify(values[name]) === JSON.stringify(initial[name])) return;
    setChecked((c) => (c.has(name) ? c : new Set(c).add(name)));
  };

  const send = (): void => {
    if (busy || expired || spec.blocked) return;
    const problems = formProblems(spec.fields, values);
    const first = spec.fields.find((f) => problems[f.name]);
    if (first) {
      setChecked(new Set(spec.fields.map((f) => f.name)));
      focusField(form.current, first.name);
      return;
    }
    onAnswer("accept", formContent(spec.fields, values));
  };

  const onKeyDown = (e: KeyboardEvent<HTMLFormElement>): void => {
    if (e.key === "Escape" && !busy) {
      e.preventDefault();
      onAnswer("cancel");
    } else if (e.key === "Enter" && e.target instanceof HTMLSelectElement) {
      // Text fields send on Enter by themselves; a select would only open.
      e.preventDefault();
      send();
    }
  };

  return (
    <form
      ref={form}
      className="input-form"
      data-testid="input-form"
      noValidate
      onKeyDown={onKeyDown}
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      {spec.fields.map((field) => {
        const problems = [
          ...(checked.has(field.name) && own[field.name] ? [own[field.name]!] : []),
          ...(server.byField[field.name] ?? []),
        ];
        return (
          <FormFieldControl
            key={field.name}
            field={field}
            value={values[field.name]}
            problems={problems}
            idPrefix={idPrefix}
            disabled={busy}
            onChange={(value) => setValues((v) => ({ ...v, [field.name]: value }))}
            onBlur={(e) => left(field.name, e)}
          />
        );
      })}
      {spec.unsupported.length > 0 && (
        <p className="form-note" data-testid="input-unsupported">
          {spec.blocked
            ? `This request asks for something this page cannot show (${spec.unsupported.join(", ")}), so it can only be declined.`
            : `Left out, as this page cannot show them: ${spec.unsupported.join(", ")}.`}
        </p>
      )}
      {server.general.length > 0 && (
        <ul className="form-problems" role="alert" data-testid="input-problems">
          {server.general.map((p) => (
            <li key={p}>{p}</li>
          ))}
        </ul>
      )}
      <div className="input-buttons" ref={buttons}>
        <button type="submit" className="button primary" data-testid="input-send" disabled={busy || expired || spec.blocked}>
          {busy ? "Sending…" : "Send"}
        </button>
        <button type="button" className="button" data-testid="input-decline" disabled={busy || expired} onClick={() => onAnswer("decline")}>
          Decline
        </button>
        <button type="button" className="button" data-testid="input-cancel" disabled={busy || expired} onClick={() => onAnswer("cancel")}>
          Cancel
        </button>
      </div>
    </form>
  );
}
