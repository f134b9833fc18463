// The seed and the bootstrap record. The first key of a user is created in the web console
// (docs/platform-api.md "Authentication" 3); the emulator plays that part once, on the first start with
// an empty store, and prints the personal keys. They are stored only as hashes, so a restart on an
// existing store prints the same record WITHOUT personalKey: a lost first key is replaced by
// POST /admin/users or the console flow, never recovered.
import { z } from 'zod';
import { hashKeySecret, newKeySecret, newOrganizationId, newUuid } from './identifiers.ts';
import type { OperationsEngine } from './operations-engine.ts';
import { createProject } from './routes/projects.ts';
import type { OrgRole, Store } from './store.ts';

const Role = z.enum(['admin', 'member']);
export const SeedSchema = z
  .object({
    organizations: z
      .array(
        z
          .object({
            id: z
              .string()
              .regex(/^[a-z0-9-]{1,60}$/)
              .optional(),
            name: z.string().min(1),
          })
          .strict(),
      )
      .default([]),
    users: z
      .array(
        z
          .object({
            id: z.string().min(1).optional(),
            name: z.string().min(1),
            email: z.string().optional(),
            /** Keys are organization ids or names of the seed's organizations. */
            orgRoles: z.record(z.string(), Role).optional(),
          })
          .strict(),
      )
      .default([]),
    projects: z
      .array(
        z
          .object({
            id: z
              .string()
              .regex(/^[a-z0-9-]{1,60}$/)
              .optional(),
            name: z.string().min(1),
            /** An organization id or name from the seed; null for a personal project. */
            organizationId: z.string().nullable(),
            /** A user id or name from the seed; defaults to the first admin of the organization. */
            ownerUserId: z.string().optional(),
          })
          .strict(),
      )
      .default([]),
  })
  .strict();

export type Seed = z.input<typeof SeedSchema>;

export const DEFAULT_SEED: Seed = {
  organizations: [{ id: 'org-demo-00000001', name: 'Demo Org' }],
  users: [
    { name: 'alice', email: 'alice@example.com', orgRoles: { 'org-demo-00000001': 'admin' } },
    { name: 'bob', email: 'bob@example.com', orgRoles: { 'org-demo-00000001': 'member' } },
    { name: 'carol', email: 'carol@example.com' },
  ],
  // Fixed ids, so examples/ and the demo name real projects of any fresh emulator.
  projects: [
    { id: 'quiet-river-00000001', name: 'demo-api', organizationId: 'org-demo-00000001', ownerUserId: 'alice' },
    { id: 'bold-meadow-00000002', name: 'demo-web', organizationId: 'org-demo-00000001', ownerUserId: 'alice' },
    { id: 'calm-forest-00000003', name: 'carol-sandbox', organizationId: null, ownerUserId: 'carol' },
  ],
};

export interface Bootstrap {
  baseUrl: string;
  adminUrl: string;
  organizations: { id: string; name: string }[];
  users: { id: string; name: string; email: string; orgRoles: Record<string, OrgRole>; personalKey?: string }[];
  projects: { id: string; name: string; organizationId: string | null; ownerUserId: string }[];
}

/** Creates a personal key for a user, as the console does for a first key; returns the secret once. */
export function issuePersonalKey(store: Store, userId: string, name: string): { id: number; secret: string } {
  const secret = newKeySecret();
  const id = store.insertKey({ hash: hashKeySecret(secret), name, kind: 'personal', user_id: userId, org_id: null, project_id: null, created_ms: Date.now() });
  return { id, secret };
}

/** Seeds an empty store; returns the personal keys it issued, by user id. */
export function applySeed(store: Store, engine: OperationsEngine, seedInput: Seed): Map<string, string> {
  const seed = SeedSchema.parse(seedInput);
  const keys = new Map<string, string>();
  store.transaction(() => {
    const now = Date.now();
    const orgIds = new Map<string, string>();
    for (const o of seed.organizations) {
      const id = o.id ?? newOrganizationId();
      store.insertOrganization({ id, name: o.name, created_ms: now });
      orgIds.set(id, id).set(o.name, id);
    }
    const resolveOrg = (ref: string) => {
      const id = orgIds.get(ref);
      if (id === undefined) throw new Error(`seed: unknown organization ${ref}`);
      return id;
    };
    const userIds = new Map<string, string>();
    for (const u of seed.users) {
      const id = u.id ?? newUuid();
      store.insertUser({ id, name: u.name, email: u.email ?? `${u.name}@example.com`, created_ms: now });
      userIds.set(id, id).set(u.name, id);
      for (const [org, role] of Object.entries(u.orgRoles ?? {})) store.setRole(resolveOrg(org), id, role, now);
      keys.set(id, issuePersonalKey(store, id, 'console-bootstrap').secret);
    }
    for (const p of seed.projects) {
      const orgId = p.organizationId === null ? null : resolveOrg(p.organizationId);
      let owner = p.ownerUserId === undefined ? undefined : userIds.get(p.ownerUserId);
      if (owner === undefined && orgId !== null) owner = store.memberships().find((m) => m.org_id === orgId && m.role === 'admin')?.user_id;
      if (owner === undefined) throw new Error(`seed: project ${p.name} needs an ownerUserId naming a seed user`);
      createProject({ store, engine }, { id: p.id, name: p.name, orgId, ownerUserId: owner });
    }
  });
  return keys;
}

/** The bootstrap record of the current store (personalKey only for keys issued by this start). */
export function bootstrapRecord(store: Store, urls: { baseUrl: string; adminUrl: string }, issued: Map<string, string>): Bootstrap {
  const memberships = store.memberships();
  return {
    ...urls,
    organizations: store.organizations().map((o) => ({ id: o.id, name: o.name })),
    users: store.users().map((u) => {
      const key = issued.get(u.id);
      return {
        id: u.id,
        name: u.name,
        email: u.email,
        orgRoles: Object.fromEntries(memberships.filter((m) => m.user_id === u.id).map((m) => [m.org_id, m.role])),
        ...(key !== undefined ? { personalKey: key } : {}),
      };
    }),
    projects: store.projects().map((p) => ({ id: p.id, name: p.name, organizationId: p.org_id, ownerUserId: p.owner_user_id })),
  };
}
