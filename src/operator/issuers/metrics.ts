// The issuers' gauge, for alerting (NeonKeyOperatorIssuerNotReady, docs/runbook.md):
// neon_key_operator_issuer_ready{issuer} is 1 while an issuer's Ready condition is True, 0 otherwise
// (False or Unknown: its reason is on the resource). Read when scraped from what the last reconcile
// of each issuer wrote; only the leader, which reconciles, reports it.
import { Gauge, type Registry } from 'prom-client';

export const ISSUER_READY_METRIC = 'neon_key_operator_issuer_ready';

export interface IssuerReadiness {
  issuer: string;
  ready: boolean;
}

/** Registers the gauge; `issuers` is read at each scrape. Returns what unregisters it. */
export function registerIssuerGauge(registry: Registry, issuers: () => Iterable<IssuerReadiness>): () => void {
  // A start of the operator that failed after registering it left it there.
  registry.removeSingleMetric(ISSUER_READY_METRIC);
  new Gauge({
    name: ISSUER_READY_METRIC,
    help:
      'Whether each ClusterKeyIssuer is Ready (1) or not (0: its credentials are missing, refused, of the wrong kind ' +
      "or not an administrator's, the platform did not answer, or its deletion waits); the reason is its Ready condition's.",
    labelNames: ['issuer'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const { issuer, ready } of issuers()) this.set({ issuer }, ready ? 1 : 0);
    },
  });
  return () => registry.removeSingleMetric(ISSUER_READY_METRIC);
}
