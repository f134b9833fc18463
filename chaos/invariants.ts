// The promise, checked after every campaign once faults have stopped and the operator has had time
// to converge: every resource Ready with a key that works in its Secret (no lost secret), every
// live platform key of an operator attempt recorded by exactly one existing resource (no orphan),
// every key the operator issued recorded (status.keyId, status.retiringKeys) or revoked, every
// deleted resource's keys revoked, no secret value in any log line, event, status or metrics
// exposition, and a bounded number of platform requests.
import { readFileSync } from 'node:fs';
import { ApiException } from '@kubernetes/client-node';
import { NAMESPACE, type Environment } from './environment.ts';
import { admin } from './platform-faults.ts';
import { GROUP, VERSION, plural, type Incarnation } from './workload.ts';
import { sleep } from './options.ts';
import { intentSettled } from '../test/operator/support.ts';

interface Resource {
  metadata: { name: string; generation?: number; annotations?: Record<string, string>; deletionTimestamp?: string };
  status?: {
    keyId?: number;
    /** Keys replaced by a rotation, live until their grace ends (at most one at a time). */
    retiringKeys?: { keyId: number; since?: string }[];
    /** Keys a repair replaced whose revoke failed, revoked on a later pass. */
    replacedKeys?: { keyId: number }[];
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}
export interface AdminKey {
  id: number;
  name: string;
  kind: string;
  revoked: boolean;
}

const ATTEMPT = /^(chaos-\d+-g\d+)-[a-z0-9]{8}$/;

async function getResource(env: Environment, inc: Incarnation): Promise<Resource | undefined> {
  try {
    return (await env.objects.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: plural(inc.kind),
      name: inc.name,
    })) as Resource;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

async function secretValue(env: Environment, name: string): Promise<{ value: string; keyId?: string } | undefined> {
  try {
    const secret = await env.core.readNamespacedSecret({ namespace: NAMESPACE, name });
    return {
      value: Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8'),
      ...(secret.metadata?.annotations?.['keys.neon.dev/key-id'] !== undefined ? { keyId: secret.metadata.annotations['keys.neon.dev/key-id'] } : {}),
    };
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

/** Platform requests made by the checks themselves (not the operator's). */
export const checkRequests = { count: 0 };

/** GET /projects with the key: 200 means the key authenticates. */
export async function authenticates(env: Environment, key: string): Promise<boolean> {
  checkRequests.count += 1;
  const response = await fetch(`${env.emulator.baseUrl}/projects`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5_000) });
  await response.body?.cancel();
  return response.status === 200;
}

export interface ResourceProblem {
  resource: string;
  problem: string;
}

/** One look at every resource: what keeps it from being settled, with a working key. */
export async function unsettled(env: Environment, live: Incarnation[], deleted: Incarnation[], checked: Map<string, boolean>): Promise<ResourceProblem[]> {
  const problems: ResourceProblem[] = [];
  for (const inc of live) {
    const id = `${inc.kind}/${inc.name}`;
    const r = await getResource(env, inc);
    if (r === undefined) {
      problems.push({ resource: id, problem: 'missing' });
      continue;
    }
    const ready = r.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'True') {
      problems.push({ resource: id, problem: `Ready ${ready?.status ?? 'absent'} ${ready?.reason ?? ''}: ${ready?.message ?? ''}` });
      continue;
    }
    if (r.status?.observedGeneration !== r.metadata.generation) {
      problems.push({ resource: id, problem: 'observedGeneration behind' });
      continue;
    }
    if (!intentSettled(r)) {
      problems.push({ resource: id, problem: 'create intent still pending' });
      continue;
    }
    // A retiring key is revoked within maxGracePeriod (8 s in the workload) of the switch: one
    // still recorded long after that was forgotten by the rotation.
    const overdue = r.status?.retiringKeys?.find((k) => k.since === undefined || Date.now() - Date.parse(k.since) > 60_000);
    if (overdue !== undefined) {
      problems.push({ resource: id, problem: `key ${overdue.keyId} still retiring since ${overdue.since ?? '(unknown)'}` });
      continue;
    }
    const secret = await secretValue(env, inc.name);
    if (secret === undefined) {
      problems.push({ resource: id, problem: 'Ready but its Secret is missing' });
      continue;
    }
    if (secret.keyId !== String(r.status?.keyId)) {
      problems.push({ resource: id, problem: `Secret holds key ${secret.keyId}, status says ${r.status?.keyId}` });
      continue;
    }
    let ok = checked.get(secret.value);
    if (ok !== true) {
      ok = await authenticates(env, secret.value);
      checked.set(secret.value, ok);
    }
    if (!ok) problems.push({ resource: id, problem: `Ready but the key in its Secret (key ${secret.keyId}) does not authenticate` });
  }
  for (const inc of deleted) {
    const r = await getResource(env, inc);
    if (r !== undefined) {
      const ready = r.status?.conditions?.find((c) => c.type === 'Ready');
      problems.push({ resource: `${inc.kind}/${inc.name}`, problem: `deleted but still present: ${ready?.reason ?? ''} ${ready?.message ?? ''}` });
    }
  }
  return problems;
}

