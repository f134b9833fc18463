// What the client makes of an answer, or of its absence: the body read within its bound and checked
// against its schema, and the PlatformErrors of an invalid answer or a call the caller aborted.
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import { classify, PlatformError } from './errors.ts';

export interface AttemptContext {
  method: string;
  route: string;
  requestId: string;
  attempt: number;
}

/** The body of a 2xx answer, parsed and checked against its schema; INVALID_RESPONSE when it is not JSON or does not match. */
export function parseResponse<S extends z.ZodType>(
  schema: S,
  text: string,
  context: AttemptContext,
  responseHeaders: Record<string, string | string[] | undefined>,
  statusCode: number,
): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw invalidResponse(context, responseHeaders, 'body is not JSON', statusCode);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    // Issue paths and codes only, never the received values: a create response holds a secret.
    const where = parsed.error.issues
      .slice(0, 5)
      .map((i) => `${i.path.join('.') || '(root)'}: ${i.code}`)
      .join('; ');
    throw invalidResponse(context, responseHeaders, `body does not match the schema (${where})`, statusCode);
  }
  return parsed.data;
}

export function invalidResponse(ctx: AttemptContext, headers: Record<string, string | string[] | undefined>, why: string, status: number): PlatformError {
  const c = classify(ctx.method, { kind: 'invalid-response' });
  return new PlatformError({
    ...c,
    method: ctx.method,
    route: ctx.route,
    status,
    requestId: headerValue(headers['x-request-id']) ?? ctx.requestId,
    message: `${ctx.method} ${ctx.route} returned HTTP ${status} with an invalid response (${c.disposition}): ${why}`,
  });
}

export function abortedError(method: string, route: string, sent: boolean): PlatformError {
  const c = classify(method, { kind: 'aborted', sent });
  return new PlatformError({
    ...c,
    method,
    route,
    message: `${method} ${route} aborted by the caller${c.disposition === 'ambiguous' ? ' after the request was sent' : ''}`,
  });
}

export class ResponseTooLarge extends Error {
  readonly status: number;
  constructor(status: number) {
    super('response too large');
    this.status = status;
  }
}

/** The body as text, or ResponseTooLarge past `max` bytes (the rest is not read). */
export async function readBounded(body: Dispatcher.ResponseData['body'], max: number, status = 0): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > max) {
      body.destroy();
      throw new ResponseTooLarge(status);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** The code of an undici or socket error, looking through AggregateError (happy eyeballs) and cause. */
export function errorCode(e: unknown): string | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const o = e as { code?: unknown; errors?: unknown; cause?: unknown };
  if (typeof o.code === 'string') return o.code;
  if (Array.isArray(o.errors) && o.errors.length > 0) return errorCode(o.errors[0]);
  if (o.cause !== undefined && o.cause !== e) return errorCode(o.cause);
  return undefined;
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
