// The house's arrows run one way (src/operator/README.md, "The key domain"): no import circle in
// src/, and inside the key domain, the rooms along a key's life import only the rooms before them
// and the frame at keys/. Unit: this reads the source, runs nothing.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { circles, describeCircle, importEdges, sourceFiles, type ImportEdge } from './import-graph.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const KEYS = 'src/operator/keys/';

/**
 * The rooms of the key domain, in the order of a key's life, and for each the rooms before it that
 * it may import, with why (the same arrows as the map in src/operator/README.md). A room imports
 * nothing of a room after it; a new arrow between rooms is added here, with its reason, and there.
 */
const ROOMS = ['issuing', 'secret', 'status', 'observing', 'turns', 'rotation'] as const;
type Room = (typeof ROOMS)[number];
const MAY_IMPORT: Record<Room, Partial<Record<Room, string>>> = {
  // The intent, its signature, the credentials' kind, the check of the answer.
  issuing: {},
  secret: {
    issuing: "the Secret's annotations are signed by the signer that signs the intent (signing.ts)",
  },
  status: {
    secret: "the catalog of what users see names the Secret's annotations (catalog.ts)",
  },
  observing: {
    secret: 'in-sync reads the key from its Secret to mirror operations; the caches keep a Secret by its owner annotation',
    status: 'conditions, reasons and the writes of a status; a drift check that fails reads as a reason',
    issuing: "the caches count a cap's slot by the issuer a create intent names (create-intent.ts unverifiedIssuer)",
  },
  turns: {
    issuing:
      "a create enters its organization's line once the credentials are known members (organization-membership.ts), its checks started beside (create-head-start.ts)",
    status: 'a key that waits says where it stands, and credentials that are not members are refused, in the status',
    observing: 'a key sent to the line unread is told from its cached copy (cache-projection.ts)',
  },
  rotation: {
    secret: "the replaced key's Secret is deleted, and an immutable Secret's consumers repointed",
    status: 'the Rotating condition, and a failed revoke reported',
    observing: 'each step of a retirement ends in the in-sync status of the new key (inSync)',
  },
};
/**
 * Arrows that run against a key's life, each with the reason written in the map. None today; a room
 * listed in MAY_IMPORT after the importing room must be named here too.
 */
const AGAINST_LIFE: Partial<Record<`${Room} -> ${Room}`, string>> = {};

/**
 * The frame at keys/ itself: what every room stands on (the context and dependencies of a reconcile,
 * the decision and its model (decision*.ts), the ports to the platform and the apiserver, the rotation schedule). The
 * rooms may import it; it imports the rooms for types only (KeyDeps names each room's service), and
 * never the top of keys/ (the reconciler, observe, create-protocol, deletion, watches, index).
 */
const FRAME = new Set(
  [
    'reconcile-context.ts',
    'decision.ts',
    'decision-types.ts',
    'decision-credentials.ts',
    'decision-intent.ts',
    'decision-deletion.ts',
    'decision-live-key.ts',
    'decision-retirement.ts',
    'adapter.ts',
    'platform-clients.ts',
    'kube-writes.ts',
    'rotation-schedule.ts',
  ].map((f) => `${KEYS}${f}`),
);

type Place = { at: 'room'; room: Room } | { at: 'frame' } | { at: 'top' } | { at: 'unknown room'; folder: string } | { at: 'outside' };

function placeOf(file: string): Place {
  if (!file.startsWith(KEYS)) return { at: 'outside' };
  const rest = file.slice(KEYS.length);
  const slash = rest.indexOf('/');
  if (slash === -1) return FRAME.has(file) ? { at: 'frame' } : { at: 'top' };
  const folder = rest.slice(0, slash);
  return (ROOMS as readonly string[]).includes(folder) ? { at: 'room', room: folder as Room } : { at: 'unknown room', folder };
}

