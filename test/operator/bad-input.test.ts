// Bad and hostile input, as users (and attackers with edit rights on a namespace) write it: every
// manifest is either refused by the real kube-apiserver with a message that names the field and the
// rule (the CRD schema and its CEL rules), or accepted and then reported by the operator in a
// condition with a specific reason. The operator must never crash, never hot-loop against the
// platform, never overwrite a Secret it does not own and never revoke a key it did not make.
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { PlatformClient } from '../../src/platform/index.ts';
import { eventually, intentSettled } from './support.ts';
import { capturedLog, type Condition, group, operatorSuite, version } from './fixture.ts';

type Kind = 'ApiKey' | 'ProjectApiKey';
interface Resource {
  metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: { keyId?: number; conditions?: Condition[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}

const ORG = 'org-demo-00000001';
const plural = (kind: Kind): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
const creds = { name: 'neon-admin' };
const personal = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ scope: 'Personal', credentialsSecretRef: creds, ...extra });
const organization = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  scope: 'Organization',
  organizationId: ORG,
  credentialsSecretRef: creds,
  ...extra,
});
const project = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  organizationId: ORG,
  projectId: 'quiet-river-00000001',
  credentialsSecretRef: creds,
  ...extra,
});

// [story, kind, metadata.name, spec (undefined: no spec at all), the apiserver's message]
const REFUSED_ON_CREATE: [string, Kind, string, unknown, RegExp][] = [
  ['no spec at all', 'ApiKey', 'no-spec', undefined, /spec: Required value/],
  ['spec is a string', 'ApiKey', 'spec-string', 'scope=Personal', /spec: Invalid value: "string": spec in body must be of type object/],
  ['scope missing', 'ApiKey', 'no-scope', { credentialsSecretRef: creds }, /spec\.scope: Required value/],
  [
    'scope not in the enum',
    'ApiKey',
    'team-scope',
    personal({ scope: 'Team' }),
    /spec\.scope: Unsupported value: "Team": supported values: "Personal", "Organization"/,
  ],
  [
    'scope of the wrong type',
    'ApiKey',
    'scope-number',
    personal({ scope: 42 }),
    /spec\.scope: Invalid value: "integer": spec\.scope in body must be of type string/,
  ],
  [
    'Organization without organizationId',
    'ApiKey',
    'org-no-id',
    { scope: 'Organization', credentialsSecretRef: creds },
    /organizationId is required when scope is Organization/,
  ],
  ['Personal with an organizationId', 'ApiKey', 'personal-org', personal({ organizationId: ORG }), /organizationId is not allowed when scope is Personal/],
  ['organizationId empty', 'ApiKey', 'org-empty', organization({ organizationId: '' }), /spec\.organizationId in body should be at least 5 chars long/],
  [
    'organizationId over-long',
    'ApiKey',
    'org-long',
    organization({ organizationId: `org-${'x'.repeat(200)}` }),
    /spec\.organizationId: Too long: may not be (more|longer) than 64/,
  ],
  [
    'credentialsSecretRef missing (and no issuerRef)',
    'ApiKey',
    'no-creds',
    { scope: 'Personal' },
    /spec: Invalid value: "object": exactly one of issuerRef and credentialsSecretRef must be set/,
  ],
  [
    'both credentialsSecretRef and issuerRef',
    'ProjectApiKey',
    'both-creds',
    { organizationId: 'org-demo-00000001', projectId: 'quiet-river-00000001', credentialsSecretRef: creds, issuerRef: { name: 'team' } },
    /exactly one of issuerRef and credentialsSecretRef must be set/,
  ],
  [
    'a Personal key through an issuer',
    'ApiKey',
    'personal-issuer',
    { scope: 'Personal', issuerRef: { name: 'team' } },
    /a Personal key is never issued through an issuer/,
  ],
  [
    'deletionPolicy Retain through an issuer',
    'ProjectApiKey',
    'retain-issuer',
    { projectId: 'quiet-river-00000001', issuerRef: { name: 'team' }, deletionPolicy: 'Retain' },
    /deletionPolicy Retain is not allowed with issuerRef/,
  ],
  [
    'deletionPolicy Retain through an issuer (Organization)',
    'ApiKey',
    'retain-issuer-org',
    { scope: 'Organization', issuerRef: { name: 'team' }, deletionPolicy: 'Retain' },
    /deletionPolicy Retain is not allowed with issuerRef/,
  ],
  [
    'credentialsSecretRef without a name',
    'ApiKey',
    'creds-no-name',
    personal({ credentialsSecretRef: { key: 'apiKey' } }),
    /spec\.credentialsSecretRef\.name: Required value/,
  ],
  [
    'credentialsSecretRef of another namespace, as namespace/name',
    'ApiKey',
    'creds-slash',
    personal({ credentialsSecretRef: { name: 'kube-system/neon-admin' } }),
    /spec\.credentialsSecretRef\.name in body should match/,
  ],
  [
    'credentialsSecretRef with a namespace field',
    'ApiKey',
    'creds-ns',
    personal({ credentialsSecretRef: { name: 'neon-admin', namespace: 'kube-system' } }),
    /unknown field "spec\.credentialsSecretRef\.namespace"/,
  ],
  [
    'credentialsSecretRef.name in capitals',
    'ApiKey',
    'creds-caps',
    personal({ credentialsSecretRef: { name: 'Neon_Admin' } }),
    /spec\.credentialsSecretRef\.name in body should match/,
  ],
  [
    'credentialsSecretRef.name over-long',
    'ApiKey',
    'creds-long',
    personal({ credentialsSecretRef: { name: 'a'.repeat(254) } }),
    /spec\.credentialsSecretRef\.name: Too long: may not be (more|longer) than 253/,
  ],
  [
    'credentialsSecretRef.key with a slash',
    'ApiKey',
    'creds-key',
    personal({ credentialsSecretRef: { name: 'neon-admin', key: '../token' } }),
    /spec\.credentialsSecretRef\.key in body should match/,
  ],
  [
    'credentialsSecretRef of the wrong type',
    'ApiKey',
    'creds-string',
    personal({ credentialsSecretRef: 'neon-admin' }),
    /spec\.credentialsSecretRef: Invalid value: "string": spec\.credentialsSecretRef in body must be of type object/,
  ],
  ['keyName empty', 'ApiKey', 'name-empty', personal({ keyName: '' }), /spec\.keyName in body should be at least 1 chars long/],
  [
    'keyName over-long (no room for the attempt suffix)',
    'ApiKey',
    'name-long',
    personal({ keyName: 'k'.repeat(56) }),
    /spec\.keyName: Too long: may not be (more|longer) than 55/,
  ],
  ['keyName with spaces and quotes', 'ApiKey', 'name-spaces', personal({ keyName: 'my key"; drop' }), /spec\.keyName in body should match/],
  ['keyName starting with a dash', 'ApiKey', 'name-dash', personal({ keyName: '-rf' }), /spec\.keyName in body should match/],
  ['keyName of the wrong type', 'ApiKey', 'name-number', personal({ keyName: 7 }), /spec\.keyName in body must be of type string/],
  ['secret.name invalid', 'ApiKey', 'target-caps', personal({ secret: { name: 'My.Secret!' } }), /spec\.secret\.name in body should match/],
  ['secret.key with a slash', 'ApiKey', 'target-key', personal({ secret: { key: 'a/b' } }), /spec\.secret\.key in body should match/],
  [
    'deletionPolicy not in the enum',
    'ApiKey',
    'policy-delete',
    personal({ deletionPolicy: 'Delete' }),
    /spec\.deletionPolicy: Unsupported value: "Delete": supported values: "Revoke", "Retain"/,
  ],
  ['an unknown spec field', 'ApiKey', 'unknown-field', personal({ rotateEvery: '24h' }), /unknown field "spec\.rotateEvery"/],
  ['metadata.name not a DNS subdomain', 'ApiKey', 'Bad_Name', personal(), /metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/],
  ['metadata.name over-long', 'ApiKey', 'n'.repeat(254), personal(), /metadata\.name: Invalid value: "n+": must be no more than 253 characters/],
  ['ProjectApiKey without projectId', 'ProjectApiKey', 'no-project', { organizationId: ORG, credentialsSecretRef: creds }, /spec\.projectId: Required value/],
  [
    'ProjectApiKey without organizationId (and no issuer to take it from)',
    'ProjectApiKey',
    'no-org',
    { projectId: 'quiet-river-00000001', credentialsSecretRef: creds },
    /spec: Invalid value: "object": organizationId is required \(unless issuerRef names an issuer\)/,
  ],
  [
    'ProjectApiKey projectId of the wrong type',
    'ProjectApiKey',
    'project-number',
    project({ projectId: 12345 }),
    /spec\.projectId: Invalid value: "integer": spec\.projectId in body must be of type string/,
  ],
  [
    'ProjectApiKey projectId over-long',
    'ProjectApiKey',
    'project-long',
    project({ projectId: 'p'.repeat(129) }),
    /spec\.projectId: Too long: may not be (more|longer) than 64/,
  ],
  [
    'the credentials Secret itself as the target Secret',
    'ApiKey',
    'overwrite-creds',
    personal({ secret: { name: 'neon-admin' } }),
    /secret\.name must not name the credentials Secret/,
  ],
  [
    'a ProjectApiKey writing into its credentials Secret',
    'ProjectApiKey',
    'overwrite-creds-p',
    project({ secret: { name: 'neon-admin' } }),
    /secret\.name must not name the credentials Secret/,
  ],
  // Ids become path segments of platform requests: anything but the platform's id shape could
  // rewrite the request (organizationId ".." made POST /organizations/../api_keys a personal key).
  ...[
    '..',
    '.',
    '../..',
    'org-x/..',
    'org-x/../../api_keys',
    '%2e%2e',
    'org-%2e%2e',
    'org-x%2F..',
    'ORG-UPPER',
    'org-x?limit=1',
    'org-x#frag',
    'org-x y',
    'org-x\n',
    'org-',
    'org--x',
    'org-x-',
    'org-x_y',
    'org-x.y',
    'org-ünï',
    'x-not-org',
  ].map((organizationId, i): [string, Kind, string, unknown, RegExp] => [
    `organizationId ${JSON.stringify(organizationId)}`,
    i % 2 === 0 ? 'ApiKey' : 'ProjectApiKey',
    `hostile-org-${i}`,
    i % 2 === 0 ? organization({ organizationId }) : project({ organizationId }),
    /spec\.organizationId in body should match|spec\.organizationId in body should be at least/,
  ]),
  ...['..', '.', 'quiet-river-00000001/..', '../../api_keys', '%2e%2e', 'Quiet-River', 'p/q', 'p?x=1', 'p#x', 'p q', '-p', 'p-', 'p_q', 'p.q', ''].map(
    (projectId, i): [string, Kind, string, unknown, RegExp] => [
      `projectId ${JSON.stringify(projectId)}`,
      'ProjectApiKey',
      `hostile-project-${i}`,
      project({ projectId }),
      /spec\.projectId in body should (match|be at least)/,
    ],
  ),
  ['ProjectApiKey with a scope field', 'ProjectApiKey', 'project-scope', project({ scope: 'Organization' }), /unknown field "spec\.scope"/],
  // spec.secret.template: the operator's own names, unknown fields, and what a data entry may hold.
  ...(
    [
      ['template label keys.neon.dev/key-id', { labels: { 'keys.neon.dev/key-id': '1' } }, /labels may not set the operator's own/],
      ['template label app.kubernetes.io/managed-by', { labels: { 'app.kubernetes.io/managed-by': 'helm' } }, /labels may not set the operator's own/],
      ['template annotation keys.neon.dev/signature', { annotations: { 'keys.neon.dev/signature': 'forged' } }, /annotations may not set the operator's own/],
      [
        'template annotation app.kubernetes.io/managed-by',
        { annotations: { 'app.kubernetes.io/managed-by': 'x' } },
        /annotations may not set the operator's own/,
      ],
      ['template label name with a space', { labels: { 'bad name': 'x' } }, /label names must be \[prefix\/\]name/],
      ['template label name over 63 characters', { labels: { [`l${'x'.repeat(63)}`]: 'x' } }, /label names must be \[prefix\/\]name/],
      ['template annotation name with two slashes', { annotations: { 'a/b/c': 'x' } }, /annotation names must be \[prefix\/\]name/],
      ['template label value with a space', { labels: { team: 'pay ments' } }, /spec\.secret\.template\.labels\.team in body should match/],
      [
        'template label value over 63 characters',
        { labels: { team: 'x'.repeat(64) } },
        /spec\.secret\.template\.labels\.team: Too long: may not be (more|longer) than 63/,
      ],
      [
        'template annotation value over 4096 characters',
        { annotations: { note: 'x'.repeat(4097) } },
        /spec\.secret\.template\.annotations\.note: Too long: may not be (more|longer) than 4096/,
      ],
      [
        '33 template labels',
        { labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`l${i}`, 'x'])) },
        /spec\.secret\.template\.labels: Too many: 33: must have at most 32 items/,
      ],
      ['template data field not in the set', { data: { TOKEN: 'Password' } }, /spec\.secret\.template\.data\.TOKEN: Unsupported value: "Password"/],
      ['template data key with a slash', { data: { 'a/b': 'Key' } }, /data keys must be valid Secret keys/],
      ['template data naming the default secret.key', { data: { apiKey: 'KeyId' } }, /template\.data may not name secret\.key/],
      ['template data ProjectId on an ApiKey', { data: { PROJECT: 'ProjectId' } }, /spec\.secret\.template\.data\.PROJECT: Unsupported value: "ProjectId"/],
      ['template data OrganizationId on a Personal key', { data: { ORG: 'OrganizationId' } }, /a Personal key has no OrganizationId/],
      ['a template with an unknown field', { stringData: { a: 'b' } }, /unknown field "spec\.secret\.template\.stringData"/],
    ] as [string, Record<string, unknown>, RegExp][]
  ).map(([story, template, message], i): [string, Kind, string, unknown, RegExp] => [
    story,
    'ApiKey',
    `bad-template-${i}`,
    personal({ secret: { template } }),
    message,
  ]),
  [
    'template data naming secret.key',
    'ProjectApiKey',
    'bad-template-key',
    project({ secret: { key: 'token', template: { data: { token: 'Key' } } } }),
    /template\.data may not name secret\.key/,
  ],
  // spec.usage.unusedAfter: a Go duration of at least 1s.
  ...(
    [
      ['30d', /spec\.usage\.unusedAfter in body should match/],
      ['720', /spec\.usage\.unusedAfter in body should match/],
      ['-1h', /spec\.usage\.unusedAfter in body should match/],
      ['1 h', /spec\.usage\.unusedAfter in body should match/],
      ['P30D', /spec\.usage\.unusedAfter in body should match/],
      ['0s', /unusedAfter must be a duration of at least 1s/],
      ['500ms', /unusedAfter must be a duration of at least 1s/],
      ['', /spec\.usage\.unusedAfter in body should be at least 1 chars long/],
      [`${'1'.repeat(70)}h`, /spec\.usage\.unusedAfter: Too long: may not be (more|longer) than 64/],
      [720, /spec\.usage\.unusedAfter in body must be of type string/],
    ] as [unknown, RegExp][]
  ).map(([unusedAfter, message], i): [string, Kind, string, unknown, RegExp] => [
    `usage.unusedAfter ${JSON.stringify(unusedAfter)}`,
    i % 2 === 0 ? 'ApiKey' : 'ProjectApiKey',
    `bad-unused-after-${i}`,
    i % 2 === 0 ? personal({ usage: { unusedAfter } }) : project({ usage: { unusedAfter } }),
    message,
  ]),
  ['usage with an unknown field', 'ApiKey', 'usage-unknown', personal({ usage: { notifyAfter: '1h' } }), /unknown field "spec\.usage\.notifyAfter"/],
];

