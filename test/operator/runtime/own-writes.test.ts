import { describe, expect, it } from '@jest/globals';
import { OwnWrites } from '../../../src/operator/runtime/own-writes.ts';

describe('OwnWrites', () => {
  it('recognises each version it recorded once, and nothing else', () => {
    const own = new OwnWrites();
    own.record('ApiKey/ns/a', '9', '10');
    expect(own.consume('ApiKey/ns/a', '9')).toBe(false);
    expect(own.consume('ApiKey/ns/b', '10')).toBe(false);
    expect(own.consume('ApiKey/ns/a', undefined)).toBe(false);
    expect(own.consume('ApiKey/ns/a', '10')).toBe(true);
    expect(own.consume('ApiKey/ns/a', '10')).toBe(false);
    expect(own.size).toBe(0);
  });

  it('drops the versions recorded before the one seen (the watch has moved past them)', () => {
    const own = new OwnWrites();
    for (const v of ['1', '2', '3']) own.record('Secret/ns/s', undefined, v);
    expect(own.consume('Secret/ns/s', '2')).toBe(true);
    expect(own.consume('Secret/ns/s', '1')).toBe(false);
    expect(own.consume('Secret/ns/s', '3')).toBe(true);
    expect(own.size).toBe(0);
  });

  it('records nothing for a write that changed nothing (no event will come)', () => {
    const own = new OwnWrites();
    own.record('ApiKey/ns/a', '10', '10');
    expect(own.size).toBe(0);
    expect(own.consume('ApiKey/ns/a', '10')).toBe(false);
  });

  it('keeps a bounded number of versions per object, and forgets a deleted one', () => {
    const own = new OwnWrites();
    for (let v = 1; v <= 20; v++) own.record('ApiKey/ns/a', String(v - 1), String(v));
    expect(own.consume('ApiKey/ns/a', '5')).toBe(false);
    expect(own.consume('ApiKey/ns/a', '20')).toBe(true);
    own.record('ApiKey/ns/a', '20', '21');
    own.record('ApiKey/ns/a', '21', undefined);
    own.forget('ApiKey/ns/a');
    expect(own.consume('ApiKey/ns/a', '21')).toBe(false);
    expect(own.size).toBe(0);
  });

  it('says whether a write of ours to an object has not come back as an event yet (a cached copy is behind it)', () => {
    const own = new OwnWrites();
    expect(own.waiting('ApiKey/ns/a')).toBe(false);
    own.record('ApiKey/ns/a', '9', '10');
    own.record('ApiKey/ns/a', '10', '11');
    expect([own.waiting('ApiKey/ns/a'), own.waiting('ApiKey/ns/b')]).toEqual([true, false]);
    expect(own.consume('ApiKey/ns/a', '10')).toBe(true);
    expect(own.waiting('ApiKey/ns/a')).toBe(true);
    expect(own.consume('ApiKey/ns/a', '11')).toBe(true);
    expect(own.waiting('ApiKey/ns/a')).toBe(false);
  });
});
