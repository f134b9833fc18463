// Fault injection for reliability tests (docs/design.md section 6; docs/emulator.md "Fault rules"):
// latency, an error status, a reset connection, or a response dropped AFTER the write committed (the
// ambiguous failure that the operator's create protocol must survive, docs/design.md section 3.2).
// Rules match public API routes by method and route template; each fires with its probability
// until `times` injections.
import { z } from 'zod';

const FaultRule = z
  .object({
    method: z.string().min(1).optional(),
    route: z.string().min(1).optional(),
    probability: z.number().min(0).max(1),
    kind: z.enum(['latency', 'status', 'reset', 'drop-after-commit']),
    latencyMs: z.number().int().min(0).max(600_000).optional(),
    status: z.number().int().min(400).max(599).optional(),
    times: z.number().int().min(0).optional(),
  })
  .strict();

export const FaultRules = z.object({ rules: z.array(FaultRule).max(100) }).strict();

export type FaultRuleSpec = z.infer<typeof FaultRule>;
export type Fault = FaultRuleSpec & { injected: number };

export interface Faults {
  set(rules: FaultRuleSpec[]): void;
  list(): Fault[];
  clear(): void;
  /** The fault to inject into this request, if any (counted as injected). */
  pick(method: string, route: string): Fault | undefined;
}

export function faultInjector(random: () => number = Math.random): Faults {
  let rules: Fault[] = [];
  return {
    set(next) {
      rules = next.map((r) => ({ ...r, injected: 0 }));
    },
    list: () => rules.map((r) => ({ ...r })),
    clear() {
      rules = [];
    },
    pick(method, route) {
      for (const rule of rules) {
        if (rule.method !== undefined && rule.method.toUpperCase() !== method) continue;
        if (rule.route !== undefined && rule.route !== route) continue;
        if (rule.times !== undefined && rule.injected >= rule.times) continue;
        if (random() >= rule.probability) continue;
        rule.injected += 1;
        return rule;
      }
      return undefined;
    },
  };
}
