// Pieces of the key kinds' specs (schema.ts), as zod schemas: the Secret the key is written to and
// its template, the use reported, the rotation; and the name shapes the specs share.
import { z } from 'zod';
import { GO_DURATION_PATTERN } from '../go-duration.ts';

export const dnsSubdomain = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
export const secretDataKey = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[-._a-zA-Z0-9]+$/);

/** What a data entry of spec.secret.template may hold (secret-template.ts computes each). */
export const TEMPLATE_FIELDS = ['Key', 'KeyId', 'KeyName', 'OrganizationId', 'ProjectId', 'PlatformUrl'] as const;
export type TemplateField = (typeof TEMPLATE_FIELDS)[number];
/** Label and annotation names the operator writes itself: a template never sets them. */
export const OPERATOR_METADATA_PREFIX = 'keys.neon.dev/';
const TEMPLATE_MAX_ENTRIES = 32;
// Label and annotation names: an optional DNS-subdomain prefix and '/', then a name of at most 63
// characters. A map's keys cannot be bounded by the structural schema (no propertyNames), so CEL
// checks them; zod checks them again for an object the CRD did not validate.
const QUALIFIED_NAME = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';
const qualifiedName = z.string().max(316).regex(new RegExp(QUALIFIED_NAME));
const notOperatorOwn = (what: string) => ({
  rule: `self.all(k, !k.startsWith('${OPERATOR_METADATA_PREFIX}') && k != 'app.kubernetes.io/managed-by')`,
  message: `${what} may not set the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by)`,
});
const qualifiedNames = (what: string) => ({
  rule: `self.all(k, size(k) <= 316 && k.matches('${QUALIFIED_NAME}'))`,
  message: `${what} names must be [prefix/]name: a DNS subdomain prefix, a name of at most 63 characters`,
});

function secretTemplate(fields: readonly TemplateField[]) {
  return z
    .object({
      labels: z
        .record(
          qualifiedName,
          z
            .string()
            .max(63)
            .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/),
        )
        .optional()
        .meta({
          description: "Labels added to the Secret. Not the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by).",
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [qualifiedNames('label'), notOperatorOwn('labels')],
        }),
      annotations: z
        .record(qualifiedName, z.string().max(4096))
        .optional()
        .meta({
          description: "Annotations added to the Secret (e.g. for a reloader). Not the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by).",
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [qualifiedNames('annotation'), notOperatorOwn('annotations')],
        }),
      data: z
        .record(secretDataKey, z.enum(fields))
        .optional()
        .meta({
          description:
            `More data entries of the Secret, each named by its key and holding one of: ${fields.join(', ')} ` +
            '(PlatformUrl: the platform API URL the operator uses). Never spec.secret.key.',
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [
            { rule: "self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))", message: 'data keys must be valid Secret keys ([-._a-zA-Z0-9]+)' },
          ],
        }),
    })
    .meta({
      description:
        'How the Secret looks to its consumers: labels, annotations and more data entries derived from ' +
        'the key. Kept in line by the operator; changing it rewrites the Secret without issuing a new key.',
    });
}

function secretTarget(fields: readonly TemplateField[]) {
  return z
    .object({
      name: dnsSubdomain.optional().meta({ description: 'Name of the Secret; defaults to the name of this resource.' }),
      key: secretDataKey.default('apiKey').meta({ description: 'Key in the Secret data that receives the key.' }),
      template: secretTemplate(fields).optional(),
      immutable: z
        .boolean()
        .optional()
        .meta({
          description:
            'Write each issued key to its own immutable Secret, named <name>-<key id>; status.secretName names the current one, a rotation repoints ' +
            "the consumers (spec.rotation.restart, those that consent) to it and the replaced key's Secret is deleted once that key is revoked. Set at creation; cannot be changed.",
        }),
    })
    .meta({
      description: 'The Secret the issued key is written to. It is created and owned by the operator.',
      'x-kubernetes-validations': [
        {
          rule: '!has(self.template) || !has(self.template.data) || !(self.key in self.template.data)',
          message: 'template.data may not name secret.key (it holds the key itself)',
        },
      ],
    });
}

export const SecretTarget = secretTarget(TEMPLATE_FIELDS);
export const ApiKeySecretTarget = secretTarget(TEMPLATE_FIELDS.filter((f) => f !== 'ProjectId'));

export const Usage = z
  .object({
    unusedAfter: z
      .string()
      .min(1)
      .max(64)
      .regex(GO_DURATION_PATTERN)
      .optional()
      .meta({
        description:
          'Set the InUse condition: False (NotUsedRecently) once the key has not been used for this long (a Go duration, e.g. 720h; at least 1s). ' +
          'A key never used counts from its creation. Never affects Ready.',
        'x-kubernetes-validations': [{ rule: "duration(self) >= duration('1s')", message: 'unusedAfter must be a duration of at least 1s' }],
      }),
  })
  .meta({ description: 'What the operator reports about the use of the key (status.lastUsedAt, the InUse condition).' });

