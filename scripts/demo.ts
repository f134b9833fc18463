// `npm run demo`: the whole product on a laptop, on embedded defaults. It starts a local Kubernetes
// control plane (built from Go modules), the platform emulator, installs the CRDs and the RBAC from
// deploy/base, runs the operator as a separate process with the token of its ServiceAccount (so it
// has exactly the rights a cluster install grants), applies examples/, waits for Ready and shows
// what a user wants to see: a team's key through the platform team's ClusterKeyIssuer, then the
// tour of a key's life. It then keeps running until Ctrl-C; `--once` exits after the tour.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import { startEmulator } from '../src/emulator/server.ts';
import { CRD_FILES, renderCrdYaml, type CrdKind } from '../src/operator/resources/crd.ts';
import { kubeconfigYaml, startControlPlane } from '../test/harness/controlplane.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values: flags } = parseArgs({
  options: {
    once: { type: 'boolean', default: false },
    timeout: { type: 'string', default: '120' },
  },
});

const demoNamespace = 'neon-demo';
/** A team of the issuer of examples/platform-team: a namespace with no platform credential, and a member bound to `edit` there. */
const teamNamespace = 'team-a';
const teamMember = 'team-a-developer';
const operatorNamespace = 'neon-key-operator-system';
const operatorServiceAccount = 'neon-key-operator';
/** The floor of spec.rotation.gracePeriod in this demo (1m in a cluster install): the tour rotates with a 5 s grace. */
const DEMO_MIN_GRACE = '1s';
const workDir = join(root, '.cache', 'demo');
mkdirSync(workDir, { recursive: true });

const step = (text: string): void => console.log(`\n\u001b[1m==> ${text}\u001b[0m`);

step('Building (or reusing) the local control plane: kube-apiserver, etcd, kubectl');
const binDir = execFileSync('bash', [join(root, 'test/controlplane/build.sh')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
}).trim();

step('Starting etcd, kube-apiserver and kube-controller-manager on loopback');
const controlPlane = await startControlPlane({ binDir });
const kubeconfig = controlPlane.info.kubeconfigPath;
// kubectl runs asynchronously: the emulator serves from this process, so a blocking call (such as
// `kubectl wait`) would stall the platform the operator is talking to.
const kubectlIn = (input: string | undefined, ...args: string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = execFile(join(binDir, 'kubectl'), args, { encoding: 'utf8', env: { ...process.env, KUBECONFIG: kubeconfig } }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`kubectl ${args[0]}: ${stderr.trim() || error.message}`)),
    );
    child.stdin?.end(input);
  });
const kubectl = (...args: string[]): Promise<string> => kubectlIn(undefined, ...args);
console.log(`apiserver ${controlPlane.info.server}`);

step('Starting the platform emulator');
// Operations run 4 times slower than the platform's usual timings, so the tour can show one in progress.
const emulator = await startEmulator({ db: ':memory:', timeScale: 4 });
const admin = emulator.bootstrap.users.find((u) => Object.values(u.orgRoles ?? {}).includes('admin') && u.personalKey !== undefined);
if (admin === undefined || admin.personalKey === undefined) throw new Error('the emulator seed has no organization administrator');
console.log(`platform API ${emulator.baseUrl}  (console: ${emulator.baseUrl.replace(/\/api\/v2$/, '')}/console)`);

