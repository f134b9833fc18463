// Identifiers and secrets shaped like the real platform's (docs/platform-api.md "Resources"):
// projects `adjective-noun-12345678`, branches `br-…`, endpoints `ep-…`, users and operations
// UUIDs, and 64-character lower-case alphanumeric key secrets.
import { createHash, randomBytes, randomInt, randomUUID } from 'node:crypto';

const ADJECTIVES = [
  'autumn',
  'bitter',
  'bold',
  'calm',
  'crimson',
  'dark',
  'floral',
  'frosty',
  'lively',
  'misty',
  'morning',
  'patient',
  'quiet',
  'shiny',
  'silent',
  'spring',
  'still',
  'twilight',
  'wandering',
  'winter',
];
const NOUNS = [
  'bird',
  'boat',
  'bread',
  'brook',
  'cloud',
  'dew',
  'field',
  'forest',
  'king',
  'leaf',
  'meadow',
  'moon',
  'night',
  'river',
  'salad',
  'smoke',
  'sound',
  'term',
  'wind',
  'wave',
];

function pick(words: readonly string[]): string {
  return words[randomInt(words.length)] ?? 'x';
}

function humanId(): string {
  return `${pick(ADJECTIVES)}-${pick(NOUNS)}-${String(randomInt(100_000_000)).padStart(8, '0')}`;
}

export const newProjectId = (): string => humanId();
export const newBranchId = (): string => `br-${humanId()}`;
export const newEndpointId = (): string => `ep-${humanId()}`;
export const newOrganizationId = (): string => `org-${humanId()}`;
export const newUuid = (): string => randomUUID();

const KEY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
// 252 = 7 * 36: bytes at or above it are discarded, so every character is equally likely
// (a plain `byte % 36` would favour the first 4 characters).
const UNBIASED_LIMIT = 252;

/** A new key secret: 64 random lower-case alphanumerics from the CSPRNG, without modulo bias. */
export function newKeySecret(): string {
  let out = '';
  while (out.length < 64) {
    for (const byte of randomBytes(96)) {
      if (byte >= UNBIASED_LIMIT) continue;
      out += KEY_ALPHABET[byte % 36];
      if (out.length === 64) break;
    }
  }
  return out;
}

/** Keys are stored only as this digest; the secret itself is returned once and never kept. */
export function hashKeySecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}