// [story, kind, spec accepted at create, change applied by an update, the apiserver's message]
const REFUSED_ON_UPDATE: [string, Kind, Record<string, unknown>, (spec: Record<string, unknown>) => Record<string, unknown>, RegExp][] = [
  ['scope Personal -> Organization', 'ApiKey', personal(), (s) => ({ ...s, scope: 'Organization', organizationId: ORG }), /scope is immutable/],
  ['organizationId changed', 'ApiKey', organization(), (s) => ({ ...s, organizationId: 'org-other-00000002' }), /organizationId is immutable/],
  [
    'organizationId removed from an Organization key',
    'ApiKey',
    organization(),
    ({ organizationId: _drop, ...rest }) => rest,
    /organizationId is required when scope is Organization/,
  ],
  ['ProjectApiKey projectId changed', 'ProjectApiKey', project(), (s) => ({ ...s, projectId: 'bold-meadow-00000002' }), /projectId is immutable/],
  ['ProjectApiKey organizationId changed', 'ProjectApiKey', project(), (s) => ({ ...s, organizationId: 'org-other-00000002' }), /organizationId is immutable/],
  [
    "a template given the operator's key-id annotation by an update",
    'ProjectApiKey',
    project({ secret: { template: { labels: { team: 'a' } } } }),
    (s) => ({ ...s, secret: { template: { annotations: { 'keys.neon.dev/key-id': '1' } } } }),
    /annotations may not set the operator's own/,
  ],
];