let operator: ChildProcess | undefined;
let shuttingDown = false;
const shutdown = async (code: number): Promise<never> => {
  if (!shuttingDown) {
    shuttingDown = true;
    if (operator !== undefined && operator.exitCode === null) {
      operator.kill('SIGTERM');
      await once(operator, 'exit');
    }
    await emulator.close();
    await controlPlane.stop();
  }
  process.exit(code);
};
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  step('Installing the CRDs and the operator RBAC (deploy/base)');
  // crds/ with the gracePeriod floor lowered to 1s (the operator below runs with the same
  // --min-rotation-grace), so the tour's rotation ends in seconds; a cluster install keeps 1m.
  const crds = (Object.keys(CRD_FILES) as CrdKind[]).map((kind) => renderCrdYaml(kind, { minRotationGrace: DEMO_MIN_GRACE })).join('\n');
  console.log((await kubectlIn(crds, 'apply', '--server-side', '-f', '-')).trim());
  await kubectl(
    'wait',
    '--for=condition=Established',
    ...Object.values(CRD_FILES).map((file) => `crd/${file.replace(/^keys\.neon\.dev_(.*)\.yaml$/, '$1.keys.neon.dev')}`),
  );
  // Only the identity and RBAC of deploy/base: this control plane has no nodes to run the Deployment.
  const base = loadAllYaml(await kubectl('kustomize', join(root, 'deploy/base'))) as { kind: string }[];
  const rbacKinds = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);
  const rbac = base
    .filter((o) => rbacKinds.has(o.kind))
    .map((o) => JSON.stringify(o))
    .join('\n');
  console.log((await kubectlIn(rbac, 'apply', '--server-side', '-f', '-')).trim());

  step(`Running the operator as ServiceAccount ${operatorNamespace}/${operatorServiceAccount}`);
  const token = (await kubectl('create', 'token', operatorServiceAccount, '-n', operatorNamespace, '--duration=24h')).trim();
  const operatorKubeconfig = join(workDir, 'operator.kubeconfig');
  writeFileSync(operatorKubeconfig, kubeconfigYaml(controlPlane.info, token, operatorServiceAccount), { mode: 0o600 });
  const operatorLog = join(workDir, 'operator.log');
  operator = spawn(
    process.execPath,
    [
      join(root, 'src/operator/main.ts'),
      `--kubeconfig=${operatorKubeconfig}`,
      `--platform-url=${emulator.baseUrl}`,
      '--metrics-bind-address=127.0.0.1:0',
      '--health-probe-bind-address=127.0.0.1:0',
      // Drift checked every 10 s (default 5m), so the tour's project operations are polled at that pace too.
      '--drift-interval=10s',
      `--min-rotation-grace=${DEMO_MIN_GRACE}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const log = createWriteStream(operatorLog);
  operator.stdout?.pipe(log);
  operator.stderr?.pipe(log);
  operator.once('exit', (code, signal) => {
    if (!shuttingDown) {
      console.error(`the operator exited (${code ?? signal}); its log: ${operatorLog}`);
      void shutdown(1);
    }
  });
  console.log(`operator pid ${operator.pid}, JSON logs in ${operatorLog}`);

  // The commands of examples/README.md (and the chart's NOTES), with the emulator's administrator's
  // personal key as the credentials: first the platform team's part, then the teams'.
  step("The platform team: an administrator's key in the operator's namespace, the ClusterKeyIssuer (examples/platform-team)");
  await kubectl('create', 'secret', 'generic', 'neon-org-admin', '-n', operatorNamespace, `--from-literal=apiKey=${admin.personalKey}`);
  console.log(
    `secret/neon-org-admin created in ${operatorNamespace} (the personal key of ${admin.name}, an administrator of ${Object.keys(admin.orgRoles ?? {}).join(', ')})`,
  );
  console.log((await kubectl('apply', '-k', join(root, 'examples/platform-team'))).trim());
  await kubectl('wait', '--for=condition=Ready', 'clusterkeyissuer/team-keys', `--timeout=${flags.timeout}s`);
  console.log((await kubectl('get', 'clusterkeyissuers', '-o', 'wide')).trimEnd());
  console.log((await kubectl('create', 'namespace', demoNamespace)).trim());
  console.log((await kubectl('label', 'namespace', demoNamespace, 'keys.neon.dev/issuer=team-keys')).trim());

  step(`A team's keys: kubectl -n ${demoNamespace} apply -k examples/ (through the issuer), then its own credential's`);
  console.log((await kubectl('apply', '-n', demoNamespace, '-k', join(root, 'examples'))).trim());
  console.log((await kubectl('apply', '-n', demoNamespace, '-f', join(root, 'examples/rotation.yaml'))).trim());
  await kubectl('create', 'secret', 'generic', 'neon-admin', '-n', demoNamespace, `--from-literal=apiKey=${admin.personalKey}`);
  console.log(`secret/neon-admin created in ${demoNamespace} (the same administrator's key, for the namespace's own keys and the inventory)`);
  console.log((await kubectl('apply', '-n', demoNamespace, '-k', join(root, 'examples/namespace-credentials'))).trim());

  step('Waiting until every key is Ready');
  console.log((await kubectl('wait', '-n', demoNamespace, '--for=condition=Ready', 'apikeys,projectapikeys', '--all', `--timeout=${flags.timeout}s`)).trim());
  console.log(await kubectl('get', '-n', demoNamespace, 'neon', '-o', 'wide'));

  step('Conditions');
  for (const kind of ['apikeys', 'projectapikeys']) {
    const list = JSON.parse(await kubectl('get', kind, '-n', demoNamespace, '-o', 'json')) as {
      items: {
        kind: string;
        metadata: { name: string };
        status?: { keyId?: number; secretName?: string; conditions?: { type: string; status: string; reason: string; message: string }[] };
      }[];
    };
    for (const item of list.items) {
      console.log(`${item.kind}/${item.metadata.name}  key ${item.status?.keyId}  Secret ${item.status?.secretName}`);
      for (const c of item.status?.conditions ?? []) console.log(`  ${c.type.padEnd(18)} ${c.status.padEnd(6)} ${c.reason.padEnd(16)} ${c.message}`);
    }
  }

  step('The Secrets, and each key working against the platform');
  for (const kind of ['apikeys', 'projectapikeys']) {
    const list = JSON.parse(await kubectl('get', kind, '-n', demoNamespace, '-o', 'json')) as {
      items: { spec: { secret?: { key?: string } }; status?: { secretName?: string } }[];
    };
    for (const item of list.items) {
      // The data key holding the key itself (spec.secret.key); a template adds others beside it.
      const field = item.spec.secret?.key ?? 'apiKey';
      const out = await kubectl('get', 'secret', item.status?.secretName ?? '', '-n', demoNamespace, '-o', 'json');
      const secret = JSON.parse(out) as { metadata: { name: string; annotations?: Record<string, string> }; data?: Record<string, string> };
      const key = Buffer.from(secret.data?.[field] ?? '', 'base64').toString('utf8');
      const response = await fetch(`${emulator.baseUrl}/projects`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await response.json()) as { projects?: unknown[] };
      const others = Object.keys(secret.data ?? {}).filter((k) => k !== field);
      console.log(
        `Secret ${secret.metadata.name} key "${field}" (key id ${secret.metadata.annotations?.['keys.neon.dev/key-id']}): ` +
          `GET /projects -> ${response.status}, ${body.projects?.length ?? 0} project(s) visible${others.length > 0 ? `; beside it: ${others.join(', ')}` : ''}`,
      );
    }
  }

  await tourIssuer();
  await tourInventory();
  await tourOperations();
  await tourSecretRepair();
  await tourRotation();
  await tourDelete();

  if (flags.once) await shutdown(0);
  // (the inventory stays: `kubectl get naki -n neon-demo` follows the keys as they come and go)
  console.log(`\nTry it:  export KUBECONFIG=${kubeconfig}`);
  console.log(`         ${join(binDir, 'kubectl')} get neon -A`);
  console.log(`         ${join(binDir, 'kubectl')} describe projectapikeys -n ${demoNamespace}`);
  console.log(`         the platform's console: ${emulator.baseUrl.replace(/\/api\/v2$/, '')}/console`);
  console.log('\nRunning; Ctrl-C stops the operator, the emulator and the control plane.');
} catch (error) {
  console.error(`demo failed: ${error instanceof Error ? error.message : String(error)}`);
  await shutdown(1);
}

// The tour: what the operator does over a key's life, each step shown with what a user would look
// at (conditions, events, the platform's own record of the key).

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface KeyObject {
  kind: string;
  metadata: { name: string };
  spec: { projectId?: string };
  status?: { keyId?: number; secretName?: string; conditions?: Condition[]; operations?: { id: string; action: string; status: string }[] };
}

function getKey(kind: 'apikeys' | 'projectapikeys', name: string, namespace = demoNamespace): Promise<KeyObject> {
  return kubectl('get', kind, name, '-n', namespace, '-o', 'json').then((out) => JSON.parse(out) as KeyObject);
}

function conditionOf(o: KeyObject, type: string): Condition | undefined {
  return o.status?.conditions?.find((c) => c.type === type);
}

/** Samples `probe` until it returns a value (or the demo's --timeout passes). */
async function until<T>(what: string, probe: () => Promise<T | undefined>, everyMs = 500): Promise<T> {
  const deadline = Date.now() + Number(flags.timeout) * 1000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${flags.timeout}s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** The platform's own record of every key (the emulator's admin API; the real console shows the same). */
async function platformKeys(): Promise<Map<number, { name: string; revoked: boolean }>> {
  const response = await fetch(`${emulator.baseUrl.replace(/\/api\/v2$/, '')}/admin/keys`);
  const keys = (await response.json()) as { id: number; name: string; revoked: boolean }[];
  return new Map(keys.map((k) => [k.id, k]));
}

/** The key a Secret holds; `as` reads it as that user (impersonation), as a team member would. */
async function secretValue(name: string, namespace = demoNamespace, ...as: string[]): Promise<string | undefined> {
  const out = await kubectl('get', 'secret', name, '-n', namespace, '-o', 'json', ...as).catch(() => undefined);
  if (out === undefined) return undefined;
  const encoded = (JSON.parse(out) as { data?: Record<string, string> }).data?.apiKey;
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}

async function eventsOf(name: string, namespace = demoNamespace): Promise<string> {
  return (
    await kubectl(
      'get',
      'events',
      '-n',
      namespace,
      '--field-selector',
      `involvedObject.name=${name}`,
      '--sort-by=.lastTimestamp',
      '-o',
      'custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message',
    )
  ).trimEnd();
}

async function tourOperations(): Promise<void> {
  step('An operation of the project, mirrored into the ProjectApiKey (OperationsSettled)');
  const before = await getKey('projectapikeys', 'app-neon');
  const projectId = before.spec.projectId ?? '';
  const key = await secretValue(before.status?.secretName ?? 'app-neon');
  if (key === undefined) throw new Error('Secret app-neon has no key');
  // A team's workload creating a branch with its project key (the key never leaves this process).
  const response = await fetch(`${emulator.baseUrl}/projects/${projectId}/branches`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ branch: { name: 'demo-feature' }, endpoints: [{ type: 'read_write' }] }),
  });
  const created = (await response.json()) as { operations?: { id: string; action: string; status: string }[] };
  const ids = (created.operations ?? []).map((o) => o.id);
  console.log(
    `POST /projects/${projectId}/branches with the Secret's key -> ${response.status}; operations: ` +
      (created.operations ?? []).map((o) => `${o.action} (${o.status})`).join(', '),
  );
  console.log("OperationsSettled of projectapikey/app-neon as it changes (the operator polls the project's operations):");
  const started = Date.now();
  let last = '';
  const done = await until("the branch's operations mirrored as finished", async () => {
    const o = await getKey('projectapikeys', 'app-neon');
    const c = conditionOf(o, 'OperationsSettled');
    const line = c === undefined ? '(not reported yet)' : `${c.status.padEnd(7)} ${c.reason.padEnd(20)} ${c.message}`;
    if (line !== last) {
      console.log(`  +${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s  ${line}`);
      last = line;
    }
    const finished = ids.every((id) => o.status?.operations?.some((op) => op.id === id && op.status === 'finished'));
    return finished && c?.status === 'True' ? o : undefined;
  });
  for (const op of done.status?.operations?.filter((x) => ids.includes(x.id)) ?? []) console.log(`  status.operations: ${op.action} ${op.status}`);
}

