// What manager.ts wires of the ClusterKeyIssuers: their reconciler, events and gauge, their watches
// and the cached copy the reconciler reads. Everything else of issuers/ is their own.
export { IssuerEventRecorder } from './events.ts';
export { registerIssuerGauge, type IssuerReadiness } from './metrics.ts';
export { IssuerReconciler } from './reconciler.ts';
export { issuerWatches, type CachedIssuer } from './watches.ts';
