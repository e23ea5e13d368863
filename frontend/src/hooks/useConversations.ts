import { useCallback, useEffect, useState } from "react";
import type { Api } from "../api/http";
import type { ConversationSummary } from "../api/types";

export function useConversations(api: Api): {
  conversations: ConversationSummary[] | null;
  error: string | null;
  refresh: () => void;
  remove: (id: string) => Promise<void>;
} {
  const [conversations, setConversations] = useState<ConversationSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const refresh = useCallback(() => {
    api.conversations().then(
      (list) => {
        setConversations(list);
        setError(null);
      },
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    );
  }, [api]);

  useEffect(refresh, [refresh]);

  const remove = useCallback(
    async (id: string) => {
      await api.deleteConversation(id);
      setConversations((list) => list?.filter((c) => c.id !== id) ?? null);
    },
    [api],
  );

  return { conversations, error, refresh, remove };
}