async function tourSecretRepair(): Promise<void> {
  step('Drift: a deleted Secret is repaired (a new key; the old one, whose secret is lost, is revoked)');
  const before = await getKey('apikeys', 'ci-deployer');
  const oldId = before.status?.keyId;
  const secretName = before.status?.secretName ?? 'ci-deployer-neon';
  console.log((await kubectl('delete', 'secret', secretName, '-n', demoNamespace)).trim());
  const after = await until('a new key in a new Secret', async () => {
    const o = await getKey('apikeys', 'ci-deployer');
    return o.status?.keyId !== undefined && o.status.keyId !== oldId && conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
  });
  await until(`key ${oldId} revoked`, async () => ((await platformKeys()).get(oldId ?? -1)?.revoked === true ? true : undefined));
  const key = await secretValue(secretName);
  const check = await fetch(`${emulator.baseUrl}/projects`, { headers: { authorization: `Bearer ${key ?? ''}` } });
  console.log(
    `Secret ${secretName} is back with key ${after.status?.keyId} (GET /projects with it -> ${check.status}); ` + `the platform says key ${oldId} is revoked`,
  );
  console.log(await eventsOf('ci-deployer'));
}

async function tourDelete(): Promise<void> {
  step('Deleting a resource revokes its key (the finalizer holds the delete until the platform confirmed)');
  const before = await getKey('projectapikeys', 'app-neon');
  const keyId = before.status?.keyId;
  console.log((await kubectl('delete', 'projectapikey', 'app-neon', '-n', demoNamespace, '--wait=true', `--timeout=${flags.timeout}s`)).trim());
  const record = (await platformKeys()).get(keyId ?? -1);
  if (record?.revoked !== true) throw new Error(`key ${keyId} is still live on the platform after its resource was deleted`);
  console.log(`the platform says key ${keyId} (${record.name}) is revoked`);
  await until('Secret app-neon collected', async () => ((await secretValue('app-neon')) === undefined ? true : undefined));
  console.log('Secret app-neon is gone with it (owner reference)');
  if (!flags.once) {
    // Left running for a person to explore: the example again.
    console.log((await kubectlIn(readFileSync(join(root, 'examples', 'projectapikey.yaml'), 'utf8'), 'apply', '-n', demoNamespace, '-f', '-')).trim());
  }
}

