// The CRDs as every suite of a run installs them on the shared control plane: crds/ rendered with
// the floor of spec.rotation.gracePeriod lowered to TEST_MIN_ROTATION_GRACE (the operators of the
// suites that rotate run with the same minRotationGraceMs), so a rotation ends in seconds. ONE
// rendering for every suite: they share the apiserver and CRDs are cluster-wide, so a suite
// applying crds/ as checked in (floor 1m) would raise the floor under another suite's feet.
// crds/ itself is checked by test/operator/resources/crd.test.ts (its rule reads 1m) and
// crd-apiserver.test.ts (a server-side dry run of the files).
import { CRD_FILES, renderCrdYaml, type CrdKind } from '../../src/operator/resources/crd.ts';

export const TEST_MIN_ROTATION_GRACE = '1s';
export const TEST_MIN_ROTATION_GRACE_MS = 1_000;

/** Every CRD of crds/ (the key kinds, the inventory, the ClusterKeyIssuer), one YAML stream, for `kubectl apply -f -`. */
export function testCrdYaml(): string {
  return (Object.keys(CRD_FILES) as CrdKind[]).map((kind) => renderCrdYaml(kind, { minRotationGrace: TEST_MIN_ROTATION_GRACE })).join('\n');
}
