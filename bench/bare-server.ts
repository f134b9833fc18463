// The baseline for the emulator benchmark: a bare node:http server answering every GET with a
// fixed JSON body (no routing, auth, store or JSON encoding). Run as a child process:
//   node bench/bare-server.ts <bodies.json>   where bodies.json = {"get": "...", "list": "..."}
// Paths containing "/operations/" get the `get` body, every other path the `list` body.
// Prints {"origin": "http://127.0.0.1:PORT"} on stdout; stops on SIGTERM.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const file = process.argv[2];
if (file === undefined) throw new Error('usage: node bench/bare-server.ts <bodies.json>');
const bodies = JSON.parse(readFileSync(file, 'utf8')) as { get: string; list: string };
const get = Buffer.from(bodies.get);
const list = Buffer.from(bodies.list);

const server = createServer((req, res) => {
  const body = req.url?.includes('/operations/') === true ? get : list;
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ origin: `http://127.0.0.1:${port}` })}\n`);
});
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
