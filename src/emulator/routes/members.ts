// Members of an organization (docs/platform-api.md "List organization members"): who belongs to it,
// with which role, sorted by joined time (default), email or role, in pages. The cursor is opaque to
// callers: it holds the order it was made for and the sort value and member id of the page's last
// member; the next page holds the members strictly after that position, so a member who joins or
// leaves between two pages never makes paging skip or repeat another.
import { z } from 'zod';
import { isoSeconds } from '../clock.ts';
import { badRequest, parseInput, pathId } from '../http-io.ts';
import { assertMayReadOrganization } from '../permissions.ts';
import type { Route } from '../router.ts';
import type { MembershipRow } from '../store.ts';

/** Default page size when `limit` is absent (the platform's default is not published: docs/emulator.md). */
const DEFAULT_LIMIT = 10;
const SORT_BY = ['email', 'role', 'joined_at'] as const;
const SORT_ORDER = ['asc', 'desc'] as const;
type SortBy = (typeof SORT_BY)[number];
type SortOrder = (typeof SORT_ORDER)[number];

const CURSOR_HINT = 'cursor must be the pagination.next of a previous response';

/** A position in one order: the sort value and the id of the last member of a page. */
const Position = z
  .object({
    sort_by: z.enum(SORT_BY),
    sort_order: z.enum(SORT_ORDER),
    key: z.union([z.string(), z.number()]),
    id: z.string(),
  })
  .strict()
  .refine((p) => (p.sort_by === 'joined_at') === (typeof p.key === 'number'));
type Position = z.output<typeof Position>;

const ListQuery = z.object({
  limit: z
    .string()
    .regex(/^\d{1,3}$/, 'limit must be an integer between 1 and 500')
    .transform(Number)
    .refine((n) => n >= 1 && n <= 500, 'limit must be an integer between 1 and 500')
    .optional(),
  cursor: z
    .string()
    .transform((s, c) => {
      const position = decodeCursor(s);
      if (position === undefined) {
        c.addIssue({ code: 'custom', message: CURSOR_HINT });
        return z.NEVER;
      }
      return position;
    })
    .optional(),
  sort_by: z.enum(SORT_BY, { error: `sort_by must be one of ${SORT_BY.join(', ')}` }).optional(),
  sort_order: z.enum(SORT_ORDER, { error: `sort_order must be one of ${SORT_ORDER.join(', ')}` }).optional(),
});

function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify(position), 'utf8').toString('base64url');
}

function decodeCursor(text: string): Position | undefined {
  if (!/^[\w-]{1,1024}$/.test(text)) return undefined;
  try {
    const parsed = Position.safeParse(JSON.parse(Buffer.from(text, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

type Member = MembershipRow & { email: string };

function sortKey(m: Member, by: SortBy): string | number {
  switch (by) {
    case 'email':
      return m.email;
    case 'role':
      return m.role;
    case 'joined_at':
      return m.joined_ms;
  }
}

/** Ascending comparison of (sort value, member id): the id breaks ties, so the order is total. */
function compare(a: { key: string | number; id: string }, b: { key: string | number; id: string }): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  if (a.id !== b.id) return a.id < b.id ? -1 : 1;
  return 0;
}

function memberJson(m: Member) {
  return {
    member: { id: m.id, user_id: m.user_id, org_id: m.org_id, role: m.role, joined_at: isoSeconds(m.joined_ms) },
    user: { email: m.email },
  };
}

export const memberRoutes: Route[] = [
  {
    method: 'GET',
    template: '/api/v2/organizations/:org_id/members',
    auth: true,
    handle(ctx) {
      const orgId = pathId(ctx.params.org_id, 'organization');
      assertMayReadOrganization(ctx.parts.store, ctx.principal, orgId);
      const q = parseInput(ListQuery, Object.fromEntries(['limit', 'cursor', 'sort_by', 'sort_order'].map((k) => [k, ctx.query.get(k) ?? undefined])), 'query');
      // A cursor carries its order: asking for another one with it would page through a different list.
      if (q.cursor !== undefined && ((q.sort_by ?? q.cursor.sort_by) !== q.cursor.sort_by || (q.sort_order ?? q.cursor.sort_order) !== q.cursor.sort_order)) {
        throw badRequest(`cursor was made for sort_by=${q.cursor.sort_by} and sort_order=${q.cursor.sort_order}: send the same, or neither`);
      }
      const sortBy: SortBy = q.cursor?.sort_by ?? q.sort_by ?? 'joined_at';
      const sortOrder: SortOrder = q.cursor?.sort_order ?? q.sort_order ?? 'desc';
      const limit = q.limit ?? DEFAULT_LIMIT;
      const direction = sortOrder === 'asc' ? 1 : -1;
      const entries = ctx.parts.store
        .membersOf(orgId)
        .map((m) => ({ m, key: sortKey(m, sortBy), id: m.id }))
        .sort((a, b) => direction * compare(a, b));
      const after = q.cursor;
      const rest = after === undefined ? entries : entries.filter((e) => direction * compare(e, after) > 0);
      const page = rest.slice(0, limit);
      const last = page.at(-1);
      // `next` only while members follow: its absence tells the caller the listing is complete.
      const next = rest.length > limit && last !== undefined ? encodeCursor({ sort_by: sortBy, sort_order: sortOrder, key: last.key, id: last.id }) : undefined;
      return {
        status: 200,
        body: {
          members: page.map((e) => memberJson(e.m)),
          pagination: { ...(next !== undefined ? { next } : {}), sort_by: sortBy, sort_order: sortOrder },
        },
      };
    },
  },
];
