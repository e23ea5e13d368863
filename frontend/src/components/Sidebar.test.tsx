import { fireEvent, render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import type { ConversationSummary } from "../api/types";
import { Sidebar } from "./Sidebar";

const conversations: ConversationSummary[] = [
  { id: "conv_b", title: "Bookings for Friday", created_at: "2025-01-02T10:00:00Z", updated_at: "2025-01-02T10:05:00Z" },
  { id: "conv_a", title: "Which tables seat six?", created_at: "2025-01-01T09:00:00Z", updated_at: "2025-01-01T09:01:00Z" },
];

function renderSidebar(overrides: Partial<Parameters<typeof Sidebar>[0]> = {}) {
  const props = {
    conversations,
    error: null,
    currentId: "conv_a",
    onNavigate: vi.fn(),
    onNewChat: vi.fn(),
    onDelete: vi.fn(),
    ...overrides,
  };
  render(<Sidebar {...props} />);
  return props;
}

describe("Sidebar", () => {
  it("lists the conversations in the server's order, each linking to /c/{id}", () => {
    renderSidebar();
    const items = within(screen.getByTestId("conversation-list")).getAllByTestId("conversation-item");
    expect(items.map((i) => i.dataset.conversationId)).toEqual(["conv_b", "conv_a"]);
    const link = within(items[0]!).getByRole("link");
    expect(link.getAttribute("href")).toBe("/c/conv_b");
    expect(link.textContent).toContain("Bookings for Friday");
    expect(within(items[1]!).getByRole("link").getAttribute("aria-current")).toBe("page");
  });

  it("opens a conversation in the page, without a reload", () => {
    const props = renderSidebar();
    const link = within(screen.getAllByTestId("conversation-item")[0]!).getByRole("link");
    const click = new MouseEvent("click", { bubbles: true, cancelable: true, button: 0 });
    link.dispatchEvent(click);
    expect(click.defaultPrevented).toBe(true);
    expect(props.onNavigate).toHaveBeenCalledWith("/c/conv_b");
  });

  it("leaves a ctrl-click to the browser (a new tab)", () => {
    const props = renderSidebar();
    const link = within(screen.getAllByTestId("conversation-item")[0]!).getByRole("link");
    let leftToBrowser = false;
    // jsdom cannot open a tab: note that the click went through, and stop it there.
    link.parentElement!.addEventListener("click", (e) => {
      leftToBrowser = !e.defaultPrevented;
      e.preventDefault();
    });
    fireEvent.click(link, { ctrlKey: true });
    expect(leftToBrowser).toBe(true);
    expect(props.onNavigate).not.toHaveBeenCalled();
  });

  it("deletes the conversation whose button is pressed", () => {
    const props = renderSidebar();
    const second = screen.getAllByTestId("conversation-item")[1]!;
    const button = within(second).getByTestId("conversation-delete");
    expect(button.getAttribute("aria-label")).toContain("Which tables seat six?");
    fireEvent.click(button);
    expect(props.onDelete).toHaveBeenCalledWith(conversations[1]);
  });

  it("starts a new chat", () => {
    const props = renderSidebar();
    fireEvent.click(screen.getByTestId("new-chat"));
    expect(props.onNewChat).toHaveBeenCalled();
  });

  it("says when there are no conversations yet", () => {
    renderSidebar({ conversations: [] });
    expect(screen.getByText(/No conversations yet/)).toBeTruthy();
    expect(screen.queryAllByTestId("conversation-item")).toHaveLength(0);
  });
});