/**
 * On a Deployment, StatefulSet or DaemonSet (its own metadata, which only those with rights on the
 * workload write): the Secrets whose rotation may restart it (and, with spec.secret.immutable,
 * repoint it), comma-separated, each as spec.secret.name names it (default: the resource's name).
 * A workload without it is never patched by a rotation (consumers.ts, docs/security.md).
 */
export const ANNOTATION_RESTART_ON_ROTATION = 'keys.neon.dev/restart-on-rotation';

// Go durations ("90s", "10m", "720h", "1h30m"), as CEL's duration() reads them (go-duration.ts).
const goDuration = (description: string) => z.string().min(1).max(32).regex(GO_DURATION_PATTERN).meta({ description });
const clock = (description: string) =>
  z
    .string()
    .regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/)
    .meta({ description });
export const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;

export const RotationWindow = z
  .object({
    daysOfWeek: z.array(z.enum(WEEKDAYS)).min(1).max(7).optional().meta({ description: 'Days a window may start on (in timeZone); default every day.' }),
    start: clock('Start of the window, HH:MM in timeZone.'),
    end: clock('End of the window, HH:MM in timeZone; before start, the window ends the next day.'),
    timeZone: z.string().min(1).max(64).optional().meta({
      description: 'IANA time zone name, e.g. Europe/Berlin; default UTC. An unknown zone stops scheduled rotations and is reported in the Rotating condition.',
    }),
  })
  .meta({ description: 'Scheduled rotations start only inside this window; requested ones (keys.neon.dev/rotate) at once.' });

export const RestartWorkload = z.object({
  kind: z.enum(['Deployment', 'StatefulSet', 'DaemonSet']).meta({ description: 'Kind of the workload (apps/v1).' }),
  name: dnsSubdomain.meta({ description: 'Name of the workload, in the namespace of this resource.' }),
});

/**
 * The shortest spec.rotation.gracePeriod the CRD admits and the operator honours (its
 * --min-rotation-grace, default this): a replaced key is never revoked sooner after the switch.
 */
export const MIN_ROTATION_GRACE = '1m';

/** The CRD's rule for it; crd.ts renders it with another floor for a test cluster (the operator's flag lowered to match). */
export function rotationGraceRule(min: string): { rule: string; message: string } {
  return { rule: `!has(self.gracePeriod) || duration(self.gracePeriod) >= duration('${min}')`, message: `gracePeriod must be at least ${min}` };
}

export const RotationSpec = z
  .object({
    interval: goDuration(
      'Rotate when the current key is this old (Go duration, at least 1m, e.g. 720h). Without it, keys rotate only on request (keys.neon.dev/rotate).',
    ).optional(),
    window: RotationWindow.optional(),
    gracePeriod: goDuration(
      `The replaced key stays live at least this long after the Secret switched, and until it was unused this long (default 10m; at least ${MIN_ROTATION_GRACE}).`,
    ).optional(),
    maxGracePeriod: goDuration(
      'The longest the replaced key is kept while it is still used (default 24h; at least gracePeriod). Never cuts short the rollout of a workload that consented to the restart.',
    ).optional(),
    restart: z
      .object({
        discover: z
          .boolean()
          .optional()
          .meta({
            description:
              'Restart the Deployments, StatefulSets and DaemonSets of this namespace whose pod templates reference the Secret, or that name it in their ' +
              `${ANNOTATION_RESTART_ON_ROTATION} annotation; only those whose annotation names it are restarted.`,
          }),
        workloads: z
          .array(RestartWorkload)
          .max(20)
          .optional()
          .meta({
            description: `Workloads of this namespace to restart, by kind and name; only those whose ${ANNOTATION_RESTART_ON_ROTATION} annotation names the Secret are restarted.`,
          }),
      })
      .optional()
      .meta({
        description:
          'Consumers restarted (like kubectl rollout restart) after the Secret switched, each only if its own metadata consents: the annotation ' +
          `${ANNOTATION_RESTART_ON_ROTATION} names the Secret (spec.secret.name, default the resource's name; comma-separated). The replaced key is revoked ` +
          'only once the rollouts of those restarted completed; a workload without consent is skipped, said so in the ConsumersRestarted event, and never waited for.',
      }),
  })
  .meta({
    description: 'Key rotation without downtime: a new key in the Secret, the replaced one kept live until its consumers moved, then revoked.',
    'x-kubernetes-validations': [
      { rule: "!has(self.interval) || duration(self.interval) >= duration('1m')", message: 'interval must be at least 1m' },
      rotationGraceRule(MIN_ROTATION_GRACE),
      {
        rule: "!has(self.maxGracePeriod) || duration(self.maxGracePeriod) >= duration(has(self.gracePeriod) ? self.gracePeriod : '10m')",
        message: 'maxGracePeriod must be at least gracePeriod (default 10m)',
      },
    ],
  });
export type RotationSpec = z.infer<typeof RotationSpec>;
