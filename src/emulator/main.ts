// `npm run emulator -- [--host 127.0.0.1] [--port 0] [--db :memory:|<file>] [--seed file.json]
//   [--time-scale 1] [--no-control-plane] [--log-level info]`
// The defaults are for a laptop: --host 127.0.0.1 (loopback only), --port 0 (a free port, printed in
// the bootstrap record), --db :memory: (nothing kept). In a cluster it needs --host=0.0.0.0 and a
// fixed --port (deploy/emulator/emulator.yaml; docs/install.md, "Try it with the emulator").
// Prints the bootstrap record as ONE JSON line on stdout (personal keys only on the first start
// of a store: they are kept as hashes, see bootstrap.ts); logs go to stderr.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { SeedSchema } from './bootstrap.ts';
import { LOG_REDACT_PATHS, startEmulator } from './server.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '0' },
    db: { type: 'string', default: ':memory:' },
    seed: { type: 'string' },
    'time-scale': { type: 'string', default: '1' },
    'no-control-plane': { type: 'boolean', default: false },
    'log-level': { type: 'string', default: process.env.LOG_LEVEL ?? 'info' },
  },
  strict: true,
});

const port = Number(values.port);
const timeScale = Number(values['time-scale']);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be an integer 0..65535, got ${values.port}`);
if (!Number.isFinite(timeScale) || timeScale <= 0) throw new Error(`--time-scale must be a positive number, got ${values['time-scale']}`);

// Synchronous writes: the SIGTERM path ends in process.exit(), which would drop lines an async
// destination still buffers (seen under load: the request lines of a run missing from stderr).
// The level as its name ("level":"info"), as the operator logs it.
const logger = pino(
  { level: values['log-level'], redact: LOG_REDACT_PATHS, formatters: { level: (label) => ({ level: label }) } },
  pino.destination({ dest: 2, sync: true }),
);
const seed = values.seed === undefined ? undefined : SeedSchema.parse(JSON.parse(readFileSync(values.seed, 'utf8')));

const emulator = await startEmulator({ host: values.host, port, db: values.db, seed, timeScale, logger, controlPlaneActivity: !values['no-control-plane'] });
process.stdout.write(`${JSON.stringify(emulator.bootstrap)}\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'stopping');
    void emulator.close().then(() => process.exit(0));
  });
}
