// The signer (src/operator/keys/issuing/signing.ts): what it signs verifies only for the same fields,
// purpose and key. The signing key's Secret against the apiserver: test/operator/signing-key.test.ts.
import { describe, expect, it } from '@jest/globals';
import { Signer } from '../../../../src/operator/keys/issuing/signing.ts';

describe('the signing key', () => {
  it('signs so that only the same purpose, fields and key verify', () => {
    const signer = new Signer(Buffer.alloc(32, 1));
    const sig = signer.sign('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7]);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(true);
    expect(signer.verify('secret', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-2', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 8], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', undefined], sig)).toBe(false);
    expect(new Signer(Buffer.alloc(32, 2)).verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1'], undefined)).toBe(false);
    expect(signer.verify('intent', ['uid-1'], '')).toBe(false);
    // A field cannot smuggle the separator to forge another split of the same text.
    expect(signer.sign('intent', ['a\nb', 'c'])).not.toBe(signer.sign('intent', ['a', 'b\nc']));
    expect(() => new Signer(Buffer.alloc(16))).toThrow(/32 bytes/);
    expect(signer.fingerprint('k1')).not.toBe(signer.fingerprint('k2'));
    expect(signer.fingerprint('k1')).not.toContain('k1');
  });
});
