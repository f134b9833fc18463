// spec.secret.template (src/operator/keys/secret/secret-template.ts): the Secret built with it, kept in
// line by a rewrite from its primary entry (no new key), the operator's own names never taken
// from it, and a tampered primary entry still a new key.
import { describe, expect, it } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import {
  ANNOTATION_TEMPLATED,
  rewrittenSecret,
  secretInLine,
  templatedData,
  templatedMetadata,
  type TemplateValues,
} from '../../../../src/operator/keys/secret/secret-template.ts';
import type { KeyResource } from '../../../../src/operator/resources/schema.ts';
import { NAMESPACE, keyResource, rig } from '../fakes.ts';

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const text = (s: string | undefined): string | undefined => (s === undefined ? undefined : Buffer.from(s, 'base64').toString('utf8'));
const values: TemplateValues = {
  key: 'k'.repeat(64),
  keyId: 42,
  keyName: 'ci-abcd1234',
  organizationId: 'org-1',
  projectId: 'p-1',
  platformUrl: 'https://example.test/api/v2',
};

describe('the template, pure', () => {
  it('derives each data entry from its field, and never replaces the key entry', () => {
    const data = templatedData(
      'apiKey',
      { data: { NEON_API_KEY: 'Key', ID: 'KeyId', NAME: 'KeyName', ORG: 'OrganizationId', PROJECT: 'ProjectId', HOST: 'PlatformUrl', apiKey: 'KeyId' } },
      values,
    );
    expect(Object.fromEntries(Object.entries(data).map(([k, v]) => [k, text(v)]))).toEqual({
      apiKey: values.key,
      NEON_API_KEY: values.key,
      ID: '42',
      NAME: 'ci-abcd1234',
      ORG: 'org-1',
      PROJECT: 'p-1',
      HOST: 'https://example.test/api/v2',
    });
  });

  it('leaves out what it does not know', () => {
    expect(
      Object.keys(templatedData('apiKey', { data: { PROJECT: 'ProjectId', NAME: 'KeyName' } }, { ...values, projectId: undefined, keyName: undefined })),
    ).toEqual(['apiKey']);
  });

  it("never takes the operator's own label or annotation names from a template", () => {
    const out = templatedMetadata(
      { labels: { [`app.kubernetes.io/managed-by`]: 'neon-key-operator' }, annotations: { 'keys.neon.dev/key-id': '42' } },
      {
        labels: { 'app.kubernetes.io/managed-by': 'someone-else', 'keys.neon.dev/owner': 'x', team: 'payments' },
        annotations: { 'keys.neon.dev/key-id': '7', 'keys.neon.dev/templated': '{}', 'reloader.stakater.com/match': 'true' },
      },
      'apiKey',
    );
    expect(out.labels).toEqual({ 'app.kubernetes.io/managed-by': 'neon-key-operator', team: 'payments' });
    expect(out.annotations).toEqual({
      'keys.neon.dev/key-id': '42',
      'reloader.stakater.com/match': 'true',
      [ANNOTATION_TEMPLATED]: JSON.stringify({ labels: ['team'], annotations: ['reloader.stakater.com/match'], data: [] }),
    });
  });

  it('removes what a template set before and no longer does, and keeps what others set', () => {
    const before = templatedMetadata({ labels: { mine: 'x' } }, { labels: { team: 'payments', tier: 'gold' } }, 'apiKey');
    const after = templatedMetadata(before, { labels: { team: 'billing' } }, 'apiKey');
    expect(after.labels).toEqual({ mine: 'x', team: 'billing', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    const none = templatedMetadata(after, undefined, 'apiKey');
    expect(none.labels).toEqual({ mine: 'x', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(none.annotations[ANNOTATION_TEMPLATED]).toBeUndefined();
  });

  it("reads a tampered record of templated names without failing, and never removes the operator's names on its strength", () => {
    for (const record of [
      '{not json',
      '[]',
      '{"labels":"x"}',
      JSON.stringify({ labels: ['app.kubernetes.io/managed-by'], annotations: ['keys.neon.dev/key-id'] }),
    ]) {
      const out = templatedMetadata(
        { labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' }, annotations: { [ANNOTATION_TEMPLATED]: record, 'keys.neon.dev/key-id': '42' } },
        undefined,
        'apiKey',
      );
      expect(out.labels['app.kubernetes.io/managed-by']).toBe('neon-key-operator');
      expect(out.annotations['keys.neon.dev/key-id']).toBe('42');
    }
  });

  it('a Secret is in line exactly when a rewrite would change nothing', () => {
    const template = { labels: { team: 'payments' }, data: { NEON_API_KEY: 'Key' as const } };
    const written = rewrittenSecret(
      { metadata: { name: 's', annotations: { 'keys.neon.dev/key-id': '42' } }, data: { apiKey: b64(values.key) } },
      'apiKey',
      template,
      values,
    );
    expect(secretInLine(written, 'apiKey', template, values)).toBe(true);
    const edits: [string, (s: V1Secret) => void][] = [
      [
        'derived entry deleted',
        (s) => {
          delete s.data!.NEON_API_KEY;
        },
      ],
      [
        'derived entry edited',
        (s) => {
          s.data!.NEON_API_KEY = b64('other');
        },
      ],
      [
        'templated label edited',
        (s) => {
          s.metadata!.labels!.team = 'other';
        },
      ],
      [
        'templated label removed',
        (s) => {
          delete s.metadata!.labels!.team;
        },
      ],
      [
        'managed-by label removed',
        (s) => {
          delete s.metadata!.labels!['app.kubernetes.io/managed-by'];
        },
      ],
      [
        'the record of templated names edited',
        (s) => {
          s.metadata!.annotations![ANNOTATION_TEMPLATED] = '{}';
        },
      ],
    ];
    for (const [story, edit] of edits) {
      const copy = structuredClone(written);
      edit(copy);
      expect([story, secretInLine(copy, 'apiKey', template, values)]).toEqual([story, false]);
    }
    expect(secretInLine(written, 'apiKey', { ...template, data: { OTHER: 'KeyId' } }, values)).toBe(false);
    // What others put on it stays: an entry, a label, an annotation of their own.
    const theirs = structuredClone(written);
    theirs.data!.EXTRA = b64('x');
    theirs.metadata!.labels!.mine = 'y';
    theirs.metadata!.annotations!.note = 'z';
    expect(secretInLine(theirs, 'apiKey', template, values)).toBe(true);
  });

  it("a rewrite removes the entries a template no longer derives, keeps the others' and the key entry's bytes", () => {
    const first = rewrittenSecret(
      { metadata: { name: 's' }, data: { apiKey: b64(values.key), EXTRA: b64('x') } },
      'apiKey',
      { data: { A: 'KeyId', B: 'Key' } },
      values,
    );
    expect(Object.keys(first.data ?? {}).sort()).toEqual(['A', 'B', 'EXTRA', 'apiKey']);
    const second = rewrittenSecret(first, 'apiKey', { data: { C: 'KeyName' } }, values);
    expect(Object.keys(second.data ?? {}).sort()).toEqual(['C', 'EXTRA', 'apiKey']);
    expect(second.data?.apiKey).toBe(first.data?.apiKey);
    const third = rewrittenSecret(second, 'apiKey', { data: { C: 'KeyName' } }, { ...values, keyName: undefined });
    expect(Object.keys(third.data ?? {}).sort()).toEqual(['EXTRA', 'apiKey']);
  });
});

describe('a reconcile with a template', () => {
  const template = {
    labels: { team: 'payments', 'app.kubernetes.io/managed-by': 'helm' },
    annotations: { 'reloader.stakater.com/match': 'true', 'keys.neon.dev/key-id': '1' },
    data: { NEON_API_KEY: 'Key', NEON_PROJECT_ID: 'ProjectId', NEON_API_HOST: 'PlatformUrl' },
  };
  const setup = async () => {
    const r = rig({ platformUrl: 'https://example.test/api/v2' });
    r.kube.putResource(keyResource('ProjectApiKey', 'pk', { spec: { secret: { key: 'apiKey', template } } }));
    await r.settle('ProjectApiKey', 'pk');
    return r;
  };
  const secretOf = (r: Awaited<ReturnType<typeof setup>>): V1Secret => r.kube.secret(NAMESPACE, 'pk')!;

  it("writes the Secret with the template on create; the operator's own names stay its own", async () => {
    const r = await setup();
    const secret = secretOf(r);
    const keyId = r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!.status!.keyId!;
    expect(text(secret.data?.NEON_API_KEY)).toBe(text(secret.data?.apiKey));
    expect(text(secret.data?.NEON_PROJECT_ID)).toBe('p-1');
    expect(text(secret.data?.NEON_API_HOST)).toBe('https://example.test/api/v2');
    expect(secret.metadata?.labels).toEqual({ team: 'payments', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.annotations?.['reloader.stakater.com/match']).toBe('true');
    expect(secret.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(keyId));
  });

  it('a template change rewrites the Secret with the same key; a tampered primary entry is still a new key', async () => {
    const r = await setup();
    const before = r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!;
    const keyId = before.status!.keyId!;
    const key = text(secretOf(r).data?.apiKey);
    r.kube.putResource({
      ...before,
      spec: { ...before.spec, secret: { key: 'apiKey', template: { labels: { team: 'billing' }, data: { TOKEN: 'Key', ID: 'KeyId' } } } },
    } as KeyResource);
    r.platform.calls.length = 0;
    await r.settle('ProjectApiKey', 'pk');
    const secret = secretOf(r);
    expect(r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!.status!.keyId).toBe(keyId);
    expect(r.platform.calls.filter((c) => c.startsWith('create'))).toEqual([]);
    expect(Object.keys(secret.data ?? {}).sort()).toEqual(['ID', 'TOKEN', 'apiKey']);
    expect(text(secret.data?.TOKEN)).toBe(key);
    expect(text(secret.data?.ID)).toBe(String(keyId));
    expect(secret.metadata?.labels).toEqual({ team: 'billing', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.annotations?.['reloader.stakater.com/match']).toBeUndefined();
    expect(r.events.reasons()).toContain('Normal SecretRewritten');
    expect(r.events.events.join('\n')).not.toContain(key);

    // The primary entry edited: SecretTampered, a new key (as without a template).
    secret.data!.apiKey = b64('x'.repeat(64));
    r.kube.secrets.set(`${NAMESPACE}/pk`, secret);
    await r.settle('ProjectApiKey', 'pk');
    const after = r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!;
    expect(after.status!.keyId).not.toBe(keyId);
    expect(r.events.reasons()).toContain('Warning SecretTampered');
    expect(text(secretOf(r).data?.TOKEN)).toBe(text(secretOf(r).data?.apiKey));
  });

  it('a deleted derived entry is repaired in one reconcile, without a platform create', async () => {
    const r = await setup();
    const secret = secretOf(r);
    delete secret.data!.NEON_API_KEY;
    r.kube.secrets.set(`${NAMESPACE}/pk`, secret);
    r.platform.calls.length = 0;
    expect(await r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(text(secretOf(r).data?.NEON_API_KEY)).toBe(text(secretOf(r).data?.apiKey));
    expect(r.platform.calls.filter((c) => c.startsWith('create') || c.startsWith('revoke'))).toEqual([]);
  });
});
