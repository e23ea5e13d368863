// Small inline icons: no icon font, no extra request, and they follow currentColor.

import type { ReactElement } from "react";

function Icon({ d, size = 18 }: { d: string; size?: number }): ReactElement {
  return (
    <svg
      width={size}
      height={size}
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      strokeWidth="2"
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden="true"
      focusable="false"
    >
      <path d={d} />
    </svg>
  );
}

export const SunIcon = (): ReactElement => (
  <Icon d="M12 4V2m0 20v-2m8-8h2M2 12h2m13.66-5.66 1.41-1.41M4.93 19.07l1.41-1.41m0-11.32L4.93 4.93m14.14 14.14-1.41-1.41M12 8a4 4 0 1 0 0 8 4 4 0 0 0 0-8Z" />
);
export const MoonIcon = (): ReactElement => <Icon d="M21 12.8A9 9 0 1 1 11.2 3a7 7 0 0 0 9.8 9.8Z" />;
export const PlusIcon = (): ReactElement => <Icon d="M12 5v14M5 12h14" />;
export const TrashIcon = (): ReactElement => (
  <Icon size={16} d="M3 6h18M8 6V4h8v2m-9 0 1 14h8l1-14M10 10v7m4-7v7" />
);
export const MenuIcon = (): ReactElement => <Icon d="M4 6h16M4 12h16M4 18h16" />;
export const SendIcon = (): ReactElement => <Icon d="M5 12h14m-6-6 6 6-6 6" />;
export const StopIcon = (): ReactElement => <Icon d="M7 7h10v10H7z" />;
export const ChevronIcon = (): ReactElement => <Icon size={16} d="m9 6 6 6-6 6" />;
export const CheckIcon = (): ReactElement => <Icon size={16} d="m5 12 5 5 9-10" />;
export const CrossIcon = (): ReactElement => <Icon size={16} d="M6 6l12 12M18 6 6 18" />;
export const AlertIcon = (): ReactElement => <Icon size={16} d="M12 8v5m0 3.5v.5M10.3 3.9 2.4 18a2 2 0 0 0 1.7 3h15.8a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0Z" />;
export const BanIcon = (): ReactElement => <Icon size={16} d="M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18ZM5.6 5.6l12.8 12.8" />;
export const PlugIcon = (): ReactElement => <Icon size={16} d="M9 7V3m6 4V3M6 7h12v4a6 6 0 0 1-12 0V7Zm6 10v4" />;
export const ClockIcon = (): ReactElement => <Icon size={16} d="M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18Zm0 4v5l3 2" />;
