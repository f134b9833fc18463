// A team of the fairness benchmark (bench/fairness.ts): the user team-<namespace>, bound to `edit`
// in its namespace. The bench's kubeconfig (system:masters) impersonates it, so the apiserver
// authorizes, and API Priority and Fairness classifies, each key's apply as that team's.
import { KubeConfig } from '@kubernetes/client-node';

export const teamOf = (namespace: string): string => `team-${namespace}`;

/** `kc` acting as the team of `namespace`. */
export function asTeam(kc: KubeConfig, namespace: string): KubeConfig {
  const team = new KubeConfig();
  team.loadFromOptions({
    clusters: kc.clusters,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
    users: kc.users.map((user) => ({ ...user, impersonateUser: teamOf(namespace) })),
  });
  return team;
}
