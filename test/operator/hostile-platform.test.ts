// Whatever answers at the platform's address is input too. A FAKE, named as such: a loopback proxy
// in front of the real emulator that rewrites the answers to key creations the way a broken or
// hostile platform (or a man in the middle) could: another name, another scope or project, a
// secret that is not a key, an answer too large to read. The emulator cannot be made to answer
// like that, which is why the proxy exists; every key still really exists in the emulator, so
// the test sees whether the operator revoked it. Nothing of such an answer may reach a Secret.
import { describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { eventually } from './support.ts';
import { capturedLog, type Condition, group, operatorSuite, version } from './fixture.ts';

const PROJECT = 'quiet-river-00000001';
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}

type Rewrite = (created: Record<string, unknown>) => Record<string, unknown> | string;
/** Per keyName: how the proxy rewrites the answer to that resource's key creation. */
const REWRITES: Record<string, Rewrite> = {
  renamed: (c) => ({ ...c, name: 'someone-elses-key' }),
  'scoped-org': (c) => ({ ...c, project_id: PROJECT }),
  'other-project': (c) => ({ ...c, project_id: 'bold-meadow-00000002' }),
  'unscoped-project': ({ project_id: _drop, ...c }) => c,
  'short-secret': (c) => ({ ...c, key: 'abc' }),
  'secret-with-newline': (c) => ({ ...c, key: `${String(c.key)}\nX-Injected: 1` }),
  'huge-answer': (c) => JSON.stringify({ ...c, padding: 'x'.repeat(17 * 1024 * 1024) }),
};

