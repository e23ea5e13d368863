// ESLint for the web UI (flat config). `npm run lint` fails on any warning too, so a
// rule that is only worth a warning still has to be answered, in code or in a
// commented disable.
import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import { defineConfig, globalIgnores } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig([
  globalIgnores(["dist/", "**/node_modules/", "e2e/node_modules/"]),

  // The app and its unit tests: TypeScript, checked with type information, so
  // promises that nobody awaits or catches (an unhandled rejection in a click
  // handler is a silent failure) are found too.
  {
    files: ["src/**/*.{ts,tsx}", "vite.config.ts"],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked, reactHooks.configs.flat.recommended],
    languageOptions: {
      globals: globals.browser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A missing dependency is a stale value on screen; fix the code, not the list.
      "react-hooks/exhaustive-deps": "error",
      // `_node` and friends: props taken out of a spread on purpose.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
    },
  },

  // The browser suite (node:test + playwright-core) and this file: plain modules for
  // Node; functions passed to page.evaluate run in the page, hence both sets of globals.
  {
    files: ["e2e/**/*.mjs", "eslint.config.js"],
    extends: [js.configs.recommended],
    languageOptions: {
      globals: { ...globals.node, ...globals.browser },
    },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
]);
