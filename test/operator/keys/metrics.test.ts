import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createMetrics, routeTemplate } from '../../../src/operator/keys/status/metrics.ts';
import { WorkQueue } from '../../../src/operator/runtime/queue.ts';

const SECRET = 'abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01';

describe('createMetrics', () => {
  it('exposes every operator metric with the neon_key_operator_ prefix and its labels', async () => {
    const m = createMetrics(new Registry(), { version: '1.2.3', revision: '0123abc' });
    m.reconcileTotal.inc({ kind: 'ProjectApiKey', result: 'success' });
    m.reconcileDuration.observe({ kind: 'ProjectApiKey' }, 0.2);
    m.observePlatformRequest('get', '/api/v2/projects/p-1/operations?limit=10', 200, 0.05);
    m.managedKeys.set({ kind: 'ApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, 3);
    m.retiredKeys.inc({ outcome: 'revoked_in_use' });
    m.leader.set(1);
    const q = new WorkQueue<string>({ metrics: m.workQueue('projectapikey') });
    q.add('a');
    q.done((await q.get())!);
    q.addRateLimited('b');
    q.shutDown();

    const text = await m.registry.metrics();
    for (const line of [
      'neon_key_operator_reconcile_total{kind="ProjectApiKey",result="success"} 1',
      'neon_key_operator_reconcile_duration_seconds_count{kind="ProjectApiKey"} 1',
      'neon_key_operator_workqueue_adds_total{name="projectapikey"} 1',
      'neon_key_operator_workqueue_depth{name="projectapikey"} 0',
      'neon_key_operator_workqueue_queue_duration_seconds_count{name="projectapikey"} 1',
      'neon_key_operator_workqueue_work_duration_seconds_count{name="projectapikey"} 1',
      'neon_key_operator_workqueue_retries_total{name="projectapikey"} 1',
      'neon_key_operator_platform_requests_total{method="GET",route="/projects/{project_id}/operations",status="200"} 1',
      'neon_key_operator_platform_request_duration_seconds_count{method="GET",route="/projects/{project_id}/operations"} 1',
      'neon_key_operator_managed_keys{kind="ApiKey",condition="Ready",status="True",reason="Ready"} 3',
      // Every outcome from zero, so that the first retirement is an increase a rule sees.
      'neon_key_operator_retired_keys_total{outcome="revoked_in_use"} 1',
      'neon_key_operator_retired_keys_total{outcome="revoked"} 0',
      'neon_key_operator_retired_keys_total{outcome="gone"} 0',
      'neon_key_operator_leader 1',
      `neon_key_operator_build_info{version="1.2.3",revision="0123abc",node_version="${process.version}"} 1`,
    ]) {
      expect(text).toContain(line);
    }
    // default process metrics, prefixed
    expect(text).toContain('neon_key_operator_process_cpu_user_seconds_total');
    for (const name of text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0])) {
      expect(name).toMatch(/^neon_key_operator_/);
    }
  });

  it('counts managed_keys when scraped, from the source it is given, and drops series that are gone', async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    let calls = 0;
    let counts = [
      { labels: { kind: 'ProjectApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, value: 2 },
      { labels: { kind: 'ProjectApiKey', condition: 'Ready', status: 'False', reason: 'CredentialsRefused' }, value: 1 },
    ];
    m.countManagedKeysWith(() => {
      calls++;
      return counts;
    });
    expect(calls).toBe(0);
    let text = await m.registry.metrics();
    expect(calls).toBe(1);
    expect(text).toContain('neon_key_operator_managed_keys{kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 2');
    expect(text).toContain('neon_key_operator_managed_keys{kind="ProjectApiKey",condition="Ready",status="False",reason="CredentialsRefused"} 1');
    counts = [{ labels: { kind: 'ProjectApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, value: 3 }];
    text = await m.registry.metrics();
    expect(calls).toBe(2);
    expect(text).toContain('neon_key_operator_managed_keys{kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 3');
    expect(text).not.toContain('status="False"');
    // Without a source, what was last counted or set stays.
    m.countManagedKeysWith(undefined);
    text = await m.registry.metrics();
    expect(calls).toBe(2);
    expect(text).toContain('neon_key_operator_managed_keys{kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 3');
  });

  it('keeps registries separate, so two operators in one process do not collide', () => {
    expect(() => {
      createMetrics(new Registry(), { defaultMetrics: false });
      createMetrics(new Registry(), { defaultMetrics: false });
    }).not.toThrow();
  });

  it('never lets an id or a secret reach a label: routes are templates', async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    m.observePlatformRequest('DELETE', `/api/v2/api_keys/12345`, 200, 0.01);
    m.observePlatformRequest('POST', `/api/v2/organizations/org-secret-1/api_keys`, 201, 0.01);
    m.observePlatformRequest('GET', `/api/v2/projects/${SECRET}/operations/${SECRET}?cursor=${SECRET}`, 'ECONNRESET', 0.01);
    m.observePlatformRequest('GET', `/api/v2/${SECRET}/${SECRET}`, 404, 0.01);
    const text = await m.registry.metrics();
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('12345');
    expect(text).not.toContain('org-secret-1');
    expect(text).toContain('route="/api_keys/{key_id}"');
    expect(text).toContain('route="/organizations/{org_id}/api_keys"');
    expect(text).toContain('route="/projects/{project_id}/operations/{operation_id}",status="ECONNRESET"');
  });
});

describe('routeTemplate', () => {
  it.each([
    ['/api/v2/api_keys', '/api_keys'],
    ['/api_keys/7', '/api_keys/{key_id}'],
    ['/api/v2/organizations/org-a/api_keys/9', '/organizations/{org_id}/api_keys/{key_id}'],
    ['/api/v2/projects/p-1/branches', '/projects/{project_id}/branches'],
    ['/api/v2/projects/p-1/operations?limit=5&cursor=x', '/projects/{project_id}/operations'],
    ['/api/v2/users/me/organizations', '/users/me/organizations'],
    ['/whatever/unknown', '/{id}/{id}'],
    ['', '/'],
  ])('%s → %s', (path, template) => {
    expect(routeTemplate(path)).toBe(template);
  });
});
