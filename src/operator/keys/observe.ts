// Observe: everything one reconcile of a key resource reads, turned into the Observation decide()
// takes (decision.ts): the resource as read, its Secret, the credentials in its namespace (never
// another's: DESIGN.md section 5), its signed intent (create-intent.ts), and what the drift check
// found on the platform (drift.ts). Nothing is written here.
import type { Logger } from 'pino';
import {
  ANNOTATION_ABANDON_KEY, ANNOTATION_CREATE_PENDING, ANNOTATION_RELEASE_WITHOUT_REVOKE, FINALIZER, parseSpec, type KeyResource,
} from '../resources/schema.ts';
import { adapterFor, type ListedKey } from './adapter.ts';
import { defaultKeyName, parseIntent } from './create-intent.ts';
import { recordedKeyId, type Credentials, type Observation } from './decision.ts';
import { checkRecordedKey, type FailingSince } from './drift.ts';
import type { Context, KeyDeps } from './reconcile-context.ts';
import { observeSecret } from './secret-writer.ts';
import { recordedValues, secretInLine, templateOf } from './secret-template.ts';

export async function observe(deps: KeyDeps, failingSince: FailingSince, resource: KeyResource, logger: Logger): Promise<Context> {
  const meta = resource.metadata;
  const parsed = parseSpec(resource.kind, resource.spec);
  const spec = parsed.ok ? parsed.spec : undefined;
  const secretName = spec?.secret?.name ?? meta.name;
  const secretKey = spec?.secret?.key ?? 'apiKey';
  const secret = await deps.kube.readSecret(meta.namespace, secretName);

  let apiKey: string | undefined;
  let credentials: Credentials = 'SecretNotFound';
  if (spec !== undefined) {
    const creds = await deps.kube.readSecret(meta.namespace, spec.credentialsSecretRef.name);
    if (creds !== undefined) {
      const encoded = creds.data?.[spec.credentialsSecretRef.key];
      apiKey = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8').trim() : undefined;
      credentials = apiKey !== undefined && apiKey !== '' ? 'Present' : 'KeyNotFound';
    }
  }
  const adapter = spec !== undefined ? adapterFor(resource, spec) : undefined;
  const pending = parseIntent(meta.annotations?.[ANNOTATION_CREATE_PENDING], spec !== undefined ? spec.keyName ?? defaultKeyName(resource) : undefined, meta.uid, deps.signer);
  const status = resource.status ?? {};
  const secretObservation = observeSecret(resource, secret, secretKey, deps.signer);
  if (secretObservation?.owned === true && secret !== undefined && spec !== undefined) {
    const encoded = secret.data?.[secretKey];
    const key = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    // Without the key there is nothing to rebuild from (decide() sees that as tampering).
    if (key !== '') {
      secretObservation.inLine = secretInLine(secret, secretKey, templateOf(spec), recordedValues(key, status, secretObservation, spec, deps.platformUrl));
    }
  }

  let platform: Observation['platform'] = { key: 'Unknown', project: 'Unknown' };
  const recorded = recordedKeyId({ status: { ...(status.keyId !== undefined ? { keyId: status.keyId } : {}) }, ...(secretObservation !== undefined ? { secret: secretObservation } : {}) });
  const fingerprint = apiKey !== undefined && credentials === 'Present' ? deps.signer.fingerprint(apiKey) : undefined;
  let listed: ListedKey | undefined;
  if (meta.deletionTimestamp === undefined && pending === undefined && adapter !== undefined && recorded !== undefined) {
    ({ platform, listed } = await checkRecordedKey(deps, failingSince, {
      trackingKey: `${resource.kind}/${meta.namespace}/${meta.name}`,
      adapter,
      apiKey: credentials === 'Present' ? apiKey : undefined,
      keyId: recorded,
      createdAt: status.createdAt,
      logger,
    }));
  }
  const abandon = meta.annotations?.[ANNOTATION_ABANDON_KEY];

  const observation: Observation = {
    now: deps.now(),
    identity: deps.identity,
    pendingGraceMs: deps.pendingGraceMs,
    deleting: meta.deletionTimestamp !== undefined,
    hasFinalizer: meta.finalizers?.includes(FINALIZER) === true,
    releaseWithoutRevoke: meta.annotations?.[ANNOTATION_RELEASE_WITHOUT_REVOKE] === 'true',
    ...(parsed.ok ? {} : { specError: parsed.message }),
    // An invalid spec still honours an explicit Retain: a deletion must never revoke what a person asked to keep.
    deletionPolicy: spec?.deletionPolicy ?? ((resource.spec as { deletionPolicy?: string } | undefined)?.deletionPolicy === 'Retain' ? 'Retain' : 'Revoke'),
    ...(pending !== undefined ? { pending } : {}),
    status: {
      ...(status.keyId !== undefined ? { keyId: status.keyId } : {}),
      ...(status.secretHash !== undefined ? { secretHash: status.secretHash } : {}),
    },
    ...(secretObservation !== undefined ? { secret: secretObservation } : {}),
    credentials,
    platform,
    // Only a personal list depends on whose credentials ask: an organization's list shows every
    // key of the organization to each of its administrators, so absence there is absence.
    credentialsChanged: adapter?.listScope === 'personal' && fingerprint !== undefined && status.credentialsFingerprint !== undefined && status.credentialsFingerprint !== fingerprint,
    ...(abandon !== undefined && /^\d{1,15}$/.test(abandon) ? { abandonKey: Number(abandon) } : {}),
    secretIsCredentials: spec !== undefined && secretName === spec.credentialsSecretRef.name,
  };
  return { resource, spec, adapter, secretName, secretKey, secret, apiKey, credentials, fingerprint, listed, observation, logger };
}
