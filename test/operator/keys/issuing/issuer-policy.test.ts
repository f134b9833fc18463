// An issuer's policy (issuing/issuer-policy.ts), its cap (issuing/issuer-slots.ts), and how a key
// reconcile uses them (issuing/credentials-source.ts), against the in-memory fakes: which requests
// a rule allows, the cap taken under concurrent claims and given to one waiter, and the refusals that
// make no platform request (a policy, a missing issuer, another organization, a namespace being
// deleted, namespace credentials forbidden), while a deletion still revokes.
import { describe, expect, it } from '@jest/globals';
import { evaluatePolicy, parseLabelSelector, selectorMatches, type PolicyRequest } from '../../../../src/operator/keys/issuing/issuer-policy.ts';
import { pino } from 'pino';
import { IssuerSlots } from '../../../../src/operator/keys/issuing/issuer-slots.ts';
import { reconcileCredentialsSecret } from '../../../../src/operator/keys/issuing/credentials-in-use.ts';
import { CREDENTIALS_FINALIZER, type KeyResource } from '../../../../src/operator/resources/schema.ts';
import type { IssuerRule } from '../../../../src/operator/resources/issuer.ts';
import { ADMIN_KEY, NAMESPACE, keyResource, platformError, rig, type Rig } from '../fakes.ts';

const request = (over: Partial<PolicyRequest> = {}): PolicyRequest => ({
  namespace: 'team-a',
  namespaceLabels: { tier: 'prod', team: 'a' },
  kind: 'Project',
  projectId: 'p-1',
  ...over,
});

describe("an issuer's policy", () => {
  const byName: IssuerRule = { namespaces: { names: ['team-a'] }, kinds: ['Project'], projects: ['p-1'] };
  const bySelector: IssuerRule = { namespaces: { selector: { matchLabels: { tier: 'prod' } } }, kinds: ['Organization'] };

  it.each<[string, IssuerRule[], Partial<PolicyRequest>, boolean | RegExp]>([
    ['a name match', [byName], {}, true],
    ['a selector match', [{ ...bySelector, kinds: ['Project'] }], {}, true],
    ['names OR selector: the name alone', [{ namespaces: { names: ['team-a'], selector: { matchLabels: { tier: 'dev' } } }, kinds: ['Project'] }], {}, true],
    [
      'names OR selector: the selector alone',
      [{ namespaces: { names: ['team-b'], selector: { matchLabels: { tier: 'prod' } } }, kinds: ['Project'] }],
      {},
      true,
    ],
    ['an empty selector: every namespace', [{ namespaces: { selector: {} }, kinds: ['Project'] }], { namespace: 'anything' }, true],
    ['no rule for the namespace', [byName], { namespace: 'team-b' }, /does not allow namespace team-b: no rule/],
    [
      'labels unread: a selector matches nothing',
      [{ ...bySelector, kinds: ['Project'] }],
      { namespaceLabels: undefined },
      /does not allow namespace team-a \(its labels could not be read\)/,
    ],
    [
      'the kind not allowed',
      [byName],
      { kind: 'Organization', projectId: undefined },
      /does not allow Organization keys in namespace team-a: its rules for this namespace allow only Project keys/,
    ],
    ['another project', [byName], { projectId: 'p-2' }, /does not allow Project keys of project p-2 in namespace team-a/],
    ['projects absent: any project', [{ ...byName, projects: undefined }], { projectId: 'p-2' }, true],
    ['two rules: one allows', [bySelector, byName], {}, true],
  ])('%s', (_what, rules, over, expected) => {
    const verdict = evaluatePolicy('team-issuer', rules, request(over));
    if (expected === true) expect(verdict).toMatchObject({ allowed: true });
    else expect(verdict).toMatchObject({ allowed: false, message: expect.stringMatching(expected as RegExp) });
  });

  it('the most generous cap of the matching rules; a matching rule without a cap sets none', () => {
    const capped = (n: number | undefined): IssuerRule => ({
      namespaces: { names: ['team-a'] },
      kinds: ['Project'],
      ...(n !== undefined ? { maxKeysPerNamespace: n } : {}),
    });
    expect(evaluatePolicy('i', [capped(2), capped(5)], request())).toEqual({ allowed: true, cap: 5 });
    expect(evaluatePolicy('i', [capped(2), capped(undefined)], request())).toEqual({ allowed: true, cap: undefined });
    // A rule that does not match the request sets nothing.
    expect(evaluatePolicy('i', [capped(2), { ...capped(9), projects: ['p-9'] }], request())).toEqual({ allowed: true, cap: 2 });
  });

  it('--issuer-label-selector: equality-based selectors as kubectl takes them, anything else refused', () => {
    expect(parseLabelSelector('keys.neon.dev/cluster=prod, tier==a,team!=b,owned,!legacy')).toEqual({
      matchLabels: { 'keys.neon.dev/cluster': 'prod', tier: 'a' },
      matchExpressions: [
        { key: 'team', operator: 'NotIn', values: ['b'] },
        { key: 'owned', operator: 'Exists' },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    });
    for (const bad of ['a in (b)', 'a=b=c', '', '=b', 'a=' + 'x'.repeat(64), 'UPPER_/x=1']) expect([bad, parseLabelSelector(bad)]).toEqual([bad, undefined]);
    const selector = parseLabelSelector('keys.neon.dev/cluster=prod,!legacy')!;
    expect(selectorMatches(selector, { 'keys.neon.dev/cluster': 'prod' })).toBe(true);
    expect(selectorMatches(selector, { 'keys.neon.dev/cluster': 'prod', legacy: '' })).toBe(false);
    expect(selectorMatches(selector, { 'keys.neon.dev/cluster': 'staging' })).toBe(false);
  });

  it('label selectors as Kubernetes reads them', () => {
    const labels = { tier: 'prod', team: 'a' };
    expect(selectorMatches({}, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { tier: 'prod', team: 'a' } }, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { tier: 'prod', team: 'b' } }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['dev', 'prod'] }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['prod'] }] }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'gone', operator: 'NotIn', values: ['x'] }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'team', operator: 'Exists' }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'gone', operator: 'In', values: [''] }] }, labels)).toBe(false);
  });
});

