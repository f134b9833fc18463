// The operator's JSON log lines: the level by name, as log pipelines read it, and the paths that
// could hold a secret redacted.
import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { createLogger } from '../../../src/operator/runtime/logger.ts';

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
});
