// Observe: everything one reconcile of a key resource reads, turned into the Observation decide()
// takes (decision.ts): the resource as read, its Secret, the credentials in its namespace (never
// another's: docs/design.md section 5.6), its signed intent (create-intent.ts), and what the drift check
// found on the platform (observing/drift-check.ts). Nothing is written here.
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MAX_API_KEY_LENGTH, isApiKeyFormat } from '../../platform/index.ts';
import {
  ANNOTATION_ABANDON_KEY,
  ANNOTATION_CREATE_PENDING,
  ANNOTATION_RELEASE_WITHOUT_REVOKE,
  ANNOTATION_ROTATE,
  FINALIZER,
  parseSpec,
  type KeyResource,
  type KindName,
} from '../resources/schema.ts';
import { adapterFor, type ListedUse } from './adapter.ts';
import { observeRetiring } from './rotation/retiring.ts';
import { baseSecretName, immutableMode } from './secret/immutable-secret.ts';
import { gracePeriods, requestToken, schedule, type RotationContext } from './rotation-schedule.ts';
import { parseIntent, unverifiedAttempt } from './issuing/create-intent.ts';
import { activeIntent, recordedKeyId } from './decision-intent.ts';
import type { Credentials, Observation, RetiringObservation } from './decision-types.ts';
import { checkRecordedKey, type FailingSince } from './observing/drift-check.ts';
import { capRefusal, credentialsSource, type CredentialsSettings } from './issuing/credentials-source.ts';
import type { Context, KeyDeps } from './reconcile-context.ts';
import { observeSecret } from './secret/secret-writer.ts';
import { locateSecret } from './secret/secret-locate.ts';
import { attemptListFingerprint, lostAttemptKeys, orphanKeys } from './observing/orphans.ts';
import { ownTagKeys } from './issuing/key-names.ts';
import { recordedValues, secretInLine, templateOf } from './secret/secret-template.ts';

/** Without settings (tests of one action): namespace credentials allowed, no issuers. */
const DEFAULT_CREDENTIALS_SETTINGS: CredentialsSettings = { issuerSecretsNamespace: undefined, allowNamespaceCredentials: true };

/**
 * A credentials Secret: as kept at the version the cache holds (issuing/credentials-reads.ts), else
 * read by name. A deletion's pass always reads it by name: a Secret deleted a moment before the
 * resource may still be in a lagging cache, and a revoke is not made with credentials already gone.
 */
function readCredentials(deps: KeyDeps, namespace: string, name: string, deleting: boolean): Promise<V1Secret | undefined> {
  return deps.credentialsReads !== undefined && !deleting ? deps.credentialsReads.read(namespace, name) : deps.kube.readSecret(namespace, name);
}

