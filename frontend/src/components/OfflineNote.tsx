import type { ReactElement } from "react";

export function OfflineNote(): ReactElement {
  return (
    <p className="offline-note" data-testid="offline-note" role="note">
      <strong>Offline model.</strong> Answers come from maitred’s built-in stand-in, which picks tools and writes
      from their results without a language model.
    </p>
  );
}
