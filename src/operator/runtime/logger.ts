// pino JSON logs with the paths that could hold a secret redacted, configured once (docs/design.md section 5.5).
// The lifecycle never passes a key to the logger; redaction is the second line of defence.
import { pino, type DestinationStream, type Logger } from 'pino';

const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'key',
  '*.key',
  'secret',
  '*.secret',
  'data',
  '*.data',
  'stringData',
  '*.stringData',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'token',
  '*.token',
];

export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { component: 'neon-key-operator' },
      // The level as its name ("level":"info"), as log pipelines expect, not pino's number.
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
    options.destination,
  );
}
