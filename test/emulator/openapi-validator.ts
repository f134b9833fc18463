// The platform's official OpenAPI document (shipped in the @neondatabase/api-client devDependency)
// and a small validator of response bodies against it, for the conformance suite.
//
// Objects are read as OpenAPI reads them: open. A property the document does not declare for a
// response is allowed (additionalProperties unset means "anything goes"), unless the document says
// `additionalProperties: false`. What fails is what the document forbids: a missing required
// property, a wrong type, a value outside an enum, a null where none is allowed, a string or number
// out of its bounds. The undeclared properties are reported apart (`undeclared`), so the
// conformance suite can hold each of them to docs/platform-api.md: the emulator may carry a field
// the project documents, never one it invented. allOf composes: an object under allOf declares the
// properties of all of its parts.
//
// Covered: $ref (local), allOf, oneOf/anyOf, type, nullable (OpenAPI 3.0), enum, required,
// properties, additionalProperties, items, pattern, minLength/maxLength, minimum/maximum, and the
// formats date-time, uuid, int32 and int64. Other keywords do not occur in the responses checked.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';

/** A schema object of the document; only the keywords this validator reads are typed. */
export interface Schema {
  $ref?: string;
  type?: string;
  nullable?: boolean;
  enum?: unknown[];
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
}

/** A property the document does not declare, with its JSON path and value. */
export interface Undeclared {
  path: string;
  value: unknown;
}

interface Findings {
  errors: string[];
  undeclared: Undeclared[];
}

interface Response {
  $ref?: string;
  content?: Record<string, { schema?: Schema }>;
}
interface Operation {
  responses?: Record<string, Response>;
}
export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Operation | unknown>>;
  components: { schemas: Record<string, Schema>; responses: Record<string, Response> };
}

/** The yaml of the installed @neondatabase/api-client (its version is pinned in package.json). */
export function loadOfficialDocument(): OpenApiDocument {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('@neondatabase/api-client/package.json'));
  return parse(readFileSync(join(dir, 'public-v2-for-users.gen.yaml'), 'utf8')) as OpenApiDocument;
}

export class OpenApiValidator {
  readonly #doc: OpenApiDocument;
  /** Document path templates as regular expressions; literal segments win over parameters. */
  readonly #templates: { template: string; pattern: RegExp; literals: number }[];

  constructor(doc: OpenApiDocument) {
    this.#doc = doc;
    this.#templates = Object.keys(doc.paths)
      .map((template) => ({
        template,
        pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
        literals: template.split('/').filter((s) => s !== '' && !s.startsWith('{')).length,
      }))
      .sort((a, b) => b.literals - a.literals);
  }

  /** The document's path template of a concrete path (relative to the base URL), e.g. /projects/{project_id}. */
  template(path: string): string | undefined {
    const bare = path.split('?')[0] ?? '';
    return this.#templates.find((t) => t.pattern.test(bare))?.template;
  }

  /**
   * The schema the document declares for this response: the status's own entry, or `default`
   * (GeneralError) when the status has none. Throws when the document has no such operation.
   */
  responseSchema(template: string, method: string, status: number): Schema {
    const operation = this.#doc.paths[template]?.[method.toLowerCase()] as Operation | undefined;
    if (operation?.responses === undefined) throw new Error(`the document has no ${method} ${template}`);
    let response = operation.responses[String(status)] ?? operation.responses.default;
    if (response === undefined) throw new Error(`the document declares no ${status} (and no default) for ${method} ${template}`);
    if (response.$ref !== undefined) response = this.#resolve<Response>(response.$ref);
    const schema = response.content?.['application/json']?.schema;
    if (schema === undefined) throw new Error(`${method} ${template} ${status} has no application/json schema`);
    return schema;
  }

  /** Problems of a value against a schema, each with its JSON path; empty when it conforms. */
  validate(schema: Schema, value: unknown, path = '$'): string[] {
    return this.#findings(schema, value, path).errors;
  }

  /**
   * The JSON paths of the properties a value carries that the document does not declare for it
   * (allowed by the document; the conformance suite decides which of them the project documents).
   */
  undeclared(schema: Schema, value: unknown, path = '$'): Undeclared[] {
    const seen = new Map<string, Undeclared>();
    for (const found of this.#findings(schema, value, path).undeclared) seen.set(found.path, found);
    return [...seen.values()];
  }

  #findings(schema: Schema, value: unknown, path: string, open = false): Findings {
    const findings: Findings = { errors: [], undeclared: [] };
    this.#check(schema, value, path, findings, open);
    return findings;
  }

  /** A named component schema (for tests of the validator itself). */
  component(name: string): Schema {
    const schema = this.#doc.components.schemas[name];
    if (schema === undefined) throw new Error(`no component schema ${name}`);
    return schema;
  }