describe("an issuer's cap (IssuerSlots)", () => {
  /** A namespace's resources naming the issuer, and which of them the cache shows holding a key made through it. */
  function slots(users: string[], holding: Set<string>, woken: string[]): IssuerSlots {
    return new IssuerSlots({ users: () => users, holders: (key) => (holding.has(key) ? ['issuer'] : []) }, (key) => woken.push(key));
  }

  it('30 claims at once: 5 taken, 25 refused and waiting; the claims count until the cache shows their intents', () => {
    const users = Array.from({ length: 30 }, (_, i) => `ProjectApiKey/ns/k${i}`);
    const holding = new Set<string>();
    const woken: string[] = [];
    const s = slots(users, holding, woken);
    const taken = users.filter((key) => s.claim('issuer', 'ns', key, 5));
    expect(taken).toHaveLength(5);
    expect(s.size).toEqual({ claims: 5, waiting: 25, released: 0 });
    // The intents come back through the cache: each counted once; still 5 held.
    for (const key of taken) holding.add(key);
    expect(s.held('issuer', 'ns')).toBe(5);
    // An intent cleared by a recovery that keeps its slot (keep()): the cache no longer shows it, the slot stays its own.
    s.keep('issuer', 'ns', taken[1]!);
    holding.delete(taken[1]!);
    expect(s.held('issuer', 'ns')).toBe(5);
    expect(s.available('issuer', 'ns', taken[1]!, 5)).toBe(true);
    expect(s.available('issuer', 'ns', 'ProjectApiKey/ns/k29', 5)).toBe(false);
    holding.add(taken[1]!);
    expect(s.claim('issuer', 'ns', 'ProjectApiKey/ns/k29', 5)).toBe(false);
    // One released: every waiter woken; the first to claim gets the slot, the others are refused again.
    s.release(['issuer'], 'ns', taken[0]!);
    expect(woken).toHaveLength(25);
    const winners = woken.filter((key) => s.claim('issuer', 'ns', key, 5));
    expect(winners).toEqual([woken[0]]);
  });

  it('a claim not written (a conflict) frees its slot; a claim of a resource gone is dropped', () => {
    const users = ['A/ns/a', 'A/ns/b'];
    const s = slots(users, new Set(), []);
    expect(s.claim('issuer', 'ns', 'A/ns/a', 1)).toBe(true);
    expect(s.available('issuer', 'ns', 'A/ns/a', 1)).toBe(true);
    expect(s.available('issuer', 'ns', 'A/ns/b', 1)).toBe(false);
    s.unclaim('A/ns/a');
    expect(s.claim('issuer', 'ns', 'A/ns/b', 1)).toBe(true);
    users.splice(1, 1);
    expect(s.held('issuer', 'ns')).toBe(0);
    expect(s.size.claims).toBe(0);
  });

  it('another namespace or issuer has slots of its own', () => {
    const s = slots(['A/ns/a'], new Set(['A/ns/a']), []);
    expect(s.held('issuer', 'ns')).toBe(1);
    expect(s.available('issuer', 'ns', 'A/ns/x', 1)).toBe(false);
    const other = new IssuerSlots(
      { users: (issuer, ns) => (issuer === 'issuer' && ns === 'ns' ? ['A/ns/a'] : []), holders: () => ['issuer'] },
      () => undefined,
    );
    expect(other.available('other', 'ns', 'A/ns/x', 1)).toBe(true);
    expect(other.available('issuer', 'ns2', 'A/ns2/x', 1)).toBe(true);
  });

  it('a key counts where it was made: moved to another issuer, it keeps that slot and takes none of the new one until a key is made there', () => {
    // Resources by the issuer they name; keys by the issuer that made them (status.issuer).
    const naming = new Map([
      ['A/ns/holder', 'one'],
      ['A/ns/waiter', 'one'],
    ]);
    const madeBy = new Map([['A/ns/holder', 'one']]);
    const woken: string[] = [];
    const s = new IssuerSlots(
      {
        users: (issuer) => [
          ...new Set(
            [...naming]
              .filter(([, i]) => i === issuer)
              .map(([k]) => k)
              .concat([...madeBy].filter(([, i]) => i === issuer).map(([k]) => k)),
          ),
        ],
        holders: (key) => (madeBy.has(key) ? [madeBy.get(key)!] : []),
      },
      (key) => woken.push(key),
    );
    expect(s.claim('one', 'ns', 'A/ns/waiter', 1)).toBe(false);
    // The holder moves to issuer two: its key, made by one, still holds one's slot; two counts none.
    naming.set('A/ns/holder', 'two');
    expect(s.held('one', 'ns')).toBe(1);
    expect(s.claim('one', 'ns', 'A/ns/waiter', 1)).toBe(false);
    expect(s.held('two', 'ns')).toBe(0);
    // A key made through two (a repair) takes a slot of two; once status says two made it, one's slot frees.
    expect(s.claim('two', 'ns', 'A/ns/holder', 1)).toBe(true);
    expect(s.held('two', 'ns')).toBe(1);
    madeBy.set('A/ns/holder', 'two');
    expect(s.held('one', 'ns')).toBe(0);
    expect(s.claim('one', 'ns', 'A/ns/waiter', 1)).toBe(true);
    // Its deletion wakes the waiters of each issuer it named or held a key through.
    expect(s.claim('two', 'ns', 'A/ns/late', 1)).toBe(false);
    s.release(['one', 'two'], 'ns', 'A/ns/holder');
    expect(woken).toEqual(['A/ns/late']);
  });
});

