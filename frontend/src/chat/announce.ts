// What a screen reader hears of a streaming answer: whole sentences, a few at a time,
// never every token (that would be a flood of interruptions).

/** Markdown syntax read aloud is noise. */
export function speakable(markdown: string): string {
  return markdown
    .replace(/```[\s\S]*?(```|$)/g, " (code) ")
    .replace(/^\s*\|?\s*:?-{3,}.*$/gm, " ")
    .replace(/[*_`#>|~]+/g, " ")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * The part of `text` after `from` that is ready to be read: up to the last sentence or
 * line end, or everything once the answer is final.
 */
export function nextChunk(text: string, from: number, final: boolean): { say: string; upTo: number } {
  const pending = text.slice(from);
  let end = pending.length;
  if (!final) {
    const boundary = /[.!?:](?=\s)|\n/g;
    let last = -1;
    for (let m = boundary.exec(pending); m !== null; m = boundary.exec(pending)) last = m.index + 1;
    if (last < 0) return { say: "", upTo: from };
    end = last;
  }
  return { say: speakable(pending.slice(0, end)), upTo: from + end };
}