/** Every import in the key domain that breaks the stage rule, as a sentence naming the files. */
function stageViolations(edges: readonly ImportEdge[]): string[] {
  const found: string[] = [];
  for (const edge of edges) {
    const from = placeOf(edge.from);
    const to = placeOf(edge.to);
    const arrow = `${edge.from} -> ${edge.to}`;
    if (from.at === 'unknown room') found.push(`${edge.from}: keys/${from.folder}/ is no room of the map (place it in ROOMS and in src/operator/README.md)`);
    if (from.at === 'outside' || from.at === 'top' || from.at === 'unknown room') continue;
    if (to.at === 'top') found.push(`${arrow}: the top of keys/ runs the rooms; no room or frame file imports it`);
    if (from.at === 'frame' && to.at === 'room' && !edge.typeOnly) found.push(`${arrow}: the frame imports a room for types only (import type)`);
    if (from.at === 'room' && to.at === 'room' && from.room !== to.room) {
      if (MAY_IMPORT[from.room][to.room] === undefined) found.push(`${arrow}: keys/${from.room}/ may not import keys/${to.room}/ (MAY_IMPORT, and the map)`);
    }
  }
  return found;
}

/**
 * The domains of the operator: each is reached from outside its folder only through its face,
 * index.ts (what the others and the wiring, manager.ts and main.ts, read of it).
 */
const DOMAINS = ['keys', 'inventory', 'issuers'] as const;

/** Every import into a domain from outside its folder that does not go through its index.ts. */
function faceViolations(edges: readonly ImportEdge[]): string[] {
  const found: string[] = [];
  for (const e of edges) {
    for (const domain of DOMAINS) {
      const folder = `src/operator/${domain}/`;
      if (e.from.startsWith(folder) || !e.to.startsWith(folder) || e.to === `${folder}index.ts`) continue;
      const [, , place = '', file] = e.from.split('/');
      found.push(`${e.from} -> ${e.to}: ${file === undefined ? place : `${place}/`} imports ${domain}/ only through ${domain}/index.ts`);
    }
  }
  return found;
}

const files = sourceFiles(ROOT, 'src');
const edges = importEdges(ROOT, files);

describe('the imports of src/', () => {
  it('are read: the key domain imports its rooms, and the reconciler its frame', () => {
    // A reader that found nothing would pass every check below.
    expect(files.length).toBeGreaterThan(100);
    expect(edges).toContainEqual({ from: `${KEYS}reconciler.ts`, to: `${KEYS}reconcile-context.ts`, typeOnly: false });
    expect(edges).toContainEqual({ from: `${KEYS}reconcile-context.ts`, to: `${KEYS}observing/drift.ts`, typeOnly: true });
  });

  it('make no circle', () => {
    const found = circles(files, edges);
    expect(found.map((c) => describeCircle(c, edges))).toEqual([]);
  });

  it("run along a key's life in the key domain: a room imports the frame and the rooms before it, never one after it", () => {
    expect(stageViolations(edges)).toEqual([]);
  });

  it('reach each domain (keys/, inventory/, issuers/) from outside it only through its index.ts', () => {
    expect(faceViolations(edges)).toEqual([]);
  });
});

describe('the map of the key domain', () => {
  it('lets a room import only the rooms before it, or one after it with a reason (AGAINST_LIFE)', () => {
    const against = ROOMS.flatMap((from) =>
      (Object.keys(MAY_IMPORT[from]) as Room[])
        .filter((to) => ROOMS.indexOf(to) >= ROOMS.indexOf(from) && AGAINST_LIFE[`${from} -> ${to}`] === undefined)
        .map((to) => `${from} -> ${to}`),
    );
    expect(against).toEqual([]);
  });
});

