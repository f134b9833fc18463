// --watch-namespace / WATCH_NAMESPACE as the operator reads them (src/operator/watch-namespaces.ts).
import { describe, expect, it } from '@jest/globals';
import { parseWatchNamespaces } from '../../../src/operator/runtime/watch-namespaces.ts';

describe('parseWatchNamespaces', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['  ', undefined],
    ['team-a', ['team-a']],
    ['team-b,team-a', ['team-a', 'team-b']],
    [' team-a , team-b ', ['team-a', 'team-b']],
    ['team-a,team-a,b', ['b', 'team-a']],
    [`${'a'.repeat(63)}`, [`${'a'.repeat(63)}`]],
  ])('%j -> %j', (text, expected) => {
    expect(parseWatchNamespaces(text)).toEqual(expected);
  });

  // A name that cannot be a namespace is a typo: refused, never read as "every namespace".
  it.each(['team-a,', ',team-a', 'team-a,,team-b', 'Team-A', 'team_a', '-team', 'team-', 'team a', 'team-a;team-b', `${'a'.repeat(64)}`])(
    'refuses %j',
    (text) => {
      expect(() => parseWatchNamespaces(text)).toThrow(/--watch-namespace/);
    },
  );
});
