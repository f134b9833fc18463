// The names of the keys the operator issues (src/operator/keys/issuing/key-names.ts, docs/clusters.md):
// the format without a cluster name is the one every earlier release wrote, the named format holds the
// platform's 64 characters, the two never read as each other, and what a name says of its maker.
// Unit: no apiserver, no platform.
import { describe, expect, it } from '@jest/globals';
import { attemptName, attemptTagOf } from '../../../../src/operator/keys/issuing/create-intent.ts';
import { CLUSTER_NAME_MAX, baseMax, clusterNameProblem, nameOrigin, nameParts, ownTagKeys, tagKey } from '../../../../src/operator/keys/issuing/key-names.ts';
import { organizationShareProblem, organizationSlots } from '../../../../src/operator/keys/issuing/organization-share.ts';
import { Signer } from '../../../../src/operator/keys/issuing/signing.ts';
import { KEY_NAME_MAX } from '../../../../src/operator/resources/schema.ts';

const KEY = Buffer.alloc(32, 7);

describe('key names', () => {
  it('writes the format of earlier releases without a cluster name, and reads names they wrote', () => {
    const name = attemptName('team-a-web', 'abcde');
    expect(name).toMatch(/^team-a-web-abcde[a-z0-9]{3}$/);
    expect(attemptTagOf(name)).toBe('abcde');
    // A name an earlier release wrote, with dots and dashes in its keyName.
    expect(nameParts('my.app-v2-k3x9qab1')).toEqual({ cluster: '', tag: 'k3x9q' });
    expect(attemptTagOf('my.app-v2-k3x9qab1')).toBe('k3x9q');
    expect(baseMax('')).toBe(KEY_NAME_MAX);
    expect(attemptName('x'.repeat(KEY_NAME_MAX), 'abcde')).toHaveLength(64);
  });

  it('writes <base>.<cluster>.<tag><rand> with a cluster name, the base cut to hold 64 characters', () => {
    const name = attemptName('team-a-web', 'abcde', 'prod-eu-1');
    expect(name).toMatch(/^team-a-web\.prod-eu-1\.abcde[a-z0-9]{3}$/);
    expect(nameParts(name)).toEqual({ cluster: 'prod-eu-1', tag: 'abcde' });
    expect(attemptTagOf(name)).toBe(tagKey('abcde', 'prod-eu-1'));
    const longest = 'c'.repeat(CLUSTER_NAME_MAX);
    const long = attemptName('k'.repeat(KEY_NAME_MAX), 'abcde', longest);
    expect(long).toHaveLength(64);
    expect(long.startsWith(`${'k'.repeat(64 - 2 - CLUSTER_NAME_MAX - 8)}.${longest}.abcde`)).toBe(true);
    // A base with dots of its own: the cluster is the part between the last two dots.
    expect(nameParts(attemptName('a.b.c', 'abcde', 'staging'))).toEqual({ cluster: 'staging', tag: 'abcde' });
  });

  it('never reads a name of one format as the other', () => {
    for (const cluster of ['a', 'prod', 'abcdefgh', 'x-12345678', 'c'.repeat(CLUSTER_NAME_MAX)]) {
      for (const base of ['web', 'web-12345678', 'a.b', 'old.x-abcdefgh', 'q.prod']) {
        const named = attemptName(base, 'abcde', cluster);
        expect(nameParts(named)).toEqual({ cluster, tag: 'abcde' });
        const unnamed = attemptName(base, 'abcde');
        expect(nameParts(unnamed)).toEqual({ cluster: '', tag: 'abcde' });
      }
    }
    // Tag keys of the two formats never meet.
    expect(tagKey('abcde', '')).not.toBe(tagKey('abcde', 'prod'));
    expect(ownTagKeys('abcde', '')).toEqual(['abcde']);
    expect(ownTagKeys('abcde', 'prod')).toEqual([tagKey('abcde', 'prod'), 'abcde']);
  });

  it('says who a name says made a key: this cluster, another (named or not), or nobody', () => {
    expect(nameOrigin('web.prod.abcde123', 'prod')).toEqual({ origin: 'ThisCluster' });
    expect(nameOrigin('web.staging.abcde123', 'prod')).toEqual({ origin: 'OtherCluster', cluster: 'staging' });
    expect(nameOrigin('web-abcde123', 'prod')).toEqual({ origin: 'OtherCluster' });
    expect(nameOrigin('web-abcde123', '')).toEqual({ origin: 'ThisCluster' });
    expect(nameOrigin('web.prod.abcde123', '')).toEqual({ origin: 'OtherCluster', cluster: 'prod' });
    for (const name of [
      'console-made',
      'web.prod',
      'web.prod.abcde12',
      'web.PROD.abcde123',
      'web.-prod.abcde123',
      `web.${'c'.repeat(CLUSTER_NAME_MAX + 1)}.abcde123`,
      '',
    ]) {
      expect(nameOrigin(name, 'prod')).toEqual({ origin: 'ByHand' });
    }
  });

  it('takes cluster names of a-z, 0-9 and inner dashes, at most 20; the signer refuses any other', () => {
    for (const ok of ['', 'a', 'prod', 'prod-eu-1', '0', 'c'.repeat(CLUSTER_NAME_MAX)]) expect(clusterNameProblem(ok)).toBeUndefined();
    for (const bad of ['Prod', 'prod.eu', '-prod', 'prod-', 'pr_od', 'c'.repeat(CLUSTER_NAME_MAX + 1), ' prod'])
      expect(clusterNameProblem(bad)).toEqual(expect.any(String));
    expect(new Signer(KEY, { cluster: 'prod' }).cluster).toBe('prod');
    expect(new Signer(KEY).cluster).toBe('');
    expect(() => new Signer(KEY, { cluster: 'prod.eu' })).toThrow(RangeError);
  });
});

describe("a cluster's share of an organization's creations", () => {
  it('is whole creations a second: 10 alone, 5 at 0.5, 3 at 0.33, 1 at 0.1; nothing under 0.1 or over 1', () => {
    expect(organizationSlots()).toBe(10);
    expect(organizationSlots(1)).toBe(10);
    expect(organizationSlots(0.5)).toBe(5);
    expect(organizationSlots(0.33)).toBe(3);
    expect(organizationSlots(0.3)).toBe(3);
    expect(organizationSlots(0.1)).toBe(1);
    for (const share of [0.1, 0.25, 0.5, 1]) expect(organizationShareProblem(share)).toBeUndefined();
    for (const share of [0, 0.09, 1.01, Number.NaN, -0.5]) {
      expect(organizationShareProblem(share)).toEqual(expect.any(String));
      expect(() => organizationSlots(share)).toThrow(RangeError);
    }
  });
});
