// spec.secret.template as consumers meet it, on a real kube-apiserver + etcd and the emulator over
// HTTP, the operator in-process with the ServiceAccount of deploy/: the extra entries appear and
// work, labels and annotations appear, a template change or a tenant's edit is repaired without a
// new key, the operator's own names cannot be set, and no secret reaches the log or an event.
import { describe, expect, it } from '@jest/globals';
import { ApiException, type V1Secret } from '@kubernetes/client-node';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually, intentSettled, replaceCustomObject } from './support.ts';
import { capturedLog, group, operatorSuite, readUntil, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface Resource {
  metadata: { name: string; generation: number; annotations?: Record<string, string> };
  spec: Record<string, unknown> & { secret?: Record<string, unknown> };
  status?: { keyId?: number; keyName?: string; observedGeneration?: number; conditions?: Condition[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}

describe('spec.secret.template against a real apiserver and the emulator', () => {
  const suite = operatorSuite({
    namespaces: ['secret-template'],
    operator: (s) => ({
      namespace: s.namespace,
      workers: 2,
      driftIntervalMs: 2_000,
      pendingGraceMs: 5_000,
      maxBackoffMs: 4_000,
      logger,
      identity: 'secret-template',
    }),
  });

  const issued = new Set<string>();
  const { logger, lines: logLines } = capturedLog('debug');

  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const create = (kind: 'ApiKey' | 'ProjectApiKey', name: string, spec: Record<string, unknown>): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: plural(kind),
      fieldValidation: 'Strict',
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace: suite.namespace }, spec },
    });
  const get = async (kind: string, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name })) as Resource;
  const untilReady = (kind: string, name: string): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        const ready = r.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'True' && r.status?.observedGeneration === r.metadata.generation && intentSettled(r) ? r : undefined;
      },
      20_000,
      `${kind} ${name} Ready`,
    );
  const readSecret = async (name: string): Promise<V1Secret> => {
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    for (const value of Object.values(secret.data ?? {})) {
      const text = Buffer.from(value, 'base64').toString('utf8');
      if (/^[a-z0-9]{64}$/.test(text)) issued.add(text);
    }
    return secret;
  };
  const entry = (secret: V1Secret, key: string): string | undefined => {
    const value = secret.data?.[key];
    return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
  };
  const untilSecret = (name: string, test: (s: V1Secret) => boolean, what: string): Promise<V1Secret> => readUntil(() => readSecret(name), test, 20_000, what);
  const keysNamed = async (prefix: string): Promise<AdminKey[]> =>
    (await emulatorAdmin<AdminKey[]>(suite.emulator.adminUrl, 'GET', '/keys')).filter((k) => k.name.startsWith(`${prefix}-`));
  const refusal = async (promise: Promise<unknown>): Promise<string> => {
    try {
      await promise;
    } catch (error) {
      if (!(error instanceof ApiException)) throw error;
      const body = typeof error.body === 'string' ? (JSON.parse(error.body) as { message?: string }) : (error.body as { message?: string });
      return body.message ?? '';
    }
    throw new Error('the apiserver accepted it');
  };
  const setTemplate = async (kind: string, name: string, template: Record<string, unknown>): Promise<void> => {
    // Again on a conflict: the operator may write the resource's status meanwhile (the first use of
    // a ProjectApiKey's key, recorded by a drift pass).
    await replaceCustomObject<Resource>(suite.objects, { group, version, namespace: suite.namespace, plural: plural(kind), name }, (current) => ({
      ...current,
      spec: { ...current.spec, secret: { ...current.spec.secret, template } },
    }));
  };

  it('the extra entries appear and work, with the labels and annotations of the template', async () => {
    await create('ProjectApiKey', 'app-neon', {
      organizationId: ORG,
      projectId: PROJECT,
      keyName: 'app-neon',
      credentialsSecretRef: { name: 'neon-admin' },
      secret: {
        name: 'app-neon',
        key: 'apiKey',
        template: {
          labels: { team: 'payments' },
          annotations: { 'reloader.stakater.com/match': 'true' },
          data: {
            NEON_API_KEY: 'Key',
            NEON_PROJECT_ID: 'ProjectId',
            NEON_API_HOST: 'PlatformUrl',
            NEON_KEY_ID: 'KeyId',
            NEON_KEY_NAME: 'KeyName',
            NEON_ORG_ID: 'OrganizationId',
          },
        },
      },
    });
    const ready = await untilReady('ProjectApiKey', 'app-neon');
    const secret = await readSecret('app-neon');
    expect(entry(secret, 'NEON_API_KEY')).toBe(entry(secret, 'apiKey'));
    expect(entry(secret, 'NEON_PROJECT_ID')).toBe(PROJECT);
    expect(entry(secret, 'NEON_API_HOST')).toBe(suite.emulator.baseUrl);
    expect(entry(secret, 'NEON_KEY_ID')).toBe(String(ready.status?.keyId));
    expect(entry(secret, 'NEON_KEY_NAME')).toBe(ready.status?.keyName);
    expect(entry(secret, 'NEON_ORG_ID')).toBe(ORG);
    expect(secret.metadata?.labels).toEqual(expect.objectContaining({ team: 'payments', 'app.kubernetes.io/managed-by': 'neon-key-operator' }));
    expect(secret.metadata?.annotations?.['reloader.stakater.com/match']).toBe('true');
    // The Key entry authenticates to the platform at the URL of the PlatformUrl entry, and reads its project.
    const client = new PlatformClient({
      baseUrl: entry(secret, 'NEON_API_HOST') ?? '',
      apiKey: entry(secret, 'NEON_API_KEY') ?? '',
      retry: { maxAttempts: 1 },
    });
    expect((await client.getAuth()).auth_method).toBe('api_key_org');
    expect(Array.isArray((await client.listOperations(PROJECT, { limit: 5 })).operations)).toBe(true);
  });

  it('editing the template rewrites the Secret with the same key (same status.keyId, no new platform key)', async () => {
    const before = await get('ProjectApiKey', 'app-neon');
    const key = entry(await readSecret('app-neon'), 'apiKey');
    await setTemplate('ProjectApiKey', 'app-neon', { labels: { team: 'billing' }, data: { TOKEN: 'Key', NEON_API_HOST: 'PlatformUrl' } });
    const secret = await untilSecret(
      'app-neon',
      (s) => entry(s, 'TOKEN') !== undefined && s.metadata?.labels?.team === 'billing',
      'the Secret rewritten to the new template',
    );
    expect(Object.keys(secret.data ?? {}).sort()).toEqual(['NEON_API_HOST', 'TOKEN', 'apiKey']);
    expect(entry(secret, 'TOKEN')).toBe(key);
    expect(entry(secret, 'apiKey')).toBe(key);
    expect(secret.metadata?.annotations?.['reloader.stakater.com/match']).toBeUndefined();
    const after = await untilReady('ProjectApiKey', 'app-neon');
    expect(after.status?.keyId).toBe(before.status?.keyId);
    expect((await keysNamed('app-neon')).filter((k) => !k.revoked).map((k) => k.id)).toEqual([before.status?.keyId]);
    expect((await keysNamed('app-neon')).length).toBe(1);
    const events = await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: 'involvedObject.name=app-neon' });
    expect(events.items.map((e) => e.reason)).toContain('SecretRewritten');
  });

  it("a tenant's deleted derived entry and edited templated label are repaired, without a new key", async () => {
    const keyId = (await get('ProjectApiKey', 'app-neon')).status?.keyId;
    const secret = await readSecret('app-neon');
    const key = entry(secret, 'apiKey');
    const edited: V1Secret = {
      ...secret,
      metadata: { ...secret.metadata, labels: { ...secret.metadata?.labels, team: 'hijacked' } },
      data: { apiKey: secret.data?.apiKey ?? '', NEON_API_HOST: secret.data?.NEON_API_HOST ?? '' },
    };
    await suite.core.replaceNamespacedSecret({ namespace: suite.namespace, name: 'app-neon', body: edited });
    const repaired = await untilSecret(
      'app-neon',
      (s) => entry(s, 'TOKEN') === key && s.metadata?.labels?.team === 'billing',
      'the derived entry and label repaired',
    );
    expect(entry(repaired, 'apiKey')).toBe(key);
    expect((await get('ProjectApiKey', 'app-neon')).status?.keyId).toBe(keyId);
    expect((await keysNamed('app-neon')).length).toBe(1);
  });

  it("a template setting the operator's own names is refused by the apiserver", async () => {
    const spec = (template: Record<string, unknown>) => ({ scope: 'Personal', credentialsSecretRef: { name: 'neon-admin' }, secret: { template } });
    expect(await refusal(create('ApiKey', 'own-label', spec({ labels: { 'app.kubernetes.io/managed-by': 'helm' } })))).toMatch(
      /labels may not set the operator's own/,
    );
    expect(await refusal(create('ApiKey', 'own-annotation', spec({ annotations: { 'keys.neon.dev/key-id': '1' } })))).toMatch(
      /annotations may not set the operator's own/,
    );
    expect(await refusal(create('ApiKey', 'own-label-key-id', spec({ labels: { 'keys.neon.dev/key-id': '1' } })))).toMatch(
      /labels may not set the operator's own/,
    );
    // Nor on an existing resource by an update.
    const current = await get('ProjectApiKey', 'app-neon');
    expect(
      await refusal(
        suite.objects.replaceNamespacedCustomObject({
          group,
          version,
          namespace: suite.namespace,
          plural: 'projectapikeys',
          name: 'app-neon',
          body: {
            ...current,
            spec: { ...current.spec, secret: { ...current.spec.secret, template: { annotations: { 'keys.neon.dev/signature': 'forged' } } } },
          },
        }),
      ),
    ).toMatch(/annotations may not set the operator's own/);
  });

  it('an ApiKey with a template works too, and the secrets never reach the log or an event', async () => {
    await create('ApiKey', 'ci', {
      scope: 'Organization',
      organizationId: ORG,
      keyName: 'ci',
      credentialsSecretRef: { name: 'neon-admin' },
      secret: { key: 'token', template: { data: { NEON_API_KEY: 'Key' } } },
    });
    await untilReady('ApiKey', 'ci');
    const secret = await readSecret('ci');
    expect(entry(secret, 'NEON_API_KEY')).toBe(entry(secret, 'token'));
    const projects = await new PlatformClient({
      baseUrl: suite.emulator.baseUrl,
      apiKey: entry(secret, 'NEON_API_KEY') ?? '',
      retry: { maxAttempts: 1 },
    }).listProjects({ orgId: ORG });
    expect(projects.map((p) => p.id)).toContain(PROJECT);

    expect(issued.size).toBeGreaterThanOrEqual(2);
    const log = logLines.join('');
    const events = (await suite.core.listNamespacedEvent({ namespace: suite.namespace })).items.map((e) => `${e.reason} ${e.message}`).join('\n');
    const statuses = JSON.stringify([await get('ProjectApiKey', 'app-neon'), await get('ApiKey', 'ci')]);
    for (const value of [...issued, suite.adminKey]) {
      expect(log.includes(value)).toBe(false);
      expect(events.includes(value)).toBe(false);
      expect(statuses.includes(value)).toBe(false);
    }
    expect(logLines.filter((l) => l.includes('"reconcile failed"'))).toEqual([]);
  });
});