async function tourRotation(): Promise<void> {
  step('Rotation without downtime: a new key, its consumer restarted, the old key revoked after the grace');
  // A consumer of Secret app-neon. This control plane has no node, so it runs no pods: 0 replicas,
  // whose rollout completes once the deployment controller saw the new template (npm run e2e shows
  // the same with running pods). The calls are made here instead, each with the key the Secret
  // holds at that moment, as a pod that re-reads its mounted Secret would.
  await kubectlIn(
    JSON.stringify({
      // Its owner consents to restarts when Secret app-neon rotates: without the annotation, no rotation touches it.
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'demo-consumer', namespace: demoNamespace, annotations: { 'keys.neon.dev/restart-on-rotation': 'app-neon' } },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'demo-consumer' } },
        template: {
          metadata: { labels: { app: 'demo-consumer' } },
          spec: {
            containers: [
              { name: 'app', image: 'demo-consumer:none', env: [{ name: 'NEON_API_KEY', valueFrom: { secretKeyRef: { name: 'app-neon', key: 'apiKey' } } }] },
            ],
          },
        },
      },
    }),
    'apply',
    '-f',
    '-',
  );
  const rotation = { gracePeriod: '5s', maxGracePeriod: '2m', restart: { discover: true } };
  await kubectl('patch', 'projectapikey', 'app-neon', '-n', demoNamespace, '--type=merge', '-p', JSON.stringify({ spec: { rotation } }));
  console.log(`deployment/demo-consumer takes NEON_API_KEY from Secret app-neon; projectapikey/app-neon spec.rotation: ${JSON.stringify(rotation)}`);
  const before = await getKey('projectapikeys', 'app-neon');
  const oldId = before.status?.keyId;

  const calls = { total: 0, byStatus: new Map<number, number>() };
  let consuming = true;
  const consumer = (async () => {
    while (consuming) {
      const key = await secretValue('app-neon');
      if (key !== undefined) {
        const response = await fetch(`${emulator.baseUrl}/projects/${before.spec.projectId ?? ''}`, { headers: { authorization: `Bearer ${key}` } });
        await response.arrayBuffer();
        calls.total += 1;
        calls.byStatus.set(response.status, (calls.byStatus.get(response.status) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();

  const token = String(Date.now());
  console.log(`$ kubectl annotate projectapikey app-neon keys.neon.dev/rotate=${token}`);
  await kubectl('annotate', 'projectapikey', 'app-neon', '-n', demoNamespace, `keys.neon.dev/rotate=${token}`, '--overwrite');
  const started = Date.now();
  let last = '';
  const settled = await until('the rotation to complete (Rotating False)', async () => {
    const o = (await getKey('projectapikeys', 'app-neon')) as KeyObject & { status?: { retiringKeys?: { keyId: number }[] } };
    const c = conditionOf(o, 'Rotating');
    const line =
      `key ${o.status?.keyId}${(o.status?.retiringKeys ?? []).map((k) => `, retiring ${k.keyId}`).join('')}; ` +
      (c === undefined ? 'Rotating (not reported yet)' : `Rotating ${c.status} ${c.reason}: ${c.message}`);
    if (line !== last) {
      console.log(`  +${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s  ${line}`);
      last = line;
    }
    return c?.status === 'False' && c.reason === 'RotationComplete' && o.status?.keyId !== oldId ? o : undefined;
  });
  consuming = false;
  await consumer;
  const record = (await platformKeys()).get(oldId ?? -1);
  if (record?.revoked !== true) throw new Error(`the rotation completed but key ${oldId} is still live on the platform`);
  const failed = [...calls.byStatus].filter(([status]) => status !== 200).reduce((n, [, count]) => n + count, 0);
  const template = JSON.parse(
    (await kubectl('get', 'deployment', 'demo-consumer', '-n', demoNamespace, '-o', 'jsonpath={.spec.template.metadata.annotations}')) || '{}',
  ) as Record<string, string>;
  console.log(`key ${settled.status?.keyId} is in the Secret; key ${oldId} is revoked; deployment/demo-consumer's pod template: ${JSON.stringify(template)}`);
  console.log(
    `the consumer made ${calls.total} calls through the rotation, ${failed} failed (${[...calls.byStatus].map(([status, count]) => `${count} x ${status}`).join(', ')})`,
  );
  if (failed > 0) throw new Error(`${failed} of the consumer's calls failed during the rotation`);
  console.log(await eventsOf('app-neon'));
}

/**
 * A team without a platform credential (docs/issuers.md). The platform team keeps an
 * administrator's personal key in the operator's namespace and the ClusterKeyIssuer of
 * examples/platform-team, which allows the namespaces it labels; a member of the team, bound to the
 * built-in `edit` role in its namespace and to nothing else, applies the team's examples there
 * (kubectl -n team-a apply -k examples/). A project the issuer does not allow is refused before any
 * platform request.
 */
async function tourIssuer(): Promise<void> {
  step(`A team without a platform credential: keys for namespace ${teamNamespace} through the ClusterKeyIssuer`);
  const asMember = ['--as', teamMember];
  // The platform team: the team's namespace, labelled so that the issuer allows it.
  console.log((await kubectl('create', 'namespace', teamNamespace)).trim());
  console.log((await kubectl('label', 'namespace', teamNamespace, 'keys.neon.dev/issuer=team-keys')).trim());

  // The team: one member, bound to `edit` in its namespace (which takes in the operator's tenant role).
  await kubectl('create', 'rolebinding', 'developers-edit', '--clusterrole=edit', `--user=${teamMember}`, '-n', teamNamespace);
  // `kubectl auth can-i` answers "no" with exit status 1.
  const canI = (...args: string[]): Promise<string> =>
    kubectl('auth', 'can-i', ...args, ...asMember).then(
      (out) => out.trim(),
      () => 'no',
    );
  await until(`edit to grant projectapikeys in ${teamNamespace}`, async () =>
    (await canI('create', 'projectapikeys', '-n', teamNamespace)) === 'yes' ? true : undefined,
  );
  const secretsBefore = (await kubectl('get', 'secrets', '-n', teamNamespace, '-o', 'name')).trim();
  console.log(
    `${teamMember}, with edit in ${teamNamespace}: create projectapikeys yes; ` +
      `get secret/neon-org-admin -n ${operatorNamespace} ${await canI('get', 'secret/neon-org-admin', '-n', operatorNamespace)}; ` +
      `label namespace/${teamNamespace} ${await canI('patch', `namespace/${teamNamespace}`)}; ` +
      `Secrets in ${teamNamespace}: ${secretsBefore === '' ? 'none' : secretsBefore.replace(/\n/g, ', ')}`,
  );
  console.log(`$ kubectl -n ${teamNamespace} apply -k examples/ --as ${teamMember}`);
  console.log((await kubectl('apply', '-n', teamNamespace, '-k', join(root, 'examples'), ...asMember)).trim());
  await kubectl('wait', '-n', teamNamespace, '--for=condition=Ready', 'projectapikeys', '--all', `--timeout=${flags.timeout}s`);
  console.log((await kubectl('get', 'neon', '-n', teamNamespace, '-o', 'wide')).trimEnd());
  const issued = await getKey('projectapikeys', 'app-neon', teamNamespace);
  for (const c of issued.status?.conditions ?? []) console.log(`  app-neon ${c.type.padEnd(18)} ${c.status.padEnd(6)} ${c.reason.padEnd(16)} ${c.message}`);
  // The member reads its own key's Secret (edit may), and uses it; it never leaves this process.
  const key = await secretValue(issued.status?.secretName ?? 'app-neon', teamNamespace, ...asMember);
  if (key === undefined) throw new Error(`${teamMember} cannot read Secret app-neon`);
  const projectId = issued.spec.projectId ?? '';
  const own = await fetch(`${emulator.baseUrl}/projects/${projectId}`, { headers: { authorization: `Bearer ${key}` } });
  await own.arrayBuffer();
  if (own.status !== 200) throw new Error(`GET /projects/${projectId} with the team's key -> ${own.status}`);
  console.log(`${teamMember} reads Secret app-neon; GET /projects/${projectId} with its key -> ${own.status}`);

  // A project the issuer does not allow: refused (NotAllowed), and nothing asked of the platform.
  const otherProject = 'bold-meadow-00000002';
  const creates = async (): Promise<number> =>
    ((await (await fetch(`${emulator.adminUrl}/requests`)).json()) as { method: string; route: string; count: number }[])
      .filter((r) => r.method === 'POST' && r.route.endsWith('/api_keys'))
      .reduce((n, r) => n + r.count, 0);
  const createsBefore = await creates();
  console.log(`$ kubectl apply --as ${teamMember}: projectapikey/web-db for project ${otherProject}, issuerRef team-keys`);
  await kubectlIn(
    JSON.stringify({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ProjectApiKey',
      metadata: { name: 'web-db', namespace: teamNamespace },
      spec: { projectId: otherProject, issuerRef: { name: 'team-keys' } },
    }),
    'apply',
    '-f',
    '-',
    ...asMember,
  );
  const refused = await until('projectapikey/web-db refused', async () => {
    const c = conditionOf(await getKey('projectapikeys', 'web-db', teamNamespace), 'Ready');
    return c?.reason === 'NotAllowed' ? c : undefined;
  });
  console.log(`projectapikey/web-db  Ready ${refused.status} ${refused.reason}: ${refused.message}`);
  console.log(
    await until('the Warning event of web-db', async () => {
      const events = await eventsOf('web-db', teamNamespace);
      return events.includes('NotAllowed') ? events : undefined;
    }),
  );
  const createsAfter = await creates();
  if (createsAfter !== createsBefore) throw new Error(`${createsAfter - createsBefore} key create(s) on the platform for a refused request`);
  console.log(`key creates on the platform: ${createsBefore} before, ${createsAfter} after (none for web-db)`);
}

/**
 * An ApiKeyInventory of the organization (docs/inventory.md): the keys the examples made, and one
 * made by hand, as a person would in the console, which no resource manages. Report only.
 */
async function tourInventory(): Promise<void> {
  step('An inventory of the organization: the keys above, and one made by hand in the console');
  const orgId = Object.keys(admin?.orgRoles ?? {})[0] ?? 'org-demo-00000001';
  // A key made outside the operator: the administrator's own POST /organizations/{org_id}/api_keys.
  const response = await fetch(`${emulator.baseUrl}/organizations/${orgId}/api_keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin?.personalKey ?? ''}`, 'content-type': 'application/json' },
    body: JSON.stringify({ key_name: 'made-by-hand' }),
  });
  const byHand = (await response.json()) as { id: number };
  console.log(`POST /organizations/${orgId}/api_keys (key_name made-by-hand) -> ${response.status}, key id ${byHand.id}: no resource records it`);
  await kubectlIn(
    JSON.stringify({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKeyInventory',
      metadata: { name: 'demo-org', namespace: demoNamespace },
      spec: { organizationId: orgId, credentialsSecretRef: { name: 'neon-admin' }, unusedAfter: '720h' },
    }),
    'apply',
    '-f',
    '-',
  );
  type Inventory = {
    status?: {
      live?: number;
      notManagedKeys?: { id: number; name: string; kind: string; createdBy?: string; lastUsedAt?: string }[];
      conditions?: { type: string; status: string }[];
    };
  };
  const deadline = Date.now() + Number(flags.timeout) * 1000;
  let inventory: Inventory = {};
  while (Date.now() < deadline) {
    inventory = JSON.parse(await kubectl('get', 'apikeyinventory', 'demo-org', '-n', demoNamespace, '-o', 'json')) as Inventory;
    if ((inventory.status?.notManagedKeys ?? []).some((k) => k.id === byHand.id)) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (!(inventory.status?.notManagedKeys ?? []).some((k) => k.id === byHand.id)) throw new Error('the inventory did not list the key made by hand');
  console.log(await kubectl('get', 'naki', '-n', demoNamespace, '-o', 'wide'));
  for (const key of inventory.status?.notManagedKeys ?? []) {
    console.log(
      `not managed: key ${key.id} "${key.name}" (${key.kind}, created by ${key.createdBy ?? '?'}, ${key.lastUsedAt !== undefined ? `last used ${key.lastUsedAt}` : 'never used'})`,
    );
  }
  console.log('The operator only reports it; to revoke it, a person decides (docs/inventory.md, "Report only").');
}
