// The first hour, on a real kube-apiserver with the operator and the emulator: the commands the
// chart's NOTES print, run as printed (bash, from the repository's root, with the administrator's
// key in $NEON_ADMIN_API_KEY), give a team Ready keys in its namespace through the platform team's
// ClusterKeyIssuer (kubectl -n team-a apply -k examples/) and another team keys with its own
// credential; applying everything again overwrites no credential and issues nothing new.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { VersionApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { eventually, installOperatorManifests, operatorKubeConfig } from '../operator/support.ts';
import { chartDir, root, tools, type Tools } from './kube-tools.ts';

const run = promisify(execFile);
const suffix = randomBytes(3).toString('hex');
const releaseNs = `examples-${suffix}`;
const release = `ex-${suffix}`;
/** The namespaces the NOTES name where every namespace is watched. */
const TEAM = 'team-a';
const OWN_CREDENTIALS_TEAM = 'team-b';
/** This suite's operator reconciles only the issuer it labels (issuers are cluster-wide; the suites share the apiserver). */
const SUITE_LABEL = 'keys.neon.dev/test-suite';

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface KeyResource {
  metadata: { name: string };
  status?: { keyId?: number; secretName?: string; conditions?: Condition[] };
}
interface SecretObject {
  metadata: { name: string; resourceVersion: string; labels?: Record<string, string> };
  type?: string;
  data?: Record<string, string>;
}

