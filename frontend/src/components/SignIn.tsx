import type { ReactElement } from "react";
import { loginUrl } from "../api/http";

export function SignIn({ problem }: { problem?: string }): ReactElement {
  const returnTo = window.location.pathname + window.location.search;
  return (
    <main className="sign-in">
      <div className="sign-in-card">
        <div className="brand-mark" aria-hidden="true">
          m
        </div>
        <h1>maitred</h1>
        <p>Ask about the restaurant’s bookings, tables and guests. The assistant looks things up with its tools and asks before it changes anything.</p>
        {problem && (
          <p className="sign-in-problem" role="alert">
            {problem}
          </p>
        )}
        <a className="button primary large" data-testid="login-button" href={loginUrl(returnTo)}>
          Sign in
        </a>
      </div>
    </main>
  );
}
