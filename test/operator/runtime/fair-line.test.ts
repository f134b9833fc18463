// runtime/fair-line.ts: items in flows, served in turns by the rule given; inside a flow by rank, then
// in the order they came. Its three users (the work queue, an organization's line of creates, the
// organization limiter's waiters) have their own tests of their rules.
import { describe, expect, it } from '@jest/globals';
import { FairLine, lowestCountFirst, type TurnRule } from '../../../src/operator/runtime/fair-line.ts';

const flowOf = (item: string): string => item.split(':')[0] ?? '';
const roundRobin: TurnRule<undefined> = { open: () => undefined, served: () => undefined };
const drain = <S>(line: FairLine<string, S>): string[] => {
  const order: string[] = [];
  for (let item = line.next(); item !== undefined; item = line.next()) order.push(item);
  return order;
};

describe('FairLine', () => {
  it('round robin without a rule of its own: flows in turn, a flow that starts waiting at the back', () => {
    const line = new FairLine<string>(roundRobin, flowOf);
    for (const item of ['a:1', 'a:2', 'a:3', 'b:1', 'c:1', 'c:2']) line.add(item);
    expect([line.next(), line.next()]).toEqual(['a:1', 'b:1']);
    line.add('d:1');
    expect(line.peek()).toBe('c:1');
    expect(drain(line)).toEqual(['c:1', 'a:2', 'd:1', 'c:2', 'a:3']);
    expect(line.size).toBe(0);
    expect(line.flowsKept).toBe(0);
  });

  it('orders a flow by rank, then by arrival; an item added again moves up only, and any item leaves at once', () => {
    const line = new FairLine<string>(roundRobin, flowOf, 3);
    line.add('a:late', 2);
    line.add('a:x', 1);
    line.add('a:y', 1);
    line.add('a:first', 0);
    line.add('a:late', 0); // more urgent: moves up, to the back of rank 0
    line.add('a:x', 2); // less urgent: stays
    expect(line.aheadInFlow('a:y')).toBe(3);
    expect(line.aheadInFlow('a:none')).toBeUndefined();
    expect(line.delete('a:x')).toBe(true);
    expect(line.delete('a:x')).toBe(false);
    expect(line.has('a:y')).toBe(true);
    expect(line.waitingIn('a')).toBe(3);
    expect(drain(line)).toEqual(['a:first', 'a:late', 'a:y']);
    expect(() => line.add('a:z', 3)).toThrow(RangeError);
  });

  it('lets the rule choose the flow, and keeps an idle flow only while the rule does', () => {
    // Fewest turns ever, kept for good: a flow that comes back keeps its count.
    const rule: TurnRule<{ turns: number }> = {
      open: () => ({ turns: 0 }),
      before: lowestCountFirst((flow) => flow.turns),
      served: (flow) => {
        flow.turns++;
      },
      keep: () => true,
    };
    const line = new FairLine(rule, flowOf, 2);
    for (let i = 1; i <= 3; i++) line.add(`a:${i}`);
    expect(drain(line)).toEqual(['a:1', 'a:2', 'a:3']);
    line.served('b');
    line.add('a:4');
    line.add('b:1');
    line.add('c:1', 1);
    line.add('c:2', 0);
    // c has had no turn, b one, a three; c's second goes after b's, as many turns but more urgent.
    expect(drain(line)).toEqual(['c:2', 'b:1', 'c:1', 'a:4']);
    expect(line.flowsKept).toBe(3);
    expect(line.flow('a')?.state.turns).toBe(4);
    // As many turns and as urgent: the flow served least lately first, whichever came first.
    line.add('c:3');
    line.add('b:2');
    expect(drain(line)).toEqual(['b:2', 'c:3']);
  });
});
