// The operator's JSON log lines: the level by name, as log pipelines read it, and the paths that
// could hold a secret redacted.
import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { censored, createLogger } from '../../../src/operator/runtime/logger.ts';

function capture(): { lines: () => Record<string, unknown>[]; destination: Writable } {
  const out: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      out.push(chunk.toString('utf8'));
      done();
    },
  });
  return {
    lines: () =>
      out
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    destination,
  };
}

describe('the operator log', () => {
  it('names each line\'s level ("level":"info"), never pino\'s number', () => {
    const { lines, destination } = capture();
    const logger = createLogger({ level: 'debug', destination });
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    logger.error('e');
    logger.child({ kind: 'ProjectApiKey' }).info('child');
    expect(lines().map((l) => [l.level, l.msg])).toEqual([
      ['debug', 'd'],
      ['info', 'i'],
      ['warn', 'w'],
      ['error', 'e'],
      ['info', 'child'],
    ]);
    expect(lines()[0]).toMatchObject({ component: 'neon-key-operator' });
  });

  it('still filters by level and redacts keys', () => {
    const { lines, destination } = capture();
    const logger = createLogger({ level: 'warn', destination });
    logger.info('not written');
    logger.warn({ apiKey: 'napi_secret', request: { authorization: 'Bearer napi_secret' } }, 'w');
    expect(lines()).toHaveLength(1);
    expect(JSON.stringify(lines())).not.toContain('napi_secret');
    expect(lines()[0]).toMatchObject({ level: 'warn', apiKey: '[redacted]' });
  });

  it("censors secret-named members at every depth it looks, in lines, child bindings and errors, and changes none of the caller's objects", () => {
    const { lines, destination } = capture();
    const logger = createLogger({ level: 'info', destination });
    const line = {
      secret: 'napi_top',
      request: { headers: { authorization: 'Bearer napi_headers', accept: 'application/json' }, token: 'napi_token' },
      items: [{ data: { apiKey: 'napi_in_array' } }, 'plain'],
      deep: { a: { b: { key: 'napi_depth4' } } },
      name: 'keep-me',
    };
    const before = structuredClone(line);
    logger.info(line, 'nested');
    class PlatformError extends Error {
      readonly key = 'napi_on_error';
      readonly response = { headers: { authorization: 'Bearer napi_error_headers' } };
    }
    const error = new PlatformError('refused', { cause: new Error('the cause') });
    logger.warn({ err: error }, 'failed');
    logger.child({ kind: 'ProjectApiKey', token: 'napi_binding' }).child({ name: 'k', key: 'napi_grandchild' }).info('child');
    const all = JSON.stringify(lines());
    expect(all).not.toContain('napi_');
    expect(lines()[0]).toMatchObject({
      secret: '[redacted]',
      request: { headers: { authorization: '[redacted]', accept: 'application/json' }, token: '[redacted]' },
      items: [{ data: '[redacted]' }, 'plain'],
      deep: { a: { b: { key: '[redacted]' } } },
      name: 'keep-me',
      msg: 'nested',
    });
    // pino's error serializer still writes the error's type, message, stack and cause.
    const err = lines()[1]?.err as Record<string, unknown>;
    expect(err).toMatchObject({ type: 'PlatformError', message: expect.stringContaining('refused'), key: '[redacted]' });
    expect(String(err.stack).startsWith(String(error.stack))).toBe(true);
    expect(String(err.stack)).toContain('caused by: Error: the cause');
    expect(lines()[2]).toMatchObject({ kind: 'ProjectApiKey', token: '[redacted]', name: 'k', key: '[redacted]', msg: 'child' });
    // The caller's objects are as they were.
    expect(line).toEqual(before);
    expect(error.key).toBe('napi_on_error');
    expect(error.response.headers.authorization).toBe('Bearer napi_error_headers');
  });

  it('hands back what holds nothing to censor as it is, without a copy', () => {
    const plain = { kind: 'ProjectApiKey', namespace: 'team-a', nested: { name: 'x', list: [1, 'two'] } };
    expect(censored(plain, 1)).toBe(plain);
    const error = new Error('e');
    expect(censored({ err: error }, 1)).toEqual({ err: error });
    expect((censored({ err: error }, 1) as { err: Error }).err).toBe(error);
    // Beyond the depth it looks at, a member is left as it is.
    const tooDeep = { a: { b: { c: { d: { key: 'x' } } } } };
    expect(censored(tooDeep, 1)).toBe(tooDeep);
    const bytes = Buffer.from('napi_bytes');
    expect(censored({ bytes }, 1)).toEqual({ bytes });
  });

  it('censors an instance of a class as a copy that keeps its prototype, so its toJSON still writes it', () => {
    class Credentials {
      readonly token: string;
      readonly name: string;
      constructor(token: string, name: string) {
        this.token = token;
        this.name = name;
      }
      toJSON(): unknown {
        return { kind: 'Credentials', name: this.name, token: this.token };
      }
    }
    const credentials = new Credentials('napi_instance', 'ci');
    const copy = censored({ credentials }, 1) as { credentials: Credentials };
    expect(copy.credentials).toBeInstanceOf(Credentials);
    expect(JSON.parse(JSON.stringify(copy))).toEqual({ credentials: { kind: 'Credentials', name: 'ci', token: '[redacted]' } });
    expect(credentials.token).toBe('napi_instance');
  });
});
