import { render } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { Markdown } from "./Markdown";

// Security finding #4: text a guest wrote (a booking's name, a note) reaches the
// answer verbatim, and so does whatever a prompt-injected model chooses to write.
// Markdown in it must not make the browser fetch anything or run anything.

function rendered(text: string): HTMLElement {
  return render(<Markdown text={text} />).container;
}

/** Nothing in the output may point the browser at a resource on its own. */
function expectNothingLoaded(root: HTMLElement): void {
  expect(root.querySelector("img")).toBeNull();
  expect(root.querySelector("[src], [srcset], picture, video, audio, iframe, object, embed")).toBeNull();
}

describe("Markdown images are never loaded", () => {
  it("shows an inline image as its alt text, with the address only in a tooltip", () => {
    const root = rendered("Guest: ![x](http://attacker.invalid/leak.png)");
    expectNothingLoaded(root);
    const image = root.querySelector<HTMLElement>('[data-testid="markdown-image"]');
    expect(image?.textContent).toBe("x");
    expect(image?.title).toContain("http://attacker.invalid/leak.png");
    expect(root.textContent).toBe("Guest: x");
  });

  it("covers reference-style images: full, collapsed and shortcut", () => {
    const root = rendered(
      [
        "![full][ref] ![collapsed][] ![shortcut]",
        "",
        "[ref]: http://attacker.invalid/full.png",
        "[collapsed]: http://attacker.invalid/collapsed.png",
        "[shortcut]: http://attacker.invalid/shortcut.png",
      ].join("\n"),
    );
    expectNothingLoaded(root);
    const shown = Array.from(root.querySelectorAll('[data-testid="markdown-image"]')).map((e) => e.textContent);
    expect(shown).toEqual(["full", "collapsed", "shortcut"]);
  });

  it("covers an image in a table cell, as a guest's name in a bookings table", () => {
    const root = rendered(
      ["| Time | Guest |", "|---|---|", "| 19:00 | ![x](http://attacker.invalid/leak.png) |", "| 20:00 | Ada |"].join(
        "\n",
      ),
    );
    expectNothingLoaded(root);
    const cells = Array.from(root.querySelectorAll("tbody td")).map((td) => td.textContent);
    expect(cells).toEqual(["19:00", "x", "20:00", "Ada"]);
  });

  it("covers an image inside a link, and one with no alt text", () => {
    const root = rendered("[![badge](http://attacker.invalid/b.png)](https://example.com) ![](http://attacker.invalid/n.png)");
    expectNothingLoaded(root);
    expect(root.querySelector("a")?.textContent).toBe("badge");
    const shown = Array.from(root.querySelectorAll('[data-testid="markdown-image"]')).map((e) => e.textContent);
    expect(shown).toEqual(["badge", "image"]);
  });

  it("drops raw HTML that would load something", () => {
    const root = rendered(
      'a <img src="http://attacker.invalid/raw.png"> b <picture><source srcset="http://attacker.invalid/s.png"></picture>\n\n<iframe src="http://attacker.invalid/"></iframe>',
    );
    expectNothingLoaded(root);
  });
});

describe("Markdown links", () => {
  it("open in a new tab with no handle on this page and no referrer", () => {
    const link = rendered("[menu](https://example.com/menu)").querySelector("a");
    expect(link?.getAttribute("href")).toBe("https://example.com/menu");
    expect(link?.target).toBe("_blank");
    expect(link?.rel.split(" ").sort()).toEqual(["noopener", "noreferrer"]);
  });

  it.each([
    "[click](javascript:alert(1))",
    "[click](JavaScript:alert(1))",
    "[click](javascript&#58;alert(1))",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click][evil]\n\n[evil]: javascript:alert(1)",
    "<javascript:alert(1)>",
  ])("never carry a script URL: %s", (text) => {
    const root = rendered(text);
    for (const a of Array.from(root.querySelectorAll("a"))) {
      expect(a.getAttribute("href") ?? "").not.toMatch(/^\s*(javascript|vbscript|data):/i);
    }
    // The words stay, as plain text.
    expect(root.textContent).toMatch(/click|javascript/);
  });
});
