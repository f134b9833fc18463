// keys/turns/create-admission.ts: how many creates of an organization are under way, who waits in its
// line, in which order turns come, and what happens to a turn its key does not take.
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { CreateAdmission } from '../../../../src/operator/keys/turns/create-admission.ts';

describe('CreateAdmission', () => {
  let woken: string[];
  let admission: CreateAdmission;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
    woken = [];
    admission = new CreateAdmission({ perOrganization: 2, wake: (key) => woken.push(key), keepMs: 5_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('admits up to perOrganization creates of one organization; the rest wait in line and are woken in order, one per create that ends', () => {
    const a = admission.admit('org-a', 'k/ns/a');
    const b = admission.admit('org-a', 'k/ns/b');
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(admission.admit('org-a', 'k/ns/c')).toBeUndefined();
    expect(admission.admit('org-a', 'k/ns/d')).toBeUndefined();
    // A key already in line keeps its place when it is seen again.
    expect(admission.admit('org-a', 'k/ns/c')).toBeUndefined();
    expect(admission.waiting()).toBe(2);
    expect(woken).toEqual([]);
    a?.done();
    a?.done(); // once only
    expect(woken).toEqual(['k/ns/c']);
    // The turn is kept for c: a newcomer does not take it, and neither does d (behind c).
    expect(admission.admit('org-a', 'k/ns/e')).toBeUndefined();
    expect(admission.admit('org-a', 'k/ns/c')).toBeDefined();
    b?.done();
    expect(woken).toEqual(['k/ns/c', 'k/ns/d']);
  });

  it('keeps organizations apart: a full organization never delays another', () => {
    admission.admit('org-a', 'k/ns/a1');
    admission.admit('org-a', 'k/ns/a2');
    expect(admission.admit('org-a', 'k/ns/a3')).toBeUndefined();
    expect(admission.waitsForTurn('org-b', 'k/ns/b1')).toBe(false);
    expect(admission.admit('org-b', 'k/ns/b1')).toBeDefined();
  });

  it('sends a new key to the line unread only when its organization has no slot for it, and never a key whose turn has come', () => {
    expect(admission.waitsForTurn('org-a', 'k/ns/a')).toBe(false);
    const a = admission.admit('org-a', 'k/ns/a');
    expect(admission.waitsForTurn('org-a', 'k/ns/b')).toBe(false);
    admission.admit('org-a', 'k/ns/b');
    expect(admission.waitsForTurn('org-a', 'k/ns/c')).toBe(true);
    expect(admission.waiting()).toBe(1);
    a?.done();
    expect(woken).toEqual(['k/ns/c']);
    expect(admission.waitsForTurn('org-a', 'k/ns/c')).toBe(false);
    expect(admission.admit('org-a', 'k/ns/c')).toBeDefined();
  });

  it("passes a turn on when its key's reconcile ends without taking it, but not a turn kept after that reconcile started", () => {
    const a = admission.admit('org-a', 'k/ns/a');
    admission.admit('org-a', 'k/ns/b');
    admission.admit('org-a', 'k/ns/c');
    admission.admit('org-a', 'k/ns/d');
    const startedBefore = Date.now();
    jest.advanceTimersByTime(10);
    a?.done();
    expect(woken).toEqual(['k/ns/c']);
    // A reconcile of c that was already running when c's turn came does not give the turn away.
    admission.ended('k/ns/c', startedBefore - 1);
    expect(woken).toEqual(['k/ns/c']);
    // The reconcile woken for the turn ends without a create (c was deleted meanwhile): d's turn.
    admission.ended('k/ns/c', Date.now());
    expect(woken).toEqual(['k/ns/c', 'k/ns/d']);
  });

  it('passes a turn on after keepMs when its key never comes back', () => {
    const a = admission.admit('org-a', 'k/ns/a');
    admission.admit('org-a', 'k/ns/b');
    admission.admit('org-a', 'k/ns/c');
    admission.admit('org-a', 'k/ns/d');
    a?.done();
    expect(woken).toEqual(['k/ns/c']);
    jest.advanceTimersByTime(4_999);
    expect(woken).toEqual(['k/ns/c']);
    jest.advanceTimersByTime(1);
    expect(woken).toEqual(['k/ns/c', 'k/ns/d']);
    // c, late, goes to the back of the line.
    expect(admission.admit('org-a', 'k/ns/c')).toBeUndefined();
  });

  it('serves its line in fair turns between namespaces, a repair first (create-line.ts)', () => {
    admission.admit('org-a', 'k/flood/1');
    const running = admission.admit('org-a', 'k/flood/2');
    for (let i = 3; i <= 10; i++) expect(admission.waitsForTurn('org-a', `k/flood/${i}`)).toBe(true);
    running?.done();
    expect(woken).toEqual(['k/flood/3']);
    admission.admit('org-a', 'k/flood/3')?.done();
    expect(woken).toEqual(['k/flood/3', 'k/flood/4']);
    expect(admission.waitsForTurn('org-a', 'k/quiet/new')).toBe(true);
    expect(admission.admit('org-a', 'k/other/broken', 'repair')).toBeUndefined();
    admission.admit('org-a', 'k/flood/4')?.done();
    // Both late namespaces start at the line's clock: the repair, then the quiet key, before flood/5.
    expect(woken.slice(2)).toEqual(['k/other/broken']);
    admission.ended('k/other/broken', Date.now());
    expect(woken.slice(2)).toEqual(['k/other/broken', 'k/quiet/new']);
    admission.ended('k/quiet/new', Date.now());
    expect(woken.slice(2)).toEqual(['k/other/broken', 'k/quiet/new', 'k/flood/5']);
  });

  it('tells a waiting key where it stands once per wait, only when it waits long, for a few keys of a namespace at once', () => {
    const telling = new CreateAdmission({ perOrganization: 1, wake: (key) => woken.push(key), tellAhead: 3, tellPerNamespace: 2 });
    const first = telling.admit('org-a', 'k/a/0');
    for (let i = 1; i <= 6; i++) telling.waitsForTurn('org-a', `k/a/${i}`);
    telling.waitsForTurn('org-a', 'k/b/1');
    // a/1 has one create before it (b/1's turn ties with it): too short a wait to tell.
    expect(telling.tell('org-a', 'k/a/1')).toBeUndefined();
    expect(telling.tell('org-a', 'k/a/4')).toEqual({ ahead: 4, aheadInNamespace: 3 });
    expect(telling.tell('org-a', 'k/a/4')).toBeUndefined(); // once
    expect(telling.tell('org-a', 'k/a/5')).toEqual({ ahead: 5, aheadInNamespace: 4 });
    expect(telling.tell('org-a', 'k/a/6')).toBeUndefined(); // two of namespace a told already
    expect(telling.tell('org-a', 'k/b/1')).toBeUndefined(); // b's key goes second: no long wait
    expect(telling.tell('org-a', 'k/c/1')).toBeUndefined(); // not waiting
    first?.done(); // a/1's turn: two of a's are still told
    expect(telling.tell('org-a', 'k/a/6')).toBeUndefined();
  });

  it("tells a few keys of a namespace per backlog: its told keys' turns give no count back while it still has keys waiting", () => {
    const telling = new CreateAdmission({ perOrganization: 1, wake: (key) => woken.push(key), tellAhead: 2, tellPerNamespace: 2 });
    let running = telling.admit('org-a', 'k/a/0');
    for (let i = 1; i <= 8; i++) telling.waitsForTurn('org-a', `k/a/${i}`);
    expect(telling.tell('org-a', 'k/a/3')).toEqual({ ahead: 2, aheadInNamespace: 2 });
    expect(telling.tell('org-a', 'k/a/4')).toEqual({ ahead: 3, aheadInNamespace: 3 });
    // Turns go by up to and past the told keys a/3 and a/4; a's backlog lasts, so no other key of a is told.
    for (let i = 1; i <= 5; i++) {
      running?.done();
      running = telling.admit('org-a', `k/a/${i}`);
      expect(running).toBeDefined();
      expect(telling.tell('org-a', 'k/a/8')).toBeUndefined();
    }
    // Its backlog gone (a/6, a/7 and a/8 have had their turns), a new backlog of a is told again.
    for (let i = 6; i <= 8; i++) {
      running?.done();
      running = telling.admit('org-a', `k/a/${i}`);
    }
    for (let i = 9; i <= 12; i++) telling.waitsForTurn('org-a', `k/a/${i}`);
    expect(telling.tell('org-a', 'k/a/12')).toEqual({ ahead: 3, aheadInNamespace: 3 });
  });

  it('refuses a bound that is not a positive integer', () => {
    expect(() => new CreateAdmission({ perOrganization: 0, wake: () => undefined })).toThrow(RangeError);
  });
});