describe('hostile platform answers to key creation', () => {
  let proxy: Server;
  const { logger, lines: logLines } = capturedLog('debug');
  const keys = async (prefix: string): Promise<AdminKey[]> =>
    ((await (await fetch(`${suite.emulator.adminUrl}/keys`)).json()) as AdminKey[]).filter((k) => k.name.startsWith(`${prefix}-`));

  const suite = operatorSuite({
    namespaces: ['hostile-platform'],
    before: async (s) => {
      const upstream = new URL(s.emulator.baseUrl);
      proxy = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req
          .on('data', (c: Buffer) => chunks.push(c))
          .on('end', () => {
            void (async () => {
              const body = Buffer.concat(chunks).toString('utf8');
              const answer = await fetch(`${upstream.origin}${req.url}`, {
                method: req.method ?? 'GET',
                headers: {
                  authorization: String(req.headers.authorization),
                  'content-type': 'application/json',
                  'x-request-id': String(req.headers['x-request-id']),
                },
                ...(body === '' ? {} : { body }),
              });
              let text = await answer.text();
              const name = req.method === 'POST' && /\/api_keys$/.test(req.url ?? '') ? ((JSON.parse(body) as { key_name?: string }).key_name ?? '') : '';
              const rewrite = Object.entries(REWRITES).find(([base]) => name.startsWith(`${base}-`))?.[1];
              if (answer.ok && rewrite !== undefined) {
                const rewritten = rewrite(JSON.parse(text) as Record<string, unknown>);
                text = typeof rewritten === 'string' ? rewritten : JSON.stringify(rewritten);
              }
              res.writeHead(answer.status, { 'content-type': 'application/json' });
              res.end(text);
            })().catch(() => res.destroy());
          });
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    },
    operator: (s) => ({
      platformBaseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/api/v2`,
      namespace: s.namespace,
      workers: 4,
      driftIntervalMs: 1_500,
      pendingGraceMs: 2_000,
      maxBackoffMs: 30_000,
      logger,
      identity: 'hostile-platform',
    }),
    after: async () => {
      proxy?.closeAllConnections();
      await new Promise((resolve) => proxy?.close(resolve));
    },
  });

  const cases: [string, string, 'ApiKey' | 'ProjectApiKey', RegExp][] = [
    ['a key with another name than the attempt', 'renamed', 'ApiKey', /its name is not renamed-/],
    ['a project-scoped key where an organization key was asked for', 'scoped-org', 'ApiKey', /scoped to a project/],
    ['a key scoped to another project', 'other-project', 'ProjectApiKey', /not scoped to project quiet-river-00000001/],
    ['an unscoped key where a project key was asked for', 'unscoped-project', 'ProjectApiKey', /not scoped to project quiet-river-00000001/],
    ['a secret that is not shaped like a key', 'short-secret', 'ApiKey', /not shaped like a key/],
    ['a secret carrying a header injection', 'secret-with-newline', 'ApiKey', /not shaped like a key/],
  ];

  it.each(cases)('%s: revoked at once, never written, reported', async (_story, base, kind, why) => {
    const spec =
      kind === 'ApiKey'
        ? { scope: 'Organization', organizationId: suite.org, keyName: base, credentialsSecretRef: { name: 'neon-admin' } }
        : { organizationId: suite.org, projectId: PROJECT, keyName: base, credentialsSecretRef: { name: 'neon-admin' } };
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: kind === 'ApiKey' ? 'apikeys' : 'projectapikeys',
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name: base }, spec },
    });
    const reported = await eventually(
      async () => {
        const r = (await suite.objects.getNamespacedCustomObject({
          group,
          version,
          namespace: suite.namespace,
          plural: kind === 'ApiKey' ? 'apikeys' : 'projectapikeys',
          name: base,
        })) as Resource;
        return r.status?.conditions?.find((c) => c.type === 'KeyIssued')?.reason === 'PlatformResponseInvalid' ? r : undefined;
      },
      20_000,
      `${base} PlatformResponseInvalid`,
    );
    const issued = reported.status?.conditions?.find((c) => c.type === 'KeyIssued');
    expect(issued?.message).toMatch(why);
    expect(issued?.message).toMatch(/was revoked/);
    expect(reported.status?.keyId).toBeUndefined();
    // The key the report names was revoked before the report was written.
    const reportedId = Number(/that key \((\d+)\) was revoked/.exec(issued?.message ?? '')?.[1]);
    const made = await keys(base);
    expect(made.find((k) => k.id === reportedId)).toEqual(expect.objectContaining({ revoked: true }));
    // Every key the platform made for it is revoked. The next attempt comes after a backoff of a
    // second or more, and a listing may fall between its create and its revoke (seen under load):
    // so the keys are listed until none is live. A key left live never passes.
    await eventually(
      async () => {
        const live = (await keys(base)).filter((k) => !k.revoked);
        return live.length === 0 ? true : undefined;
      },
      10_000,
      `every key made for ${base} revoked`,
    );
    await expect(suite.core.readNamespacedSecret({ namespace: suite.namespace, name: base })).rejects.toMatchObject({ code: 404 });
  });

  it('an answer too large to read is an ambiguous create: recovery revokes the key it made, nothing is written', async () => {
    await suite.apply(
      'ApiKey',
      { name: 'huge-answer' },
      { scope: 'Organization', organizationId: suite.org, keyName: 'huge-answer', credentialsSecretRef: { name: 'neon-admin' } },
    );
    // Recovery's event is recorded after it revoked: wait for both.
    await eventually(
      async () => {
        const made = await keys('huge-answer');
        const reasons = (await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: 'involvedObject.name=huge-answer' })).items.map(
          (e) => e.reason,
        );
        return made.length >= 1 && reasons.includes('CreateOutcomeUnknown') && reasons.includes('CreateRecovered') ? made : undefined;
      },
      20_000,
      'the key behind the unreadable answer revoked by recovery',
    );
    // Every attempt's key is revoked once its recovery has run (a later attempt may be in flight).
    const recoveredIds = new Set<number>();
    for (const e of (await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: 'involvedObject.name=huge-answer' })).items) {
      for (const id of /ids ([\d, ]+)\)/.exec(e.message ?? '')?.[1]?.split(', ') ?? []) recoveredIds.add(Number(id));
    }
    expect(recoveredIds.size).toBeGreaterThanOrEqual(1);
    const made = await keys('huge-answer');
    for (const id of recoveredIds) expect(made.find((k) => k.id === id)?.revoked).toBe(true);
    await expect(suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'huge-answer' })).rejects.toMatchObject({ code: 404 });
  });

  it('no secret value reaches the log', () => {
    expect(logLines.join('')).not.toMatch(/\b[a-z0-9]{64}\b/);
  });
});