const ISSUER_NS = 'neon-key-operator-system';

function issuerRig(allow: IssuerRule[], options: { allowNamespaceCredentials?: boolean } = {}): Rig {
  const r = rig({
    credentials: false,
    credentialsSettings: {
      issuerSecretsNamespace: ISSUER_NS,
      allowNamespaceCredentials: options.allowNamespaceCredentials ?? true,
      // Issuers without labels are every install's; one labelled for another cluster is not this one's.
      issuerSelector: parseLabelSelector('keys.neon.dev/cluster!=other')!,
    },
  });
  r.kube.putSecret({ metadata: { name: 'org-admin', namespace: ISSUER_NS }, data: { apiKey: Buffer.from(ADMIN_KEY).toString('base64') } });
  r.kube.issuers.set('team', {
    apiVersion: 'keys.neon.dev/v1alpha1',
    kind: 'ClusterKeyIssuer',
    metadata: { name: 'team', uid: 'i-1', resourceVersion: '1' },
    spec: { organizationId: 'org-1', credentialsSecretRef: { name: 'org-admin' }, allow },
  });
  return r;
}

const throughIssuer = (kind: 'ApiKey' | 'ProjectApiKey', spec: Record<string, unknown> = {}): KeyResource => {
  const resource = keyResource(kind, 'ci', { spec: { issuerRef: { name: 'team' }, ...spec } });
  const { credentialsSecretRef: _gone, organizationId: _org, ...rest } = resource.spec as Record<string, unknown>;
  return { ...resource, spec: { ...rest, ...(spec.organizationId !== undefined ? { organizationId: spec.organizationId } : {}) } } as KeyResource;
};

