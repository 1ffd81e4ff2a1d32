import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    environment: "node",
    pool: "threads",
    maxWorkers: 2,
    isolate: false,
    testTimeout: 20_000,
  },
});
