// A small web console at /console, the way the platform's console shows keys and operations
// (docs/platform-api.md "Kinds of operation", "Operation status": console names with spaces and
// capitals; status labels OK, Scheduling, In progress, Error; the view shows operation, branch,
// compute, status, duration, date; docs/emulator.md "The console"). Plain server-rendered HTML, no
// secrets, no scripts.
import { isoSeconds } from './clock.ts';
import { operationJson } from './operations-engine.ts';
import type { Route } from './router.ts';
import type { OperationStatus } from './store.ts';

const LABELS: Record<OperationStatus, string> = {
  scheduling: 'Scheduling',
  running: 'In progress',
  cancelling: 'In progress',
  failed: 'Error',
  error: 'Error',
  finished: 'OK',
  skipped: 'OK',
  cancelled: 'OK',
};

/** "create_branch" -> "Create branch" (the console spelling of an action). */
export function consoleActionName(action: string): string {
  const words = action.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function consoleStatusLabel(status: OperationStatus): string {
  return LABELS[status];
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function table(headers: string[], rows: string[][]): string {
  const head = headers.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`).join('\n');
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

export const consoleRoutes: Route[] = [
  {
    method: 'GET',
    template: '/console',
    auth: false,
    handle(ctx) {
      const { store } = ctx.parts;
      const users = new Map(store.users().map((u) => [u.id, u.name]));
      const orgs = store.organizations();
      const memberships = store.memberships();
      const sections: string[] = [];
      sections.push(
        '<h2>Organizations</h2>',
        table(
          ['ID', 'Name', 'Members'],
          orgs.map((o) => [
            o.id,
            o.name,
            memberships
              .filter((m) => m.org_id === o.id)
              .map((m) => `${users.get(m.user_id) ?? m.user_id} (${m.role})`)
              .join(', '),
          ]),
        ),
      );
      sections.push(
        '<h2>API keys</h2>',
        table(
          ['ID', 'Name', 'Kind', 'Owner', 'Organization', 'Project', 'Created', 'Last used', 'Revoked'],
          store
            .keys()
            .map((k) => [
              String(k.id),
              k.name,
              k.kind,
              users.get(k.user_id) ?? k.user_id,
              k.org_id ?? '',
              k.project_id ?? '',
              isoSeconds(k.created_ms),
              k.last_used_ms === null ? 'never' : isoSeconds(k.last_used_ms),
              k.revoked_ms === null ? 'no' : isoSeconds(k.revoked_ms),
            ]),
        ),
      );
      for (const p of store.projects()) {
        const ops = store.operationsPage(p.id, undefined, 25).map(operationJson);
        sections.push(
          `<h2>Project ${escapeHtml(p.name)} <small>${escapeHtml(p.id)} · ${escapeHtml(p.org_id ?? 'personal')}</small></h2>`,
          table(
            ['Operation', 'Branch', 'Compute', 'Status', 'Duration', 'Date'],
            ops.map((o) => [
              consoleActionName(String(o.action)),
              String(o.branch_id),
              String(o.endpoint_id ?? ''),
              consoleStatusLabel(o.status as OperationStatus),
              `${String(o.total_duration_ms)} ms`,
              String(o.created_at),
            ]),
          ),
        );
      }
      const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5"><title>Emulator console</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse;margin-bottom:1.5rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left}small{color:#666;font-weight:normal}</style>
</head><body><h1>Platform emulator console</h1>
${sections.join('\n')}
</body></html>`;
      return { status: 200, body: html, html: true };
    },
  },
];
