// How the operator's API clients reach the Kubernetes API server. client-node 2.0, left alone, does
// three costly things on every request (GET, PATCH, POST) of an API client:
// - it builds a new undici Agent (KubeConfig.applySecurityAuthentication → createDispatcher): a new
//   TCP connection and a full TLS handshake with a fresh secure context, and an idle socket left
//   behind (its https.Agent for watches is cached, the undici dispatcher is not);
// - it reads the TLS material again (the CA and client certificate files, or decodes their base64);
// - it sends with undici's `fetch`, whose WHATWG Request, Headers and streams cost several times
//   what undici's own `request` costs for the same exchange.
// reuseKubeConnections() keeps one dispatcher per cluster, user and TLS material, reads the TLS
// material once a minute (so a rotated CA or client certificate is still picked up), and gives the
// KubeConfig's API clients an HTTP library over `request`. The Authorization header is still
// computed per request: client-node's authenticators keep and refresh tokens themselves.
// Watches (informers) keep client-node's own path: they are long-lived and few.
import { createHash } from 'node:crypto';
import {
  createConfiguration,
  ResponseContext,
  SelfDecodingBody,
  ServerConfiguration,
  setHeaderMiddleware,
  wrapHttpLibrary,
  type Configuration,
  type KubeConfig,
  type RequestContext,
} from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';

/** How long TLS material read from the kubeconfig (or the files it names) is used before it is read again. */
export const TLS_REREAD_MS = 60_000;

interface ClusterLike {
  name?: string;
  server?: string;
}
type CreateDispatcher = (cluster: ClusterLike | null, agentOptions: Record<string, unknown>) => unknown;
interface HttpsOptions {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  pfx?: Buffer;
  passphrase?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
  headers?: Record<string, string>;
}
/** The parts of client-node's KubeConfig this module relies on, some of them not in its typings. */
interface KubeConfigInternals {
  createDispatcher?: CreateDispatcher;
  applyHTTPSOptions?: (opts: HttpsOptions) => void;
  applyAuthorizationHeader?: (opts: { headers: Record<string, string> }) => Promise<void>;
  applySecurityAuthentication(context: RequestContext): Promise<void>;
  makeApiClient<T>(apiClientType: new (config: Configuration) => T): T;
}

const AGENT_FIELDS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

export interface KubeConnectionOptions {
  /** The User-Agent of every API client request (the apiserver's audit log shows it). */
  userAgent?: string;
  /** A monotonic clock in milliseconds (tests). */
  now?: () => number;
}

export function reuseKubeConnections(kubeConfig: KubeConfig, options: KubeConnectionOptions = {}): KubeConfig {
  const target = kubeConfig as unknown as KubeConfigInternals;
  const create = target.createDispatcher;
  const applyHTTPSOptions = target.applyHTTPSOptions;
  const applyAuthorizationHeader = target.applyAuthorizationHeader;
  // Another client-node version without these private methods: nothing to patch.
  if (typeof create !== 'function' || typeof applyHTTPSOptions !== 'function' || typeof applyAuthorizationHeader !== 'function') return kubeConfig;

  const dispatchers = new Map<string, unknown>();
  target.createDispatcher = function cachedDispatcher(this: unknown, cluster, agentOptions) {
    const tls = createHash('sha256');
    for (const field of AGENT_FIELDS) tls.update(`${field}=${String(agentOptions[field] ?? '')};`);
    const key = JSON.stringify([cluster?.name ?? '', cluster?.server ?? '', kubeConfig.getCurrentUser()?.name ?? '', tls.digest('hex')]);
    if (dispatchers.has(key)) return dispatchers.get(key);
    const dispatcher = create.call(this, cluster, agentOptions);
    if (dispatcher !== undefined) dispatchers.set(key, dispatcher);
    return dispatcher;
  };

  const now = options.now ?? (() => performance.now());
  let tls: { readAt: number; context: string; dispatcher: unknown; headers: Record<string, string> } | undefined;
  target.applySecurityAuthentication = async function authenticate(context: RequestContext): Promise<void> {
    const current = kubeConfig.getCurrentContext();
    if (tls === undefined || tls.context !== current || now() - tls.readAt >= TLS_REREAD_MS) {
      const https: HttpsOptions = {};
      applyHTTPSOptions.call(kubeConfig, https);
      const agentOptions: Record<string, unknown> = {};
      for (const field of AGENT_FIELDS) if (https[field] !== undefined) agentOptions[field] = https[field];
      const dispatcher = (target.createDispatcher as CreateDispatcher).call(kubeConfig, kubeConfig.getCurrentCluster(), agentOptions);
      tls = { readAt: now(), context: current, dispatcher, headers: { ...https.headers } };
    }
    const auth = { headers: { ...tls.headers } };
    await applyAuthorizationHeader.call(kubeConfig, auth);
    const user = kubeConfig.getCurrentUser();
    if (user?.username !== undefined && user.username !== '')
      context.setHeaderParam('Authorization', `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}`);
    for (const [name, value] of Object.entries(auth.headers)) context.setHeaderParam(name, String(value));
    if (tls.dispatcher !== undefined) context.setDispatcher(tls.dispatcher as Dispatcher);
  };

  const userAgent = options.userAgent;
  target.makeApiClient = function makeApiClient<T>(this: KubeConfig, apiClientType: new (config: Configuration) => T): T {
    const cluster = this.getCurrentCluster();
    if (cluster === null) throw new Error('No active cluster!');
    return new apiClientType(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        // `this`, not kubeConfig: a KubeConfig made from this one with Object.create (the write
        // fence) authenticates its clients' requests itself.
        authMethods: { default: this },
        httpApi: UNDICI_REQUEST,
        ...(userAgent !== undefined ? { middleware: [setHeaderMiddleware('User-Agent', userAgent)] } : {}),
      }),
    );
  };
  return kubeConfig;
}

/**
 * client-node's HttpLibrary over undici's `request`. The answer's body is read whole before it is
 * handed on: an API client's answers are single objects, and a body never read would hold its
 * connection.
 */
const UNDICI_REQUEST = wrapHttpLibrary({
  async send(req: RequestContext): Promise<ResponseContext> {
    const body = req.getBody();
    const response = await request(req.getUrl(), {
      method: req.getHttpMethod() as Dispatcher.HttpMethod,
      headers: req.getHeaders(),
      ...(body !== undefined ? { body: body as string } : {}),
      ...(req.getSignal() !== undefined ? { signal: req.getSignal() } : {}),
      ...(req.getDispatcher() !== undefined ? { dispatcher: req.getDispatcher() as Dispatcher } : {}),
    });
    const data = Buffer.from(await response.body.arrayBuffer());
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(response.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    return new ResponseContext(response.statusCode, headers, new SelfDecodingBody(Promise.resolve(data)));
  },
});