describe('bad and hostile input', () => {
  let otherNamespace: string;
  const { logger, lines: logLines } = capturedLog('debug');

  const admin = async <T>(method: string, path: string): Promise<T> => {
    const response = await fetch(`${suite.emulator.adminUrl}${path}`, { method });
    if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status}`);
    return (await response.json()) as T;
  };
  const requestsTo = async (method: string, route: string): Promise<number> =>
    (await admin<{ method: string; route: string; count: number }[]>('GET', '/requests'))
      .filter((r) => r.method === method && r.route === route)
      .reduce((n, r) => n + r.count, 0);
  const keyCreations = async (): Promise<number> =>
    (await requestsTo('POST', '/api/v2/api_keys')) + (await requestsTo('POST', '/api/v2/organizations/:org_id/api_keys'));

  const create = (kind: Kind, name: string, spec: unknown, metadata: Record<string, unknown> = {}): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: plural(kind),
      fieldValidation: 'Strict',
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace: suite.namespace, ...metadata }, ...(spec === undefined ? {} : { spec }) },
    });
  const get = async (kind: Kind, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name })) as Resource;
  const refusal = async (promise: Promise<unknown>): Promise<string> => {
    try {
      await promise;
    } catch (error) {
      if (!(error instanceof ApiException)) throw error;
      expect([400, 422]).toContain(error.code);
      const body = typeof error.body === 'string' ? (JSON.parse(error.body) as { message?: string }) : (error.body as { message?: string });
      return body.message ?? '';
    }
    throw new Error('the apiserver accepted it');
  };
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const untilReason = (kind: Kind, name: string, type: string, reason: string, timeoutMs = 20_000): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        return condition(r, type)?.reason === reason ? r : undefined;
      },
      timeoutMs,
      `${kind} ${name} ${type} reason ${reason}`,
    );
  const untilReady = (kind: Kind, name: string): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        return condition(r, 'Ready')?.status === 'True' && intentSettled(r) ? r : undefined;
      },
      20_000,
      `${kind} ${name} Ready`,
    );
  const secret = (name: string, data: Record<string, string>, ns = suite.namespace) =>
    suite.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: data } });

  const suite = operatorSuite({
    namespaces: ['bad-input', 'bad-input-other'],
    credentials: false,
    before: async (s) => {
      otherNamespace = s.namespaces[1] ?? '';
      await secret('neon-admin', { apiKey: s.adminKey });
      await secret('neon-member', { apiKey: s.userKey('bob') });
      await secret('neon-outsider', { apiKey: s.userKey('carol') });
      await secret('neon-bogus', { apiKey: 'x'.repeat(64) });
      await secret('neon-wrong-key', { token: s.adminKey });
      await secret('neon-empty', { apiKey: '' });
      // An administrator's key in ANOTHER namespace: a resource here must not be able to use it.
      await secret('stolen-admin', { apiKey: s.adminKey }, otherNamespace);
    },
    operator: (s) => ({
      namespace: s.namespace,
      workers: 4,
      driftIntervalMs: 5_000,
      pendingGraceMs: 5_000,
      logger,
      identity: 'bad-input',
    }),
  });

  describe('refused by the apiserver with a message naming the field and the rule', () => {
    it.each(REFUSED_ON_CREATE.map((c) => [c[0], c] as const))('create: %s', async (_story, [, kind, name, spec, message]) => {
      expect(await refusal(create(kind, name, spec))).toMatch(message);
    });

    it.each(REFUSED_ON_UPDATE.map((c) => [c[0], c] as const))('update: %s', async (story, [, kind, spec, change, message]) => {
      const name = `immutable-${REFUSED_ON_UPDATE.findIndex((c) => c[0] === story)}`;
      // Retain: these resources get keys; deleting them at the end must not revoke anything it should not.
      await create(kind, name, { ...spec, deletionPolicy: 'Retain', keyName: name });
      // The operator writes the resource meanwhile (finalizer, intent, status): an update from an
      // older read gets 409 before any validation, so it is sent again from a fresh read.
      const replaced = async (): Promise<unknown> => {
        for (let attempt = 1; ; attempt++) {
          const current = await get(kind, name);
          try {
            return await suite.objects.replaceNamespacedCustomObject({
              group,
              version,
              namespace: suite.namespace,
              plural: plural(kind),
              name,
              body: { ...current, spec: change(current.spec) },
            });
          } catch (error) {
            if (!(error instanceof ApiException) || error.code !== 409 || attempt === 20) throw error;
          }
        }
      };
      expect(await refusal(replaced())).toMatch(message);
    });
  });

  describe('accepted by the apiserver, reported by the operator', () => {
    // [story, kind, name, spec, condition type, reason, message]
    const REPORTED: [string, Kind, string, Record<string, unknown>, string, string, RegExp][] = [
      [
        'credentials Secret absent',
        'ApiKey',
        'creds-absent',
        personal({ credentialsSecretRef: { name: 'neon-nowhere' } }),
        'Ready',
        'CredentialsMissing',
        /does not exist in this namespace/,
      ],
      [
        'credentials Secret without the named entry',
        'ApiKey',
        'creds-wrong-key',
        personal({ credentialsSecretRef: { name: 'neon-wrong-key' } }),
        'Ready',
        'CredentialsMissing',
        /has no \(or an empty\) entry/,
      ],
      [
        'credentials Secret with an empty key',
        'ApiKey',
        'creds-empty',
        personal({ credentialsSecretRef: { name: 'neon-empty' } }),
        'Ready',
        'CredentialsMissing',
        /has no \(or an empty\) entry/,
      ],
      [
        "an administrator's credentials Secret of another namespace",
        'ApiKey',
        'creds-cross-ns',
        organization({ credentialsSecretRef: { name: 'stolen-admin' } }),
        'Ready',
        'CredentialsMissing',
        /does not exist in this namespace/,
      ],
      [
        'credentials the platform rejects',
        'ApiKey',
        'creds-bogus',
        organization({ credentialsSecretRef: { name: 'neon-bogus' } }),
        'KeyIssued',
        'Unauthorized',
        /rejected the credentials \(401\)/,
      ],
      [
        "a member's (non-admin) credentials asking for an organization key",
        'ApiKey',
        'member-org-key',
        organization({ credentialsSecretRef: { name: 'neon-member' } }),
        'KeyIssued',
        'Forbidden',
        /may not do this \(403\)/,
      ],
      // Not a member: refused before any create or place in the organization's line (GET /users/me/organizations, issue 41).
      [
        "a non-member's credentials asking for an organization key",
        'ApiKey',
        'outsider-org-key',
        organization({ credentialsSecretRef: { name: 'neon-outsider' } }),
        'KeyIssued',
        'NotAllowed',
        /do not belong to organization org-/,
      ],
      [
        "a non-member's credentials asking for a project key",
        'ProjectApiKey',
        'outsider-project-key',
        project({ credentialsSecretRef: { name: 'neon-outsider' } }),
        'KeyIssued',
        'NotAllowed',
        /do not belong to organization org-/,
      ],
      [
        'an organization that does not exist',
        'ApiKey',
        'unknown-org',
        organization({ organizationId: 'org-nowhere-00000000' }),
        'KeyIssued',
        'NotAllowed',
        /do not belong to organization org-nowhere-00000000/,
      ],
      [
        'a project that does not exist',
        'ProjectApiKey',
        'unknown-project',
        project({ projectId: 'no-such-project-000' }),
        'KeyIssued',
        'NotFound',
        /does not exist or is not visible/,
      ],
      [
        "a project outside the organization (someone's personal project)",
        'ProjectApiKey',
        'foreign-project',
        project({ projectId: 'calm-forest-00000003' }),
        'KeyIssued',
        'NotFound',
        /does not exist or is not visible/,
      ],
      // The default target is metadata.name, which the CRD's rules cannot see: the operator refuses it.
      [
        'a resource named like its credentials Secret (the default target)',
        'ApiKey',
        'neon-admin',
        personal(),
        'Ready',
        'InvalidSpec',
        /is the credentials Secret/,
      ],
    ];
    const FAILING = REPORTED.filter((r) => ['Unauthorized', 'Forbidden', 'NotFound'].includes(r[5])).length;

    it.each(REPORTED.map((c) => [c[0], c] as const))('%s', async (_story, [, kind, name, spec, type, reason, message]) => {
      await create(kind, name, { ...spec, keyName: name });
      const reported = await untilReason(kind, name, type, reason);
      expect(condition(reported, type)?.message).toMatch(message);
      expect(condition(reported, 'Ready')?.status).toBe('False');
      expect(reported.status?.keyId).toBeUndefined();
      const keys = (await admin<AdminKey[]>('GET', '/keys')).filter((k) => k.name.startsWith(`${name}-`));
      expect(keys).toEqual([]);
    });

    it('the credentials Secret named as a target is left exactly as it was', async () => {
      const creds = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-admin' });
      expect(Buffer.from(creds.data?.apiKey ?? '', 'base64').toString('utf8')).toBe(suite.adminKey);
      expect(creds.metadata?.ownerReferences ?? []).toEqual([]);
    });

    it('a second resource claiming the Secret of a first is refused, the first keeps its key', async () => {
      await create('ApiKey', 'first-claim', personal({ keyName: 'first-claim', secret: { name: 'shared-target' } }));
      const first = await untilReady('ApiKey', 'first-claim');
      await create('ApiKey', 'second-claim', personal({ keyName: 'second-claim', secret: { name: 'shared-target' } }));
      await untilReason('ApiKey', 'second-claim', 'Ready', 'SecretConflict');
      const target = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'shared-target' });
      expect(target.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(first.status?.keyId));
      expect((await get('ApiKey', 'first-claim')).status?.keyId).toBe(first.status?.keyId);
    });

    it('an unreadable create-pending annotation is cleared and the key issued', async () => {
      await create('ApiKey', 'garbled-intent', personal({ keyName: 'garbled-intent' }), {
        finalizers: ['keys.neon.dev/finalizer'],
        annotations: { 'keys.neon.dev/create-pending': '{"attempt": [1, 2' },
      });
      await untilReady('ApiKey', 'garbled-intent');
      const events = await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: 'involvedObject.name=garbled-intent' });
      expect(events.items.map((e) => e.reason)).toContain('InvalidAnnotation');
    });

    it("a forged create-pending annotation naming someone else's key never gets that key revoked", async () => {
      // A live key of the same user, that this resource never asked for.
      const victim = await new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.adminKey, retry: { maxAttempts: 1 } }).createPersonalKey(
        'victim-abcd1234',
      );
      const forged = JSON.stringify({ attempt: 'victim-abcd1234', startedAt: '2000-01-01T00:00:00Z', holder: 'attacker' });
      await create('ApiKey', 'forged-intent', personal({ keyName: 'forged-intent' }), {
        finalizers: ['keys.neon.dev/finalizer'],
        annotations: { 'keys.neon.dev/create-pending': forged },
      });
      // The same forgery naming the credentials' own key, on another resource.
      const forgedCreds = JSON.stringify({ attempt: 'console-bootstrap', startedAt: '2000-01-01T00:00:00Z', holder: 'attacker' });
      await create('ApiKey', 'forged-creds', personal({ keyName: 'forged-creds' }), {
        finalizers: ['keys.neon.dev/finalizer'],
        annotations: { 'keys.neon.dev/create-pending': forgedCreds },
      });
      await untilReady('ApiKey', 'forged-intent');
      await untilReady('ApiKey', 'forged-creds');
      const keys = await admin<AdminKey[]>('GET', '/keys');
      expect(keys.find((k) => k.id === victim.id)?.revoked).toBe(false);
      expect(keys.filter((k) => k.name === 'console-bootstrap' && k.revoked)).toEqual([]);
      for (const name of ['forged-intent', 'forged-creds']) {
        const events = await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: `involvedObject.name=${name}` });
        expect(events.items.map((e) => e.reason)).toContain('InvalidAnnotation');
      }
    });

    it('refused resources cost a bounded number of platform calls (no hot loop), and the operator keeps running', async () => {
      const before = await keyCreations();
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const during = (await keyCreations()) - before;
      // Each failing resource backs off 1 s, 2 s, 4 s, 8 s...: at most a couple of attempts each in 6 s.
      expect(during).toBeLessThanOrEqual(FAILING * 3);
      expect(suite.operator.ready()).toBe(true);
      expect(logLines.filter((l) => l.includes('"reconcile failed"'))).toEqual([]);
      const all = logLines.join('');
      expect(all.includes(suite.adminKey)).toBe(false);
    });
  });
});
