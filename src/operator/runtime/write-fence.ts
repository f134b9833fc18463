// The write fence: what keeps a replica that no longer leads from writing. The manager hands the
// domain a Leadership (manager.ts); every write to the apiserver (fenceKubeWrites, below) and to a
// remote system (the domain's clients call `check` before each attempt) asks it first, and the
// signal ends in-flight work (reconciles, pollers, a remote call's retries) once leadership ends.
//
// `check` is a clock comparison, not a flag the renew loop sets: after an event-loop stall past the
// lease (a SIGSTOP, a long GC pause, a starved node), the first callback that runs finds the lease
// expired by this process's monotonic clock and refuses, before the renew loop has had a turn.
// What it cannot stop is a request that passed the check just before the deadline and reaches the
// server later (docs/reference/probes-and-failover.md says how long and what protects that window).
import type { KubeConfig } from '@kubernetes/client-node';

/** A write refused because this replica no longer leads (or is shutting down past its drain). */
export class NotLeadingError extends Error {
  readonly code = 'NOT_LEADING';

  constructor(message = 'this replica no longer holds the leader lease: write refused') {
    super(message);
    this.name = 'NotLeadingError';
  }
}

export interface Leadership {
  /** Aborts once this replica stops leading: in-flight work should end. */
  signal: AbortSignal;
  /** Throws NotLeadingError unless this replica may still write. Cheap: call it before every write. */
  check(): void;
}

/** The leadership of a process that runs without election: it may write until it stops. */
export function soleLeadership(signal: AbortSignal): Leadership {
  return {
    signal,
    check: () => {
      if (signal.aborted) throw new NotLeadingError('this process is stopping: write refused');
    },
  };
}

interface RequestContextLike {
  getHttpMethod(): string;
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A KubeConfig whose API clients (kube-client.ts, and client-node's own) refuse every request but
 * reads while `leadership.check` throws: one place for every apiserver write of the domain (key
 * resources, Secrets, workloads, Events), present and future. The check runs in
 * applySecurityAuthentication, which signs each request (kube-connections.ts sendKubeRequest, as
 * client-node does), as late as anything runs before the request is sent. Watches (informers)
 * read, and do not pass here.
 */
export function fenceKubeWrites(kubeConfig: KubeConfig, leadership: Pick<Leadership, 'check'>): KubeConfig {
  const fenced = Object.create(kubeConfig) as KubeConfig;
  const authenticate = kubeConfig.applySecurityAuthentication.bind(kubeConfig) as (context: RequestContextLike) => Promise<void>;
  (fenced as unknown as { applySecurityAuthentication(context: RequestContextLike): Promise<void> }).applySecurityAuthentication = async (context) => {
    if (!READS.has(context.getHttpMethod().toUpperCase())) leadership.check();
    await authenticate(context);
    // Checked again once the credentials are in hand: getting them may await (a token file read).
    if (!READS.has(context.getHttpMethod().toUpperCase())) leadership.check();
  };
  return fenced;
}
