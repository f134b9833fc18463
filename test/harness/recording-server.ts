// A loopback HTTP server that records every request it gets (method, URL, headers, the whole body)
// and answers as the test says: what a client put on the wire, seen from the other end.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface RecordingServer {
  port: number;
  close(): Promise<void>;
}

/** Starts the server on 127.0.0.1 (a free port); each request is pushed onto `seen`, then answered by `answer`. */
export async function startRecordingServer(seen: SeenRequest[], answer: (request: SeenRequest, res: ServerResponse) => void): Promise<RecordingServer> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(request);
      answer(request, res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * A KubeConfig whose one cluster is a loopback server on `port` (a named fake of a test), over plain
 * HTTP: client-node refuses a plain-HTTP server unless TLS verification is off. `token`: the user's
 * bearer token, none when not given.
 */
export function loopbackKubeConfig(port: number, token?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'loopback', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', ...(token !== undefined ? { token } : {}) }],
    contexts: [{ name: 'loopback', cluster: 'loopback', user: 'u' }],
    currentContext: 'loopback',
  });
  return kc;
}
