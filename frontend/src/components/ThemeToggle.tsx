import type { ReactElement } from "react";
import type { Theme } from "../hooks/useTheme";
import { MoonIcon, SunIcon } from "./icons";

export function ThemeToggle({ theme, onToggle }: { theme: Theme; onToggle: () => void }): ReactElement {
  const next = theme === "dark" ? "light" : "dark";
  return (
    <button
      type="button"
      className="icon-button"
      data-testid="theme-toggle"
      aria-label={`Switch to the ${next} theme`}
      title={`Switch to the ${next} theme`}
      onClick={onToggle}
    >
      {theme === "dark" ? <SunIcon /> : <MoonIcon />}
    </button>
  );
}
