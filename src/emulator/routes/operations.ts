// Operations of a project (docs/platform-api.md "List operations of a project", "Get one operation",
// "Pagination object"). Newest first; the cursor is the creation time of the page's last
// operation; the next page holds the operations created strictly before it. Creation times are
// unique per project, so paging never skips or repeats an operation, also while new ones arrive.
import { z } from 'zod';
import { isoMicros, parseIsoMicros } from '../clock.ts';
import { notFound, parseInput, pathId } from '../http-io.ts';
import { operationJson } from '../operations-engine.ts';
import { visibleProject } from '../permissions.ts';
import type { Route } from '../router.ts';

/** Default page size when `limit` is absent (the platform's default is not published: docs/emulator.md). */
const DEFAULT_LIMIT = 10;

const ListQuery = z.object({
  limit: z
    .string()
    .regex(/^\d{1,4}$/, 'limit must be an integer between 1 and 1000')
    .transform(Number)
    .refine((n) => n >= 1 && n <= 1000, 'limit must be an integer between 1 and 1000')
    .optional(),
  cursor: z
    .string()
    .transform((s, c) => {
      const us = parseIsoMicros(s);
      if (us === undefined) {
        c.addIssue({ code: 'custom', message: 'cursor must be the pagination.cursor of a previous response (an ISO 8601 timestamp)' });
        return z.NEVER;
      }
      return us;
    })
    .optional(),
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const operationRoutes: Route[] = [
  {
    method: 'GET',
    template: '/api/v2/projects/:project_id/operations',
    auth: true,
    handle(ctx) {
      const project = visibleProject(ctx.parts.store, ctx.principal, pathId(ctx.params.project_id, 'project'));
      const q = parseInput(ListQuery, { limit: ctx.query.get('limit') ?? undefined, cursor: ctx.query.get('cursor') ?? undefined }, 'query');
      const rows = ctx.parts.store.operationsPage(project.id, q.cursor, q.limit ?? DEFAULT_LIMIT);
      const last = rows.at(-1);
      // An empty page keeps the caller's cursor (the position does not move); with no cursor and
      // no operations at all there is no position to report.
      const cursor = last !== undefined ? isoMicros(last.created_us) : q.cursor !== undefined ? isoMicros(q.cursor) : undefined;
      return { status: 200, body: { operations: rows.map(operationJson), ...(cursor !== undefined ? { pagination: { cursor } } : {}) } };
    },
  },
  {
    method: 'GET',
    template: '/api/v2/projects/:project_id/operations/:operation_id',
    auth: true,
    handle(ctx) {
      const project = visibleProject(ctx.parts.store, ctx.principal, pathId(ctx.params.project_id, 'project'));
      const opId = ctx.params.operation_id ?? '';
      if (!UUID.test(opId)) throw notFound(`operation ${JSON.stringify(opId.slice(0, 80))} not found`);
      const op = ctx.parts.store.operation(project.id, opId.toLowerCase());
      if (op === undefined) throw notFound(`operation ${opId} not found in project ${project.id}`);
      return { status: 200, body: { operation: operationJson(op) } };
    },
  },
];
