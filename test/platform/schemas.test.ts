import { describe, expect, it } from '@jest/globals';
import {
  ApiKeyListItemSchema,
  CreatedKeySchema,
  OperationSchema,
  OperationsPageSchema,
  OrganizationMemberSchema,
  RevokedKeySchema,
} from '../../src/platform/schemas.ts';

const op = {
  id: '894cea79-949a-4aa1-8983-b9c1dbccf30b',
  project_id: 'shiny-moon-54113652',
  branch_id: 'br-crimson-forest-90705895',
  action: 'create_branch',
  status: 'running',
  failures_count: 0,
  created_at: '2026-11-22T21:42:21.840413Z',
  updated_at: '2026-11-22T21:42:21.840413Z',
  total_duration_ms: 0,
};

describe('response schemas', () => {
  it('accept a personal create response with only id and key (docs/platform-api.md, Create personal key)', () => {
    expect(CreatedKeySchema.parse({ id: 1, key: 'k'.repeat(64) })).toEqual({ id: 1, key: 'k'.repeat(64) });
  });

  it('reject a create response without its secret or with a string id', () => {
    expect(CreatedKeySchema.safeParse({ id: 1 }).success).toBe(false);
    expect(CreatedKeySchema.safeParse({ id: '1', key: 'x' }).success).toBe(false);
    expect(CreatedKeySchema.safeParse({ id: 1.5, key: 'x' }).success).toBe(false);
  });

  it('read a missing last_used_at of a list item as null', () => {
    const item = ApiKeyListItemSchema.parse({ id: 2, name: 'n', created_at: '2022-11-15T20:13:35Z', last_used_from_addr: '' });
    expect(item.last_used_at).toBeNull();
    expect(RevokedKeySchema.parse({ id: 2, name: 'n', revoked: true, last_used_at: null, last_used_from_addr: '' }).last_used_at).toBeNull();
  });

  it('reject a timestamp that is not one', () => {
    expect(ApiKeyListItemSchema.safeParse({ id: 2, name: 'n', created_at: 'yesterday', last_used_from_addr: '' }).success).toBe(false);
  });

  it('keep an operation action or status the client does not know (the platform grows them)', () => {
    expect(OperationSchema.parse({ ...op, action: 'timeline_mark_invisible', status: 'error' }).action).toBe('timeline_mark_invisible');
  });

  it('require the operation fields docs/platform-api.md marks required, and drop unknown ones', () => {
    const { branch_id: _omit, ...noBranch } = op;
    expect(OperationSchema.safeParse(noBranch).success).toBe(false);
    expect(OperationSchema.parse({ ...op, retry_at: 'x' })).not.toHaveProperty('retry_at');
  });

  it('read a member pair as one flat member, keep a role the client does not know, and require the role', () => {
    const wire = {
      member: {
        id: 'd57833f2-d308-4ede-9d2e-468d9d013d1b',
        user_id: 'b107d689-6dd2-4c9a-8b9e-0b25e457cf56',
        org_id: 'org-x',
        role: 'admin',
        joined_at: '2024-02-23T17:42:25Z',
        extra: 1,
      },
      user: { email: 'a@x.test', has_mfa: true },
    };
    expect(OrganizationMemberSchema.parse(wire)).toEqual({
      id: wire.member.id,
      userId: wire.member.user_id,
      orgId: 'org-x',
      role: 'admin',
      joinedAt: '2024-02-23T17:42:25Z',
      email: 'a@x.test',
    });
    expect(OrganizationMemberSchema.parse({ member: { ...wire.member, role: 'viewer' } }).role).toBe('viewer');
    const { role: _omit, ...roleless } = wire.member;
    expect(OrganizationMemberSchema.safeParse({ ...wire, member: roleless }).success).toBe(false);
    expect(OrganizationMemberSchema.safeParse({ ...wire, member: { ...wire.member, joined_at: 'never' } }).success).toBe(false);
  });

  it('accept an operations page without pagination, and reject an empty cursor', () => {
    expect(OperationsPageSchema.parse({ operations: [] })).toEqual({ operations: [] });
    expect(OperationsPageSchema.safeParse({ operations: [op], pagination: { cursor: '' } }).success).toBe(false);
  });
});
