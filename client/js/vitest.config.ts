import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "bench/**/*.test.ts"], // bench/: run by bench/js, by name
    testTimeout: 60000,
    hookTimeout: 60000,
  },
});
