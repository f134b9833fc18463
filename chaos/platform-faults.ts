// The platform misbehaving (src/emulator's fault rules, /admin/faults): latency, 500, 503, 423, 429,
// reset connections on every route, and on the create POSTs a response dropped AFTER the key was
// committed (the failure the create protocol exists for). The rules are checked in order and each
// fires with its own probability, so per-rule probabilities are chosen to make the combined share
// of faulted requests the --fault-rate.
import type { Emulator } from '../src/emulator/server.ts';

interface Rule {
  method?: string;
  route?: string;
  probability: number;
  kind: 'latency' | 'status' | 'reset' | 'drop-after-commit';
  latencyMs?: number;
  status?: number;
}
export interface InjectedFault {
  kind: string;
  status?: number;
  route?: string;
  method?: string;
  injected: number;
}

const CREATE_ROUTES = ['/api/v2/organizations/:org_id/api_keys', '/api/v2/api_keys'];

export function faultRules(rate: number): Rule[] {
  const generic: Omit<Rule, 'probability'>[] = [
    { kind: 'latency', latencyMs: 250 },
    { kind: 'latency', latencyMs: 1_500 },
    { kind: 'status', status: 500 },
    { kind: 'status', status: 503 },
    { kind: 'status', status: 423 },
    { kind: 'status', status: 429 },
    { kind: 'reset' },
  ];
  // On creates, a dropped response takes a share of the budget of its own on top of the generic faults.
  const drop = Math.min(0.5, rate);
  const each = 1 - (1 - rate) ** (1 / generic.length);
  return [
    ...CREATE_ROUTES.map((route): Rule => ({ method: 'POST', route, probability: drop, kind: 'drop-after-commit' })),
    ...generic.map((r): Rule => ({ ...r, probability: each })),
  ];
}

export async function admin<T>(emulator: Emulator, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${emulator.adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${text}`);
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

export class PlatformFaults {
  readonly #emulator: Emulator;
  /** Injections of rule sets already replaced (PUT resets the counters). */
  readonly #done: InjectedFault[] = [];

  constructor(emulator: Emulator) {
    this.#emulator = emulator;
  }

  async enable(rate: number): Promise<void> {
    if (rate <= 0) return;
    await admin(this.#emulator, 'PUT', '/faults', { rules: faultRules(rate) });
  }

  async disable(): Promise<void> {
    this.#done.push(...(await this.current()));
    await admin(this.#emulator, 'DELETE', '/faults');
  }

  async current(): Promise<InjectedFault[]> {
    return (await admin<{ rules: InjectedFault[] }>(this.#emulator, 'GET', '/faults')).rules;
  }

  /** Injections by kind (status faults by status), over the whole run. */
  async injected(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const rule of [...this.#done, ...(await this.current())]) {
      const label = rule.kind === 'status' ? `status ${rule.status}` : rule.kind === 'latency' ? 'latency' : rule.kind;
      out[label] = (out[label] ?? 0) + rule.injected;
    }
    return out;
  }
}
