// A line of waiting items in flows (one per namespace, say), served in turns between the flows by
// a rule given as a parameter: round robin (the work queue), the fewest turns (an organization's
// creates), the fewest recent permits (the platform limiter's waiters). Inside a flow, items go by
// rank (0 first), then in the order they came.
//
// Adding, deleting any item and taking the next item of a flow are O(1); choosing the flow is the
// rule's: round robin takes the first waiting flow, a rule that compares flows looks at each.

/** What a rule keeps of one flow, and what it knows when it compares two. */
export interface FlowView<S> {
  readonly name: string;
  /** The rule's own state of the flow (open()). */
  readonly state: S;
  /** Items waiting. */
  readonly size: number;
  /** The line's serial number of the flow's last turn (0: none): the higher, the more lately served. */
  readonly lastServed: number;
}

/** Who goes next. Each line has its own rule object (a rule may keep state of the whole line). */
export interface TurnRule<S> {
  /** The state of a flow the line does not keep yet. */
  open(flow: string): S;
  /** A kept flow with nothing waiting gets an item again. */
  resume?(state: S): void;
  /**
   * Whether waiting flow `a` (its most urgent item of rank `aRank`) goes before `b`. Without it,
   * round robin: the flow served least lately goes first, a flow that starts waiting at the back.
   */
  before?(a: FlowView<S>, aRank: number, b: FlowView<S>, bRank: number): boolean;
  /** The flow had a turn. */
  served(state: S): void;
  /** Whether a flow with nothing waiting is kept (its state still counts). Default: not. */
  keep?(state: S): boolean;
}

/** A rule's `before`: the lowest count first (turns had, recent permits), then the more urgent, then the flow served least lately. */
export function lowestCountFirst<S>(count: (state: S) => number): NonNullable<TurnRule<S>['before']> {
  return (a, aRank, b, bRank) => {
    const ca = count(a.state);
    const cb = count(b.state);
    return ca < cb || (ca === cb && (aRank < bRank || (aRank === bRank && a.lastServed < b.lastServed)));
  };
}

interface Link<T, S> {
  readonly item: T;
  readonly flow: Flow<T, S>;
  rank: number;
  prev: Link<T, S> | undefined;
  next: Link<T, S> | undefined;
}

/** One rank of a flow: its items in the order they came. */
interface Chain<T, S> {
  head: Link<T, S> | undefined;
  tail: Link<T, S> | undefined;
  size: number;
}

interface Flow<T, S> extends FlowView<S> {
  size: number;
  lastServed: number;
  readonly ranks: Chain<T, S>[];
}

export class FairLine<T, S = undefined> {
  readonly #rule: TurnRule<S>;
  readonly #flowOf: (item: T) => string;
  readonly #ranks: number;
  /** Waiting flows and the idle ones the rule keeps, least lately served first (a new one at the back). */
  readonly #flows = new Map<string, Flow<T, S>>();
  readonly #links = new Map<T, Link<T, S>>();
  #serial = 0;

  constructor(rule: TurnRule<S>, flowOf: (item: T) => string, ranks = 1) {
    if (!Number.isInteger(ranks) || ranks < 1) throw new RangeError(`ranks must be a positive integer, got ${ranks}`);
    this.#rule = rule;
    this.#flowOf = flowOf;
    this.#ranks = ranks;
  }

  /** Items waiting. */
  get size(): number {
    return this.#links.size;
  }

  /** Flows kept: those with items waiting, and idle ones the rule keeps. */
  get flowsKept(): number {
    return this.#flows.size;
  }

  has(item: T): boolean {
    return this.#links.has(item);
  }

  /** Items of this flow waiting. */
  waitingIn(flow: string): number {
    return this.#flows.get(flow)?.size ?? 0;
  }

  /** The flows kept, least lately served first. */
  flows(): Iterable<FlowView<S>> {
    return this.#flows.values();
  }

  /** The kept flow of this name. */
  flow(name: string): FlowView<S> | undefined {
    return this.#flows.get(name);
  }