export async function observe(deps: KeyDeps, failingSince: FailingSince, resource: KeyResource, logger: Logger): Promise<Context> {
  const meta = resource.metadata;
  const deleting = meta.deletionTimestamp !== undefined;
  const parsed = parseSpec(resource.kind, resource.spec);
  const parsedSpec = parsed.ok ? parsed.spec : undefined;
  const secretKey = parsedSpec?.secret?.key ?? 'apiKey';
  const status = resource.status ?? {};
  const recordedStatus = {
    ...(status.keyId !== undefined ? { keyId: status.keyId } : {}),
    ...(status.keyName !== undefined ? { keyName: status.keyName } : {}),
  };
  const rawIntent = meta.annotations?.[ANNOTATION_CREATE_PENDING];
  let intent = parseIntent(rawIntent, meta.uid, deps.signer);
  // An intent that names the key status records (status.keyName, with status.keyId) asks for
  // nothing, whatever its signature: a new key's create leaves its fulfilled intent on the resource
  // (decision-intent.ts fulfilledIntent), so an operator with another signing key (installed again in
  // another namespace, its signing-key Secret lost) finds one on every resource it did not create.
  // Each is no forgery to clear with a Warning on every resource: it is as if absent. Nothing is
  // believed from it; what the resource has is status, which only the operator writes.
  if (intent === 'Unsigned' && status.keyId !== undefined && status.keyName !== undefined && unverifiedAttempt(rawIntent) === status.keyName)
    intent = undefined;
  // A fulfilled intent (its attempt is the recorded key) is no pending attempt: the resource is
  // observed as without one (decision-intent.ts fulfilledIntent).
  const pending = activeIntent({ pending: intent, status: recordedStatus });
  // spec.secret.immutable: the pending attempt's Secret, else status.secretName (secret-writer.ts).
  // The two Secrets at once: one round trip to the apiserver instead of two in a row.
  // Where the credentials are (the namespace's Secret, or an issuer's after its policy allowed the
  // request: issuing/credentials-source.ts), read beside the key's Secret. A namespace Secret is
  // read at once with them; an issuer's once the issuer named it.
  const namespaceRef = parsedSpec?.issuerRef === undefined ? parsedSpec?.credentialsSecretRef : undefined;
  const [{ secretName, secret }, source, namespaceCreds] = await Promise.all([
    locateSecret(
      deps,
      resource,
      parsedSpec,
      secretKey,
      typeof pending === 'object' ? pending.attempt : undefined,
      status.keyId === undefined && pending === undefined && meta.deletionTimestamp === undefined,
    ),
    parsedSpec !== undefined ? credentialsSource(deps.kube, deps.credentialsSettings ?? DEFAULT_CREDENTIALS_SETTINGS, resource, parsedSpec) : undefined,
    namespaceRef !== undefined ? readCredentials(deps, meta.namespace, namespaceRef.name, deleting) : undefined,
  ]);
  // Refused (policy, a missing issuer, a namespace being deleted): nothing is asked of the platform,
  // not even a drift check, unless an interrupted create must be finished (decision.ts).
  const refused = source?.refusal !== undefined && meta.deletionTimestamp === undefined && typeof pending !== 'object';
  const credentialsAt = refused ? undefined : source?.secret;
  const creds =
    credentialsAt === undefined
      ? undefined
      : namespaceRef !== undefined && credentialsAt.namespace === meta.namespace
        ? namespaceCreds
        : await readCredentials(deps, credentialsAt.namespace, credentialsAt.name, deleting);
  const spec = source?.spec ?? parsedSpec;

  let apiKey: string | undefined;
  let credentials: Credentials = 'SecretNotFound';
  let credentialsVersion: Context['credentialsVersion'];
  if (spec !== undefined && credentialsAt !== undefined) {
    if (creds !== undefined) {
      credentialsVersion = { uid: creds.metadata?.uid, resourceVersion: creds.metadata?.resourceVersion };
      const encoded = creds.data?.[credentialsAt.key];
      // Measured before it is decoded: an entry of any size (up to the Secret's 1 MiB) longer than
      // any API key is refused without a copy, and never reaches a platform client or its cache.
      const fits = encoded !== undefined && encoded.length <= 4 * Math.ceil((MAX_API_KEY_LENGTH + 64) / 3);
      apiKey = encoded !== undefined && fits ? Buffer.from(encoded, 'base64').toString('utf8').trim() : undefined;
      credentials =
        encoded !== undefined && !fits ? 'NotAKey' : apiKey === undefined || apiKey === '' ? 'KeyNotFound' : isApiKeyFormat(apiKey) ? 'Present' : 'NotAKey';
      if (credentials !== 'Present') apiKey = undefined;
    }
  }
  // No adapter without an organization for an organization or project key (an issuer not found yet):
  // never the personal adapter a missing organizationId would otherwise read as.
  const adapter =
    spec !== undefined && !(spec.organizationId === undefined && (resource.kind === 'ProjectApiKey' || (spec as { scope?: string }).scope === 'Organization'))
      ? adapterFor(resource, spec)
      : undefined;
  const secretObservation = observeSecret(resource, secret, secretKey, deps.signer);
  if (secretObservation?.legacy === true && (status.keyId === undefined || secretObservation.keyId === status.keyId)) {
    // Signed in the first format (the value not covered): believed for the key status records (or,
    // status lost, as before), never for another; re-signed once its value is checked against
    // status.secretHash (RewriteSecret). Replayed old annotations of another key stay unverified.
    secretObservation.verified = true;
    if (status.keyId !== undefined && status.secretHash !== undefined && secretObservation.hash === status.secretHash) secretObservation.resign = true;
  }
  if (secretObservation?.owned === true && secret !== undefined && spec !== undefined) {
    const encoded = secret.data?.[secretKey];
    const key = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    // Without the key there is nothing to rebuild from (decide() sees that as tampering).
    if (key !== '') {
      secretObservation.inLine =
        secretObservation.resign !== true &&
        secretInLine(secret, secretKey, templateOf(spec), recordedValues(key, status, secretObservation, spec, deps.platformUrl), secret.immutable === true);
    }
  }

  // Rotation: the request and schedule (pure), and the first retiring key, observed before the
  // recorded key so that its fresher snapshot of the list serves the drift check too.
  const rotationSpec = spec?.rotation;
  const rotation: RotationContext = {
    spec: rotationSpec,
    ...gracePeriods(rotationSpec, deps.minRotationGraceMs),
    request: requestToken(meta.annotations?.[ANNOTATION_ROTATE]),
    // The key's age: since the last rotation, else its creation (else the resource's, for a status without it).
    schedule: schedule(rotationSpec, parseTime(status.rotation?.lastRotatedAt ?? status.createdAt ?? meta.creationTimestamp), deps.now()),
  };
  const retiringKeys = status.retiringKeys ?? [];
  const first = retiringKeys[0];
  let retiring: RetiringObservation | undefined;
  if (meta.deletionTimestamp === undefined && pending === undefined && adapter !== undefined && first !== undefined) {
    retiring = await observeRetiring(deps, {
      adapter,
      apiKey: credentials === 'Present' ? apiKey : undefined,
      namespace: meta.namespace,
      consentName: baseSecretName(resource, spec),
      rotation,
      key: first,
    });
  }

  let platform: Observation['platform'] = { key: 'Unknown', project: 'Unknown' };
  const recorded = recordedKeyId({
    status: { ...(status.keyId !== undefined ? { keyId: status.keyId } : {}) },
    ...(secretObservation !== undefined ? { secret: secretObservation } : {}),
  });
  const fingerprint = apiKey !== undefined && credentials === 'Present' ? deps.signer.fingerprint(apiKey) : undefined;
  // Only a personal list depends on whose credentials ask: an organization's list shows every
  // key of the organization to each of its administrators, so absence there is absence.
  // An organization's list shows its keys to any of its administrators, but never another
  // organization's: credentials (an issuer) of another organization than the recorded key's cannot
  // see it, and their NOT_FOUND says nothing of whether it is live (status.organizationId).
  const organizationMoved =
    adapter !== undefined &&
    adapter.listScope.startsWith('org:') &&
    status.organizationId !== undefined &&
    adapter.listScope !== `org:${status.organizationId}`;
  const credentialsChanged =
    organizationMoved ||
    (adapter?.listScope === 'personal' &&
      fingerprint !== undefined &&
      status.credentialsFingerprint !== undefined &&
      status.credentialsFingerprint !== fingerprint);
  let listed: ListedUse | undefined;
  // With an intent pending, the key is looked up only under other credentials than the ones that
  // issued it: whether they list it decides whether they may finish the intent (decision.ts).
  if (meta.deletionTimestamp === undefined && (pending === undefined || credentialsChanged) && adapter !== undefined && recorded !== undefined) {
    ({ platform, listed } = await checkRecordedKey(deps, failingSince, {
      trackingKey: `${resource.kind}/${meta.namespace}/${meta.name}`,
      adapter,
      apiKey: credentials === 'Present' ? apiKey : undefined,
      keyId: recorded,
      createdAt: status.createdAt,
      logger,
    }));
    if (listed !== undefined) platform.listed = true;
  }
  // Keys an interrupted create of this resource left, whatever became of its intent (stripped or
  // replaced by whoever may edit the resource): named with this resource's attempt tag in
  // the list just checked, recorded nowhere on it, made after the resource and long enough ago that
  // no create of this process is still on its way to record it.
  // Being deleted, the list is taken if none was lately (shared by the scope's resources), and any age counts: no create runs any more.
  const releasing =
    deleting && meta.annotations?.[ANNOTATION_RELEASE_WITHOUT_REVOKE] === 'true' && typeof status.issuer !== 'string' && parsedSpec?.issuerRef === undefined;
  let orphans: number[] = [];
  if (
    pending === undefined &&
    !releasing &&
    adapter !== undefined &&
    apiKey !== undefined &&
    credentials === 'Present' &&
    (listed !== undefined || deleting) &&
    !refused
  ) {
    const client = deps.platformFor(apiKey);
    try {
      if (deleting)
        await deps.drift.ensureList(client.credentialsId, adapter, client.platform, ownTagKeys(deps.signer.attemptTag(meta.uid), deps.signer.cluster));
      orphans = orphanKeys(deps, {
        credentialsId: client.credentialsId,
        listScope: adapter.listScope,
        uid: meta.uid,
        createdAt: parseTime(meta.creationTimestamp as unknown as string | undefined),
        recorded: [recorded, ...retiringKeys.map((k) => k.keyId), ...(status.replacedKeys ?? []).map((k) => k.keyId)],
        minAgeMs: deleting ? 0 : deps.pendingGraceMs,
      });
    } catch (error) {
      // The list not taken: the deletion goes on as before (its revokes meet the same failure).
      logger.debug({ err: error }, "no list for the interrupted creates' keys");
    }
  }
  // Creates whose answer was lost (status.lostAttempts): their keys, at any age, in a list taken if
  // none was lately, whatever became of the intent; rare, so one list per pass at most meanwhile.
  const lostEntries = status.lostAttempts ?? [];
  let lostAttempts: Observation['lostAttempts'];
  if (lostEntries.length > 0) {
    lostAttempts = { names: lostEntries.map((l) => l.keyName), keys: [], gone: [] };
    if (pending === undefined && !releasing && adapter !== undefined && apiKey !== undefined && credentials === 'Present' && !refused) {
      const client = deps.platformFor(apiKey);
      try {
        await deps.drift.ensureList(client.credentialsId, adapter, client.platform, ownTagKeys(deps.signer.attemptTag(meta.uid), deps.signer.cluster));
        lostAttempts = lostAttemptKeys(deps, {
          credentialsId: client.credentialsId,
          listScope: adapter.listScope,
          uid: meta.uid,
          lost: lostEntries,
          fingerprint: attemptListFingerprint(deps.signer, fingerprint, adapter.listScope),
          recorded: [recorded, ...retiringKeys.map((k) => k.keyId), ...(status.replacedKeys ?? []).map((k) => k.keyId)],
          graceMs: deps.pendingGraceMs,
        });
      } catch (error) {
        logger.debug({ err: error }, "no list for the lost attempts' keys");
      }
    }
  }
  const abandon = meta.annotations?.[ANNOTATION_ABANDON_KEY];
  // The cap of the issuer's rule, for a first key only (issuer-slots.ts): refused here, before any
  // write; taken for good at the intent (create-protocol.ts).
  const cap = source?.issuer?.cap;
  const wantsSlot =
    cap !== undefined && source?.refusal === undefined && meta.deletionTimestamp === undefined && pending === undefined && status.keyId === undefined;
  const tracking = `${resource.kind}/${meta.namespace}/${meta.name}`;
  let refusal = source?.refusal;
  if (wantsSlot && source?.issuer !== undefined && deps.slots !== undefined && !deps.slots.available(source.issuer.name, meta.namespace, tracking, cap)) {
    deps.slots.wait(source.issuer.name, meta.namespace, tracking);
    refusal = capRefusal(source.issuer.name, meta.namespace, cap);
  }

  const issuerKey =
    typeof status.issuer === 'string' || spec?.issuerRef !== undefined || (resource.spec as { issuerRef?: unknown } | undefined)?.issuerRef !== undefined;
  const unhandledRequest = rotation.request !== undefined && rotation.request !== status.rotation?.lastRequest ? rotation.request : undefined;
  const secretNameTakenBy = meta.deletionTimestamp === undefined && spec !== undefined ? await secretNameOwner(deps, resource, spec) : undefined;
  const observation: Observation = {
    now: deps.now(),
    ...(unhandledRequest !== undefined || rotation.schedule.nextAt !== undefined
      ? {
          rotation: {
            ...(unhandledRequest !== undefined ? { request: unhandledRequest } : {}),
            ...(rotation.schedule.nextAt !== undefined ? { scheduledAt: rotation.schedule.nextAt } : {}),
          },
        }
      : {}),
    ...(retiring !== undefined ? { retiring } : {}),
    ...(retiringKeys.length > 0 ? { retiringKeyIds: retiringKeys.map((k) => k.keyId) } : {}),
    ...((status.replacedKeys ?? []).length > 0 ? { replacedKeyIds: (status.replacedKeys ?? []).map((k) => k.keyId) } : {}),
    ...(orphans.length > 0 ? { orphanKeyIds: orphans } : {}),
    ...(lostAttempts !== undefined ? { lostAttempts } : {}),
    identity: deps.identity,
    pendingGraceMs: deps.pendingGraceMs,
    deleting: meta.deletionTimestamp !== undefined,
    hasFinalizer: meta.finalizers?.includes(FINALIZER) === true,
    // A key made through an issuer (or a resource naming one) is revoked with its resource: neither
    // the annotation nor Retain, both a tenant's to write, lets it outlive it (docs/issuers.md).
    releaseWithoutRevoke: !issuerKey && meta.annotations?.[ANNOTATION_RELEASE_WITHOUT_REVOKE] === 'true',
    ...(parsed.ok ? {} : { specError: parsed.message }),
    // An invalid spec still honours an explicit Retain: a deletion must never revoke what a person asked to keep.
    deletionPolicy: issuerKey
      ? 'Revoke'
      : (spec?.deletionPolicy ?? ((resource.spec as { deletionPolicy?: string } | undefined)?.deletionPolicy === 'Retain' ? 'Retain' : 'Revoke')),
    ...(intent !== undefined ? { pending: intent } : {}),
    status: {
      ...(status.keyId !== undefined ? { keyId: status.keyId } : {}),
      ...(status.keyName !== undefined ? { keyName: status.keyName } : {}),
      ...(status.secretHash !== undefined ? { secretHash: status.secretHash } : {}),
    },
    ...(secretObservation !== undefined ? { secret: secretObservation } : {}),
    credentials,
    platform,
    credentialsChanged,
    ...(abandon !== undefined && /^\d{1,15}$/.test(abandon) ? { abandonKey: Number(abandon) } : {}),
    secretIsCredentials: spec?.credentialsSecretRef !== undefined && spec.issuerRef === undefined && secretName === spec.credentialsSecretRef.name,
    ...(secretNameTakenBy !== undefined ? { secretNameTakenBy } : {}),
    ...(refusal !== undefined ? { refusal } : {}),
    ...(source?.issuer !== undefined || spec?.issuerRef !== undefined ? { throughIssuer: true } : {}),
  };
  const credentialsSecret = namespaceRef !== undefined && credentialsAt?.namespace === meta.namespace ? creds : undefined;
  return {
    resource,
    spec,
    ...(source !== undefined ? { source } : {}),
    ...(credentialsSecret !== undefined ? { credentialsSecret } : {}),
    adapter,
    secretName,
    secretKey,
    secret,
    apiKey,
    credentials,
    ...(credentialsVersion !== undefined ? { credentialsVersion } : {}),
    fingerprint,
    listed,
    observation,
    rotation,
    logger,
  };
}

