import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createMetrics, routeTemplate } from '../../../../src/operator/keys/status/metrics.ts';
import { WorkQueue, type Timers } from '../../../../src/operator/runtime/queue.ts';

/** A clock that moves only when told: the queue's durations without waiting. */
class FakeTimers implements Timers {
  #now = 0;
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  setTimeout(): unknown {
    return undefined;
  }
  clearTimeout(): void {}
}

const SECRET = 'abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01';

describe('createMetrics', () => {
  it("serves the runtime under controller-runtime's names and labels, the domain under the neon_key_operator_ prefix", async () => {
    const m = createMetrics(new Registry(), { version: '1.2.3', revision: '0123abc', leaseName: 'neon-key-operator-leader' });
    m.controller.started(['ApiKey']);
    m.controller.reconciled('ProjectApiKey', 'requeue_after', 0.2);
    m.controller.reconciled('ProjectApiKey', 'error', 0.1);
    m.controller.workers('ProjectApiKey', 1);
    m.observePlatformRequest('get', '/api/v2/projects/p-1/operations?limit=10', 200, 0.05);
    m.managedKeys.set({ namespace: 'team-a', kind: 'ApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, 3);
    m.retiredKeys.inc({ outcome: 'revoked_in_use' });
    m.setLeading(true);
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ metrics: m.workQueue('keys'), timers });
    q.add('ProjectApiKey/team-a/a');
    q.add('ProjectApiKey/team-a/b', { priority: 'low' });
    q.done((await q.get())!);
    q.addRateLimited('ProjectApiKey/team-a/c');
    const inFlight = (await q.get())!;
    timers.advance(1_500);

    const text = await m.registry.metrics();
    for (const line of [
      'controller_runtime_reconcile_total{controller="projectapikey",result="requeue_after"} 1',
      'controller_runtime_reconcile_total{controller="projectapikey",result="error"} 1',
      'controller_runtime_reconcile_total{controller="projectapikey",result="success"} 0',
      // A controller's series start at 0 when it starts, as controller-runtime's do.
      'controller_runtime_reconcile_total{controller="apikey",result="success"} 0',
      'controller_runtime_reconcile_errors_total{controller="apikey"} 0',
      'controller_runtime_reconcile_errors_total{controller="projectapikey"} 1',
      'controller_runtime_reconcile_time_seconds_count{controller="projectapikey"} 2',
      'controller_runtime_reconcile_time_seconds_bucket{le="0.15",controller="projectapikey"} 1',
      'controller_runtime_active_workers{controller="projectapikey"} 1',
      'controller_runtime_active_workers{controller="apikey"} 0',
      'workqueue_adds_total{name="projectapikey",controller="projectapikey"} 2',
      'workqueue_depth{name="projectapikey",controller="projectapikey",priority="0"} 0',
      'workqueue_depth{name="projectapikey",controller="projectapikey",priority="-100"} 0',
      'workqueue_queue_duration_seconds_count{name="projectapikey",controller="projectapikey"} 2',
      'workqueue_work_duration_seconds_count{name="projectapikey",controller="projectapikey"} 1',
      'workqueue_retries_total{name="projectapikey",controller="projectapikey"} 1',
      // The key in flight for 1.5 s (the fake clock's), the only one.
      'workqueue_unfinished_work_seconds{name="projectapikey",controller="projectapikey"} 1.5',
      'workqueue_longest_running_processor_seconds{name="projectapikey",controller="projectapikey"} 1.5',
      'workqueue_unfinished_work_seconds{name="apikey",controller="apikey"} 0',
      'leader_election_master_status{name="neon-key-operator-leader"} 1',
      'neon_key_operator_platform_requests_total{method="GET",route="/projects/{project_id}/operations",status="200"} 1',
      'neon_key_operator_platform_request_duration_seconds_count{method="GET",route="/projects/{project_id}/operations"} 1',
      'neon_key_operator_managed_keys{namespace="team-a",kind="ApiKey",condition="Ready",status="True",reason="Ready"} 3',
      // Every outcome from zero, so that the first retirement is an increase a rule sees.
      'neon_key_operator_retired_keys_total{outcome="revoked_in_use"} 1',
      'neon_key_operator_retired_keys_total{outcome="revoked"} 0',
      'neon_key_operator_retired_keys_total{outcome="gone"} 0',
      `neon_key_operator_build_info{version="1.2.3",revision="0123abc",node_version="${process.version}"} 1`,
      // The names of before, for one release (docs/upgrading.md).
      'neon_key_operator_reconcile_total{kind="ProjectApiKey",result="success"} 1',
      'neon_key_operator_reconcile_total{kind="ProjectApiKey",result="error"} 1',
      'neon_key_operator_reconcile_duration_seconds_count{kind="ProjectApiKey"} 2',
      'neon_key_operator_workqueue_adds_total{name="keys"} 2',
      'neon_key_operator_workqueue_depth{name="keys"} 0',
      'neon_key_operator_workqueue_queue_duration_seconds_count{name="keys"} 2',
      'neon_key_operator_workqueue_work_duration_seconds_count{name="keys"} 1',
      'neon_key_operator_workqueue_retries_total{name="keys"} 1',
      'neon_key_operator_leader 1',
    ]) {
      expect(text).toContain(line);
    }
    q.done(inFlight);
    expect(await m.registry.metrics()).toContain('workqueue_unfinished_work_seconds{name="projectapikey",controller="projectapikey"} 0');
    q.shutDown();
    // prom-client's process and Node.js metrics without a prefix (and with it, deprecated).
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'neon_key_operator_process_cpu_user_seconds_total',
    ]) {
      expect(text).toMatch(new RegExp(`^${name} `, 'm'));
    }
    const names = new Set(
      text
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('#'))
        .map((l) => l.split(/[{ ]/)[0]),
    );
    for (const name of names) expect(name).toMatch(/^(neon_key_operator_|controller_runtime_|workqueue_|leader_election_master_status$|process_|nodejs_)/);
  });

  it('leaves the deprecated names out when asked, and has no leader series without leader election', async () => {
    const m = createMetrics(new Registry(), { deprecated: false });
    m.setLeading(true);
    const text = await m.registry.metrics();
    expect(text).not.toMatch(/^neon_key_operator_(reconcile|workqueue|leader|process|nodejs)/m);
    expect(text).not.toContain('leader_election_master_status');
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
  });

  it('counts managed_keys when scraped, from the source it is given, and drops series that are gone', async () => {
    const m = createMetrics(new Registry(), { defaultMetrics: false });
    let calls = 0;
    let counts = [
      { labels: { namespace: 'team-a', kind: 'ProjectApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, value: 2 },
      { labels: { namespace: 'team-a', kind: 'ProjectApiKey', condition: 'Ready', status: 'False', reason: 'CredentialsRefused' }, value: 1 },
    ];
    m.countManagedKeysWith(() => {
      calls++;
      return counts;
    });
    expect(calls).toBe(0);
    let text = await m.registry.metrics();
    expect(calls).toBe(1);
    expect(text).toContain('neon_key_operator_managed_keys{namespace="team-a",kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 2');
    expect(text).toContain(
      'neon_key_operator_managed_keys{namespace="team-a",kind="ProjectApiKey",condition="Ready",status="False",reason="CredentialsRefused"} 1',
    );
    counts = [{ labels: { namespace: 'team-a', kind: 'ProjectApiKey', condition: 'Ready', status: 'True', reason: 'Ready' }, value: 3 }];
    text = await m.registry.metrics();
    expect(calls).toBe(2);
    expect(text).toContain('neon_key_operator_managed_keys{namespace="team-a",kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 3');
    expect(text).not.toContain('status="False"');
    // Without a source, what was last counted or set stays.
    m.countManagedKeysWith(undefined);
    text = await m.registry.metrics();
    expect(calls).toBe(2);
    expect(text).toContain('neon_key_operator_managed_keys{namespace="team-a",kind="ProjectApiKey",condition="Ready",status="True",reason="Ready"} 3');
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