describe("the first hour: the commands of the chart's NOTES, run as printed", () => {
  let cp: ControlPlane;
  let t: Tools;
  let emulator: Emulator;
  let operator: RunningOperator | undefined;
  let home: string;
  let adminKey: string;
  let commands: string[] = [];

  /** One printed line, through bash, from the repository's root: the way a person pastes it. */
  const shell = async (line: string): Promise<string> => {
    const { stdout } = await run('bash', ['-c', line], {
      cwd: root,
      env: { PATH: `${cp.binDir}:${process.env.PATH ?? ''}`, HOME: home, KUBECONFIG: cp.kubeconfigPath, NEON_ADMIN_API_KEY: adminKey },
    });
    return stdout;
  };
  const getJson = async <T>(...args: string[]): Promise<T> => JSON.parse(await t.kubectl(['get', ...args, '-o', 'json'])) as T;
  const secretsOf = async (namespace: string): Promise<SecretObject[]> =>
    (await getJson<{ items: SecretObject[] }>('secrets', '-n', namespace)).items.filter((s) => s.type !== 'kubernetes.io/service-account-token');
  const platformKeys = async (): Promise<{ id: number; revoked: boolean }[]> =>
    (await (await fetch(`${emulator.adminUrl}/keys`)).json()) as { id: number; revoked: boolean }[];
  const ready = (r: KeyResource): boolean => r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    t = tools(cp, (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion);
    home = mkdtempSync(join(tmpdir(), 'nko-examples-'));
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const admin = emulator.bootstrap.users.find((u) => u.orgRoles['org-demo-00000001'] === 'admin');
    adminKey = admin?.personalKey ?? '';
    await t.kubectl(['create', 'namespace', releaseNs]);
    // The NOTES of a default install into releaseNs (the CRDs exist already: a release never takes them over).
    const out = await t.helm(['install', release, chartDir, '--namespace', releaseNs, '--set', 'crds.enabled=false', '--dry-run=server']);
    const notes = out.slice(out.indexOf('NOTES:'));
    commands = notes
      .split('\n')
      .filter((l) => l.startsWith('  kubectl '))
      .map((l) => l.trim());
    // The operator as installed: every namespace it is told of, the issuers' Secrets in the release's
    // namespace, and only the issuer this suite labels.
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespaces: [releaseNs, TEAM, OWN_CREDENTIALS_TEAM],
      issuerSecretsNamespace: releaseNs,
      issuerLabelSelector: `${SUITE_LABEL}=${suffix}`,
      logger: createLogger({ level: 'silent' }),
      identity: 'examples',
    });
  }, 90_000);

  afterAll(async () => {
    // Deleting the resources revokes their keys while the operator runs; the issuer goes once no resource names it.
    await t?.kubectl(['delete', 'apikeys,projectapikeys', '--all', '-n', TEAM, '--timeout=30s']).catch(() => undefined);
    await t?.kubectl(['delete', 'apikeys,projectapikeys', '--all', '-n', OWN_CREDENTIALS_TEAM, '--timeout=30s']).catch(() => undefined);
    await t?.kubectl(['delete', 'clusterkeyissuer', 'team-keys', '--ignore-not-found', '--timeout=30s']).catch(() => undefined);
    await operator?.stop();
    await emulator?.close();
    await t?.kubectl(['delete', 'namespace', TEAM, OWN_CREDENTIALS_TEAM, releaseNs, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
    if (home !== undefined) rmSync(home, { recursive: true, force: true });
  });

  it("prints the platform team's and the teams' commands, with kubectl -n team-a apply -k examples/", () => {
    expect(commands).toEqual([
      `kubectl -n ${releaseNs} get pods -l app.kubernetes.io/instance=${release}`,
      `kubectl -n ${releaseNs} get lease`,
      `kubectl -n ${releaseNs} create secret generic neon-org-admin --from-literal=apiKey="$NEON_ADMIN_API_KEY"`,
      'kubectl apply -k examples/platform-team',
      `kubectl create namespace ${TEAM}`,
      `kubectl label namespace ${TEAM} keys.neon.dev/issuer=team-keys`,
      `kubectl -n ${TEAM} apply -k examples/`,
      `kubectl -n ${TEAM} wait --for=condition=Ready projectapikeys --all`,
      `kubectl -n ${TEAM} get neon`,
      `kubectl create namespace ${OWN_CREDENTIALS_TEAM}`,
      `kubectl -n ${OWN_CREDENTIALS_TEAM} create secret generic neon-admin --from-literal=apiKey="$NEON_ADMIN_API_KEY"`,
      `kubectl -n ${OWN_CREDENTIALS_TEAM} apply -k examples/namespace-credentials`,
      `kubectl -n ${OWN_CREDENTIALS_TEAM} wait --for=condition=Ready apikeys --all`,
      `kubectl -n ${OWN_CREDENTIALS_TEAM} get neon`,
    ]);
  });

  it("prints, in namespaced mode, commands for the watched namespaces: the issuer's only with issuerSecretsNamespace; none with namespace credentials forbidden", async () => {
    const printed = async (...set: string[]): Promise<string[]> => {
      const out = await t.helm([
        'install',
        release,
        chartDir,
        '--namespace',
        releaseNs,
        '--set',
        'crds.enabled=false',
        '--dry-run=server',
        ...set.flatMap((v) => ['--set', v]),
      ]);
      return out
        .slice(out.indexOf('NOTES:'))
        .split('\n')
        .filter((l) => l.startsWith('  kubectl ') && !/ get (pods|lease)/.test(l))
        .map((l) => l.trim());
    };
    const ownCredentials = (ns: string): string[] => [
      `kubectl -n ${ns} create secret generic neon-admin --from-literal=apiKey="$NEON_ADMIN_API_KEY"`,
      `kubectl -n ${ns} apply -k examples/namespace-credentials`,
      `kubectl -n ${ns} wait --for=condition=Ready apikeys --all`,
      `kubectl -n ${ns} get neon`,
    ];
    expect(await printed('watchNamespaces={apps,web}')).toEqual(ownCredentials('web'));
    expect(await printed('watchNamespaces={keys,apps}', 'issuerSecretsNamespace=keys')).toEqual([
      'kubectl -n keys create secret generic neon-org-admin --from-literal=apiKey="$NEON_ADMIN_API_KEY"',
      'kubectl apply -k examples/platform-team',
      'kubectl label namespace apps keys.neon.dev/issuer=team-keys',
      'kubectl -n apps apply -k examples/',
      'kubectl -n apps wait --for=condition=Ready projectapikeys --all',
      'kubectl -n apps get neon',
      ...ownCredentials('apps'),
    ]);
    expect((await printed('namespaceCredentials=forbid')).filter((l) => l.includes('neon-admin') || l.includes('namespace-credentials'))).toEqual([]);
  });

  it('gives team-a Ready keys through the issuer, holding no credential, and team-b a key with its own', async () => {
    for (const line of commands) {
      await shell(line);
      // The suite's label on the platform team's issuer, so that only this suite's operator reconciles it.
      if (line === 'kubectl apply -k examples/platform-team') await t.kubectl(['label', 'clusterkeyissuer', 'team-keys', `${SUITE_LABEL}=${suffix}`]);
    }
    const keys = await getJson<{ items: KeyResource[] }>('projectapikeys', '-n', TEAM);
    expect(keys.items.map((k) => [k.metadata.name, ready(k)]).sort()).toEqual([
      ['app-neon', true],
      ['billing-db', true],
    ]);
    expect(ready(await getJson<KeyResource>('apikey', 'ci-deployer', '-n', OWN_CREDENTIALS_TEAM))).toBe(true);

    // team-a holds the keys' Secrets and nothing else; each key works for the project.
    const secrets = await secretsOf(TEAM);
    expect(secrets.map((s) => s.metadata.name).sort()).toEqual(['app-neon', 'billing-db']);
    const billing = secrets.find((s) => s.metadata.name === 'billing-db');
    expect(Object.keys(billing?.data ?? {}).sort()).toEqual(['NEON_API_KEY', 'NEON_API_URL', 'NEON_PROJECT_ID']);
    expect(billing?.metadata.labels?.['app.kubernetes.io/part-of']).toBe('billing');
    for (const [name, field] of [
      ['app-neon', 'apiKey'],
      ['billing-db', 'NEON_API_KEY'],
    ] as const) {
      const key = Buffer.from(secrets.find((s) => s.metadata.name === name)?.data?.[field] ?? '', 'base64').toString('utf8');
      const response = await fetch(`${emulator.baseUrl}/projects/quiet-river-00000001`, { headers: { authorization: `Bearer ${key}` } });
      expect([name, response.status]).toEqual([name, 200]);
    }
    const issuer = await getJson<{ status?: { conditions?: Condition[]; resources?: number } }>('clusterkeyissuer', 'team-keys');
    expect(issuer.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Verified' });
  });

  it('applies again without overwriting a credential or issuing a key, and deleting the examples revokes their keys', async () => {
    const credentials = async (): Promise<string[]> =>
      [
        ...(await secretsOf(releaseNs)).filter((s) => s.metadata.name === 'neon-org-admin'),
        ...(await secretsOf(OWN_CREDENTIALS_TEAM)).filter((s) => s.metadata.name === 'neon-admin'),
      ].map((s) => `${s.metadata.name}@${s.metadata.resourceVersion}`);
    const keyIds = async (): Promise<(number | undefined)[]> =>
      [
        ...(await getJson<{ items: KeyResource[] }>('projectapikeys', '-n', TEAM)).items,
        ...(await getJson<{ items: KeyResource[] }>('apikeys', '-n', OWN_CREDENTIALS_TEAM)).items,
      ].map((k) => k.status?.keyId);
    const before = { credentials: await credentials(), keyIds: await keyIds() };
    expect(before.credentials).toHaveLength(2);
    for (const line of commands.filter((l) => l.includes(' apply -k '))) await shell(line);
    // A credential is only ever created: the printed command refuses to replace one.
    await expect(shell(commands.find((l) => l.includes('create secret generic neon-org-admin')) ?? '')).rejects.toThrow(/AlreadyExists|already exists/);
    expect(await credentials()).toEqual(before.credentials);
    expect(await keyIds()).toEqual(before.keyIds);

    await shell(`kubectl -n ${TEAM} delete -k examples/`);
    const revoked = new Map((await platformKeys()).map((k) => [k.id, k.revoked]));
    expect(before.keyIds.slice(0, 2).map((id) => revoked.get(id ?? -1))).toEqual([true, true]);
    // Their Secrets go with them (owner references, the garbage collector).
    await eventually(async () => ((await secretsOf(TEAM)).length === 0 ? true : undefined), 30_000, `the Secrets of ${TEAM} collected`);
  });
});
