// pino JSON logs with the members that could hold a secret censored, configured once (docs/design.md section 5.5).
// The lifecycle never passes a key to the logger; censoring is the second line of defence.
//
// Censored here, in pino's formatters, rather than by pino's `redact`: its wildcard paths (`*.key`)
// make it run every value of every line and every child logger's bindings, strings included,
// through a redactor that parses each path again character by character: about 5 % of what the
// operator allocated in the ten-organization wave (docs/benchmarks.md), for lines whose values are
// almost all names and ids. Here a line is looked at once, and copied only where it holds a censored name.
import { pino, type DestinationStream, type Logger } from 'pino';

/** Member names whose value is never written, at any depth up to CENSOR_DEPTH (`headers.authorization` included). */
const CENSORED: ReadonlySet<string> = new Set(['apiKey', 'key', 'secret', 'data', 'stringData', 'authorization', 'token']);
const CENSOR = '[redacted]';
/** How deep censoring looks: the line's own members are depth 1, `err.response.headers.authorization` depth 4. */
const CENSOR_DEPTH = 4;

export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  const logger = pino(
    {
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { component: 'neon-key-operator' },
      formatters: {
        // The level as its name ("level":"info"), as log pipelines expect, not pino's number.
        level: (label) => ({ level: label }),
        log: (obj) => censored(obj, 1) as Record<string, unknown>,
        bindings: (bindings) => censored(bindings, 1) as object,
      },
    },
    options.destination,
  );
  // A child's bindings do not pass through formatters.bindings (pino resets it for children): they
  // are censored as the child is made. Every child is made from this logger (or from a child, which
  // inherits this method), so every binding passes here.
  type Child = (this: unknown, bindings: pino.Bindings, childOptions?: unknown) => Logger;
  const child = logger.child as unknown as Child;
  const censoringChild: Child = function (this: unknown, bindings, childOptions) {
    return child.call(this, censored(bindings, 1) as pino.Bindings, childOptions);
  };
  logger.child = censoringChild as unknown as Logger['child'];
  return logger;
}

/**
 * `value` with every member named in CENSORED replaced by CENSOR, in objects and arrays down to
 * CENSOR_DEPTH (binary data, which holds no members, is not looked into). What holds nothing to
 * censor is returned as it is, and what does is copied (the caller's objects are never changed). A
 * copy of an instance of a class keeps its prototype and its own properties as values (an error's
 * message, stack and cause included), so pino writes it as it would the original: an error through
 * its error serializer, anything else through its toJSON.
 */
export function censored(value: unknown, depth: number): unknown {
  if (depth > CENSOR_DEPTH || value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const kept = censored(item, depth + 1);
      if (kept !== item) (copy ??= [...value])[i] = kept;
    }
    return copy ?? value;
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  const plain = proto === Object.prototype || proto === null;
  const record = value as Record<string, unknown>;
  // An instance's own properties whether enumerable or not: an error's cause is not.
  const names = plain ? Object.keys(record) : Object.getOwnPropertyNames(record);
  let changes: Map<string, unknown> | undefined;
  for (const name of names) {
    const member = record[name];
    const kept = CENSORED.has(name) && member !== undefined ? CENSOR : censored(member, depth + 1);
    if (kept !== member) (changes ??= new Map()).set(name, kept);
  }
  if (changes === undefined) return value;
  if (plain) return { ...record, ...Object.fromEntries(changes) };
  // Each own property as a value read from the original: V8's `stack` is an accessor that answers
  // only on the error it was made for.
  const copy = Object.create(proto) as Record<string, unknown>;
  for (const name of names) {
    const enumerable = Object.getOwnPropertyDescriptor(record, name)?.enumerable ?? false;
    Object.defineProperty(copy, name, { value: changes.has(name) ? changes.get(name) : record[name], writable: true, enumerable, configurable: true });
  }
  return copy;
}
