// What the operator writes where a tenant can also write (the create intent on the resource, the
// key id on the Secret) carries an HMAC under a key only the operator holds, bound to the
// resource's uid. Recovery revokes, and adoption records, only what verifies: a forged or copied
// intent or Secret annotation is refused, never acted on (docs/security.md, threat model).
//
// The key lives in a Secret of the operator's own namespace (neon-key-operator-signing-key),
// made by the first replica that needs it; tenants have no access to that namespace.
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { ApiException } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { CoreClient } from '../../runtime/kube-client.ts';
import { ANNOTATION_PURPOSE } from '../../resources/schema.ts';
import { ATTEMPT_TAG_LENGTH, clusterNameProblem } from './key-names.ts';

export const DEFAULT_SIGNING_KEY_SECRET = 'neon-key-operator-signing-key';
const DATA_KEY = 'key';
const KEY_BYTES = 32;

type Field = string | number | undefined;

/** The characters of an attempt's name suffix (key-names.ts). */
const TAG_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

export class Signer {
  /**
   * A KeyObject, made once: createHmac given a Buffer first tests whether it is a KeyObject by
   * catching an exception, on every signature (a few percent of the operator's CPU in a wave).
   */
  readonly #key: KeyObject;
  /**
   * The name of this install's cluster (--cluster-name), '' for none: part of the names of the keys
   * its attempts make (key-names.ts), beside the tag this signer computes.
   */
  readonly cluster: string;

  constructor(key: Buffer, options: { cluster?: string } = {}) {
    if (key.length < KEY_BYTES) throw new RangeError(`a signing key has at least ${KEY_BYTES} bytes`);
    this.#key = createSecretKey(key);
    const cluster = options.cluster ?? '';
    const problem = clusterNameProblem(cluster);
    if (problem !== undefined) throw new RangeError(`cluster name ${JSON.stringify(cluster.slice(0, 64))}: ${problem}`);
    this.cluster = cluster;
  }

  /** base64url HMAC-SHA256 of the purpose and fields, encoded as a JSON array (no two tuples share an encoding). */
  sign(purpose: 'intent' | 'secret', fields: readonly Field[]): string {
    return createHmac('sha256', this.#key)
      .update(JSON.stringify([purpose, ...fields.map((f) => (f === undefined ? null : f))]))
      .digest('base64url');
  }

  verify(purpose: 'intent' | 'secret', fields: readonly Field[], signature: string | undefined): boolean {
    if (signature === undefined) return false;
    const expected = Buffer.from(this.sign(purpose, fields));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /**
   * The tag of a resource's create attempts (key-names.ts attemptName): 5 characters of
   * [a-z0-9] from an HMAC of its uid, so that a key an interrupted create made is known as this
   * resource's by its name alone, whatever became of the intent, and nobody without the signing key
   * can name a key so.
   */
  attemptTag(uid: string): string {
    const digest = createHmac('sha256', this.#key).update(`attempt\n${uid}`).digest();
    let tag = '';
    for (let i = 0; i < ATTEMPT_TAG_LENGTH; i++) tag += TAG_ALPHABET[digest[i]! % TAG_ALPHABET.length];
    return tag;
  }

  /**
   * Which credentials issued a key (status.credentialsFingerprint): keyed by the signing key, so
   * the value reveals nothing of the API key even to someone who can guess candidates.
   */
  fingerprint(apiKey: string): string {
    return createHmac('sha256', this.#key).update(`credentials\n${apiKey}`).digest('hex').slice(0, 32);
  }
}

function statusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

class MalformedSigningKey extends Error {}

/** What loadSigningKey asks of the apiserver. */
type SigningKeyApi = Pick<CoreClient, 'readNamespacedSecret' | 'createNamespacedSecret'>;

/**
 * The signing key from Secret `namespace/name`, created with 32 random bytes when it does not
 * exist. Two replicas racing to create it: the loser reads the winner's. The apiserver being away
 * (a restart, a network blip) is waited out with backoff, as the informers wait it out: a
 * controller that exits on it would crash-loop; a malformed Secret is an error at once.
 */
export async function loadSigningKey(core: SigningKeyApi, namespace: string, name: string, logger?: Logger): Promise<Buffer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await readOrCreate(core, namespace, name, logger);
    } catch (error) {
      if (error instanceof MalformedSigningKey) throw error;
      const delayMs = Math.min(5_000, 250 * 2 ** Math.min(attempt - 1, 5));
      const status = statusCode(error);
      // 403: the Role grants get on one name only (deploy/base, the chart's signingKeySecret).
      const hint =
        status === 403 ? { hint: `the operator's Role must grant get on Secret ${name} in ${namespace} (--signing-key-secret; Helm: signingKeySecret)` } : {};
      logger?.warn(
        { secret: `${namespace}/${name}`, status, err: error instanceof Error ? error.message : String(error), retryInMs: delayMs, ...hint },
        'cannot read the signing key yet',
      );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

async function readOrCreate(core: SigningKeyApi, namespace: string, name: string, logger?: Logger): Promise<Buffer> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const secret = await core.readNamespacedSecret({ namespace, name });
      const encoded = secret.data?.[DATA_KEY];
      const key = encoded !== undefined ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
      if (key.length < KEY_BYTES)
        throw new MalformedSigningKey(`Secret ${namespace}/${name} has no ${KEY_BYTES}-byte entry "${DATA_KEY}"; delete it and the operator makes a new one`);
      return key;
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
    }
    const key = randomBytes(KEY_BYTES);
    try {
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: {
            name,
            labels: { 'app.kubernetes.io/name': 'neon-key-operator', 'app.kubernetes.io/component': 'signing-key' },
            annotations: { [ANNOTATION_PURPOSE]: 'signs the create intents and Secret annotations the operator writes; deleting it voids pending intents' },
          },
          type: 'Opaque',
          data: { [DATA_KEY]: key.toString('base64') },
        },
      });
      logger?.info({ secret: `${namespace}/${name}` }, 'created the signing key');
      return key;
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
    }
  }
  throw new Error(`the signing key Secret ${namespace}/${name} keeps appearing and vanishing`);
}