  /** At the back of its flow's rank; an item already waiting keeps its place unless it becomes more urgent (a lower rank). */
  add(item: T, rank = 0): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.#ranks) throw new RangeError(`rank must be an integer from 0 to ${this.#ranks - 1}, got ${rank}`);
    const link = this.#links.get(item);
    if (link !== undefined) {
      if (link.rank <= rank) return;
      unlink(link.flow.ranks[link.rank] as Chain<T, S>, link);
      link.rank = rank;
      append(link.flow.ranks[rank] as Chain<T, S>, link);
      return;
    }
    const flow = this.#flowFor(this.#flowOf(item));
    const added: Link<T, S> = { item, flow, rank, prev: undefined, next: undefined };
    append(flow.ranks[rank] as Chain<T, S>, added);
    flow.size++;
    this.#links.set(item, added);
  }

  delete(item: T): boolean {
    const link = this.#links.get(item);
    if (link === undefined) return false;
    this.#take(link);
    return true;
  }

  /** The item whose turn is next, taken out of the line; undefined when nothing waits. */
  next(): T | undefined {
    const flow = this.#choose();
    const link = flow === undefined ? undefined : first(flow);
    if (flow === undefined || link === undefined) return undefined;
    this.#served(flow);
    this.#take(link);
    return link.item;
  }

  /** The item next() would take, left in place. */
  peek(): T | undefined {
    const flow = this.#choose();
    return flow === undefined ? undefined : first(flow)?.item;
  }

  /** A turn of this flow taken without waiting in line: counted by the rule as one. */
  served(flow: string): void {
    const kept = this.#flowFor(flow);
    this.#served(kept);
    this.#idle(kept);
  }

  /** Items of its own flow that go before `item` (more urgent, or as urgent and earlier); undefined when it does not wait. */
  aheadInFlow(item: T): number | undefined {
    const link = this.#links.get(item);
    if (link === undefined) return undefined;
    let ahead = 0;
    for (let r = 0; r < link.rank; r++) ahead += link.flow.ranks[r]?.size ?? 0;
    for (let other = link.flow.ranks[link.rank]?.head; other !== undefined && other !== link; other = other.next) ahead++;
    return ahead;
  }

  /** Drops the flows with nothing waiting that the rule no longer keeps. */
  forget(): void {
    for (const flow of this.#flows.values()) this.#idle(flow);
  }

  clear(): void {
    this.#flows.clear();
    this.#links.clear();
  }

  #flowFor(name: string): Flow<T, S> {
    let flow = this.#flows.get(name);
    if (flow === undefined) {
      const ranks = Array.from({ length: this.#ranks }, (): Chain<T, S> => ({ head: undefined, tail: undefined, size: 0 }));
      flow = { name, state: this.#rule.open(name), size: 0, lastServed: 0, ranks };
      this.#flows.set(name, flow);
    } else if (flow.size === 0) {
      this.#rule.resume?.(flow.state);
    }
    return flow;
  }

  /** The waiting flow whose turn it is, by the rule; idle flows it no longer keeps are dropped on the way. */
  #choose(): Flow<T, S> | undefined {
    const before = this.#rule.before?.bind(this.#rule);
    let best: { flow: Flow<T, S>; rank: number } | undefined;
    for (const flow of this.#flows.values()) {
      if (flow.size === 0) {
        this.#idle(flow);
        continue;
      }
      if (before === undefined) return flow;
      const rank = flow.ranks.findIndex((chain) => chain.size > 0);
      if (best === undefined || before(flow, rank, best.flow, best.rank)) best = { flow, rank };
    }
    return best?.flow;
  }

  /** The rule counts the turn; the flow goes to the back of the order. */
  #served(flow: Flow<T, S>): void {
    this.#rule.served(flow.state);
    flow.lastServed = ++this.#serial;
    this.#flows.delete(flow.name);
    this.#flows.set(flow.name, flow);
  }

  #take(link: Link<T, S>): void {
    this.#links.delete(link.item);
    unlink(link.flow.ranks[link.rank] as Chain<T, S>, link);
    link.flow.size--;
    this.#idle(link.flow);
  }

  #idle(flow: Flow<T, S>): void {
    if (flow.size === 0 && this.#rule.keep?.(flow.state) !== true && this.#flows.get(flow.name) === flow) this.#flows.delete(flow.name);
  }
}

/** The most urgent waiting item of a flow. */
function first<T, S>(flow: Flow<T, S>): Link<T, S> | undefined {
  for (const chain of flow.ranks) if (chain.head !== undefined) return chain.head;
  return undefined;
}

function append<T, S>(chain: Chain<T, S>, link: Link<T, S>): void {
  link.prev = chain.tail;
  link.next = undefined;
  if (chain.tail === undefined) chain.head = link;
  else chain.tail.next = link;
  chain.tail = link;
  chain.size++;
}

function unlink<T, S>(chain: Chain<T, S>, link: Link<T, S>): void {
  if (link.prev === undefined) chain.head = link.next;
  else link.prev.next = link.next;
  if (link.next === undefined) chain.tail = link.prev;
  else link.next.prev = link.prev;
  link.prev = undefined;
  link.next = undefined;
  chain.size--;
}
