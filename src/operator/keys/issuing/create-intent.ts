// The create intent (docs/design.md section 3.1, step 2): the annotation keys.neon.dev/create-pending
// that names an attempt before its POST, so a crash between the platform's answer and the Secret
// never loses track of the key. It lives on the resource, where tenants can write too: it is
// signed for the resource's uid (signing.ts), and an intent that does not verify is never acted on.
import type { PendingAttempt, RefusedIntent } from '../decision-types.ts';
import { KEY_NAME_MAX, type KeyResource } from '../../resources/schema.ts';
import type { Signer } from './signing.ts';
import { nameParts, tagKey } from './key-names.ts';

/** An attempt's key name: key-names.ts. */
export { attemptName } from './key-names.ts';

/** The annotation's value: the attempt and the operator's signature over it and the uid. */
export function encodeIntent(signer: Signer, uid: string, pending: PendingAttempt): string {
  return JSON.stringify({ ...pending, sig: signer.sign('intent', intentFields(uid, pending)) });
}

/**
 * The intent annotation, read. It is on the resource, where whoever may edit the resource can
 * write it, so it is believed only with the operator's signature over its fields and this
 * resource's uid (signing.ts): a forged intent, an edited one, or one copied from another resource
 * is Unsigned and cleared without revoking anything, since recovery revokes what the intent names.
 * A signed intent holds whatever spec.keyName says now: its attempt is a name this operator chose
 * for this resource (`<keyName then>-<8 random chars>`), so an edit of spec.keyName between the
 * intent and its outcome never turns the attempt's key into one nobody records (before
 * the signature, the attempt had to start with the current keyName, which lost that key).
 */
export function parseIntent(value: string | undefined, uid: string, signer: Signer): PendingAttempt | RefusedIntent | undefined {
  if (value === undefined) return undefined;
  try {
    const parsed = JSON.parse(value) as Partial<PendingAttempt> & { sig?: unknown };
    if (typeof parsed.attempt !== 'string' || typeof parsed.startedAt !== 'string' || typeof parsed.holder !== 'string') return 'Malformed';
    if (parsed.replaces !== undefined && (typeof parsed.replaces !== 'number' || !Number.isSafeInteger(parsed.replaces))) return 'Malformed';
    if (parsed.abandons !== undefined && (typeof parsed.abandons !== 'number' || !Number.isSafeInteger(parsed.abandons))) return 'Malformed';
    if (parsed.issuer !== undefined && (typeof parsed.issuer !== 'string' || parsed.issuer.length > ISSUER_NAME_MAX)) return 'Malformed';
    const rotation = parsed.rotation as unknown;
    if (
      rotation !== undefined &&
      (typeof rotation !== 'object' ||
        rotation === null ||
        ((rotation as { request?: unknown }).request !== undefined && typeof (rotation as { request?: unknown }).request !== 'string'))
    )
      return 'Malformed';
    if (typeof parsed.sig !== 'string' || !signer.verify('intent', intentFields(uid, parsed as PendingAttempt), parsed.sig)) return 'Unsigned';
    const { attempt, startedAt, holder, replaces, abandons, issuer } = parsed as PendingAttempt;
    const request = (rotation as { request?: string } | undefined)?.request;
    return {
      attempt,
      startedAt,
      holder,
      ...(replaces !== undefined ? { replaces } : {}),
      ...(abandons !== undefined ? { abandons } : {}),
      ...(issuer !== undefined ? { issuer } : {}),
      ...(rotation !== undefined ? { rotation: request !== undefined ? { request } : {} } : {}),
    };
  } catch {
    return 'Malformed';
  }
}

/** The longest issuer name an intent carries: a ClusterKeyIssuer's name is a DNS subdomain. */
const ISSUER_NAME_MAX = 253;

/**
 * The issuer an intent names, read WITHOUT its signature, from a value of at most a few KiB (an
 * intent is ~300 bytes; anything longer a tenant wrote names none): only to count a cap's slot
 * (cache-projection.ts). A tenant who forges one counts against its own namespace alone.
 */
export function unverifiedIssuer(value: string | undefined): string | undefined {
  if (value === undefined || value.length > 4_096) return undefined;
  try {
    const issuer = (JSON.parse(value) as { issuer?: unknown } | null)?.issuer;
    return typeof issuer === 'string' && issuer.length > 0 && issuer.length <= ISSUER_NAME_MAX ? issuer : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The attempt an intent names, read WITHOUT its signature: only to tell an intent that names the
 * key status records (observe.ts) from one that asks for anything; never acted on.
 */
export function unverifiedAttempt(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    const attempt = (JSON.parse(value) as { attempt?: unknown } | null)?.attempt;
    return typeof attempt === 'string' ? attempt : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the signature covers. The rotation marker is signed too: it decides whether the replaced key
 * is revoked at once or kept retiring; and the given-up key (`abandons`), which lets the intent
 * stand beside a recorded key (decision-intent.ts consistentIntent); and the issuer that makes the key,
 * which status records with it (adopt). Each appended only when present, so
 * intents written before they existed still verify.
 */
function intentFields(uid: string, p: PendingAttempt): (string | number | undefined)[] {
  const fields: (string | number | undefined)[] = [uid, p.attempt, p.startedAt, p.holder, p.replaces];
  if (p.rotation !== undefined) fields.push('rotation', p.rotation.request ?? '');
  if (p.abandons !== undefined) fields.push('abandons', p.abandons);
  if (p.issuer !== undefined) fields.push('issuer', p.issuer);
  return fields;
}

/**
 * The tag key an attempt's key name carries (key-names.ts tagKey: the resource's tag, with the
 * cluster when the name has one), or undefined for any other name.
 */
export function attemptTagOf(name: string): string | undefined {
  const parts = nameParts(name);
  return parts === undefined ? undefined : tagKey(parts.tag, parts.cluster);
}

/** The key name of a resource without spec.keyName: `<namespace>-<name>`, cut to the platform's limit. */
export function defaultKeyName(resource: Pick<KeyResource, 'metadata'>): string {
  return `${resource.metadata.namespace}-${resource.metadata.name}`
    .slice(0, KEY_NAME_MAX)
    .replace(/[^-_.A-Za-z0-9]/g, '-')
    .replace(/[-_.]+$/, '');
}
