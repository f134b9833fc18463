// The List body cut into its items as it streams (src/operator/runtime/paged-list.ts ListItems): each
// element of the top-level `items` comes out whole and alone, wherever the chunks are split, with
// strings holding brackets, quotes and escapes; the list's metadata is kept; anything else is not.
import { describe, expect, it } from '@jest/globals';
import { ListItems } from '../../../src/operator/runtime/paged-list.ts';

function cut(body: string, sizes: (i: number) => number, maxBytes = 1 << 20): { items: unknown[]; metadata: unknown } {
  const items: unknown[] = [];
  const list = new ListItems(maxBytes, (json) => items.push(JSON.parse(json.toString('utf8'))));
  const bytes = Buffer.from(body, 'utf8');
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.max(1, sizes(i));
    list.write(bytes.subarray(at, at + n));
    at += n;
  }
  const meta = list.end();
  return { items, metadata: meta === undefined ? undefined : JSON.parse(meta.toString('utf8')) };
}

const tricky = [
  { metadata: { name: 'a', annotations: { brackets: '}]{["', quote: 'say "hi" \\ \\"', unicode: 'é ✓ 𝄞' } }, spec: { list: [1, [2, { x: [] }], null] } },
  { metadata: { name: 'b', labels: { items: '[{"no":1}]', metadata: '{}' } }, items: [{ nested: true }], status: { metadata: { inner: 1 }, items: null } },
  { metadata: { name: 'c' } },
];

describe('a List body cut into its items as it streams', () => {
  it('gives each item whole, and the list metadata, whatever the key order and the chunk sizes', () => {
    const bodies = [
      JSON.stringify({ apiVersion: 'keys.neon.dev/v1alpha1', items: tricky, kind: 'ApiKeyList', metadata: { continue: 'tok"en', resourceVersion: '42' } }),
      JSON.stringify({ kind: 'SecretList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: tricky }, null, 2),
    ];
    for (const body of bodies) {
      for (const size of [1, 2, 3, 7, 64, body.length]) {
        const { items, metadata } = cut(body, () => size);
        expect(items).toEqual(tricky);
        expect(metadata).toEqual(JSON.parse(body).metadata);
      }
      // Irregular chunks.
      expect(cut(body, (i) => (i * 7919) % 13).items).toEqual(tricky);
    }
  });

  it('takes an empty list and `items: null` (an empty PartialObjectMetadataList)', () => {
    expect(cut('{"items":[],"metadata":{"resourceVersion":"1"}}', () => 5)).toEqual({ items: [], metadata: { resourceVersion: '1' } });
    expect(cut('{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"2"},"items":null}', () => 3)).toEqual({
      items: [],
      metadata: { resourceVersion: '2' },
    });
  });

  it('hands each item over as soon as it is complete, holding no more than one', () => {
    const seen: string[] = [];
    const list = new ListItems(1 << 20, (json) => seen.push(JSON.parse(json.toString()).metadata.name as string));
    list.write(Buffer.from('{"items":[{"metadata":{"name":"a"}},{"metadata":{"na'));
    expect(seen).toEqual(['a']);
    list.write(Buffer.from('me":"b"}}'));
    expect(seen).toEqual(['a', 'b']);
    list.write(Buffer.from(']}'));
    expect(list.end()).toBeUndefined();
  });

  it('refuses an item over the bound, and a body cut short', () => {
    const big = JSON.stringify({ items: [{ pad: 'x'.repeat(2_000) }] });
    expect(() => cut(big, () => 100, 1_000)).toThrow(/an object over 1000 bytes/);
    expect(() => cut('{"items":[{"a":1}', () => 4)).toThrow(/truncated/);
    expect(() => cut('{"items":[{"a":"}', () => 4)).toThrow(/truncated/);
  });
});
