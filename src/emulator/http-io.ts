// Request bodies in, JSON and GeneralError bodies out. Errors are the OpenAPI GeneralError
// `{code, message, request_id}`; bad input is a 4xx with a message a person can act on, never a 500.
import type { IncomingMessage, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 1024 * 1024;

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Record<string, string>;
  constructor(status: number, code: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const badRequest = (message: string) => new ApiError(400, 'BAD_REQUEST', message);
export const unprocessable = (message: string) => new ApiError(422, 'UNPROCESSABLE_ENTITY', message);
export const forbidden = (message: string) => new ApiError(403, 'PERMISSION_DENIED', message);
export const notFound = (message: string) => new ApiError(404, 'NOT_FOUND', message);
export const unauthorized = (message: string) => new ApiError(401, 'UNAUTHORIZED', message);

/** Reads the whole body (up to MAX_BODY_BYTES: 413 beyond it); an empty body is undefined. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > MAX_BODY_BYTES) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body exceeds ${MAX_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw badRequest('request body is not valid JSON');
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendError(res: ServerResponse, err: ApiError, requestId: string): void {
  sendJson(res, err.status, { code: err.code, message: err.message, request_id: requestId }, err.headers);
}

/** The request body as a plain object (absent body = {}); anything else is a 400. */
export function asObject(body: unknown, what = 'request body'): Record<string, unknown> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest(`${what} must be a JSON object`);
  return body as Record<string, unknown>;
}

/** Validates input against a zod schema; the first problem becomes a 400 naming the field. */
export function parseInput<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } },
  value: unknown,
  what = 'request body',
): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const path = issue === undefined || issue.path.length === 0 ? what : issue.path.map(String).join('.');
  throw badRequest(`${path}: ${issue?.message ?? 'invalid'}`);
}

const ID = /^[a-z0-9-]{1,60}$/;
/** Path identifiers follow the OpenAPI pattern ^[a-z0-9-]{1,60}$; anything else cannot exist. */
export function pathId(value: string | undefined, what: string): string {
  if (value === undefined || !ID.test(value)) throw notFound(`${what} ${JSON.stringify(value ?? '').slice(0, 80)} not found`);
  return value;
}
