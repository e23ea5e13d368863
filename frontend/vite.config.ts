import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The gateway a developer runs locally; override with MAITRED_GATEWAY for another port.
const gateway = process.env.MAITRED_GATEWAY ?? "http://127.0.0.1:8081";

export default defineConfig({
  plugins: [react()],
  server: {
    port: Number(process.env.PORT ?? 5173),
    proxy: {
      "/api": { target: gateway, changeOrigin: false },
      "/login": { target: gateway, changeOrigin: false },
      "/logout": { target: gateway, changeOrigin: false },
    },
  },
  build: {
    outDir: "dist",
    sourcemap: true,
  },
  test: {
    // The end-to-end suite under e2e/ runs in a real browser with node:test.
    include: ["src/**/*.test.{ts,tsx}"],
    environment: "jsdom",
    setupFiles: ["src/test/setup.ts"],
    restoreMocks: true,
  },
});
