// The flooding namespaces of bench/fairness.ts, in a process of their own: `node
// bench/fairness-flood.ts '<json>'` with { kubeconfig, organization, namespaces, names }. Each
// namespace applies its keys 32 at a time, the namespaces at once; one JSON line per key applied
// ({ id, sent, answered }: wall-clock ms). A tenant's flood comes from its own client, not from the
// process that measures: there, 320 requests in flight held the measuring process's event loop,
// and its watch saw Ready up to 43 s after the operator wrote it (load 20, 2026-11-26). Each
// namespace's keys are applied by its team (fairness-flood-team.ts), as a tenant would.
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { asTeam } from './fairness-flood-team.ts';

interface FloodJob {
  kubeconfig: string;
  organization: string;
  namespaces: string[];
  names: string[];
}

const job = JSON.parse(process.argv[2] ?? '{}') as FloodJob;
const kc = new KubeConfig();
kc.loadFromFile(job.kubeconfig);
const objectsOf = new Map(job.namespaces.map((namespace) => [namespace, asTeam(kc, namespace).makeApiClient(CustomObjectsApi)]));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function apply(namespace: string, name: string): Promise<void> {
  const sent = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      await objectsOf.get(namespace)!.createNamespacedCustomObject({
        group: 'keys.neon.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'apikeys',
        body: {
          apiVersion: 'keys.neon.dev/v1alpha1',
          kind: 'ApiKey',
          metadata: { name },
          spec: { scope: 'Organization', organizationId: job.organization, keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
        },
      });
      break;
    } catch (e) {
      const code = (e as { code?: number }).code;
      // An attempt that failed on the way back (a timeout) may have created it: applied, at this answer.
      if (attempt > 0 && code === 409) break;
      if (attempt >= 5) throw e;
      process.stderr.write(`[bench]    apply ${namespace}/${name} failed (${code ?? (e instanceof Error ? e.message : String(e))}); again in 0.5 s\n`);
      await sleep(500);
    }
  }
  process.stdout.write(`${JSON.stringify({ id: `${namespace}/${name}`, sent, answered: Date.now() })}\n`);
}

await Promise.all(
  job.namespaces.map(async (namespace) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < job.names.length) await apply(namespace, job.names[next++] as string);
      }),
    );
  }),
);
