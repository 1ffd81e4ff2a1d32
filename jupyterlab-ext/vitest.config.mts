import { defineConfig } from 'vitest/config';

// Vitest's reporter calls Map.groupBy (Node >= 21) to print failures; Node 20 lacks it.
if (typeof (Map as { groupBy?: unknown }).groupBy !== 'function') {
  (Map as unknown as { groupBy: unknown }).groupBy = <K, V>(items: Iterable<V>, key: (v: V, i: number) => K) => {
    const out = new Map<K, V[]>();
    let i = 0;
    for (const item of items) {
      const k = key(item, i++);
      out.set(k, [...(out.get(k) ?? []), item]);
    }
    return out;
  };
}

// happy-dom: the panel renders into a DOM (and @lumino/widgets needs one to load).
export default defineConfig({
  test: { include: ['test/**/*.test.ts'], environment: 'happy-dom' }
});
