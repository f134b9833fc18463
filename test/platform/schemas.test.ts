import { describe, expect, it } from '@jest/globals';
import { ApiKeyListItemSchema, CreatedKeySchema, OperationSchema, OperationsPageSchema, RevokedKeySchema } from '../../src/platform/schemas.ts';

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

  it('accept an operations page without pagination, and reject an empty cursor', () => {
    expect(OperationsPageSchema.parse({ operations: [] })).toEqual({ operations: [] });
    expect(OperationsPageSchema.safeParse({ operations: [op], pagination: { cursor: '' } }).success).toBe(false);
  });
});
