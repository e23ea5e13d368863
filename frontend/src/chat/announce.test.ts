import { describe, expect, it } from "vitest";
import { nextChunk, speakable } from "./announce";

describe("nextChunk", () => {
  it("holds back a sentence until it ends", () => {
    expect(nextChunk("There are twel", 0, false)).toEqual({ say: "", upTo: 0 });
    const text = "There are **12** tables. Four seat si";
    const chunk = nextChunk(text, 0, false);
    expect(chunk.say).toBe("There are 12 tables.");
    expect(text.slice(chunk.upTo)).toBe(" Four seat si");
  });

  it("goes on from where it stopped, and reads the rest at the end", () => {
    const text = "One. Two. Three";
    const first = nextChunk(text, 0, false);
    expect(first.say).toBe("One. Two.");
    expect(nextChunk(text, first.upTo, true)).toEqual({ say: "Three", upTo: text.length });
  });
});

describe("speakable", () => {
  it("drops markdown syntax and code", () => {
    expect(speakable("## Tables\n| T4 | 6 |\n|---|---|\n`x` and [docs](http://a)")).toBe("Tables T4 6 x and docs");
    expect(speakable("Run:\n```\nrm -rf\n```\nDone")).toBe("Run: (code) Done");
  });
});
