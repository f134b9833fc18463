import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { CONTROLPLANE_ENV } from './index.ts';

export default async function globalTeardown(): Promise<void> {
  await globalThis.nkoControlPlane?.stop();
  globalThis.nkoControlPlane = undefined;
  const file = process.env[CONTROLPLANE_ENV];
  // An external cluster's info file has a folder of its own; a started one went with stop().
  if (file !== undefined && file !== '') rmSync(dirname(file), { recursive: true, force: true });
}
