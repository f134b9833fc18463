import { describe, expect, it } from '@jest/globals';
import { parseYaml } from '../../deploy/kube-tools.ts';
import { toYaml } from '../../../src/operator/resources/yaml.ts';

describe('the manifest YAML writer', () => {
  it('round-trips nested maps, lists, quoted scalars and empty containers', () => {
    const value = {
      apiVersion: 'example.dev/v1',
      kind: 'Thing',
      metadata: { name: 'x' },
      data: { yes: 'no', colon: 'a: b', num: '12', empty: '', rule: "self.scope != 'Personal' || has(self.x)" },
      list: [{ a: 1, b: [true, false] }, 'on', [], {}],
      nested: { deeper: { deepest: null } },
    };
    const [parsed] = parseYaml(toYaml(value));
    expect(JSON.parse(JSON.stringify(parsed))).toEqual(value);
  });
});
