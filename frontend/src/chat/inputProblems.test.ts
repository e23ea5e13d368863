import { describe, expect, it } from "vitest";
import { HttpError } from "../api/http";
import { problemsOf, splitProblems } from "./inputProblems";

describe("problemsOf", () => {
  it("reads a 400's details.problems, and nothing from any other error", () => {
    const problems = ["email: not an email address", "people: must be at least 1"];
    expect(problemsOf(new HttpError(400, "INVALID_REQUEST", "invalid", undefined, { problems }))).toEqual(problems);
    expect(problemsOf(new HttpError(400, "INVALID_REQUEST", "invalid", undefined, { problems: [1, "x: y"] }))).toEqual(["x: y"]);
    expect(problemsOf(new HttpError(400, "INVALID_REQUEST", "invalid"))).toEqual([]);
    expect(problemsOf(new HttpError(404, "RESOURCE_NOT_FOUND", "gone", undefined, { problems }))).toEqual([]);
    expect(problemsOf(new Error("network"))).toEqual([]);
  });
});

describe("splitProblems", () => {
  it("puts each line next to the field it names, and the rest apart", () => {
    expect(
      splitProblems(
        ["email: not an email address", "email_2: required", "/people: too many", "content.email: taken", "the table is gone"],
        ["email", "email_2", "people"],
      ),
    ).toEqual({
      byField: { email: ["not an email address", "taken"], email_2: ["required"], people: ["too many"] },
      general: ["the table is gone"],
    });
  });

  it("keeps a line about a field the form does not have as a general problem", () => {
    expect(splitProblems(["phone: required"], ["email"])).toEqual({ byField: {}, general: ["phone: required"] });
  });
});
