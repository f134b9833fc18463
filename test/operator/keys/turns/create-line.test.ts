// keys/turns/create-line.ts: the order in which one organization's creates get their turns (issue 25):
// fair turns between namespaces, a late namespace served next, and the priorities.
import { describe, expect, it } from '@jest/globals';
import { CreateLine, namespaceOf } from '../../../../src/operator/keys/turns/create-line.ts';

const drain = (line: CreateLine): string[] => {
  const order: string[] = [];
  for (let item = line.next(); item !== undefined; item = line.next()) order.push(item);
  return order;
};
const keys = (namespace: string, n: number): string[] => Array.from({ length: n }, (_, i) => `ApiKey/${namespace}/k${i + 1}`);
const short = (items: string[]): string[] => items.map((i) => `${namespaceOf(i)}:${i.split('/')[2] ?? ''}`);

describe('CreateLine', () => {
  it('serves 3 namespaces of unequal backlogs in turns, each in its own order, and a namespace alone takes every turn', () => {
    const line = new CreateLine();
    for (const k of [...keys('a', 6), ...keys('b', 3), ...keys('c', 1)]) line.add(k);
    expect(line.size).toBe(10);
    expect(short(drain(line))).toEqual(['a:k1', 'b:k1', 'c:k1', 'a:k2', 'b:k2', 'a:k3', 'b:k3', 'a:k4', 'a:k5', 'a:k6']);
    expect(line.size).toBe(0);
  });

  it('gives a namespace that starts waiting the next turn, but no credit for the time it was quiet', () => {
    const line = new CreateLine();
    for (const k of [...keys('a', 100), ...keys('b', 3)]) line.add(k);
    expect(short([line.next(), line.next(), line.next()] as string[])).toEqual(['a:k1', 'b:k1', 'a:k2']);
    line.add('ApiKey/late/k1');
    line.add('ApiKey/late/k2');
    // late is served next, then once per round like the others: never twice in a row while others wait.
    expect(short([line.next(), line.next(), line.next(), line.next(), line.next()] as string[])).toEqual(['late:k1', 'b:k2', 'a:k3', 'late:k2', 'b:k3']);
    // After 80 of a's keys alone, a key of a new namespace is still next.
    for (let i = 0; i < 80; i++) expect(namespaceOf(line.next() as string)).toBe('a');
    line.add('ApiKey/later/k1');
    expect(short([line.next(), line.next()] as string[])).toEqual(['later:k1', 'a:k84']);
  });

  it('serves a broken key first, then a requested rotation, a first create, a scheduled rotation', () => {
    const line = new CreateLine();
    line.add('ApiKey/a/scheduled', 'scheduled-rotation');
    line.add('ApiKey/a/new', 'create');
    line.add('ApiKey/a/requested', 'requested-rotation');
    line.add('ApiKey/a/repair', 'repair');
    expect(short(drain(line))).toEqual(['a:repair', 'a:requested', 'a:new', 'a:scheduled']);
    // A key already waiting moves up when it becomes more urgent, never down.
    line.add('ApiKey/b/x', 'create');
    line.add('ApiKey/b/y', 'create');
    line.add('ApiKey/b/y', 'repair');
    line.add('ApiKey/b/x', 'scheduled-rotation');
    expect(short(drain(line))).toEqual(['b:y', 'b:x']);
  });

  it("lets a quiet namespace's repair go next during a flood, but buys a flooding namespace no more than its share", () => {
    const line = new CreateLine();
    for (const k of keys('flood', 50)) line.add(k);
    for (let i = 0; i < 10; i++) line.next();
    line.add('ApiKey/quiet/new', 'create');
    line.add('ApiKey/other/broken', 'repair');
    // Both start at the line's clock: the repair wins the tie, the create comes right after.
    expect(short([line.next(), line.next(), line.next()] as string[])).toEqual(['other:broken', 'quiet:new', 'flood:k11']);

    // A tenant that breaks all of its own keys alternates with a namespace of first creates.
    const contested = new CreateLine();
    for (const k of keys('breaker', 20)) contested.add(k, 'repair');
    for (const k of keys('creator', 5)) contested.add(k, 'create');
    expect(drain(contested).slice(0, 10).map(namespaceOf)).toEqual([
      'breaker',
      'creator',
      'breaker',
      'creator',
      'breaker',
      'creator',
      'breaker',
      'creator',
      'breaker',
      'creator',
    ]);
  });

  it("tells a waiting key how many keys go before it, and how many of them are its own namespace's", () => {
    const line = new CreateLine();
    for (const k of [...keys('a', 10), ...keys('b', 2)]) line.add(k);
    // b's second key: its turn is b's second; a gets two turns before it (a's first two), b one.
    expect(line.place('ApiKey/b/k2')).toEqual({ ahead: 3, aheadInNamespace: 1 });
    // a's fifth: 4 of its own, and both of b's.
    expect(line.place('ApiKey/a/k5')).toEqual({ ahead: 6, aheadInNamespace: 4 });
    expect(line.place('ApiKey/c/k1')).toBeUndefined();
    // The place is what happens: a:k5 is the 7th served.
    expect(drain(line).indexOf('ApiKey/a/k5')).toBe(6);
  });

  it('counts a turn taken without waiting (the line was empty) as a turn', () => {
    const line = new CreateLine();
    for (let i = 0; i < 30; i++) line.served(`ApiKey/flood/early${i}`);
    line.add('ApiKey/flood/k1');
    line.add('ApiKey/quiet/k1');
    expect(short(drain(line))).toEqual(['quiet:k1', 'flood:k1']);
  });

  it('forgets a key that leaves the line, and a namespace with nothing waiting', () => {
    const line = new CreateLine();
    line.add('ApiKey/a/k1');
    line.add('ApiKey/a/k2');
    expect(line.delete('ApiKey/a/k1')).toBe(true);
    expect(line.delete('ApiKey/a/k1')).toBe(false);
    expect(line.has('ApiKey/a/k2')).toBe(true);
    expect(short(drain(line))).toEqual(['a:k2']);
    expect(line.next()).toBeUndefined();
  });
});
