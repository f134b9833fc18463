// A core/v1 Event about one object, as every recorder of the operator creates it (never patched):
// its name unique by time and random suffix, the message cut to 1,024 characters, the reporting
// component both as the legacy source and as reportingComponent/Instance.
import { randomBytes } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for a cluster-scoped object: its events go to `default`, where Kubernetes looks for them. */
  namespace?: string | undefined;
  uid: string;
  resourceVersion?: string | undefined;
}

/** The namespace an event about the object lives in. */
export function eventNamespace(involved: Pick<InvolvedObject, 'namespace'>): string {
  return involved.namespace ?? 'default';
}

export function eventBody(involved: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string, component: string, now: Date): CoreV1Event {
  const namespace = eventNamespace(involved);
  const { resourceVersion, namespace: own, ...identity } = involved;
  return {
    metadata: { name: `${involved.name}.${now.getTime().toString(16)}${randomBytes(3).toString('hex')}`, namespace },
    involvedObject: { ...identity, ...(own !== undefined ? { namespace: own } : {}), ...(resourceVersion !== undefined ? { resourceVersion } : {}) },
    type,
    reason,
    message: message.slice(0, 1024),
    source: { component },
    reportingComponent: component,
    reportingInstance: component,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}
