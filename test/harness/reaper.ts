// Watches a test process; once it is gone (even SIGKILLed, when no exit handler runs) it stops the
// control plane processes that process started and removes their folder. Started detached by
// controlplane.ts: `reaper.ts <watched pid> <folder> <child pid>...`.
import { readFileSync, rmSync } from 'node:fs';

const [watched, dir, ...children] = process.argv.slice(2);
if (watched === undefined || dir === undefined) process.exit(2);

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
// A pid is ours only while its command line still names our folder (pids are reused).
const ours = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
  } catch {
    return false;
  }
};

const timer = setInterval(() => {
  const pids = children.map(Number).filter((pid) => alive(pid) && ours(pid));
  if (pids.length === 0 && alive(Number(watched))) return;
  if (alive(Number(watched)) && pids.length > 0) return;
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  clearInterval(timer);
}, 500);
