// The key watches (keys/watches.ts) on the generic controller with in-memory informers: which
// ProjectApiKeys an operations change or a project gone from the platform wakes, looked up by
// project through the index (issue 30), not by a scan of every cached ProjectApiKey.
import { afterEach, describe, expect, it } from '@jest/globals';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller } from '../../../src/operator/runtime/controller.ts';
import { keyWatches, projectKeysIn, wakeProject } from '../../../src/operator/keys/watches.ts';
import { FakeInformer } from '../runtime/fake-informer.ts';

const informers: FakeInformer[] = [];
let controller: Controller | undefined;

afterEach(async () => {
  await controller?.stop();
  controller = undefined;
  informers.length = 0;
});

async function start(namespaces: string[]): Promise<{ controller: Controller; projectKeys(ns: string): FakeInformer; woken: string[] }> {
  const woken: string[] = [];
  controller = new Controller({
    kubeConfig: new KubeConfig(),
    reconciler: { reconcile: async () => ({ type: 'Done' }) },
    // Never listed: the fake informers are fed by emit().
    watches: (namespace) => keyWatches(namespace),
    logger: pino({ level: 'silent' }),
    workers: 1,
    namespaces,
    informerFor: (watch) => {
      const informer = new FakeInformer(watch);
      informers.push(informer);
      return informer;
    },
  });
  await controller.start();
  const c = controller;
  const enqueueLow = c.enqueueLow.bind(c);
  c.enqueueLow = (key: string): void => {
    woken.push(key);
    enqueueLow(key);
  };
  return {
    controller: c,
    projectKeys: (ns) => informers.find((i) => i.watch.kind === 'ProjectApiKey' && i.watch.path.includes(`/namespaces/${ns}/`))!,
    woken,
  };
}

function projectKey(namespace: string, name: string, projectId: string, organizationId = 'org-1'): KubernetesObject {
  return {
    apiVersion: 'keys.neon.dev/v1alpha1',
    kind: 'ProjectApiKey',
    metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: '1' },
    spec: { projectId, organizationId, keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
  } as KubernetesObject;
}

describe('the ProjectApiKeys of a project', () => {
  it('are found through the project index, across namespaces, filtered by organization when one is given', async () => {
    const h = await start(['team-a', 'team-b']);
    h.projectKeys('team-a').emit('add', projectKey('team-a', 'a1', 'p-1'));
    h.projectKeys('team-a').emit('add', projectKey('team-a', 'a2', 'p-2'));
    h.projectKeys('team-b').emit('add', projectKey('team-b', 'b1', 'p-1'));
    h.projectKeys('team-b').emit('add', projectKey('team-b', 'b2', 'p-1', 'org-2'));
    expect(projectKeysIn(h.controller, ['p-1']).sort()).toEqual(['ProjectApiKey/team-a/a1', 'ProjectApiKey/team-b/b1', 'ProjectApiKey/team-b/b2']);
    expect(projectKeysIn(h.controller, ['p-1'], 'org-1').sort()).toEqual(['ProjectApiKey/team-a/a1', 'ProjectApiKey/team-b/b1']);
    expect(projectKeysIn(h.controller, ['p-1', 'p-2', 'p-1'], 'org-1').sort()).toEqual([
      'ProjectApiKey/team-a/a1',
      'ProjectApiKey/team-a/a2',
      'ProjectApiKey/team-b/b1',
    ]);
    expect(projectKeysIn(h.controller, ['p-9'])).toEqual([]);
  });

  it('follow a resource moved to another project, and forget a deleted one', async () => {
    const h = await start(['team-a']);
    h.projectKeys('team-a').emit('add', projectKey('team-a', 'a1', 'p-1'));
    h.projectKeys('team-a').emit('update', {
      ...projectKey('team-a', 'a1', 'p-2'),
      metadata: { name: 'a1', namespace: 'team-a', uid: 'uid-a1', resourceVersion: '2' },
    });
    expect(projectKeysIn(h.controller, ['p-1'])).toEqual([]);
    expect(projectKeysIn(h.controller, ['p-2'])).toEqual(['ProjectApiKey/team-a/a1']);
    h.projectKeys('team-a').emit('delete', projectKey('team-a', 'a1', 'p-2'));
    expect(projectKeysIn(h.controller, ['p-2'])).toEqual([]);
  });

  it('an operations change wakes exactly the keys of its project, in the low lane', async () => {
    const h = await start(['team-a']);
    for (let i = 0; i < 20; i++) h.projectKeys('team-a').emit('add', projectKey('team-a', `k${i}`, `p-${i % 4}`));
    h.woken.length = 0;
    wakeProject(h.controller, 'p-3');
    expect(h.woken.sort()).toEqual(['k11', 'k15', 'k19', 'k3', 'k7'].map((n) => `ProjectApiKey/team-a/${n}`).sort());
  });
});
