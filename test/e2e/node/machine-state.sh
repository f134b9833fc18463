#!/usr/bin/env bash
# Prints what the e2e could leave behind on this machine, one fact a line, in a stable order:
# run.sh diffs the output from before the e2e with the output from after it. Host-wide sysctls
# (minus counters that move by themselves), mount points, cgroup directories, network links,
# addresses, routes and iptables rules of the host's network namespace, the paths a node's
# components and buildah write to by default, and processes of a node's kind.
set -euo pipefail
# One byte order for sort and comm, whatever the caller's locale.
export LC_ALL=C

echo "## sysctls"
sysctl -a 2>/dev/null | grep -vE '^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.)|kernel\.(ns_last_pid|random\.|pty\.nr)|net\.netfilter\.nf_conntrack_count)' || true
echo "## mounts"
awk '{ print $5, $9 }' /proc/self/mountinfo | sort
echo "## cgroups"
# Other work on this machine makes cgroups under process_api, other e2e runs (another checkout
# at the same time) their own subtree (nko-e2e-*, or /kubepods and buildah-* of an older version,
# whose builds and pods used the top level), and hostile campaigns (`npm run hostile`, and its run
# in `npm test`) one memory cgroup each (nko-hostile-*, chaos/hostile/memory.ts): not this
# run's to compare. This run's own subtree ($E2E_CGROUP) is compared: it must be gone at the end.
{
  find /sys/fs/cgroup -mindepth 1 -type d -not -path '*/process_api*' 2>/dev/null \
    | grep -vE "^/sys/fs/cgroup/[^/]+/(kubepods|nko-e2e-|nko-hostile-|buildah-)" || true
  if [ -n "${E2E_CGROUP:-}" ]; then find /sys/fs/cgroup -mindepth 2 -path "/sys/fs/cgroup/*/$E2E_CGROUP*" -type d 2>/dev/null; fi
} | sort
echo "## network"
ip -o link | sed -E 's/^[0-9]+: //' | awk '{ print $1 }' | sort
ip -o addr | awk '{ print $2, $3, $4 }' | sort
ip route | sort
iptables-save 2>/dev/null | grep -vE '^#|^:' | sort || true
echo "## paths"
for path in /usr/libexec/kubernetes /var/lib/kubelet /var/lib/cni /var/lib/containerd /var/log/pods \
            /var/log/containers /run/containerd /run/runc /etc/cni /opt/cni /etc/kubernetes /var/lib/containers; do
  [ -e "$path" ] && echo "$path"
done
echo "## processes"
# Node-type processes in this PID namespace. Those of a node that another e2e run holds in its
# own PID namespace are not this run's (a node of this run lives and dies in its namespace), nor
# a build working on another checkout's .cache/e2e.
own_pidns=$(readlink /proc/self/ns/pid)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd -P)
for proc in /proc/[0-9]*; do
  comm=$(cat "$proc/comm" 2>/dev/null) || continue
  case "$comm" in
    containerd*|kubelet|kube-proxy|kube-scheduler|runc|buildah|pause|tini|conmon|dockerd|docker-proxy|kind)
      [ "$(readlink "$proc/ns/pid" 2>/dev/null)" = "$own_pidns" ] || continue
      cmd=$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null) || continue
      case "$cmd" in *"/.cache/e2e/"*) case "$cmd" in *"$here/.cache/e2e/"*) ;; *) continue ;; esac ;; esac
      echo "${proc#/proc/} $comm" ;;
  esac
done | sort -n
