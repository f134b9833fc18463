// One organization's line of creates, served in fair turns between namespaces.
//
// Every namespace that uses keys of one organization draws on the platform's 10 creates per second
// of that organization. First come, first served, one namespace that applies 10,000 keys would leave
// every other namespace of the organization without a new key, a repair or a rotation for minutes.
// So the line is one flow per namespace, served like start-time fair queueing (Goyal et al.; the
// apiserver's API Priority and Fairness serves its queues alike):
//
// - each flow counts the turns it has had; the next turn goes to the waiting flow with the fewest;
// - a flow that starts waiting is brought up to the line's clock (the count of the flow served
//   last), so a namespace that was quiet gets the next turn, but no credit for the time it was
//   quiet: two namespaces with a backlog alternate, ten take one turn each per round;
// - work-conserving: a flow alone takes every turn.
//
// Priorities order a flow's own keys, and break ties between flows with as many turns: a broken key
// first, then a requested rotation, a first create, a scheduled rotation. They never buy a namespace
// more than its share: a tenant who breaks its own keys gets one turn per round like everyone else.
//
// Each item is a work-queue key (`kind/namespace/name`); its namespace names its flow.
import { FairLine, lowestCountFirst, type TurnRule } from '../../runtime/fair-line.ts';

/** What a create is for, most urgent first (the index is the rank). */
export const PRIORITIES = ['repair', 'requested-rotation', 'create', 'scheduled-rotation'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The rank of a priority in a fair line (fair-line.ts: 0 first). */
export function rankOf(priority: Priority): number {
  return PRIORITIES.indexOf(priority);
}

export interface Place {
  /** Items of the whole line served before this one (about: a flow that starts waiting meanwhile may come first). */
  ahead: number;
  /** Of those, items of its own namespace. */
  aheadInNamespace: number;
}

/** The namespace of a work-queue key (`kind/namespace/name`). */
export function namespaceOf(item: string): string {
  const first = item.indexOf('/');
  const second = item.indexOf('/', first + 1);
  return first < 0 || second < 0 ? '' : item.slice(first + 1, second);
}

interface Turns {
  /** Turns this flow has had (brought up to the line's clock when it starts waiting). */
  turns: number;
}

/** The fewest turns first; a flow that starts waiting is brought up to the clock: the turn count the flow served last had before its turn. */
class FewestTurns implements TurnRule<Turns> {
  clock = 0;
  readonly before = lowestCountFirst<Turns>((flow) => flow.turns);

  open(): Turns {
    return { turns: this.clock };
  }

  resume(flow: Turns): void {
    flow.turns = Math.max(flow.turns, this.clock);
  }

  served(flow: Turns): void {
    this.clock = flow.turns;
    flow.turns++;
  }

  /** An idle flow whose count is no more than the clock is forgotten: it would be brought up to it anyway. */
  keep(flow: Turns): boolean {
    return flow.turns > this.clock;
  }
}

export class CreateLine {
  readonly #line = new FairLine<string, Turns>(new FewestTurns(), namespaceOf, PRIORITIES.length);

  get size(): number {
    return this.#line.size;
  }

  has(item: string): boolean {
    return this.#line.has(item);
  }

  /** Items of this namespace waiting. */
  waitingIn(namespace: string): number {
    return this.#line.waitingIn(namespace);
  }

  /** Adds an item at the back of its namespace's line for its priority; an item already in line keeps its place unless it becomes more urgent. */
  add(item: string, priority: Priority = 'create'): void {
    this.#line.add(item, rankOf(priority));
  }

  delete(item: string): boolean {
    return this.#line.delete(item);
  }

  /** The item whose turn is next, taken out of the line; undefined when the line is empty. */
  next(): string | undefined {
    return this.#line.next();
  }

  /** An item of this namespace had a turn without waiting in line (the line was empty): counted as one. */
  served(item: string): void {
    this.#line.served(namespaceOf(item));
  }

  /**
   * Where an item stands: the items of its own namespace before it (more urgent, or as urgent and
   * earlier), and the turns the other namespaces get before its namespace's turn for it (each
   * waiting flow at most as many as it has waiting). Undefined when it is not in line.
   */
  place(item: string): Place | undefined {
    const aheadInNamespace = this.#line.aheadInFlow(item);
    const own = this.#line.flow(namespaceOf(item));
    if (aheadInNamespace === undefined || own === undefined) return undefined;
    const turn = own.state.turns + aheadInNamespace;
    let ahead = aheadInNamespace;
    for (const other of this.#line.flows()) {
      if (other === own || other.size === 0) continue;
      // Its turns numbered other.turns, other.turns + 1, ...: those before `turn`, and a tie too (counted as first: a bound, not a promise).
      ahead += Math.min(other.size, Math.max(0, turn - other.state.turns + 1));
    }
    return { ahead, aheadInNamespace };
  }
}
