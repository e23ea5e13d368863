import { useCallback, useEffect, useState } from "react";

/** The two client routes: a new chat at `/`, a conversation at `/c/{id}`. */
export interface Route {
  conversationId: string | null;
}

export function parseRoute(pathname: string): Route {
  const match = /^\/c\/([^/]+)\/?$/.exec(pathname);
  return { conversationId: match?.[1] ? decodeURIComponent(match[1]) : null };
}

export function conversationPath(id: string): string {
  return `/c/${encodeURIComponent(id)}`;
}

export function useRoute(): { route: Route; navigate: (path: string) => void } {
  const [pathname, setPathname] = useState(() => window.location.pathname);

  useEffect(() => {
    const onPop = (): void => setPathname(window.location.pathname);
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);

  const navigate = useCallback((path: string) => {
    if (path !== window.location.pathname) window.history.pushState(null, "", path);
    setPathname(path);
  }, []);

  return { route: parseRoute(pathname), navigate };
}
