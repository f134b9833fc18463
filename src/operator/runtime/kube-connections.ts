// How the operator's API clients (kube-client.ts) reach the Kubernetes API server. client-node 2.0,
// left alone, does three costly things on every request (GET, PATCH, POST) of an API client:
// - it builds a new undici Agent (KubeConfig.applySecurityAuthentication → createDispatcher): a new
//   TCP connection and a full TLS handshake with a fresh secure context, and an idle socket left
//   behind (its https.Agent for watches is cached, the undici dispatcher is not);
// - it reads the TLS material again (the CA and client certificate files, or decodes their base64);
// - it sends with undici's `fetch`, whose WHATWG Request, Headers and streams cost several times
//   what undici's own `request` costs for the same exchange.
// reuseKubeConnections() keeps one dispatcher per cluster, user and TLS material, and reads the TLS
// material once a minute (so a rotated CA or client certificate is still picked up);
// sendKubeRequest() sends one request of an API client straight to the dispatcher (undici's
// `dispatch`: no Readable around the answer, no callback bound to an AsyncResource, which undici's
// `request` adds to every exchange and an answer read whole does not need). The Authorization
// header is still computed per request: client-node's authenticators keep and refresh tokens themselves.
// Watches (informers) go over the same dispatchers, read by watch-stream.ts.
import { createHash } from 'node:crypto';
import { RequestContext, type HttpMethod, type KubeConfig } from '@kubernetes/client-node';
import { getGlobalDispatcher, type Dispatcher } from 'undici';

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
}

const AGENT_FIELDS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

export interface KubeConnectionOptions {
  /** The User-Agent of every API client request (the apiserver's audit log shows it); not of watches. */
  userAgent?: string;
  /** A monotonic clock in milliseconds (tests). */
  now?: () => number;
}

/** Where reuseKubeConnections keeps the user agent: a KubeConfig made from it with Object.create (the write fence) inherits it. */
const USER_AGENT = Symbol('the User-Agent of the API clients');
interface UserAgentHolder {
  [USER_AGENT]?: string | undefined;
}

export function reuseKubeConnections(kubeConfig: KubeConfig, options: KubeConnectionOptions = {}): KubeConfig {
  (kubeConfig as unknown as UserAgentHolder)[USER_AGENT] = options.userAgent;
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

  return kubeConfig;
}

/** One request of an API client: a path below the cluster's server, and a JSON body already written. */
export interface KubeRequest {
  method: HttpMethod;
  path: string;
  /** The body's Content-Type (application/json, or a patch's). */
  contentType?: string;
  body?: string;
}

/** The apiserver's answer, its body read whole. */
export interface KubeAnswer {
  statusCode: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Sends one request of an API client through undici's `dispatch`. It is signed by
 * `kubeConfig.applySecurityAuthentication`, as client-node signs its own: the write fence of a
 * fenced KubeConfig (write-fence.ts), the authenticators, and the dispatcher reuseKubeConnections
 * keeps all apply. The body is read whole before it is handed on: an API client's answers are
 * single objects, and a body never read would hold its connection.
 */
export async function sendKubeRequest(kubeConfig: KubeConfig, req: KubeRequest): Promise<KubeAnswer> {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('No active cluster!');
  const context = new RequestContext(cluster.server + req.path, req.method);
  context.setHeaderParam('Accept', 'application/json');
  if (req.contentType !== undefined) context.setHeaderParam('Content-Type', req.contentType);
  // On the context too, as client-node's requests carry it: whatever signs the request sees it whole.
  if (req.body !== undefined) context.setBody(req.body);
  const userAgent = (kubeConfig as unknown as UserAgentHolder)[USER_AGENT];
  if (userAgent !== undefined) context.setHeaderParam('User-Agent', userAgent);
  await kubeConfig.applySecurityAuthentication(context);
  const dispatcher = (context.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher();
  const body = context.getBody() as string | undefined;
  const url = new URL(context.getUrl());
  return new Promise<KubeAnswer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let statusCode = 0;
    let headers: Record<string, string> = {};
    dispatcher.dispatch(
      { origin: url.origin, path: url.pathname + url.search, method: req.method as Dispatcher.HttpMethod, headers: context.getHeaders(), body: body ?? null },
      {
        onRequestStart() {},
        onResponseStart(_controller, code, answered) {
          statusCode = code;
          headers = {};
          for (const name in answered) {
            const value = answered[name];
            if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
          }
        },
        onResponseData(_controller, chunk) {
          chunks.push(chunk);
          bytes += chunk.length;
        },
        onResponseEnd() {
          resolve({ statusCode, headers, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, bytes) });
        },
        onResponseError(_controller, error) {
          reject(error);
        },
      },
    );
  });
}
