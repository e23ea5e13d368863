import { fireEvent, render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { InputRequest, ToolView } from "../chat/answer";
import { ToolCard } from "./ToolCard";

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name", description: "Who the table is for", minLength: 2 },
    email: { type: "string", format: "email", title: "Email" },
    people: { type: "integer", title: "People", minimum: 1, maximum: 12, default: 2 },
    terrace: { type: "boolean", title: "On the terrace" },
    seating: {
      type: "string",
      title: "Seating",
      oneOf: [
        { const: "bar", title: "At the bar" },
        { const: "table", title: "At a table" },
      ],
    },
    occasion: {
      type: "string",
      title: "Occasion",
      enum: ["none", "birthday", "anniversary", "business", "other"],
      enumNames: ["Nothing special", "Birthday", "Anniversary", "Business", "Something else"],
    },
  },
  required: ["name", "email", "seating"],
};

function waiting(input: Partial<InputRequest> = {}): ToolView {
  return {
    id: "tc_1",
    server: "resos",
    tool: "createBooking",
    title: "Booking a table",
    arguments: {},
    status: "waiting",
    input: {
      id: "in_1",
      mode: "form",
      message: "Who is the booking for?",
      schema: SCHEMA,
      expiresAt: new Date(Date.now() + 120_000).toISOString(),
      state: "open",
      ...input,
    },
  };
}

const field = (name: string): HTMLElement => {
  const found = screen.getAllByTestId("input-field").find((f) => f.dataset.field === name);
  if (!found) throw new Error(`no field ${name}`);
  return found;
};