  #resolve<T>(ref: string): T {
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported: ${ref}`);
    let node: unknown = this.#doc;
    for (const part of ref.slice(2).split('/')) node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
    return node as T;
  }

  #deref(schema: Schema): Schema {
    let s = schema;
    for (let hops = 0; s.$ref !== undefined; hops++) {
      if (hops > 32) throw new Error(`$ref cycle at ${schema.$ref ?? ''}`);
      s = this.#resolve<Schema>(s.$ref);
    }
    return s;
  }

  /**
   * The property names a schema declares for an object, through allOf (and the branches of
   * oneOf/anyOf, which the branch check itself narrows); 'any' when it declares open keys.
   */
  #declared(schema: Schema, into: Set<string> = new Set()): Set<string> | 'any' {
    const s = this.#deref(schema);
    if (s.additionalProperties !== undefined && s.additionalProperties !== false) return 'any';
    for (const name of Object.keys(s.properties ?? {})) into.add(name);
    for (const part of [...(s.allOf ?? []), ...(s.oneOf ?? []), ...(s.anyOf ?? [])]) {
      if (this.#declared(part, into) === 'any') return 'any';
    }
    return into;
  }

  /** `open`: a part of an allOf or a branch of a oneOf, whose object may hold its siblings' properties too. */
  #check(schema: Schema, value: unknown, path: string, findings: Findings, open: boolean): void {
    const { errors } = findings;
    const s = this.#deref(schema);
    if (value === null) {
      if (s.nullable !== true) errors.push(`${path}: null is not allowed`);
      return;
    }
    if (s.allOf !== undefined) {
      for (const part of s.allOf) this.#check(part, value, path, findings, true);
    }
    for (const [keyword, branches] of [
      ['oneOf', s.oneOf],
      ['anyOf', s.anyOf],
    ] as const) {
      if (branches === undefined) continue;
      const fitting = branches.map((b) => this.#findings(b, value, path, true)).filter((f) => f.errors.length === 0);
      if (keyword === 'oneOf' ? fitting.length !== 1 : fitting.length === 0)
        errors.push(`${path}: matches ${fitting.length} of the ${branches.length} ${keyword} branches`);
      findings.undeclared.push(...(fitting[0]?.undeclared ?? []));
    }
    if (s.enum !== undefined && !s.enum.includes(value)) errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
    if (s.type !== undefined && !this.#typeMatches(s.type, value)) {
      errors.push(`${path}: expected ${s.type}, got ${Array.isArray(value) ? 'array' : typeof value}`);
      return;
    }
    if (typeof value === 'string') this.#checkString(s, value, path, errors);
    if (typeof value === 'number') this.#checkNumber(s, value, path, errors);
    if (Array.isArray(value)) {
      if (s.items !== undefined) value.forEach((item, i) => this.#check(s.items as Schema, item, `${path}[${i}]`, findings, false));
      return;
    }
    if (typeof value === 'object') this.#checkObject(s, value as Record<string, unknown>, path, findings, open);
  }

  #checkObject(s: Schema, value: Record<string, unknown>, path: string, findings: Findings, open: boolean): void {
    for (const name of s.required ?? []) if (!(name in value)) findings.errors.push(`${path}: required property ${name} is missing`);
    for (const [name, v] of Object.entries(value)) {
      const declared = s.properties?.[name];
      if (declared !== undefined) this.#check(declared, v, `${path}.${name}`, findings, false);
      else if (typeof s.additionalProperties === 'object') this.#check(s.additionalProperties, v, `${path}.${name}`, findings, false);
    }
    // Undeclared properties, looked for once, at the level that sees all of an allOf's parts.
    if (open || (s.type !== 'object' && s.properties === undefined && s.allOf === undefined)) return;
    const declared = this.#declared(s);
    if (declared === 'any') return;
    const closed = s.additionalProperties === false;
    for (const name of Object.keys(value)) {
      if (declared.has(name)) continue;
      if (closed) findings.errors.push(`${path}.${name}: the document allows no property beyond its own here`);
      else findings.undeclared.push({ path: `${path}.${name}`, value: value[name] });
    }
  }

  #checkString(s: Schema, value: string, path: string, errors: string[]): void {
    if (s.pattern !== undefined && !new RegExp(s.pattern, 'u').test(value)) errors.push(`${path}: ${JSON.stringify(value)} does not match ${s.pattern}`);
    if (s.minLength !== undefined && value.length < s.minLength) errors.push(`${path}: shorter than ${s.minLength}`);
    if (s.maxLength !== undefined && value.length > s.maxLength) errors.push(`${path}: longer than ${s.maxLength}`);
    if (s.format === 'date-time' && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value))
      errors.push(`${path}: ${JSON.stringify(value)} is not an RFC 3339 date-time`);
    if (s.format === 'uuid' && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value))
      errors.push(`${path}: ${JSON.stringify(value)} is not a uuid`);
  }

  #checkNumber(s: Schema, value: number, path: string, errors: string[]): void {
    if (s.minimum !== undefined && value < s.minimum) errors.push(`${path}: below the minimum ${s.minimum}`);
    if (s.maximum !== undefined && value > s.maximum) errors.push(`${path}: above the maximum ${s.maximum}`);
    if (s.format === 'int32' && (value < -(2 ** 31) || value >= 2 ** 31)) errors.push(`${path}: outside int32`);
  }

  #typeMatches(type: string, value: unknown): boolean {
    switch (type) {
      case 'object':
        return typeof value === 'object' && !Array.isArray(value);
      case 'array':
        return Array.isArray(value);
      case 'integer':
        return Number.isInteger(value);
      case 'number':
        return typeof value === 'number' && Number.isFinite(value);
      case 'string':
        return typeof value === 'string';
      case 'boolean':
        return typeof value === 'boolean';
      default:
        throw new Error(`unknown type ${type}`);
    }
  }
}
