// Where the operator's Kubernetes credentials come from (src/operator/runtime/kubeconfig.ts):
// --kubeconfig, else $KUBECONFIG as a list of files merged as kubectl merges them.
import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/operator/runtime/kubeconfig.ts';

const scratch = mkdtempSync(join(tmpdir(), 'nko-kubeconfig-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function file(name: string, server: string, context: string | undefined, extra = ''): string {
  const path = join(scratch, name);
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
${context !== undefined ? `current-context: ${context}` : ''}
clusters:
- name: shared
  cluster: { server: ${server} }
- name: ${name}
  cluster: { server: ${server} }
users:
- name: shared
  user: { token: ${name}-token }
contexts:
- name: ${name}
  context: { cluster: ${name}, user: shared }
${extra}`,
  );
  return path;
}

describe('loadKubeConfig', () => {
  const a = file('a', 'https://a.example:6443', undefined);
  const b = file('b', 'https://b.example:6443', 'b');
  const c = file('c', 'https://c.example:6443', 'c');

  it('merges a $KUBECONFIG list as kubectl does: the first to set a name or the current context wins, missing files skipped', () => {
    const kc = new KubeConfig();
    loadKubeConfig(kc, undefined, { KUBECONFIG: [join(scratch, 'missing'), a, b, c].join(delimiter) });
    expect(kc.getCurrentContext()).toBe('b');
    expect(kc.getCurrentCluster()?.server).toBe('https://b.example:6443');
    expect(kc.getCluster('shared')?.server).toBe('https://a.example:6443');
    expect(kc.getUser('shared')?.token).toBe('a-token');
    expect(
      kc
        .getContexts()
        .map((x) => x.name)
        .sort(),
    ).toEqual(['a', 'b', 'c']);
  });

  it('reads --kubeconfig alone when it is given', () => {
    const kc = new KubeConfig();
    loadKubeConfig(kc, c, { KUBECONFIG: [a, b].join(delimiter) });
    expect(kc.getCurrentContext()).toBe('c');
    expect(kc.getContexts().map((x) => x.name)).toEqual(['c']);
  });

  it('says so when no file of $KUBECONFIG exists', () => {
    expect(() => loadKubeConfig(new KubeConfig(), undefined, { KUBECONFIG: join(scratch, 'none') })).toThrow('none of the files of $KUBECONFIG exists');
  });
});