export async function converge(
  env: Environment,
  live: Incarnation[],
  deleted: Incarnation[],
  deadlineMs: number,
  log: (text: string) => void,
): Promise<{ problems: ResourceProblem[]; seconds: number }> {
  const started = Date.now();
  let problems: ResourceProblem[];
  const checked = new Map<string, boolean>();
  let lastReport = 0;
  for (;;) {
    try {
      problems = await unsettled(env, live, deleted, checked);
    } catch (error) {
      problems = [{ resource: '(apiserver)', problem: error instanceof Error ? error.message : String(error) }];
    }
    if (problems.length === 0 || Date.now() - started > deadlineMs) break;
    if (Date.now() - lastReport > 10_000) {
      lastReport = Date.now();
      log(`converging: ${problems.length} resource(s) not settled yet, e.g. ${problems[0]?.resource}: ${problems[0]?.problem}`);
    }
    // A key revoked a moment ago is only noticed by the next drift interval: look again.
    checked.clear();
    await sleep(1_000);
  }
  return { problems, seconds: (Date.now() - started) / 1000 };
}

export interface KeyAudit {
  /** Live keys of operator attempts that no existing resource records (or a second live key of one). */
  orphans: string[];
  /** Live keys whose resource was deleted (deletionPolicy Revoke). */
  unrevokedAfterDelete: string[];
  /** Resources whose recorded key is not live on the platform. */
  lostSecrets: string[];
  /** Live keys a resource records as retiring (replaced by a rotation, in their grace): allowed, one per resource. */
  inGrace: number;
  /**
   * Live keys of operator attempts that their resource records neither as its key (status.keyId)
   * nor as retiring (status.retiringKeys), a deleted resource's included: every key the operator
   * issued is recorded or revoked (issue 24).
   */
  unrecorded: string[];
  attemptKeys: number;
  revokedAttemptKeys: number;
}

