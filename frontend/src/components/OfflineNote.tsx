import type { ReactElement } from "react";

export function OfflineNote(): ReactElement {
  return (
    <p className="offline-note" data-testid="offline-note" role="note">
      <strong>Offline model:</strong> a built-in stand-in writes these answers from the tools’ results, with no
      language model behind it.
    </p>
  );
}
