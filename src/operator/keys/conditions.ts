// metav1.Condition bookkeeping (Kubernetes API conventions): one entry per type, each with the
// observedGeneration it was computed from; lastTransitionTime moves only when status changes.
import type { Condition } from '../resources/schema.ts';

export type ConditionType = 'Ready' | 'KeyIssued' | 'SecretSynced' | 'OperationsSettled';
export type ConditionStatus = Condition['status'];

export interface ConditionUpdate {
  type: ConditionType;
  status: ConditionStatus;
  reason: string;
  message: string;
}

export function setConditions(existing: readonly Condition[] | undefined, updates: readonly ConditionUpdate[], generation: number, now: Date): Condition[] {
  const out = [...(existing ?? [])];
  for (const update of updates) {
    const index = out.findIndex((c) => c.type === update.type);
    const previous = index >= 0 ? out[index] : undefined;
    const next: Condition = {
      type: update.type,
      status: update.status,
      observedGeneration: generation,
      lastTransitionTime: previous !== undefined && previous.status === update.status ? previous.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
      reason: update.reason,
      message: update.message,
    };
    if (index >= 0) out[index] = next;
    else out.push(next);
  }
  return out;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: ConditionType): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