export async function auditKeys(env: Environment, live: Incarnation[], deleted: Incarnation[]): Promise<KeyAudit> {
  const keys = await admin<AdminKey[]>(env.emulator, 'GET', '/keys');
  const byKeyName = new Map<string, Incarnation>(live.map((i) => [i.keyName, i]));
  const deletedNames = new Set(deleted.map((i) => i.keyName));
  const recorded = new Map<string, number | undefined>();
  const retiring = new Map<string, number[]>();
  for (const inc of live) {
    const status = (await getResource(env, inc))?.status;
    recorded.set(inc.keyName, status?.keyId);
    retiring.set(
      inc.keyName,
      [...(status?.retiringKeys ?? []), ...(status?.replacedKeys ?? [])].map((k) => k.keyId),
    );
  }
  const audit: KeyAudit = { orphans: [], unrevokedAfterDelete: [], lostSecrets: [], inGrace: 0, unrecorded: [], attemptKeys: 0, revokedAttemptKeys: 0 };
  for (const key of keys) {
    const match = ATTEMPT.exec(key.name);
    if (match === null) continue;
    audit.attemptKeys += 1;
    if (key.revoked) {
      audit.revokedAttemptKeys += 1;
      continue;
    }
    const keyName = match[1] ?? '';
    const owner = byKeyName.get(keyName);
    const graced = retiring.get(keyName) ?? [];
    if (owner === undefined || (recorded.get(keyName) !== key.id && !graced.includes(key.id))) {
      audit.unrecorded.push(
        `key ${key.id} (${key.name}) live, recorded by no resource (${owner === undefined ? 'none of that name exists' : `it records ${String(recorded.get(keyName))}, retiring [${graced.join(', ')}]`})`,
      );
    }
    if (deletedNames.has(keyName)) {
      audit.unrevokedAfterDelete.push(`key ${key.id} (${key.name})`);
      continue;
    }
    if (owner !== undefined && recorded.get(keyName) !== key.id && graced.length === 1 && graced[0] === key.id) {
      audit.inGrace += 1;
      continue;
    }
    if (owner === undefined || recorded.get(keyName) !== key.id)
      audit.orphans.push(`key ${key.id} (${key.name}), resource records ${owner === undefined ? 'nothing' : String(recorded.get(keyName))}`);
  }
  const liveIds = new Set(keys.filter((k) => !k.revoked).map((k) => k.id));
  for (const inc of live) {
    const keyId = recorded.get(inc.keyName);
    if (keyId === undefined || !liveIds.has(keyId)) audit.lostSecrets.push(`${inc.kind}/${inc.name} records key ${String(keyId)}, not live`);
  }
  return audit;
}

export interface LeakAudit {
  secretsKnown: number;
  leaked: string[];
  logLines: number;
  events: number;
  expositions: number;
}

/** Every secret value ever seen, searched for in every log line, event, status and metrics exposition. */
export async function auditLeaks(env: Environment, secrets: Set<string>, logFile: string, expositions: string[]): Promise<LeakAudit> {
  const logs = readFileSync(logFile, 'utf8');
  const events = (await env.core.listNamespacedEvent({ namespace: NAMESPACE })).items;
  const eventText = JSON.stringify(events);
  const statuses = JSON.stringify([
    ...((await env.objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'apikeys' })) as { items: unknown[] })
      .items,
    ...(
      (await env.objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NAMESPACE, plural: 'projectapikeys' })) as { items: unknown[] }
    ).items,
  ]);
  const metrics = expositions.join('\n');
  const leaked: string[] = [];
  for (const secret of secrets) {
    const where = [
      ['log', logs],
      ['events', eventText],
      ['status', statuses],
      ['metrics', metrics],
    ]
      .filter(([, text]) => text?.includes(secret))
      .map(([w]) => w);
    if (where.length > 0) leaked.push(`${secret.slice(0, 4)}… in ${where.join(', ')}`);
  }
  return { secretsKnown: secrets.size, leaked, logLines: logs.split('\n').length, events: events.length, expositions: expositions.length };
}

export async function platformRequests(env: Environment): Promise<{ total: number; byStatus: Record<string, number>; byRoute: Record<string, number> }> {
  const rows = await admin<{ method: string; route: string; status: number; count: number }[]>(env.emulator, 'GET', '/requests');
  const byStatus: Record<string, number> = {};
  const byRoute: Record<string, number> = {};
  let total = 0;
  for (const r of rows) {
    total += r.count;
    byStatus[String(r.status)] = (byStatus[String(r.status)] ?? 0) + r.count;
    const route = `${r.method} ${r.route}`;
    byRoute[route] = (byRoute[route] ?? 0) + r.count;
  }
  return { total, byStatus, byRoute };
}
