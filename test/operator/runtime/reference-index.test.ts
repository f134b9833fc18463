// The index of reconciled objects by what they refer to (src/operator/runtime/reference-index.ts).
import { describe, expect, it } from '@jest/globals';
import { ReferenceIndex } from '../../../src/operator/runtime/reference-index.ts';

describe('ReferenceIndex', () => {
  it('answers the keys naming a value, follows updates and deletes, and leaves nothing behind', () => {
    const index = new ReferenceIndex();
    index.set('ApiKey/ns/a', ['ns/creds']);
    index.set('ProjectApiKey/ns/b', ['ns/creds']);
    index.set('ApiKey/other/c', ['other/creds']);
    expect([...index.keysOf('ns/creds')].sort()).toEqual(['ApiKey/ns/a', 'ProjectApiKey/ns/b']);
    expect(index.keysOf('other/creds')).toEqual(['ApiKey/other/c']);
    expect(index.keysOf('ns/nothing')).toEqual([]);
    // b now names another Secret: the old value no longer answers it.
    index.set('ProjectApiKey/ns/b', ['ns/new']);
    expect(index.keysOf('ns/creds')).toEqual(['ApiKey/ns/a']);
    expect(index.keysOf('ns/new')).toEqual(['ProjectApiKey/ns/b']);
    // An object naming nothing, and a delete of an unknown key: no entry, no error.
    index.set('ApiKey/ns/d', []);
    index.delete('ApiKey/ns/unknown');
    for (const key of ['ApiKey/ns/a', 'ProjectApiKey/ns/b', 'ApiKey/other/c', 'ApiKey/ns/d']) index.delete(key);
    expect(index.size).toBe(0);
  });

  it('follows an update that keeps some values and adds or drops others, and one naming the same again', () => {
    const index = new ReferenceIndex();
    index.set('ApiKey/ns/a', ['ns/x', '/x']);
    index.set('ApiKey/ns/a', ['ns/x', '/x']);
    expect(index.keysOf('ns/x')).toEqual(['ApiKey/ns/a']);
    expect(index.keysOf('/x')).toEqual(['ApiKey/ns/a']);
    index.set('ApiKey/ns/a', ['ns/y', '/x']);
    expect(index.keysOf('ns/x')).toEqual([]);
    expect(index.keysOf('ns/y')).toEqual(['ApiKey/ns/a']);
    expect(index.keysOf('/x')).toEqual(['ApiKey/ns/a']);
    index.set('ApiKey/ns/a', ['ns/y']);
    expect(index.keysOf('/x')).toEqual([]);
    expect(index.keysOf('ns/y')).toEqual(['ApiKey/ns/a']);
    index.set('ApiKey/ns/a', ['ns/y', 'ns/z']);
    expect([...index.keysOf('ns/z'), ...index.keysOf('ns/y')]).toEqual(['ApiKey/ns/a', 'ApiKey/ns/a']);
    index.set('ApiKey/ns/a', []);
    expect(index.keysOf('ns/y')).toEqual([]);
    expect(index.size).toBe(0);
  });
});