/** The most other resources naming one Secret name that a pass reads to find which was first. */
const MAX_NAME_HOLDERS_READ = 8;

/**
 * The resource of the namespace that owns this resource's Secret name, when it is another one
 * (`Kind/name`): with spec.secret.immutable on either side, several resources may name one Secret
 * name without writing the same Secret, and each rotation of each would restart the workloads
 * consenting to that name. The name belongs to the resource created first (creationTimestamp, then
 * kind and name), read fresh; the others issue no key and start no rotation (decision.ts).
 * Two mutable resources naming one Secret are told apart by who controls the Secret, as before.
 */
async function secretNameOwner(deps: KeyDeps, resource: KeyResource, spec: NonNullable<Context['spec']>): Promise<string | undefined> {
  const { namespace, name } = resource.metadata;
  const secretName = baseSecretName(resource, spec);
  const immutable = immutableMode(spec);
  const self = `${resource.kind}/${namespace}/${name}`;
  const others = (deps.secretNameHolders?.(namespace, secretName) ?? [])
    .filter((h) => h.key !== self && (immutable || h.immutable))
    .slice(0, MAX_NAME_HOLDERS_READ);
  type Rank = [number, string, string];
  const rank = (kind: string, r: KeyResource): Rank => [Date.parse(r.metadata.creationTimestamp ?? '') || 0, kind, r.metadata.name];
  const before = (a: Rank, b: Rank): boolean => (a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2]);
  const mine = rank(resource.kind, resource);
  for (const { key } of others) {
    const [kind = '', , otherName = ''] = key.split('/');
    const other = await deps.kube.readResource(kind as KindName, namespace, otherName);
    if (other === undefined || other.metadata.deletionTimestamp !== undefined) continue;
    const otherSecret = (other.spec as { secret?: { name?: unknown; immutable?: unknown } } | undefined)?.secret;
    const otherSecretName = typeof otherSecret?.name === 'string' ? otherSecret.name : other.metadata.name;
    if (otherSecretName !== secretName || !(immutable || otherSecret?.immutable === true)) continue; // the cache was behind
    if (before(rank(kind, other), mine)) return `${kind}/${otherName}`;
  }
  return undefined;
}

function parseTime(value: string | undefined): number | undefined {
  const t = value !== undefined ? Date.parse(value) : Number.NaN;
  return Number.isFinite(t) ? t : undefined;
}