describe("the form card", () => {
  it("draws the schema's fields with their labels, descriptions and required marks", () => {
    render(<ToolCard tool={waiting()} onAnswerInput={() => {}} />);
    const card = screen.getByTestId("input-card");
    expect(within(card).getByTestId("input-message").textContent).toBe("Who is the booking for?");
    // The required ones first.
    expect(screen.getAllByTestId("input-field").map((f) => f.dataset.field)).toEqual([
      "name",
      "email",
      "seating",
      "people",
      "terrace",
      "occasion",
    ]);

    const name = screen.getByLabelText<HTMLInputElement>(/^Name/);
    expect(name.type).toBe("text");
    expect(name.required).toBe(true);
    expect(screen.getByText("Who the table is for").id).toBe(name.getAttribute("aria-describedby"));
    expect(field("name").querySelector("label")?.textContent).toBe("Name *");
    expect(screen.getByLabelText<HTMLInputElement>(/^Email/).type).toBe("email");

    const people = screen.getByLabelText<HTMLInputElement>(/^People/);
    expect([people.type, people.min, people.max, people.step, people.value]).toEqual(["number", "1", "12", "1", "2"]);
    expect(people.required).toBe(false);
    expect(screen.getByLabelText<HTMLInputElement>("On the terrace").type).toBe("checkbox");

    // Two choices are radio buttons with their titles; five are a select.
    const seating = within(field("seating")).getAllByRole("radio");
    expect(seating.map((r) => r.parentElement?.textContent)).toEqual(["At the bar", "At a table"]);
    expect(field("seating").querySelector("legend")?.textContent).toBe("Seating *");
    const occasion = within(field("occasion")).getByRole<HTMLSelectElement>("combobox");
    expect(Array.from(occasion.options).map((o) => o.textContent)).toEqual([
      "(none)",
      "Nothing special",
      "Birthday",
      "Anniversary",
      "Business",
      "Something else",
    ]);
  });

  it("puts the focus on the first field when it appears", () => {
    render(<ToolCard tool={waiting()} onAnswerInput={() => {}} />);
    expect(document.activeElement).toBe(screen.getByLabelText(/^Name/));
  });

  it("sends the content typed as the schema says", () => {
    const onAnswer = vi.fn();
    render(<ToolCard tool={waiting()} onAnswerInput={onAnswer} />);
    fireEvent.change(screen.getByLabelText(/^Name/), { target: { value: "Ada Lovelace" } });
    fireEvent.change(screen.getByLabelText(/^Email/), { target: { value: "ada@example.com" } });
    fireEvent.change(screen.getByLabelText(/^People/), { target: { value: "4" } });
    fireEvent.click(screen.getByLabelText("On the terrace"));
    fireEvent.click(screen.getByLabelText("At a table"));
    fireEvent.change(within(field("occasion")).getByRole("combobox"), { target: { value: "1" } });
    fireEvent.click(screen.getByTestId("input-send"));
    expect(onAnswer).toHaveBeenCalledWith("in_1", "accept", {
      name: "Ada Lovelace",
      email: "ada@example.com",
      people: 4,
      terrace: true,
      seating: "table",
      occasion: "birthday",
    });
  });

  it("does not send a form that breaks the schema: it says what is wrong, by the field", () => {
    const onAnswer = vi.fn();
    render(<ToolCard tool={waiting()} onAnswerInput={onAnswer} />);
    fireEvent.change(screen.getByLabelText(/^Name/), { target: { value: "A" } });
    fireEvent.change(screen.getByLabelText(/^Email/), { target: { value: "ada at example" } });
    fireEvent.submit(screen.getByTestId("input-form"));
    expect(onAnswer).not.toHaveBeenCalled();
    expect(within(field("name")).getByTestId("input-field-problem").textContent).toBe("Enter at least 2 characters.");
    expect(within(field("email")).getByTestId("input-field-problem").textContent).toMatch(/email address/);
    expect(within(field("seating")).getByTestId("input-field-problem").textContent).toBe("Choose one.");
    expect(within(field("people")).queryByTestId("input-field-problem")).toBeNull();
    const name = screen.getByLabelText(/^Name/);
    expect(name.getAttribute("aria-invalid")).toBe("true");
    expect(name.getAttribute("aria-describedby")).toContain(within(field("name")).getByTestId("input-field-problem").id);
    expect(document.activeElement).toBe(name);
  });

  it("says what is wrong with a field once it was changed and left, not before", () => {
    render(<ToolCard tool={waiting()} onAnswerInput={() => {}} />);
    const name = screen.getByLabelText(/^Name/);
    const email = screen.getByLabelText(/^Email/);
    fireEvent.blur(name, { relatedTarget: email });
    expect(within(field("name")).queryByTestId("input-field-problem")).toBeNull();
    fireEvent.change(name, { target: { value: "A" } });
    fireEvent.blur(name, { relatedTarget: email });
    expect(within(field("name")).getByTestId("input-field-problem").textContent).toBe("Enter at least 2 characters.");
  });

  it("says nothing on leaving a field for a button, so the button does not move under the pointer", () => {
    const onAnswer = vi.fn();
    render(<ToolCard tool={waiting()} onAnswerInput={onAnswer} />);
    const name = screen.getByLabelText(/^Name/);
    fireEvent.change(name, { target: { value: "A" } });
    fireEvent.blur(name, { relatedTarget: screen.getByTestId("input-decline") });
    expect(screen.queryByTestId("input-field-problem")).toBeNull();
    fireEvent.click(screen.getByTestId("input-decline"));
    expect(onAnswer).toHaveBeenCalledWith("in_1", "decline", undefined);
  });

  it("shows the server's problems next to their fields, and the rest above the buttons", () => {
    render(
      <ToolCard
        tool={waiting({ problems: ["email: this address cannot receive mail", "the restaurant is full that night"] })}
        onAnswerInput={() => {}}
      />,
    );
    expect(within(field("email")).getByTestId("input-field-problem").textContent).toBe("this address cannot receive mail");
    expect(screen.getByTestId("input-problems").textContent).toBe("the restaurant is full that night");
    expect(screen.getByTestId("input-problems").getAttribute("role")).toBe("alert");
    expect(document.activeElement).toBe(screen.getByLabelText(/^Email/));
  });

  it("declines and cancels without content; Escape cancels", () => {
    const onAnswer = vi.fn();
    render(<ToolCard tool={waiting()} onAnswerInput={onAnswer} />);
    fireEvent.click(screen.getByTestId("input-decline"));
    expect(onAnswer).toHaveBeenLastCalledWith("in_1", "decline", undefined);
    fireEvent.click(screen.getByTestId("input-cancel"));
    expect(onAnswer).toHaveBeenLastCalledWith("in_1", "cancel", undefined);
    fireEvent.keyDown(screen.getByLabelText(/^Name/), { key: "Escape" });
    expect(onAnswer).toHaveBeenCalledTimes(3);
    expect(onAnswer).toHaveBeenLastCalledWith("in_1", "cancel", undefined);
  });

  it("offers several choices as checkboxes, and sends the ones ticked", () => {
    const onAnswer = vi.fn();
    const schema = {
      type: "object",
      properties: {
        diets: {
          type: "array",
          title: "Dietary needs",
          items: { anyOf: [{ const: "vegan", title: "Vegan" }, { const: "nuts", title: "No nuts" }, { const: "gf", title: "Gluten-free" }] },
        },
      },
      required: ["diets"],
    };
    render(<ToolCard tool={waiting({ schema })} onAnswerInput={onAnswer} />);
    const boxes = within(field("diets")).getAllByRole<HTMLInputElement>("checkbox");
    expect(boxes.map((b) => b.parentElement?.textContent)).toEqual(["Vegan", "No nuts", "Gluten-free"]);
    fireEvent.click(screen.getByTestId("input-send"));
    expect(onAnswer).not.toHaveBeenCalled();
    expect(within(field("diets")).getByTestId("input-field-problem").textContent).toBe("Choose at least one.");
    fireEvent.click(screen.getByLabelText("Gluten-free"));
    fireEvent.click(screen.getByLabelText("Vegan"));
    fireEvent.click(screen.getByTestId("input-send"));
    expect(onAnswer).toHaveBeenCalledWith("in_1", "accept", { diets: ["vegan", "gf"] });
  });

  it("sends with Enter from a select too", () => {
    const onAnswer = vi.fn();
    const schema = { type: "object", properties: { occasion: SCHEMA.properties.occasion } };
    render(<ToolCard tool={waiting({ schema })} onAnswerInput={onAnswer} />);
    const select = screen.getByRole("combobox");
    fireEvent.change(select, { target: { value: "4" } });
    fireEvent.keyDown(select, { key: "Enter" });
    expect(onAnswer).toHaveBeenCalledWith("in_1", "accept", { occasion: "other" });
  });

  it("shows the time left, and nothing can be pressed twice while the answer is sent", () => {
    const now = Date.parse("2026-11-24T12:00:00Z");
    vi.useFakeTimers({ now, toFake: ["Date"] });
    try {
      render(<ToolCard tool={waiting({ state: "sending", expiresAt: new Date(now + 95_000).toISOString() })} onAnswerInput={() => {}} />);
    } finally {
      vi.useRealTimers();
    }
    expect(screen.getByTestId("input-expiry").textContent).toBe("Closes in 1:35.");
    for (const id of ["input-send", "input-decline", "input-cancel"]) {
      expect(screen.getByTestId<HTMLButtonElement>(id).disabled).toBe(true);
    }
    expect(screen.getByTestId("input-send").textContent).toBe("Sending…");
    expect(screen.getByLabelText<HTMLInputElement>(/^Name/).disabled).toBe(true);
  });

  it("cannot be sent once the time is up", () => {
    render(<ToolCard tool={waiting({ expiresAt: new Date(Date.now() - 1000).toISOString() })} onAnswerInput={() => {}} />);
    expect(screen.getByTestId("input-expiry").textContent).toBe("The time to answer is up.");
    expect(screen.getByTestId<HTMLButtonElement>("input-send").disabled).toBe(true);
  });

  it("can only be declined when it asks for something it cannot show", () => {
    const schema = { type: "object", properties: { guests: { type: "array" } }, required: ["guests"] };
    render(<ToolCard tool={waiting({ schema })} onAnswerInput={() => {}} />);
    expect(screen.getByTestId("input-unsupported").textContent).toContain("guests");
    expect(screen.getByTestId<HTMLButtonElement>("input-send").disabled).toBe(true);
    expect(screen.getByTestId<HTMLButtonElement>("input-decline").disabled).toBe(false);
  });

  it("shows the outcome on the tool card once answered, without the form", () => {
    const { rerender } = render(<ToolCard tool={waiting()} onAnswerInput={() => {}} />);
    const answered = (input: Partial<InputRequest>): ToolView => {
      const tool = waiting(input);
      return { ...tool, status: "running" };
    };
    rerender(<ToolCard tool={answered({ state: "closed", outcome: "accept" })} onAnswerInput={() => {}} />);
    expect(screen.queryByTestId("input-card")).toBeNull();
    expect(screen.getByTestId("input-outcome").textContent).toBe("You sent the details asked for.");
    rerender(<ToolCard tool={answered({ state: "closed", outcome: "decline" })} onAnswerInput={() => {}} />);
    expect(screen.getByTestId("input-outcome").textContent).toBe("You declined the request for input.");
    rerender(
      <ToolCard
        tool={answered({ state: "closed", problem: "This request is no longer open: it was already answered, it expired, or it is not yours." })}
        onAnswerInput={() => {}}
      />,
    );
    expect(screen.getByTestId("input-outcome").textContent).toMatch(/no longer open/);
  });

  it("shows the server's message as text, loading nothing", () => {
    const hostile = '![x](http://attacker.invalid/leak.png) <img src="http://attacker.invalid/raw.png"> **bold**';
    const schema = { type: "object", properties: { x: { type: "string", title: hostile, description: hostile } } };
    render(<ToolCard tool={waiting({ message: hostile, schema })} onAnswerInput={() => {}} />);
    const card = screen.getByTestId("input-card");
    expect(card.querySelector("img, [src], strong")).toBeNull();
    expect(screen.getByTestId("input-message").textContent).toBe(hostile);
  });
});