describe('a key through an issuer, against the fakes', () => {
  const allowProject: IssuerRule[] = [{ namespaces: { names: [NAMESPACE] }, kinds: ['Project'], projects: ['p-1'] }];

  it("is created with the issuer's credentials and organization, and revoked with them on delete", async () => {
    const r = issuerRig(allowProject);
    r.kube.putResource(throughIssuer('ProjectApiKey'));
    await r.settle('ProjectApiKey');
    const issued = r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')!;
    expect(issued.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
    expect(r.platform.calls.filter((c) => c.startsWith('createOrg'))).toEqual([expect.stringMatching(/^createOrg org-1 ci-deployer-\w{8} p-1$/)]);
    expect(r.kube.calls).toContain(`get Secret ${ISSUER_NS}/org-admin`);
    // The policy no longer allows it: refused, but the delete still revokes with the issuer's credentials.
    r.kube.issuers.get('team')!.spec = { organizationId: 'org-1', credentialsSecretRef: { name: 'org-admin' }, allow: [] };
    r.kube.resources.set(`ProjectApiKey/${NAMESPACE}/ci`, { ...issued, metadata: { ...issued.metadata, deletionTimestamp: new Date().toISOString() } });
    r.platform.calls.length = 0;
    await r.settle('ProjectApiKey');
    expect(r.platform.calls).toEqual(['listOrg org-1', `revokeOrg org-1 ${issued.status?.keyId}`]);
    expect(r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')).toBeUndefined();
  });

  it.each<[string, (r: Rig) => void, KeyResource, string, RegExp]>([
    [
      'a project the policy does not allow',
      () => undefined,
      throughIssuer('ProjectApiKey', { projectId: 'p-2' }),
      'NotAllowed',
      /does not allow Project keys of project p-2/,
    ],
    [
      'an organization key where only Project keys are',
      () => undefined,
      throughIssuer('ApiKey', { scope: 'Organization' }),
      'NotAllowed',
      /does not allow Organization keys/,
    ],
    ['an issuer that does not exist', (r) => r.kube.issuers.clear(), throughIssuer('ProjectApiKey'), 'IssuerNotFound', /ClusterKeyIssuer team does not exist/],
    [
      "another organization than the issuer's",
      () => undefined,
      throughIssuer('ProjectApiKey', { organizationId: 'org-2' }),
      'NotAllowed',
      /issues keys of organization org-1, not of spec.organizationId org-2/,
    ],
    [
      'a namespace being deleted',
      (r) => r.kube.namespaces.set(NAMESPACE, { labels: {}, terminating: true }),
      throughIssuer('ProjectApiKey'),
      'NamespaceTerminating',
      /is being deleted/,
    ],
    [
      'an issuer of another install (--issuer-label-selector)',
      (r) => {
        r.kube.issuers.get('team')!.metadata!.labels = { 'keys.neon.dev/cluster': 'other' };
      },
      throughIssuer('ProjectApiKey'),
      'IssuerNotFound',
      /is not one of this operator's/,
    ],
  ])('refuses %s: Ready and KeyIssued False, a Warning, no platform request', async (_what, arrange, resource, reason, message) => {
    const r = issuerRig(allowProject);
    arrange(r);
    r.kube.putResource(resource);
    await r.settle(resource.kind);
    const after = r.kube.resource(resource.kind, NAMESPACE, 'ci')!;
    for (const type of ['Ready', 'KeyIssued'])
      expect(after.status?.conditions?.find((c) => c.type === type)).toMatchObject({ status: 'False', reason, message: expect.stringMatching(message) });
    expect(r.events.reasons()).toEqual([`Warning ${reason}`]);
    expect(r.platform.calls).toEqual([]);
    // Nothing written but status: no finalizer, no intent, no Secret.
    expect(r.kube.calls.filter((c) => !c.startsWith('get') && !c.startsWith('readIssuer') && !c.startsWith('put status'))).toEqual([]);
  });

  it('issuerRef moved to an issuer of another organization: the key is kept (never taken for revoked), reported, and its delete waits for the right credentials', async () => {
    const r = issuerRig(allowProject);
    r.kube.issuers.set('other-org', {
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ClusterKeyIssuer',
      metadata: { name: 'other-org', uid: 'i-2', resourceVersion: '1' },
      spec: { organizationId: 'org-2', credentialsSecretRef: { name: 'org-admin' }, allow: allowProject },
    });
    r.kube.putResource(throughIssuer('ProjectApiKey'));
    await r.settle('ProjectApiKey');
    const issued = r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')!;
    expect(issued.status).toMatchObject({ organizationId: 'org-1', keyId: expect.any(Number) });
    const keyId = issued.status!.keyId!;
    r.kube.putResource({ ...issued, spec: { ...issued.spec, issuerRef: { name: 'other-org' } } } as KeyResource);
    r.platform.calls.length = 0;
    await r.settle('ProjectApiKey');
    const moved = r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')!;
    expect(moved.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NotAllowed',
      message: expect.stringMatching(`key ${keyId} was issued in organization org-1, and ClusterKeyIssuer other-org issues keys of organization org-2`),
    });
    expect(r.platform.calls).toEqual([]);
    // Deleted now: org-2's credentials do not find it (404); it is not taken for revoked.
    r.kube.resources.set(`ProjectApiKey/${NAMESPACE}/ci`, { ...moved, metadata: { ...moved.metadata, deletionTimestamp: new Date().toISOString() } });
    r.platform.failNext = { method: 'revoke', error: platformError('NOT_FOUND', 404) };
    await r.reconcile('ProjectApiKey');
    const waiting = r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')!;
    expect(waiting.metadata.finalizers).toContain('keys.neon.dev/finalizer');
    expect(waiting.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      reason: 'Deleting',
      message: expect.stringMatching(/^CredentialsChanged: key \d+ was issued with other credentials/),
    });
    expect(r.platform.keys.map((k) => k.id)).toContain(keyId);
    // The issuer of its organization named again: revoked, released.
    r.kube.resources.set(`ProjectApiKey/${NAMESPACE}/ci`, { ...waiting, spec: { ...waiting.spec, issuerRef: { name: 'team' } } } as KeyResource);
    await r.settle('ProjectApiKey');
    expect(r.platform.keys.map((k) => k.id)).not.toContain(keyId);
    expect(r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')).toBeUndefined();
  });

  it('with namespace credentials forbidden: NotAllowed for credentialsSecretRef, no platform request; an issuer still works', async () => {
    const r = issuerRig(allowProject, { allowNamespaceCredentials: false });
    r.kube.putSecret({ metadata: { name: 'neon-admin', namespace: NAMESPACE }, data: { apiKey: Buffer.from(ADMIN_KEY).toString('base64') } });
    r.kube.putResource(keyResource('ApiKey', 'ci'));
    await r.settle('ApiKey');
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NotAllowed',
      message: expect.stringMatching(/--namespace-credentials forbid/),
    });
    expect(r.platform.calls).toEqual([]);
    r.kube.putResource(throughIssuer('ProjectApiKey'));
    await r.settle('ProjectApiKey');
    expect(r.kube.resource('ProjectApiKey', NAMESPACE, 'ci')!.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
  });

  it("keeps the namespace's credentials Secret with a finalizer when minting with it; its own reconcile lifts it once no resource needs it", async () => {
    const r = rig({ credentialsUsers: { holders: () => [] } });
    r.kube.putResource(keyResource('ApiKey', 'ci'));
    await r.settle('ApiKey');
    expect(r.kube.secret(NAMESPACE, 'neon-admin')?.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    const update = r.kube.calls.indexOf(`update Secret ${NAMESPACE}/neon-admin`);
    const create = r.platform.calls.findIndex((c) => c.startsWith('createOrg'));
    expect(update).toBeGreaterThanOrEqual(0);
    expect(create).toBeGreaterThanOrEqual(0);
    const logger = pino({ level: 'silent' });
    // Being deleted (the namespace goes) while a resource still holds the finalizer: kept, looked at again soon.
    const kept = r.kube.secret(NAMESPACE, 'neon-admin')!;
    r.kube.putSecret({ ...kept, metadata: { ...kept.metadata, deletionTimestamp: new Date() } });
    expect(await reconcileCredentialsSecret(r.kube, { holders: () => [`ApiKey/${NAMESPACE}/ci`] }, new Set(), NAMESPACE, 'neon-admin', logger)).toEqual({
      type: 'Done',
      requeueAfterMs: 2_000,
    });
    expect(r.kube.secret(NAMESPACE, 'neon-admin')?.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    // That resource released its keys (the cache may still show it): lifted.
    expect(
      await reconcileCredentialsSecret(
        r.kube,
        { holders: () => [`ApiKey/${NAMESPACE}/ci`] },
        new Set([`ApiKey/${NAMESPACE}/ci`]),
        NAMESPACE,
        'neon-admin',
        logger,
      ),
    ).toEqual({ type: 'Done' });
    expect(r.kube.secret(NAMESPACE, 'neon-admin')?.metadata?.finalizers ?? []).toEqual([]);
  });
});
