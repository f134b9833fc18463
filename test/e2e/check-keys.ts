// The e2e's invariants on keys, from the emulator's admin view of every key (GET /admin/keys) and
// the cluster's objects. Prints counts and key ids, never a key's secret.
//
//   node check-keys.ts samples <keyName prefix> <samples.jsonl>
//     every snapshot (one JSON array of /admin/keys a line): no resource ever had two live keys
//   node check-keys.ts final <keyName prefix> <admin-keys.json> <resources.json> <secrets.json> <platform api url>
//     every resource Ready with exactly one live key, the one in its status; its Secret holds that
//     key (annotation and a secret that authenticates); no live key of the prefix is unrecorded
import { readFileSync } from 'node:fs';

/** An entry of the emulator's GET /admin/keys. */
interface PlatformKey {
  id: number | string;
  name: string;
  revoked: boolean;
}
interface Resource {
  metadata: { namespace: string; name: string };
  spec: { keyName: string; projectId: string; secret?: { name?: string; key?: string } };
  status?: { keyId?: number | string; conditions?: { type: string; status: string; reason?: string }[] };
}
interface Secret {
  metadata: { namespace: string; name: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
}

const [mode, prefix = '', ...files] = process.argv.slice(2);
const problems: string[] = [];
const read = <T>(file: string | undefined): T => JSON.parse(readFileSync(file ?? '', 'utf8')) as T;
// An attempt's key name is `<spec.keyName>-<8 characters>` (docs/design.md section 3.1).
const baseOf = (name: string): string => name.replace(/-[a-z0-9]{8}$/, '');
const liveByBase = (keys: PlatformKey[]): Map<string, PlatformKey[]> => {
  const map = new Map<string, PlatformKey[]>();
  for (const k of keys) {
    if (k.revoked || !k.name.startsWith(prefix)) continue;
    const base = baseOf(k.name);
    map.set(base, [...(map.get(base) ?? []), k]);
  }
  return map;
};

if (mode === 'samples') {
  const lines = readFileSync(files[0] ?? '', 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  let most = 0;
  for (const [i, line] of lines.entries()) {
    for (const [base, live] of liveByBase(JSON.parse(line) as PlatformKey[])) {
      most = Math.max(most, live.length);
      if (live.length > 1) problems.push(`snapshot ${i}: ${base} has ${live.length} live keys (${live.map((k) => k.id).join(', ')})`);
    }
  }
  console.log(`${lines.length} snapshots of the platform's keys; at most ${most} live key(s) per resource at once`);
} else if (mode === 'final') {
  const [keysFile, resourcesFile, secretsFile, api] = files;
  const keys = read<PlatformKey[]>(keysFile);
  const resources = read<{ items: Resource[] }>(resourcesFile).items.filter((r) => r.spec.keyName.startsWith(prefix));
  const secrets = new Map(read<{ items: Secret[] }>(secretsFile).items.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s]));
  const live = liveByBase(keys);
  const recorded = new Set<string>();
  const checks: { id: string; value: string; project: string }[] = [];
  for (const r of resources) {
    const id = `${r.metadata.namespace}/${r.metadata.name}`;
    const ready = r.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'True') problems.push(`${id} is not Ready (${ready?.reason ?? 'no condition'})`);
    const keyId = r.status?.keyId === undefined ? undefined : String(r.status.keyId);
    if (keyId === undefined) {
      problems.push(`${id} records no key`);
      continue;
    }
    recorded.add(keyId);
    const mine = live.get(r.spec.keyName) ?? [];
    if (mine.length !== 1 || String(mine[0]?.id) !== keyId) {
      problems.push(`${id}: live keys ${JSON.stringify(mine.map((k) => k.id))}, status records ${keyId}`);
    }
    const secretName = r.spec.secret?.name ?? r.metadata.name;
    const secret = secrets.get(`${r.metadata.namespace}/${secretName}`);
    if (secret === undefined) {
      problems.push(`${id}: Secret ${secretName} is lost`);
      continue;
    }
    if (secret.metadata.annotations?.['keys.neon.dev/key-id'] !== keyId) problems.push(`${id}: Secret ${secretName} records another key`);
    const value = Buffer.from(secret.data?.[r.spec.secret?.key ?? 'apiKey'] ?? '', 'base64').toString();
    if (value.length !== 64) {
      problems.push(`${id}: Secret ${secretName} holds no key`);
      continue;
    }
    checks.push({ id, value, project: r.spec.projectId });
  }
  for (const [base, keysOfBase] of live) {
    for (const k of keysOfBase) if (!recorded.has(String(k.id))) problems.push(`orphan: live key ${k.id} (${base}) recorded by no resource`);
  }
  // Every Secret's key authenticates on the platform: a few requests at a time.
  let works = 0;
  const queue = [...checks];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
        const res = await fetch(`${api}/projects/${c.project}`, { headers: { authorization: `Bearer ${c.value}` } });
        await res.arrayBuffer();
        if (res.status === 200) works += 1;
        else problems.push(`${c.id}: the key in its Secret gets HTTP ${res.status}`);
      }
    }),
  );
  console.log(`${resources.length} resources, ${[...live.values()].flat().length} live keys, ${works} Secrets whose key works, ${problems.length} problems`);
} else {
  console.error('usage: check-keys.ts samples|final ...');
  process.exit(2);
}
for (const p of problems.slice(0, 30)) console.error(`  ${p}`);
if (problems.length > 0) process.exit(1);
