// The answer to a key creation is checked like any input: a platform (or whatever answers at the
// platform's address) that returns a key other than the one asked for, another name, a project
// key for an organization key or the reverse, another project, or no usable secret, must not have
// that key written into a tenant's Secret (create-protocol.ts revokes it and reports
// PlatformResponseInvalid).
import type { CreatedKey } from '../adapter.ts';

/** A key secret as platforms issue them: URL-safe characters, no whitespace, of a sane length. */
const KEY_FORMAT = /^[A-Za-z0-9_-]{32,256}$/;

/** What does not match the request, or undefined when the created key is the one asked for. */
export function checkCreatedKey(created: CreatedKey, asked: { name: string; projectId?: string }): string | undefined {
  if (!Number.isSafeInteger(created.id) || created.id < 0) return 'its id is not a key id';
  if (typeof created.key !== 'string' || !KEY_FORMAT.test(created.key)) return 'its secret is not shaped like a key';
  if (created.name !== undefined && created.name !== asked.name) return `its name is not ${asked.name}`;
  const project = created.project_id ?? undefined;
  if (asked.projectId !== undefined && project !== asked.projectId) return `it is not scoped to project ${asked.projectId}`;
  if (asked.projectId === undefined && project !== undefined) return 'it is scoped to a project, an organization or personal key was asked for';
  return undefined;
}
