import { useEffect, useState, type ReactElement } from "react";
import { Api } from "./api/http";
import type { AuthStatus } from "./api/types";
import { ChatShell } from "./components/ChatShell";
import { SignIn } from "./components/SignIn";
import { useTheme } from "./hooks/useTheme";

type Session = { kind: "loading" } | { kind: "ready"; status: AuthStatus } | { kind: "failed"; message: string };

export function App(): ReactElement {
  const [session, setSession] = useState<Session>({ kind: "loading" });
  const theme = useTheme();

  useEffect(() => {
    new Api().status().then(
      (status) => setSession({ kind: "ready", status }),
      (error: unknown) =>
        setSession({ kind: "failed", message: error instanceof Error ? error.message : String(error) }),
    );
  }, []);

  if (session.kind === "loading") {
    return <div className="splash" aria-busy="true" />;
  }
  if (session.kind === "failed") {
    return <SignIn problem={`The gateway could not be reached: ${session.message}`} />;
  }
  const { status } = session;
  if (!status.authenticated) return <SignIn />;
  return (
    <ChatShell
      theme={theme}
      user={status.user}
      csrfToken={status.csrf_token}
      model={status.model}
      onSignedOut={() => setSession({ kind: "ready", status: { authenticated: false, login_url: "/login", model: status.model } })}
    />
  );
}
