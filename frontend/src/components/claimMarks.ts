// Where an answer's checked claims are in its markdown source, and a rehype plugin
// that wraps each one in a <mark> the Markdown component renders as a link to the
// tool card whose result states it, or as a visibly marked unsupported figure.

import type { Claim } from "../api/types";

export interface ClaimRange {
  /** UTF-16 indexes in the markdown source. */
  start: number;
  end: number;
  /** The claim's index in the grounding's list. */
  index: number;
}

/** The claims' code point offsets (counted from `base`) as UTF-16 ranges of `text`. */
export function claimRanges(text: string, base: number, claims: Claim[]): ClaimRange[] {
  const unitAt = (codePoints: number): number => {
    let unit = base;
    for (let n = 0; n < codePoints && unit < text.length; n++) {
      unit += (text.codePointAt(unit) ?? 0) > 0xffff ? 2 : 1;
    }
    return unit;
  };
  return claims.map((claim, index) => ({ start: unitAt(claim.start), end: unitAt(claim.end), index }));
}

interface HastText {
  type: "text";
  value: string;
  position?: { start: { offset?: number }; end: { offset?: number } };
}

interface HastElement {
  type: "element";
  tagName: string;
  properties: Record<string, unknown>;
  children: HastNode[];
}

type HastNode = HastText | HastElement | { type: string; children?: HastNode[] };

/** Splits a text node around the claims it holds whole; `null` when it holds none. */
function split(node: HastText, source: string, ranges: ClaimRange[]): HastNode[] | null {
  const from = node.position?.start.offset;
  const to = node.position?.end.offset;
  // Only text that is its source verbatim (no escapes, no entities) can be cut by offsets.
  if (from === undefined || to === undefined || source.slice(from, to) !== node.value) return null;
  const inside = ranges.filter((r) => r.start >= from && r.end <= to && r.end > r.start).sort((a, b) => a.start - b.start);
  if (inside.length === 0) return null;
  const out: HastNode[] = [];
  let at = from;
  for (const range of inside) {
    if (range.start < at) continue;
    if (range.start > at) out.push({ type: "text", value: source.slice(at, range.start) });
    out.push({
      type: "element",
      tagName: "mark",
      properties: { dataClaim: String(range.index) },
      children: [{ type: "text", value: source.slice(range.start, range.end) }],
    });
    at = range.end;
  }
  if (at < to) out.push({ type: "text", value: source.slice(at, to) });
  return out;
}

function walk(node: HastNode, source: string, ranges: ClaimRange[]): void {
  const children = "children" in node ? node.children : undefined;
  if (!children) return;
  const next: HastNode[] = [];
  for (const child of children) {
    const pieces = child.type === "text" ? split(child as HastText, source, ranges) : null;
    if (pieces) {
      next.push(...pieces);
    } else {
      walk(child, source, ranges);
      next.push(child);
    }
  }
  children.splice(0, children.length, ...next);
}

/** A rehype plugin marking `ranges` of `source` (the markdown the tree was parsed from). */
export function rehypeClaims(source: string, ranges: ClaimRange[]) {
  return () => (tree: HastNode) => {
    if (ranges.length > 0) walk(tree, source, ranges);
  };
}