describe('the checks themselves', () => {
  it('finds each circle of a small graph, and nothing in a graph without one', () => {
    const nodes = ['a', 'b', 'c', 'd', 'e', 'f'];
    const graph = [
      ['a', 'b'],
      ['b', 'c'],
      ['c', 'a'],
      ['d', 'a'],
      ['d', 'e'],
      ['e', 'd'],
      ['f', 'f'],
    ].map(([from = '', to = '']) => ({ from, to }));
    expect(circles(nodes, graph)).toEqual([['a', 'b', 'c'], ['d', 'e'], ['f']]);
    expect(
      circles(
        nodes,
        graph.filter((e) => !(e.from === 'c' && e.to === 'a') && e.from !== 'e' && e.from !== 'f'),
      ),
    ).toEqual([]);
  });

  describe('on a scratch tree', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nko-import-circles-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('names the files of a circle made through a type import and a re-export', () => {
      mkdirSync(join(dir, 'src/x'), { recursive: true });
      writeFileSync(join(dir, 'src/a.ts'), "import type { B } from './x/b.ts';\nexport type A = B;\n");
      writeFileSync(join(dir, 'src/x/b.ts'), "export { c as B } from './c.ts';\n");
      writeFileSync(join(dir, 'src/x/c.ts'), "import { type A } from '../a.ts';\nexport const c = 1 as unknown as A;\n");
      writeFileSync(join(dir, 'src/d.ts'), "export const d = async () => import('./a.ts');\n");
      const scratch = sourceFiles(dir, 'src');
      const scratchEdges = importEdges(dir, scratch);
      expect(scratchEdges).toContainEqual({ from: 'src/a.ts', to: 'src/x/b.ts', typeOnly: true });
      expect(scratchEdges).toContainEqual({ from: 'src/d.ts', to: 'src/a.ts', typeOnly: false });
      const found = circles(scratch, scratchEdges);
      expect(found).toEqual([['src/a.ts', 'src/x/b.ts', 'src/x/c.ts']]);
      expect(describeCircle(found[0] ?? [], scratchEdges)).toContain('src/x/c.ts -> src/a.ts');
    });
  });

  it("refuses an arrow against a key's life, a room off the map, the top imported from below, and a frame that imports a room for more than types", () => {
    const edge = (from: string, to: string, typeOnly = false): ImportEdge => ({ from: `${KEYS}${from}`, to: `${KEYS}${to}`, typeOnly });
    const found = stageViolations([
      edge('secret/secret-writer.ts', 'rotation/rotation.ts'),
      edge('issuing/create-intent.ts', 'status/conditions.ts', true),
      edge('observing/in-sync.ts', 'secret/secret-writer.ts'),
      edge('rotation/rotation.ts', 'observing/in-sync.ts'),
      edge('status/events.ts', 'reconciler.ts'),
      edge('reconcile-context.ts', 'observing/drift.ts', true),
      edge('reconcile-context.ts', 'observing/drift-check.ts'),
      edge('vault/box.ts', 'decision.ts'),
    ]);
    expect(found).toEqual([
      expect.stringContaining('keys/secret/ may not import keys/rotation/'),
      expect.stringContaining('keys/issuing/ may not import keys/status/'),
      expect.stringContaining('the top of keys/ runs the rooms'),
      expect.stringContaining('the frame imports a room for types only'),
      expect.stringContaining('keys/vault/ is no room of the map'),
    ]);
    expect(faceViolations([{ from: 'src/operator/inventory/reconciler.ts', to: `${KEYS}observing/drift.ts`, typeOnly: true }])).toHaveLength(1);
    expect(faceViolations([{ from: 'src/operator/issuers/watches.ts', to: `${KEYS}watches.ts`, typeOnly: false }])).toEqual([
      'src/operator/issuers/watches.ts -> src/operator/keys/watches.ts: issuers/ imports keys/ only through keys/index.ts',
    ]);
    expect(faceViolations([{ from: 'src/operator/manager.ts', to: `${KEYS}reconciler.ts`, typeOnly: false }])).toEqual([
      'src/operator/manager.ts -> src/operator/keys/reconciler.ts: manager.ts imports keys/ only through keys/index.ts',
    ]);
    expect(faceViolations([{ from: 'src/operator/manager.ts', to: 'src/operator/inventory/watches.ts', typeOnly: false }])).toEqual([
      'src/operator/manager.ts -> src/operator/inventory/watches.ts: manager.ts imports inventory/ only through inventory/index.ts',
    ]);
    expect(faceViolations([{ from: 'src/operator/inventory/reconciler.ts', to: 'src/operator/issuers/verification.ts', typeOnly: true }])).toHaveLength(1);
    // Inside a domain, and through a face, nothing is said.
    expect(faceViolations([{ from: 'src/operator/issuers/reconciler.ts', to: 'src/operator/issuers/verification.ts', typeOnly: false }])).toEqual([]);
    expect(faceViolations([{ from: 'src/operator/manager.ts', to: `${KEYS}index.ts`, typeOnly: false }])).toEqual([]);
    expect(faceViolations([{ from: 'src/operator/manager.ts', to: 'src/operator/issuers/index.ts', typeOnly: false }])).toEqual([]);
  });
});
