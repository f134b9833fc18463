// Where the operator's Kubernetes credentials come from, in kubectl's order: --kubeconfig; else
// the files of $KUBECONFIG (a list, ':' between files on Linux), merged as kubectl merges them
// (the first file to set the current context, or to define a cluster, user or context of a name,
// wins; a file that does not exist is skipped); else ~/.kube/config; else the in-cluster
// ServiceAccount. @kubernetes/client-node's loadFromDefault() reads such a list too, but throws
// on a missing file or a name defined twice, and lets the last current context win.
import { existsSync } from 'node:fs';
import { delimiter } from 'node:path';
import { KubeConfig, type Cluster, type Context, type User } from '@kubernetes/client-node';

export function loadKubeConfig(kubeConfig: KubeConfig, flag: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): void {
  if (flag !== undefined && flag !== '') {
    kubeConfig.loadFromFile(flag);
    return;
  }
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((file) => file !== '');
  if (list.length === 0) {
    kubeConfig.loadFromDefault();
    return;
  }
  const files = list.filter((file) => existsSync(file));
  if (files.length === 0) throw new Error(`none of the files of $KUBECONFIG exists: ${list.join(delimiter)}`);
  const clusters = new Map<string, Cluster>();
  const users = new Map<string, User>();
  const contexts = new Map<string, Context>();
  let currentContext = '';
  for (const file of files) {
    const one = new KubeConfig();
    one.loadFromFile(file);
    if (currentContext === '' && one.currentContext !== undefined) currentContext = one.currentContext;
    for (const c of one.clusters) if (!clusters.has(c.name)) clusters.set(c.name, c);
    for (const u of one.users) if (!users.has(u.name)) users.set(u.name, u);
    for (const c of one.contexts) if (!contexts.has(c.name)) contexts.set(c.name, c);
  }
  kubeConfig.loadFromOptions({ clusters: [...clusters.values()], users: [...users.values()], contexts: [...contexts.values()], currentContext });
}
