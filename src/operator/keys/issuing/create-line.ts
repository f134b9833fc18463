// One organization's line of creates, served in fair turns between namespaces.
//
// Every namespace that uses keys of one organization draws on the platform's 10 creates per second
// of that organization. First come, first served, one namespace that applies 10,000 keys leaves
// every other namespace of the organization without a new key, a repair or a rotation for about 17
// minutes. So the line is one queue per namespace (a "flow"), and turns go between the flows like
// start-time fair queueing (Goyal et al.; the apiserver's API Priority and Fairness serves its
// queues alike):
//
// - each flow counts the turns it has had; the next turn goes to the waiting flow with the fewest;
// - a flow that starts waiting is brought up to the line's clock (the count of the flow served
//   last), so a namespace that was quiet gets the next turn, but no credit for the time it was
//   quiet: two namespaces with a backlog alternate, ten take one turn each per round;
// - work-conserving: a flow alone takes every turn.
//
// Priorities (Priority below) order a flow's own keys, and break ties between flows with as many
// turns: a broken key (consumers broken now) goes before a first create, which goes before a
// scheduled rotation; an explicit rotation request goes before a first create. They never buy a
// namespace more than its share: a tenant who breaks its own 1,000 keys gets the same one turn per
// round as everyone else (the repairs of a quiet namespace still go next, as its count is lowest).
//
// Each item is a work-queue key (`kind/namespace/name`); its namespace names its flow.

/** What a create is for, most urgent first (the index is the rank). */
export const PRIORITIES = ['repair', 'requested-rotation', 'create', 'scheduled-rotation'] as const;
export type Priority = (typeof PRIORITIES)[number];

interface Flow {
  readonly name: string;
  /** Turns this flow has had (brought up to the line's clock when it starts waiting). */
  turns: number;
  /** The line's serial number of this flow's last turn (0: none): the older goes first on a tie. */
  lastTurn: number;
  /** Its waiting items, one insertion-ordered set per priority rank. */
  readonly items: Set<string>[];
  size: number;
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

export class CreateLine {
  /** Flows with items waiting, and idle flows that had a turn after the line's clock (their count must not be lost). */
  readonly #flows = new Map<string, Flow>();
  /** Each waiting item's flow and rank. */
  readonly #where = new Map<string, { flow: Flow; rank: number }>();
  /** The turn count the flow served last had before its turn. */
  #clock = 0;
  #serial = 0;

  get size(): number {
    return this.#where.size;
  }

  has(item: string): boolean {
    return this.#where.has(item);
  }

  /** Items of this namespace waiting. */
  waitingIn(namespace: string): number {
    return this.#flows.get(namespace)?.size ?? 0;
  }

  /** Adds an item at the back of its namespace's line for its priority; an item already in line keeps its place unless it becomes more urgent. */
  add(item: string, priority: Priority = 'create'): void {
    const rank = PRIORITIES.indexOf(priority);
    const at = this.#where.get(item);
    if (at !== undefined) {
      if (at.rank <= rank) return;
      at.flow.items[at.rank]?.delete(item);
      at.flow.items[rank]?.add(item);
      at.rank = rank;
      return;
    }
    const flow = this.#flowFor(namespaceOf(item));
    flow.items[rank]?.add(item);
    flow.size++;
    this.#where.set(item, { flow, rank });
  }

  delete(item: string): boolean {
    const at = this.#where.get(item);
    if (at === undefined) return false;
    this.#where.delete(item);
    at.flow.items[at.rank]?.delete(item);
    at.flow.size--;
    this.#idle(at.flow);
    return true;
  }

  /** The item whose turn is next, taken out of the line; undefined when the line is empty. */
  next(): string | undefined {
    let best: { flow: Flow; rank: number } | undefined;
    for (const flow of this.#flows.values()) {
      if (flow.size === 0) {
        if (flow.turns <= this.#clock) this.#flows.delete(flow.name);
        continue;
      }
      const rank = flow.items.findIndex((s) => s.size > 0);
      if (
        best === undefined ||
        flow.turns < best.flow.turns ||
        (flow.turns === best.flow.turns && (rank < best.rank || (rank === best.rank && flow.lastTurn < best.flow.lastTurn)))
      )
        best = { flow, rank };
    }
    if (best === undefined) return undefined;
    const { flow, rank } = best;
    const item = flow.items[rank]?.values().next().value as string;
    this.#turn(flow);
    flow.items[rank]?.delete(item);
    flow.size--;
    this.#where.delete(item);
    this.#idle(flow);
    return item;
  }

  /** An item of this namespace had a turn without waiting in line (the line was empty): counted as one. */
  served(item: string): void {
    const flow = this.#flowFor(namespaceOf(item));
    this.#turn(flow);
  }

  /**
   * Where an item stands: the items of its own namespace before it (more urgent, or as urgent and
   * earlier), and the turns the other namespaces get before its namespace's turn for it (each
   * waiting flow at most as many as it has waiting). Undefined when it is not in line.
   */
  place(item: string): Place | undefined {
    const at = this.#where.get(item);
    if (at === undefined) return undefined;
    const { flow } = at;
    let aheadInNamespace = 0;
    for (let r = 0; r < at.rank; r++) aheadInNamespace += flow.items[r]?.size ?? 0;
    for (const other of flow.items[at.rank] ?? []) {
      if (other === item) break;
      aheadInNamespace++;
    }
    const turn = flow.turns + aheadInNamespace;
    let ahead = aheadInNamespace;
    for (const other of this.#flows.values()) {
      if (other === flow || other.size === 0) continue;
      // Its turns numbered other.turns, other.turns + 1, ...: those before `turn`, and a tie too (counted as first: a bound, not a promise).
      ahead += Math.min(other.size, Math.max(0, turn - other.turns + 1));
    }
    return { ahead, aheadInNamespace };
  }

  /** The namespace's flow; one that had nothing waiting is brought up to the line's clock. */
  #flowFor(name: string): Flow {
    let flow = this.#flows.get(name);
    if (flow === undefined) {
      flow = { name, turns: this.#clock, lastTurn: 0, items: PRIORITIES.map(() => new Set<string>()), size: 0 };
      this.#flows.set(name, flow);
    } else if (flow.size === 0) {
      flow.turns = Math.max(flow.turns, this.#clock);
    }
    return flow;
  }

  #turn(flow: Flow): void {
    this.#clock = flow.turns;
    flow.turns++;
    flow.lastTurn = ++this.#serial;
  }

  /** A flow left with nothing waiting is forgotten once its count is no more than the clock (it would be brought up to it anyway). */
  #idle(flow: Flow): void {
    if (flow.size === 0 && flow.turns <= this.#clock) this.#flows.delete(flow.name);
  }
}
